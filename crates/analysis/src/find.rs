//! Where a condition holds: the time ranges of one dataset's samples that meet it, in one
//! pass.
//!
//! A *range* is a run of consecutive samples that meet the condition: it starts at the
//! first such sample's time and ends at the last one's, and a sample that does not meet it
//! (a NaN or a text reading never does) ends it. Ranges closer than `mergeS` are merged.
//! Per condition, a sample meets it when:
//!
//! | condition  | the sample                                                              |
//! |------------|-------------------------------------------------------------------------|
//! | `above`    | is greater than `level`                                                 |
//! | `below`    | is less than `level`                                                    |
//! | `between`  | lies in `low..=high`                                                    |
//! | `outside`  | lies outside `low..=high`                                               |
//! | `alarm`    | lies in one of the dataset's alarm bands (`min..=max`)                  |
//! | `rate`     | changed faster than `perS` (absolute, units a second) since the previous sample |
//! | `stuck`    | equals the previous one, in a run of equal values lasting at least `forS` (the run's first sample included) |
//! | `crossing` | is on the other side of `level` than the previous sample (`>= level` is above); each crossing is its own one-sample range with its direction |

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::summary::Reading;

/// Ranges listed in a result at most; the totals count them all.
pub const MAX_RANGES: usize = 50;

/// What to look for.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Condition {
    /// Greater than `level`.
    Above { level: f64 },
    /// Less than `level`.
    Below { level: f64 },
    /// From `low` to `high`, both included.
    Between { low: f64, high: f64 },
    /// Below `low` or above `high`.
    Outside { low: f64, high: f64 },
    /// Inside one of the dataset's alarm bands (its project settings).
    Alarm,
    /// Changing faster than `perS` units a second, up or down.
    #[serde(rename_all = "camelCase")]
    Rate { per_s: f64 },
    /// The same value for at least `forS` seconds.
    #[serde(rename_all = "camelCase")]
    Stuck { for_s: f64 },
    /// Passing `level`; `direction` up, down or either (the default).
    Crossing {
        level: f64,
        #[serde(default)]
        direction: Direction,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Direction {
    Up,
    Down,
    #[default]
    Either,
}

impl Condition {
    /// Checks the condition's numbers; `Err` says what is wrong, for the person.
    pub fn check(&self) -> Result<(), String> {
        let finite = |name: &str, x: f64| {
            if x.is_finite() {
                Ok(())
            } else {
                Err(format!("{name} must be a finite number"))
            }
        };
        match *self {
            Condition::Above { level }
            | Condition::Below { level }
            | Condition::Crossing { level, .. } => finite("level", level),
            Condition::Between { low, high } | Condition::Outside { low, high } => {
                finite("low", low)?;
                finite("high", high)?;
                if low > high {
                    return Err("low must not be above high".into());
                }
                Ok(())
            }
            Condition::Alarm => Ok(()),
            Condition::Rate { per_s } => {
                finite("perS", per_s)?;
                if per_s < 0.0 {
                    return Err("perS must be 0 or more".into());
                }
                Ok(())
            }
            Condition::Stuck { for_s } => {
                finite("forS", for_s)?;
                if for_s <= 0.0 {
                    return Err("forS must be more than 0".into());
                }
                Ok(())
            }
        }
    }
}

/// One range where the condition held.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Range {
    pub start_s: f64,
    pub end_s: f64,
    pub duration_s: f64,
    /// Samples in it that met the condition.
    pub samples: u64,
    pub min: f64,
    pub max: f64,
    /// A crossing's direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
}

/// Every range found, the first [`MAX_RANGES`] of them listed.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    /// Ranges found in all.
    pub count: u64,
    /// Samples that met the condition in all.
    pub samples: u64,
    /// Time covered by the ranges in all, seconds.
    pub total_s: f64,
    /// The lowest and highest value over every range, with when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_at_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_at_s: Option<f64>,
    /// The longest range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest: Option<Range>,
    /// The first ranges in time (up to 50).
    pub ranges: Vec<Range>,
    /// Whether more ranges were found than listed.
    pub truncated: bool,
}

/// Finds the ranges in one pass over a dataset's samples.
#[derive(Debug, Clone)]
pub struct Finder {
    condition: Condition,
    bands: Vec<(f64, f64)>,
    merge_s: f64,
    /// The previous sample, while it was a finite number.
    previous: Option<(f64, f64)>,
    /// The run of samples meeting the condition so far.
    open: Option<Range>,
    /// The range that ended last, held until the next one shows whether they merge.
    pending: Option<Range>,
    /// A run of equal values (for `stuck`): its first sample's time, the value, its
    /// sample count and its last sample's time.
    equal: Option<(f64, f64, u64, f64)>,
    found: Found,
}

impl Finder {
    /// `bands`: the dataset's alarm bands, for [`Condition::Alarm`]; `merge_s`: ranges
    /// less than this apart become one.
    pub fn new(condition: Condition, bands: Vec<(f64, f64)>, merge_s: f64) -> Finder {
        Finder {
            condition,
            bands,
            merge_s: if merge_s.is_finite() {
                merge_s.max(0.0)
            } else {
                0.0
            },
            previous: None,
            open: None,
            pending: None,
            equal: None,
            found: Found {
                count: 0,
                samples: 0,
                total_s: 0.0,
                min: None,
                min_at_s: None,
                max: None,
                max_at_s: None,
                longest: None,
                ranges: Vec::new(),
                truncated: false,
            },
        }
    }

    pub fn push(&mut self, t: f64, reading: Reading) {
        let x = match reading {
            Reading::Number(x) if x.is_finite() => x,
            _ => {
                self.previous = None;
                self.close_stuck();
                self.end_run();
                return;
            }
        };
        let previous = self.previous.replace((t, x));
        match self.condition {
            Condition::Crossing { level, direction } => {
                if let Some((_, p)) = previous {
                    let (was, is) = (p >= level, x >= level);
                    let dir = if is { Direction::Up } else { Direction::Down };
                    if was != is && (direction == Direction::Either || direction == dir) {
                        self.note(t, x);
                        let mut r = one(t, x);
                        r.direction = Some(dir);
                        self.emit(r);
                    }
                }
            }
            Condition::Stuck { .. } => match &mut self.equal {
                Some((_, v, n, last)) if *v == x => {
                    *n += 1;
                    *last = t;
                }
                _ => {
                    self.close_stuck();
                    self.equal = Some((t, x, 1, t));
                }
            },
            _ => {
                let meets = match self.condition {
                    Condition::Above { level } => x > level,
                    Condition::Below { level } => x < level,
                    Condition::Between { low, high } => (low..=high).contains(&x),
                    Condition::Outside { low, high } => !(low..=high).contains(&x),
                    Condition::Alarm => self.bands.iter().any(|(lo, hi)| (*lo..=*hi).contains(&x)),
                    Condition::Rate { per_s } => previous.is_some_and(|(pt, p)| {
                        let dt = t - pt;
                        dt > 0.0 && ((x - p) / dt).abs() > per_s
                    }),
                    Condition::Crossing { .. } | Condition::Stuck { .. } => false,
                };
                if meets {
                    self.note(t, x);
                    match &mut self.open {
                        Some(r) => {
                            r.end_s = t;
                            r.duration_s = r.end_s - r.start_s;
                            r.samples += 1;
                            r.min = r.min.min(x);
                            r.max = r.max.max(x);
                        }
                        None => self.open = Some(one(t, x)),
                    }
                } else {
                    self.end_run();
                }
            }
        }
    }

    /// The extremes over every range, with when they were first reached.
    fn note(&mut self, t: f64, x: f64) {
        let f = &mut self.found;
        if f.min.is_none_or(|m| x < m) {
            f.min = Some(x);
            f.min_at_s = Some(t);
        }
        if f.max.is_none_or(|m| x > m) {
            f.max = Some(x);
            f.max_at_s = Some(t);
        }
    }

    fn end_run(&mut self) {
        if let Some(r) = self.open.take() {
            self.emit(r);
        }
    }

    fn close_stuck(&mut self) {
        let Condition::Stuck { for_s } = self.condition else {
            return;
        };
        let Some((start, v, n, end)) = self.equal.take() else {
            return;
        };
        if n >= 2 && end - start >= for_s {
            self.note(start, v);
            self.emit(Range {
                start_s: start,
                end_s: end,
                duration_s: end - start,
                samples: n,
                min: v,
                max: v,
                direction: None,
            });
        }
    }

    fn emit(&mut self, r: Range) {
        // One with the range before when it started within `mergeS` of its end.
        if let Some(last) = self.pending.as_mut() {
            if r.direction.is_none() && self.merge_s > 0.0 && r.start_s - last.end_s <= self.merge_s
            {
                last.end_s = r.end_s;
                last.duration_s = last.end_s - last.start_s;
                last.samples += r.samples;
                last.min = last.min.min(r.min);
                last.max = last.max.max(r.max);
                return;
            }
        }
        if let Some(done) = self.pending.replace(r) {
            self.record(done);
        }
    }

    fn record(&mut self, r: Range) {
        let f = &mut self.found;
        f.count += 1;
        f.samples += r.samples;
        f.total_s += r.duration_s;
        if f.longest
            .as_ref()
            .is_none_or(|l| r.duration_s > l.duration_s)
        {
            f.longest = Some(r.clone());
        }
        if f.ranges.len() < MAX_RANGES {
            f.ranges.push(r);
        } else {
            f.truncated = true;
        }
    }

    pub fn finish(mut self) -> Found {
        self.close_stuck();
        self.end_run();
        if let Some(r) = self.pending.take() {
            self.record(r);
        }
        self.found
    }
}

fn one(t: f64, x: f64) -> Range {
    Range {
        start_s: t,
        end_s: t,
        duration_s: 0.0,
        samples: 1,
        min: x,
        max: x,
        direction: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(condition: Condition, merge_s: f64, samples: &[(f64, f64)]) -> Found {
        let mut f = Finder::new(condition, vec![(9.0, 12.0)], merge_s);
        for (t, x) in samples {
            f.push(*t, Reading::Number(*x));
        }
        f.finish()
    }

    /// t = 0..10 s at 1 Hz.
    const WAVE: [f64; 11] = [0.0, 5.0, 11.0, 12.0, 4.0, 13.0, 13.0, 13.0, 2.0, 2.0, 10.0];

    fn wave() -> Vec<(f64, f64)> {
        WAVE.iter()
            .enumerate()
            .map(|(i, x)| (i as f64, *x))
            .collect()
    }

    fn spans(f: &Found) -> Vec<(f64, f64, u64)> {
        f.ranges
            .iter()
            .map(|r| (r.start_s, r.end_s, r.samples))
            .collect()
    }

    #[test]
    fn conditions_as_a_table() {
        type Spans = &'static [(f64, f64, u64)];
        let cases: &[(Condition, f64, Spans)] = &[
            (
                Condition::Above { level: 10.0 },
                0.0,
                &[(2.0, 3.0, 2), (5.0, 7.0, 3)],
            ),
            (Condition::Above { level: 10.0 }, 2.0, &[(2.0, 7.0, 5)]),
            (
                Condition::Below { level: 3.0 },
                0.0,
                &[(0.0, 0.0, 1), (8.0, 9.0, 2)],
            ),
            (
                Condition::Between {
                    low: 4.0,
                    high: 5.0,
                },
                0.0,
                &[(1.0, 1.0, 1), (4.0, 4.0, 1)],
            ),
            (
                Condition::Outside {
                    low: 1.0,
                    high: 12.0,
                },
                0.0,
                &[(0.0, 0.0, 1), (5.0, 7.0, 3)],
            ),
            (Condition::Alarm, 0.0, &[(2.0, 3.0, 2), (10.0, 10.0, 1)]),
            (
                Condition::Rate { per_s: 8.0 },
                0.0,
                &[(5.0, 5.0, 1), (8.0, 8.0, 1)],
            ),
            (Condition::Stuck { for_s: 2.0 }, 0.0, &[(5.0, 7.0, 3)]),
            (
                Condition::Stuck { for_s: 1.0 },
                0.0,
                &[(5.0, 7.0, 3), (8.0, 9.0, 2)],
            ),
            (
                Condition::Crossing {
                    level: 10.0,
                    direction: Direction::Either,
                },
                0.0,
                &[
                    (2.0, 2.0, 1),
                    (4.0, 4.0, 1),
                    (5.0, 5.0, 1),
                    (8.0, 8.0, 1),
                    (10.0, 10.0, 1),
                ],
            ),
            (
                Condition::Crossing {
                    level: 10.0,
                    direction: Direction::Down,
                },
                0.0,
                &[(4.0, 4.0, 1), (8.0, 8.0, 1)],
            ),
        ];
        for (condition, merge, want) in cases {
            let found = run(condition.clone(), *merge, &wave());
            assert_eq!(spans(&found), *want, "{condition:?} merge {merge}");
            assert_eq!(found.count, want.len() as u64);
        }
    }

    #[test]
    fn a_nan_ends_a_run_and_extremes_say_when() {
        let mut f = Finder::new(Condition::Above { level: 0.0 }, vec![], 0.0);
        f.push(0.0, Reading::Number(1.0));
        f.push(1.0, Reading::Number(3.0));
        f.push(2.0, Reading::Number(f64::NAN));
        f.push(3.0, Reading::Number(2.0));
        f.push(4.0, Reading::Text);
        let found = f.finish();
        assert_eq!(spans(&found), vec![(0.0, 1.0, 2), (3.0, 3.0, 1)]);
        assert_eq!((found.max, found.max_at_s), (Some(3.0), Some(1.0)));
        assert_eq!((found.min, found.min_at_s), (Some(1.0), Some(0.0)));
        assert_eq!(found.longest.unwrap().start_s, 0.0);
    }

    #[test]
    fn only_the_first_ranges_are_listed() {
        let samples: Vec<(f64, f64)> = (0..500).map(|i| (i as f64, (i % 2) as f64)).collect();
        let found = run(Condition::Above { level: 0.5 }, 0.0, &samples);
        assert_eq!(found.count, 250);
        assert_eq!(found.ranges.len(), MAX_RANGES);
        assert!(found.truncated);
    }

    #[test]
    fn bad_numbers_are_refused() {
        assert!(Condition::Between {
            low: 2.0,
            high: 1.0
        }
        .check()
        .is_err());
        assert!(Condition::Above { level: f64::NAN }.check().is_err());
        assert!(Condition::Stuck { for_s: 0.0 }.check().is_err());
        assert!(Condition::Rate { per_s: 1.0 }.check().is_ok());
    }
}
