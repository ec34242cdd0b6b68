//! The difference of one dataset's summaries over two windows (`b − a`).

use schemars::JsonSchema;
use serde::Serialize;

use crate::summary::Summary;

/// What changed from window `a` to window `b`; a field is absent when either side has no
/// value for it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// `b.mean − a.mean`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// The same, as a percentage of `|a.mean|` (absent when that is 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    /// `b.std / a.std`: above 1, b is noisier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub std_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_hz: Option<f64>,
    /// `b.count − a.count`.
    pub count: i64,
    /// `b.gaps − a.gaps`.
    pub gaps: i64,
}

pub fn compare(a: &Summary, b: &Summary) -> Difference {
    let diff = |x: Option<f64>, y: Option<f64>| Some(y? - x?);
    Difference {
        mean: diff(a.mean, b.mean),
        mean_percent: match (a.mean, b.mean) {
            (Some(x), Some(y)) if x != 0.0 => Some((y - x) / x.abs() * 100.0),
            _ => None,
        },
        min: diff(a.min, b.min),
        max: diff(a.max, b.max),
        p50: diff(a.p50, b.p50),
        std_ratio: match (a.std, b.std) {
            (Some(x), Some(y)) if x > 0.0 => Some(y / x),
            _ => None,
        },
        rate_hz: diff(a.rate_hz, b.rate_hz),
        count: b.count as i64 - a.count as i64,
        gaps: b.gaps as i64 - a.gaps as i64,
    }
}
