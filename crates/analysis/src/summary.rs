//! The summary of each dataset over a window: count, time span, extremes, mean, standard
//! deviation, percentiles, sample rate, gaps, and readings that are not numbers.
//!
//! Definitions (the test checks each against pandas on a CSV export):
//!
//! - a *sample* is a frame in which the dataset has a reading (an empty cell is none);
//! - `count` is the samples whose reading is a finite number (text that reads as a number
//!   is that number); `nonFinite` counts NaN and infinities, `text` the other readings;
//! - `mean` is over `count`, `std` the sample standard deviation (n − 1, pandas' default);
//! - percentiles interpolate linearly between ranks (pandas' and numpy's default);
//! - `rateHz` is (samples − 1) / (last − first time), the mean rate;
//! - an *interval* is the time between consecutive samples; `typicalIntervalS` is their
//!   median, and a *gap* is an interval longer than [`GAP_FACTOR`] times it.

use schemars::JsonSchema;
use serde::Serialize;

use crate::quantile::{Quantiles, Sorted};

/// An interval longer than this many typical intervals is a gap.
pub const GAP_FACTOR: f64 = 3.0;

/// Numbers folded into the mean and deviation at a time.
const BATCH: usize = 256;

/// Values kept exactly for percentiles, across every dataset of one request, before they
/// are estimated instead (8 bytes each; the intervals count too).
pub const EXACT_BUDGET: usize = 4 << 20;

/// How its percentiles were computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Percentiles {
    Exact,
    /// From a histogram, within 0.025 % of the true value (the window held more values
    /// than are kept exactly).
    Estimated,
}

/// One dataset over the window.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Finite numbers.
    pub count: u64,
    /// Time of the first and the last sample, seconds (absent without samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// When the minimum was first reached, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_at_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_at_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1); absent below two numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p5: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95: Option<f64>,
    pub percentiles: Percentiles,
    /// Mean sample rate over the window, per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_hz: Option<f64>,
    /// Median time between samples, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub typical_interval_s: Option<f64>,
    /// Intervals longer than three typical intervals.
    pub gaps: u64,
    /// The longest interval, seconds, and the time of the sample that ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_gap_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_gap_end_s: Option<f64>,
    /// NaN and infinite readings.
    pub non_finite: u64,
    /// Readings that are text, not numbers.
    pub text: u64,
}

/// One reading of one dataset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading {
    Number(f64),
    Text,
}

/// When one dataset's samples came: the first and last time, how many, and the intervals
/// between them.
#[derive(Debug, Clone)]
struct Timeline {
    first: Option<f64>,
    last: Option<f64>,
    samples: u64,
    intervals: Quantiles,
    longest: Option<(f64, f64)>,
}

/// A finished [`Timeline`].
#[derive(Debug, Clone, Copy)]
struct Times {
    first: Option<f64>,
    last: Option<f64>,
    exact: bool,
    rate_hz: Option<f64>,
    typical: Option<f64>,
    gaps: u64,
    longest: Option<(f64, f64)>,
}

impl Timeline {
    fn new(budget: usize) -> Timeline {
        Timeline {
            first: None,
            last: None,
            samples: 0,
            intervals: Quantiles::new(budget),
            longest: None,
        }
    }

    #[inline]
    fn push(&mut self, t: f64) {
        if let Some(last) = self.last {
            let dt = t - last;
            if dt.is_finite() {
                self.intervals.push_repeating(dt);
                if self.longest.is_none_or(|(longest, _)| dt > longest) {
                    self.longest = Some((dt, t));
                }
            }
        }
        self.first.get_or_insert(t);
        self.last = Some(t);
        self.samples += 1;
    }

    fn merge(&mut self, later: Timeline) {
        // The interval between the parts, then the later part's own.
        if let (Some(last), Some(first)) = (self.last, later.first) {
            let dt = first - last;
            if dt.is_finite() {
                self.intervals.push_repeating(dt);
                if self.longest.is_none_or(|(longest, _)| dt > longest) {
                    self.longest = Some((dt, first));
                }
            }
        }
        if let Some((dt, t)) = later.longest {
            if self.longest.is_none_or(|(longest, _)| dt > longest) {
                self.longest = Some((dt, t));
            }
        }
        self.intervals.merge(later.intervals);
        self.first = self.first.or(later.first);
        self.last = later.last.or(self.last);
        self.samples += later.samples;
    }

    fn finish(self) -> Times {
        let exact = self.intervals.is_exact();
        let intervals = self.intervals.finish();
        let typical = intervals.quantile(0.5);
        let gaps = match typical {
            Some(t) if t > 0.0 => intervals.count_above(GAP_FACTOR * t),
            _ => 0,
        };
        let rate_hz = match (self.first, self.last) {
            (Some(f), Some(l)) if l > f && self.samples > 1 => {
                Some((self.samples - 1) as f64 / (l - f))
            }
            _ => None,
        };
        Times {
            first: self.first,
            last: self.last,
            exact,
            rate_hz,
            typical,
            gaps,
            longest: self.longest,
        }
    }
}

/// What one dataset's readings were: their count, extremes, mean, deviation, percentiles,
/// and the readings that are not numbers.
#[derive(Debug, Clone)]
struct Values {
    count: u64,
    min: Option<(f64, f64)>,
    max: Option<(f64, f64)>,
    // The mean and the sum of squared deviations of the numbers folded so far, and the
    // numbers not yet folded: each batch's own two passes, then Chan's combination. As
    // stable as Welford's update over hours of samples, without a division per sample.
    mean: f64,
    m2: f64,
    folded: u64,
    batch: Vec<f64>,
    values: Quantiles,
    non_finite: u64,
    text: u64,
}

impl Values {
    fn new(budget: usize) -> Values {
        Values {
            count: 0,
            min: None,
            max: None,
            mean: 0.0,
            m2: 0.0,
            folded: 0,
            batch: Vec::with_capacity(BATCH),
            values: Quantiles::new(budget),
            non_finite: 0,
            text: 0,
        }
    }

    #[inline]
    fn push(&mut self, t: f64, reading: Reading) {
        let x = match reading {
            Reading::Text => {
                self.text += 1;
                return;
            }
            Reading::Number(x) if !x.is_finite() => {
                self.non_finite += 1;
                return;
            }
            Reading::Number(x) => x,
        };
        self.count += 1;
        self.batch.push(x);
        if self.batch.len() == BATCH {
            self.fold();
        }
        if self.min.is_none_or(|(m, _)| x < m) {
            self.min = Some((x, t));
        }
        if self.max.is_none_or(|(m, _)| x > m) {
            self.max = Some((x, t));
        }
        self.values.push(x);
    }

    fn merge(&mut self, mut later: Values) {
        self.fold();
        later.fold();
        self.values.merge(later.values);
        // The first time an extreme was reached: a later part's only when it went further.
        if let Some((x, t)) = later.min {
            if self.min.is_none_or(|(m, _)| x < m) {
                self.min = Some((x, t));
            }
        }
        if let Some((x, t)) = later.max {
            if self.max.is_none_or(|(m, _)| x > m) {
                self.max = Some((x, t));
            }
        }
        // Chan's combination of the two parts' means and squared deviations.
        if later.folded > 0 {
            let (na, nb) = (self.folded as f64, later.folded as f64);
            let total = na + nb;
            let delta = later.mean - self.mean;
            self.mean += delta * nb / total;
            self.m2 += later.m2 + delta * delta * na * nb / total;
            self.folded += later.folded;
        }
        self.count += later.count;
        self.non_finite += later.non_finite;
        self.text += later.text;
    }

    /// Folds the batch into the running mean and sum of squared deviations.
    fn fold(&mut self) {
        let n = self.batch.len() as f64;
        if n == 0.0 {
            return;
        }
        let mean = sum_of(&self.batch, |x| x) / n;
        let m2 = sum_of(&self.batch, |x| (x - mean) * (x - mean));
        let total = self.folded as f64 + n;
        let delta = mean - self.mean;
        self.mean += delta * n / total;
        self.m2 += m2 + delta * delta * self.folded as f64 * n / total;
        self.folded += self.batch.len() as u64;
        self.batch.clear();
    }

    /// The summary of these readings, which came at `times`.
    fn finish(mut self, times: &Times) -> Summary {
        self.fold();
        let exact = self.values.is_exact() && times.exact;
        let values: Sorted = self.values.finish();
        let some = |x: f64| (self.count > 0).then_some(x);
        Summary {
            count: self.count,
            first_s: times.first,
            last_s: times.last,
            min: self.min.map(|m| m.0),
            min_at_s: self.min.map(|m| m.1),
            max: self.max.map(|m| m.0),
            max_at_s: self.max.map(|m| m.1),
            mean: some(self.mean),
            std: (self.count > 1).then(|| (self.m2 / (self.count - 1) as f64).sqrt()),
            p5: values.quantile(0.05),
            p50: values.quantile(0.5),
            p95: values.quantile(0.95),
            percentiles: if exact {
                Percentiles::Exact
            } else {
                Percentiles::Estimated
            },
            rate_hz: times.rate_hz,
            typical_interval_s: times.typical,
            gaps: times.gaps,
            longest_gap_s: times.longest.map(|l| l.0),
            longest_gap_end_s: times.longest.map(|l| l.1),
            non_finite: self.non_finite,
            text: self.text,
        }
    }
}

/// The sum of `f` over `xs`, in four running sums: a single one waits for each addition
/// to finish before the next (a tenth of the hour's summary went there), four keep the
/// adder busy. Pairing the partial sums also rounds no worse than one running sum.
#[inline]
fn sum_of(xs: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    let mut sums = [0.0; 4];
    let quads = xs.chunks_exact(4);
    let rest = quads.remainder();
    for quad in quads {
        for (sum, &x) in sums.iter_mut().zip(quad) {
            *sum += f(x);
        }
    }
    let mut total = (sums[0] + sums[1]) + (sums[2] + sums[3]);
    for &x in rest {
        total += f(x);
    }
    total
}

/// Exact values each of `datasets` keeps, for its values and for its intervals, when a
/// window is read in `parts` parts: [`EXACT_BUDGET`] shared out.
fn budget(datasets: usize, parts: usize) -> usize {
    EXACT_BUDGET / (2 * datasets.max(1) * parts.max(1))
}

/// Accumulates one dataset's summary in one pass.
#[derive(Debug, Clone)]
pub struct Accumulator {
    time: Timeline,
    values: Values,
}

impl Accumulator {
    /// `budget`: values kept exactly, for the values and for the intervals each.
    pub fn new(budget: usize) -> Accumulator {
        Accumulator {
            time: Timeline::new(budget),
            values: Values::new(budget),
        }
    }

    /// One accumulator per dataset, sharing [`EXACT_BUDGET`].
    pub fn for_datasets(n: usize) -> Vec<Accumulator> {
        Accumulator::for_parts(n, 1)
    }

    /// One accumulator per dataset for each of `parts` parts of a window read apart (see
    /// [`Accumulator::merge`]), the parts together sharing [`EXACT_BUDGET`].
    pub fn for_parts(datasets: usize, parts: usize) -> Vec<Accumulator> {
        let budget = budget(datasets, parts);
        (0..datasets).map(|_| Accumulator::new(budget)).collect()
    }

    /// Takes in the samples of `later`, the same dataset's samples that come after these:
    /// the summary is the one a single pass over both would give (up to the rounding of
    /// the mean's sums), so a long window can be read in parts on several threads.
    pub fn merge(&mut self, later: Accumulator) {
        self.time.merge(later.time);
        self.values.merge(later.values);
    }

    #[inline]
    pub fn push(&mut self, t: f64, reading: Reading) {
        self.time.push(t);
        self.values.push(t, reading);
    }

    pub fn finish(self) -> Summary {
        self.values.finish(&self.time.finish())
    }
}

/// The summaries of the datasets of a table read a frame at a time
/// ([`Frames::push_frame`]), each the one its own [`Accumulator`] would give.
///
/// Why: in a table whose datasets all have a reading in every frame (one device, one
/// frame format), every dataset's times are the frames' times. Counting them once per
/// frame rather than once per dataset takes away most of the per-sample work that is not
/// the reading's own (an hour of 16 datasets at 1 kHz is 57.6 M samples and 3.6 M frames).
/// A dataset that misses a frame takes its own copy of the times so far, then goes on
/// alone.
#[derive(Debug, Clone)]
pub struct Frames {
    /// The times of every frame: those of each dataset that has missed none so far.
    shared: Timeline,
    /// Per dataset, its own times once it has missed a frame.
    own: Vec<Option<Timeline>>,
    values: Vec<Values>,
}

impl Frames {
    /// For `datasets` datasets, the window read in `parts` parts merged in order (see
    /// [`Frames::merge`]); the same exact budgets as [`Accumulator::for_parts`].
    pub fn for_parts(datasets: usize, parts: usize) -> Frames {
        let budget = budget(datasets, parts);
        Frames {
            shared: Timeline::new(budget),
            own: vec![None; datasets],
            values: (0..datasets).map(|_| Values::new(budget)).collect(),
        }
    }

    /// One frame at `t`: each dataset's reading, `None` where it has none. `readings` has
    /// one entry per dataset.
    #[inline]
    pub fn push_frame(&mut self, t: f64, readings: &[Option<Reading>]) {
        debug_assert_eq!(readings.len(), self.values.len());
        if readings.iter().any(Option::is_none) {
            self.part_ways(readings);
        }
        self.shared.push(t);
        for ((reading, own), values) in readings.iter().zip(&mut self.own).zip(&mut self.values) {
            let Some(reading) = *reading else { continue };
            if let Some(own) = own {
                own.push(t);
            }
            values.push(t, reading);
        }
    }

    /// Datasets missing from a frame, still on the shared times, take their own copy of
    /// them (the times before this frame).
    #[cold]
    fn part_ways(&mut self, readings: &[Option<Reading>]) {
        for (reading, own) in readings.iter().zip(&mut self.own) {
            if reading.is_none() && own.is_none() {
                *own = Some(self.shared.clone());
            }
        }
    }

    /// Takes in `later`, the frames that come after these (see [`Accumulator::merge`]).
    pub fn merge(&mut self, later: Frames) {
        let Frames {
            shared: later_shared,
            own: later_own,
            values: later_values,
        } = later;
        for ((own, later_own), (values, later_values)) in self
            .own
            .iter_mut()
            .zip(later_own)
            .zip(self.values.iter_mut().zip(later_values))
        {
            if own.is_some() || later_own.is_some() {
                let mut mine = own.take().unwrap_or_else(|| self.shared.clone());
                mine.merge(later_own.unwrap_or_else(|| later_shared.clone()));
                *own = Some(mine);
            }
            values.merge(later_values);
        }
        self.shared.merge(later_shared);
    }

    pub fn finish(self) -> Vec<Summary> {
        let shared = self.shared.finish();
        self.own
            .into_iter()
            .zip(self.values)
            .map(|(own, values)| values.finish(&own.map_or(shared, Timeline::finish)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ramp_with_a_gap_and_odd_readings() {
        let mut a = Accumulator::new(1000);
        // 0..=9 at 10 Hz, then a 1 s gap, then 10..=19; a NaN and a text in between.
        for i in 0..10 {
            a.push(i as f64 * 0.1, Reading::Number(i as f64));
        }
        a.push(0.95, Reading::Number(f64::NAN));
        a.push(0.97, Reading::Text);
        for i in 10..20 {
            a.push(1.9 + (i - 10) as f64 * 0.1, Reading::Number(i as f64));
        }
        let s = a.finish();
        assert_eq!(s.count, 20);
        assert_eq!((s.min, s.max), (Some(0.0), Some(19.0)));
        assert_eq!(s.mean, Some(9.5));
        let std = ((0..20).map(|i| (i as f64 - 9.5).powi(2)).sum::<f64>() / 19.0).sqrt();
        assert!((s.std.unwrap() - std).abs() < 1e-12);
        assert_eq!(s.p50, Some(9.5));
        assert_eq!((s.non_finite, s.text), (1, 1));
        assert_eq!(s.gaps, 1, "{s:?}");
        assert!((s.longest_gap_s.unwrap() - 0.93).abs() < 1e-9);
        assert_eq!(s.percentiles, Percentiles::Exact);
    }

    #[test]
    fn nothing_in_the_window() {
        let s = Accumulator::new(10).finish();
        assert_eq!(s.count, 0);
        assert_eq!((s.mean, s.std, s.p50, s.rate_hz), (None, None, None, None));
    }

    /// A table read a frame at a time gives each dataset the summary its own accumulator
    /// gives, field for field: datasets present in every frame, missing from the first,
    /// stopping midway, missing now and then, never present; read whole and in parts, in
    /// the exact regime and past the budget.
    #[test]
    fn frames_summarise_each_dataset_as_its_accumulator_would() {
        type Pattern = fn(usize) -> bool;
        let present: [(&str, Pattern); 6] = [
            ("always", |_| true),
            ("not in the first frame", |i| i > 0),
            ("stops at 3 000", |i| i < 3_000),
            ("every frame but each 7th", |i| i % 7 != 3),
            ("from 5 000 on", |i| i >= 5_000),
            ("never", |_| false),
        ];
        let n = 12_000;
        let time = |i: usize| i as f64 * 0.01 + if i >= 5_000 { 2.0 } else { 0.0 };
        let reading = |k: usize, i: usize| match (i + k) % 997 {
            13 => Reading::Text,
            14 => Reading::Number(f64::NAN),
            _ => Reading::Number(
                (i as f64 * 0.003 * (k + 1) as f64).sin() * 3.0 + (i % 7) as f64 * 1e-3,
            ),
        };
        let datasets = present.len();
        for cuts in [
            vec![],
            vec![6_000],
            vec![1, 4_999, 5_000, 11_999],
            vec![0, 3_000, 3_000, 9_000],
        ] {
            for exact_budget in [true, false] {
                let parts = cuts.len() + 1;
                let mut bounds = vec![0];
                bounds.extend(&cuts);
                bounds.push(n);
                let mut accs: Option<Vec<Accumulator>> = None;
                let mut frames: Option<Frames> = None;
                for w in bounds.windows(2) {
                    let mut part_accs = Accumulator::for_parts(datasets, parts);
                    let mut part_frames = Frames::for_parts(datasets, parts);
                    if !exact_budget {
                        // Past the budget: a few hundred values kept exactly.
                        part_accs = (0..datasets).map(|_| Accumulator::new(200)).collect();
                        part_frames = Frames {
                            shared: Timeline::new(200),
                            own: vec![None; datasets],
                            values: (0..datasets).map(|_| Values::new(200)).collect(),
                        };
                    }
                    let mut readings = vec![None; datasets];
                    for i in w[0]..w[1] {
                        for (k, (_, here)) in present.iter().enumerate() {
                            readings[k] = here(i).then(|| reading(k, i));
                            if let Some(r) = readings[k] {
                                part_accs[k].push(time(i), r);
                            }
                        }
                        part_frames.push_frame(time(i), &readings);
                    }
                    match (&mut accs, &mut frames) {
                        (Some(a), Some(f)) => {
                            for (a, p) in a.iter_mut().zip(part_accs) {
                                a.merge(p);
                            }
                            f.merge(part_frames);
                        }
                        _ => (accs, frames) = (Some(part_accs), Some(part_frames)),
                    }
                }
                let want: Vec<Summary> =
                    accs.unwrap().into_iter().map(Accumulator::finish).collect();
                let got = frames.unwrap().finish();
                for ((name, _), (w, g)) in present.iter().zip(want.iter().zip(&got)) {
                    assert_eq!(g, w, "{name}, cut at {cuts:?}, exact budget {exact_budget}");
                }
                assert_eq!(
                    got[0].percentiles,
                    if exact_budget {
                        Percentiles::Exact
                    } else {
                        Percentiles::Estimated
                    }
                );
                assert!(got[2].last_s.unwrap() < 30.0 && got[4].first_s.unwrap() >= 52.0);
                assert_eq!(got[5].first_s, None);
            }
        }
    }

    /// A stream summarised in parts and merged in order gives the one-pass summary: with
    /// text, NaN, gaps and extremes reached twice, for splits anywhere, in the exact regime
    /// and past the budget (where the parts' histograms add up to the same counts).
    #[test]
    fn parts_merged_in_order_summarise_as_one_pass() {
        let sample = |i: usize| -> (f64, Reading) {
            // 10 ms apart with a 2 s gap at 5 000; a wave that reaches its extremes twice.
            let t = i as f64 * 0.01 + if i >= 5_000 { 2.0 } else { 0.0 };
            let r = match i % 997 {
                13 => Reading::Text,
                14 => Reading::Number(f64::NAN),
                _ => Reading::Number((i as f64 * 0.003).sin() * 3.0 + (i % 7) as f64 * 1e-3),
            };
            (t, r)
        };
        let n = 12_000;
        for (budget, cuts) in [
            (100_000, vec![6_000]),
            (100_000, vec![1, 4_999, 5_000, 11_999]),
            (100_000, vec![0, 3_000, 3_000, 9_000]),
            (2_000, vec![4_000, 8_000]),
            (2_000, vec![100, 5_000, 11_000]),
        ] {
            let mut one = Accumulator::new(budget);
            for i in 0..n {
                let (t, r) = sample(i);
                one.push(t, r);
            }
            let parts = cuts.len() + 1;
            let mut bounds = vec![0];
            bounds.extend(&cuts);
            bounds.push(n);
            let mut merged: Option<Accumulator> = None;
            for w in bounds.windows(2) {
                let mut part = Accumulator::new(budget / parts);
                for i in w[0]..w[1] {
                    let (t, r) = sample(i);
                    part.push(t, r);
                }
                match &mut merged {
                    None => merged = Some(part),
                    Some(m) => m.merge(part),
                }
            }
            let (one, merged) = (one.finish(), merged.unwrap().finish());
            let close = |a: Option<f64>, b: Option<f64>| {
                let (a, b) = (a.unwrap(), b.unwrap());
                assert!(
                    (a - b).abs() <= 1e-12 * a.abs().max(1.0),
                    "{cuts:?}: {a} vs {b}"
                );
            };
            close(one.mean, merged.mean);
            close(one.std, merged.std);
            let exact_fields = |s: &Summary| {
                let mut s = s.clone();
                (s.mean, s.std) = (None, None);
                s
            };
            assert_eq!(exact_fields(&one), exact_fields(&merged), "{cuts:?}");
            let want = if budget < n {
                Percentiles::Estimated
            } else {
                Percentiles::Exact
            };
            assert_eq!(merged.percentiles, want, "{cuts:?}");
            assert_eq!(merged.gaps, 1, "{cuts:?}");
        }
    }
}
