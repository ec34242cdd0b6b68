//! The spectrum of one dataset over a window, by Welch's method, in one pass: the samples
//! are cut into segments overlapping by half, each has its mean removed and a periodic
//! Hann window applied, and their power spectra are averaged. This is SciPy's
//! `signal.welch(x, fs, window="hann", nperseg=N, noverlap=N//2, detrend="constant",
//! scaling="spectrum")`, which the test checks it against.
//!
//! The sample rate is the window's mean rate (samples − 1 over the time they span): the
//! method assumes evenly spaced samples, which a device's frames nearly are. NaN and text
//! readings are skipped and counted. A window shorter than one segment is one segment of
//! every sample, as SciPy does.
//!
//! A peak is a bin higher than both neighbours (the first and last bin never are, as in
//! SciPy's `find_peaks`); its amplitude is √(2·power), a sine's amplitude when the sine
//! sits on the bin (up to 1.42 dB less between two bins, Hann's scalloping loss).

use std::collections::VecDeque;
use std::sync::Arc;

use realfft::{RealFftPlanner, RealToComplex};
use schemars::JsonSchema;
use serde::Serialize;

use crate::summary::Reading;

/// Samples per segment when the caller does not say.
pub const DEFAULT_SEGMENT: usize = 1024;
/// Segment lengths allowed.
pub const SEGMENT_RANGE: std::ops::RangeInclusive<usize> = 16..=65_536;
/// Peaks listed at most.
pub const MAX_PEAKS: usize = 20;

/// One peak of the spectrum.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Peak {
    pub frequency_hz: f64,
    /// √(2·power): the amplitude of a sine at this frequency, in the dataset's units.
    pub amplitude: f64,
    /// Power in the bin (units²).
    pub power: f64,
    /// 10·log10(power).
    pub db: f64,
}

/// The spectrum's strongest peaks and how it was computed.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spectrum {
    /// How it was computed, in words.
    pub method: String,
    pub samples: u64,
    /// NaN, infinite and text readings, left out.
    pub skipped: u64,
    pub sample_rate_hz: f64,
    pub segment_samples: usize,
    pub segments: u64,
    /// Width of one bin, Hz.
    pub resolution_hz: f64,
    /// The median bin's power: what a peak stands above.
    pub noise_floor_power: f64,
    /// Strongest first.
    pub peaks: Vec<Peak>,
}

/// Accumulates Welch's average in one pass.
pub struct Welch {
    segment: usize,
    /// The newest `segment` samples.
    recent: VecDeque<f64>,
    /// Samples since the last segment was taken.
    since: usize,
    sum: Vec<f64>,
    segments: u64,
    n: u64,
    skipped: u64,
    first_t: Option<f64>,
    last_t: f64,
    fft: Arc<dyn RealToComplex<f64>>,
    window: Vec<f64>,
}

fn hann(n: usize) -> Vec<f64> {
    // Periodic (SciPy's `get_window("hann", n)`, `sym=False`): for spectral analysis.
    (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos())
        .collect()
}

impl Welch {
    /// `segment` must lie in [`SEGMENT_RANGE`].
    pub fn new(segment: usize) -> Welch {
        let segment = segment.clamp(*SEGMENT_RANGE.start(), *SEGMENT_RANGE.end());
        Welch {
            segment,
            recent: VecDeque::with_capacity(segment),
            since: 0,
            sum: vec![0.0; segment / 2 + 1],
            segments: 0,
            n: 0,
            skipped: 0,
            first_t: None,
            last_t: 0.0,
            fft: RealFftPlanner::<f64>::new().plan_fft_forward(segment),
            window: hann(segment),
        }
    }

    pub fn push(&mut self, t: f64, reading: Reading) {
        let x = match reading {
            Reading::Number(x) if x.is_finite() => x,
            _ => {
                self.skipped += 1;
                return;
            }
        };
        self.first_t.get_or_insert(t);
        self.last_t = t;
        self.n += 1;
        if self.recent.len() == self.segment {
            self.recent.pop_front();
        }
        self.recent.push_back(x);
        self.since += 1;
        // Segments start every `segment − segment/2` samples (SciPy's step).
        let step = self.segment - self.segment / 2;
        if self.recent.len() == self.segment && (self.segments == 0 || self.since >= step) {
            let segment: Vec<f64> = self.recent.iter().copied().collect();
            add_segment(&self.fft, &self.window, &segment, &mut self.sum);
            self.segments += 1;
            self.since = 0;
        }
    }

    pub fn finish(mut self, max_peaks: usize) -> Option<Spectrum> {
        let (Some(first), n) = (self.first_t, self.n) else {
            return None;
        };
        if n < *SEGMENT_RANGE.start() as u64 || self.last_t <= first {
            return None;
        }
        if self.segments == 0 {
            // Fewer samples than a segment: one segment of them all.
            let all: Vec<f64> = self.recent.iter().copied().collect();
            self.segment = all.len();
            self.window = hann(self.segment);
            self.fft = RealFftPlanner::<f64>::new().plan_fft_forward(self.segment);
            self.sum = vec![0.0; self.segment / 2 + 1];
            add_segment(&self.fft, &self.window, &all, &mut self.sum);
            self.segments = 1;
        }
        let rate = (n - 1) as f64 / (self.last_t - first);
        let scale = 1.0 / self.window.iter().sum::<f64>().powi(2) / self.segments as f64;
        let bins = self.sum.len();
        let power: Vec<f64> = self
            .sum
            .iter()
            .enumerate()
            .map(|(i, p)| {
                // One-sided: every bin but DC (and Nyquist for an even segment) doubled.
                let nyquist = self.segment.is_multiple_of(2) && i == bins - 1;
                p * scale * if i == 0 || nyquist { 1.0 } else { 2.0 }
            })
            .collect();
        let resolution = rate / self.segment as f64;
        let mut peaks: Vec<Peak> = (1..bins.saturating_sub(1))
            .filter(|&i| power[i] > power[i - 1] && power[i] > power[i + 1])
            .map(|i| Peak {
                frequency_hz: i as f64 * resolution,
                amplitude: (2.0 * power[i]).sqrt(),
                power: power[i],
                db: 10.0 * power[i].log10(),
            })
            .collect();
        peaks.sort_by(|a, b| b.power.total_cmp(&a.power));
        peaks.truncate(max_peaks.min(MAX_PEAKS));
        let mut sorted = power.clone();
        sorted.sort_by(f64::total_cmp);
        Some(Spectrum {
            method: format!(
                "Welch: {}-sample segments overlapping by half, mean removed and a Hann \
                 window applied to each, power spectra averaged",
                self.segment
            ),
            samples: n,
            skipped: self.skipped,
            sample_rate_hz: rate,
            segment_samples: self.segment,
            segments: self.segments,
            resolution_hz: resolution,
            noise_floor_power: sorted[sorted.len() / 2],
            peaks,
        })
    }
}

fn add_segment(
    fft: &Arc<dyn RealToComplex<f64>>,
    window: &[f64],
    segment: &[f64],
    sum: &mut [f64],
) {
    let mean = segment.iter().sum::<f64>() / segment.len() as f64;
    let mut input: Vec<f64> = segment
        .iter()
        .zip(window)
        .map(|(x, w)| (x - mean) * w)
        .collect();
    let mut output = fft.make_output_vec();
    // Lengths come from the same plan, so the transform cannot fail.
    if fft.process(&mut input, &mut output).is_ok() {
        for (s, c) in sum.iter_mut().zip(&output) {
            *s += c.norm_sqr();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_sines_give_two_peaks_with_their_amplitudes() {
        let rate = 1000.0;
        let mut w = Welch::new(1000);
        for i in 0..20_000 {
            let t = i as f64 / rate;
            let x = 2.0 * (2.0 * std::f64::consts::PI * 50.0 * t).sin()
                + 0.5 * (2.0 * std::f64::consts::PI * 120.0 * t).sin()
                + 3.0;
            w.push(t, Reading::Number(x));
        }
        let s = w.finish(5).unwrap();
        assert!((s.sample_rate_hz - rate).abs() < 1e-6);
        assert_eq!(s.segments, 39);
        assert!((s.peaks[0].frequency_hz - 50.0).abs() < 1e-6, "{s:?}");
        assert!((s.peaks[0].amplitude - 2.0).abs() < 1e-6);
        assert!((s.peaks[1].frequency_hz - 120.0).abs() < 1e-6);
        assert!((s.peaks[1].amplitude - 0.5).abs() < 1e-6);
    }

    #[test]
    fn too_few_samples_is_no_spectrum() {
        let mut w = Welch::new(64);
        for i in 0..10 {
            w.push(i as f64, Reading::Number(i as f64));
        }
        assert!(w.finish(5).is_none());
    }
}
