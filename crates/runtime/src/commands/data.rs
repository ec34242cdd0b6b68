//! `data.*`: answers from the data itself, over the live data or a recorded session – a
//! summary of each dataset, the time ranges where a condition holds, the spectrum's peaks,
//! two windows side by side, and a decimated series a chart draws.
//!
//! A window is either the last N seconds of the live data (what the dashboard keeps: the
//! newest 65 536 samples of each dataset) or a recorded session, whole or from `fromS` to
//! `toS` seconds (its CSV export's `elapsed_s`). Both feed the same analyses of
//! `sextant_analysis` one sample at a time: the live samples are copied out on the owner
//! (a few milliseconds), a session is read on a job in one streaming pass that skips the
//! blocks outside the range, so neither the owner nor memory grows with its length.
//!
//! Results are small by construction: at most [`MAX_DATASETS`] datasets, 50 ranges, 20
//! peaks, [`MAX_POINTS`] chart points a dataset.

use std::collections::HashMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sextant_analysis::{
    compare, Accumulator, Condition, Difference, Finder, Found, Frames, Reading, Spectrum, Summary,
    Welch,
};
use sextant_commands::{CommandError, Deferred, Registry, Tier};
use sextant_display::Recent;
use sextant_sessions::codec::Cell;
use sextant_sessions::{SessionError, SessionStore, Share};
use sextant_telemetry::project::Project;

use crate::Workspace;

/// Datasets one request analyses at most.
pub const MAX_DATASETS: usize = 32;
/// Datasets one chart draws at most.
pub const MAX_CHART_DATASETS: usize = 8;
/// Points a chart's dataset gets at most (min and max of each bucket).
pub const MAX_POINTS: usize = 2000;

/// Which data to analyse.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataWindow {
    /// The last this many seconds of the live data (0.01 to 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_s: Option<f64>,
    /// A recorded session's id (from `sessions.list`), instead of the live data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<i64>,
    /// From this many seconds: after a session's first frame, or without `session` and
    /// `lastS`, on the live data's own clock (the dashboard's time axis). Default: the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_s: Option<f64>,
    /// Up to this many seconds, on the same clock as `fromS`. Default: the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_s: Option<f64>,
}

/// The window an answer covers, as read.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WindowRead {
    /// The recorded session read; absent for live data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<i64>,
    /// The session's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Start and end, seconds: session time for live data, seconds from the first frame
    /// for a session.
    pub from_s: f64,
    pub to_s: f64,
    /// What the window could not cover, when anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SummaryParams {
    window: DataWindow,
    /// Datasets by id or `Group/Dataset` name; every dataset (up to 32) when absent.
    #[serde(default)]
    datasets: Option<Vec<String>>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Named<T> {
    /// `Group/Dataset`.
    dataset: String,
    units: String,
    #[serde(flatten)]
    result: T,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SummaryReply {
    window: WindowRead,
    datasets: Vec<Named<Summary>>,
    /// Datasets left out (only the first 32 are summarised unless named).
    #[serde(skip_serializing_if = "is_zero")]
    left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FindParams {
    window: DataWindow,
    /// The dataset, by id or `Group/Dataset` name.
    dataset: String,
    condition: Condition,
    /// Ranges less than this many seconds apart count as one (default 0).
    #[serde(default)]
    merge_s: f64,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct FindReply {
    window: WindowRead,
    #[serde(flatten)]
    found: Named<Found>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SpectrumParams {
    window: DataWindow,
    /// The dataset, by id or `Group/Dataset` name.
    dataset: String,
    /// Samples per segment, 16 to 65536 (default 1024): more gives finer frequency steps.
    #[serde(default)]
    segment: Option<usize>,
    /// How many peaks, 1 to 20 (default 5).
    #[serde(default)]
    peaks: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SpectrumReply {
    window: WindowRead,
    #[serde(flatten)]
    spectrum: Named<Spectrum>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompareParams {
    a: DataWindow,
    b: DataWindow,
    /// Datasets by id or `Group/Dataset` name (found in both); every dataset the two share
    /// (up to 32) when absent.
    #[serde(default)]
    datasets: Option<Vec<String>>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Side {
    a: Summary,
    b: Summary,
    /// `b − a`.
    difference: Difference,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct CompareReply {
    a: WindowRead,
    b: WindowRead,
    datasets: Vec<Named<Side>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SeriesParams {
    window: DataWindow,
    /// Datasets by id or `Group/Dataset` name (1 to 8).
    datasets: Vec<String>,
    /// Points per dataset, 10 to 2000 (default 400): the lowest and highest sample of
    /// each of half as many time buckets.
    #[serde(default)]
    points: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Line {
    /// Times, seconds, ascending.
    t: Vec<f64>,
    v: Vec<f64>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SeriesReply {
    window: WindowRead,
    datasets: Vec<Named<Line>>,
}

/// The `data.*` commands, one line each; the handler of `data.summary` is `data_summary`,
/// and so on, below in the same order.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    r.register_deferred("data.summary", Tier::Safe, DATA_SUMMARY, data_summary)
        .example("the last 10 s of live data", serde_json::json!({"window": {"lastS": 10}}))
        .example("one dataset of session 3", serde_json::json!({"window": {"session": 3}, "datasets": ["Battery/Voltage"]}));
    r.register_deferred("data.find", Tier::Safe, DATA_FIND, data_find)
        .example("when the voltage went below 3.3 V in session 3", serde_json::json!({"window": {"session": 3}, "dataset": "Battery/Voltage", "condition": {"kind": "below", "level": 3.3}}))
        .example("stuck for 2 s in the last minute", serde_json::json!({"window": {"lastS": 60}, "dataset": "Sensors/Temperature", "condition": {"kind": "stuck", "forS": 2}}));
    r.register_deferred("data.spectrum", Tier::Safe, DATA_SPECTRUM, data_spectrum)
        .example("is there 50 Hz hum in the last 5 s", serde_json::json!({"window": {"lastS": 5}, "dataset": "Audio/Mic"}));
    r.register_deferred("data.compare", Tier::Safe, DATA_COMPARE, data_compare)
        .example("session 4 against session 2", serde_json::json!({"a": {"session": 2}, "b": {"session": 4}}));
    r.register_deferred("data.series", Tier::Safe, DATA_SERIES, data_series);
}

const DATA_SUMMARY: &str =
    "Per dataset over a window of live data (lastS) or of a recorded session: count, first \
    and last time, min and max (with when), mean, std, p5/p50/p95, sample rate, gaps, NaN \
    and text readings. Computed from every sample, not estimated from a few.";

const DATA_FIND: &str =
    "When a condition held for one dataset: the time ranges (merged runs of samples) where \
    it is above/below/between/outside levels, in an alarm band, changing faster than a \
    rate, stuck at one value, or crossing a level, with counts and extremes.";

const DATA_SPECTRUM: &str =
    "The strongest frequencies of one dataset over a window (Welch's method, Hann window): \
    each peak's frequency, amplitude and power, and the noise floor.";

const DATA_COMPARE: &str =
    "The summaries of two windows (two sessions, or two ranges, or a session and the live \
    data) side by side with their differences (b − a).";

const DATA_SERIES: &str =
    "Up to 2000 points per dataset (each bucket's lowest and highest sample) over a window: \
    what a chart of it draws.";

/// Where a window's samples come from, resolved on the owner.
enum Source {
    Live {
        recent: Recent,
        from_s: f64,
        to_s: f64,
        bands: HashMap<String, Vec<(f64, f64)>>,
        note: Option<String>,
    },
    Recorded {
        db: PathBuf,
        session: i64,
        from_s: f64,
        to_s: Option<f64>,
    },
}

fn bands_of(project: &Project) -> HashMap<String, Vec<(f64, f64)>> {
    project
        .datasets()
        .map(|d| {
            let bands = d
                .alarms
                .iter()
                .map(|a| (a.min.min(a.max), a.max.max(a.min)));
            (d.id.clone(), bands.collect())
        })
        .collect()
}

fn check_window(w: &DataWindow, at: &str) -> Result<(), CommandError> {
    let bad = |field: &str, why: &str| Err(CommandError::invalid(format!("{at}.{field}"), why));
    match (w.last_s, w.session) {
        (Some(_), Some(_)) => bad(
            "lastS",
            "give either lastS (live data) or session, not both",
        ),
        (None, None) if w.from_s.is_none() && w.to_s.is_none() => bad(
            "lastS",
            "give lastS (the last seconds of live data) or session (a recorded session's id)",
        ),
        (Some(s), None) => {
            if !(s.is_finite() && s > 0.0 && s <= 86_400.0) {
                return bad(
                    "lastS",
                    "lastS must be more than 0 and at most 86400 seconds",
                );
            }
            if w.from_s.is_some() || w.to_s.is_some() {
                return bad(
                    "fromS",
                    "fromS and toS make a range of their own: give them or lastS, not both",
                );
            }
            Ok(())
        }
        (None, _) => {
            for (field, v) in [("fromS", w.from_s), ("toS", w.to_s)] {
                if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                    return bad(field, "a time must be 0 or more seconds");
                }
            }
            if let (Some(f), Some(t)) = (w.from_s, w.to_s) {
                if f > t {
                    return bad("toS", "toS must not be before fromS");
                }
            }
            Ok(())
        }
    }
}

/// Resolves `w` on the owner: copies the live samples, or names the session to read.
fn source(ws: &Workspace, w: &DataWindow, at: &str) -> Result<Source, CommandError> {
    check_window(w, at)?;
    if let Some(session) = w.session {
        let db = ws.sessions_db().map(PathBuf::from).ok_or_else(|| {
            CommandError::failed(
                "no sessions database is set, so there is no recorded session to read; \
                 choose one with sessions.setDatabase, or analyse the live data with lastS",
            )
        })?;
        return Ok(Source::Recorded {
            db,
            session,
            from_s: w.from_s.unwrap_or(0.0),
            to_s: w.to_s,
        });
    }
    let now = ws.scope.recent(Some(f64::INFINITY)).now_s.ok_or_else(|| {
        CommandError::failed(
            "there is no live data: connect a device (io.connect) or give a recorded session",
        )
    })?;
    // The last seconds, or a range on the live clock.
    let (from_s, to_s) = match w.last_s {
        Some(last) => (now - last, now),
        None => (w.from_s.unwrap_or(0.0), w.to_s.unwrap_or(now).min(now)),
    };
    let mut recent = ws.scope.recent(Some(from_s));
    for d in &mut recent.datasets {
        let end = d.t.partition_point(|t| *t <= to_s);
        d.t.truncate(end);
        d.v.truncate(end);
    }
    // Only a dataset whose older samples were let go can be missing some of the window.
    let oldest = recent
        .datasets
        .iter()
        .filter(|d| d.trimmed)
        .filter_map(|d| d.oldest_kept_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let note = (oldest.is_finite() && oldest > from_s).then(|| {
        format!(
            "the live data reaches back only {:.3} s (the newest samples the dashboard keeps); \
             record a session to analyse longer spans",
            now - oldest
        )
    });
    Ok(Source::Live {
        recent,
        from_s,
        to_s: to_s.max(from_s),
        bands: bands_of(ws.project()),
        note,
    })
}

/// One dataset of a source: its column, units, alarm bands and where its values are.
#[derive(Clone)]
struct Column {
    name: String,
    id: String,
    units: String,
}

/// A source opened for reading (on a job for a session).
struct Opened {
    source: Source,
    store: Option<SessionStore>,
    columns: Vec<Column>,
    bands: HashMap<String, Vec<(f64, f64)>>,
    window: WindowRead,
}

fn session_error(e: SessionError) -> CommandError {
    match e {
        SessionError::NotFound(_) => CommandError::not_found(e.to_string()),
        other => CommandError::failed(other.to_string()),
    }
}

fn open(source: Source) -> Result<Opened, CommandError> {
    match source {
        Source::Live {
            recent,
            from_s,
            to_s,
            bands,
            note,
        } => {
            let columns = recent
                .datasets
                .iter()
                .map(|d| Column {
                    name: d.column.clone(),
                    id: d.id.clone(),
                    units: d.units.clone(),
                })
                .collect();
            let window = WindowRead {
                session: None,
                title: None,
                from_s,
                to_s,
                note: note.clone(),
            };
            Ok(Opened {
                source: Source::Live {
                    recent,
                    from_s,
                    to_s,
                    bands: HashMap::new(),
                    note,
                },
                store: None,
                columns,
                bands,
                window,
            })
        }
        Source::Recorded {
            ref db,
            session,
            from_s,
            to_s,
        } => {
            let store = SessionStore::open(db).map_err(session_error)?;
            let summary = store.summary(session).map_err(session_error)?;
            let names = store.columns(session).map_err(session_error)?;
            let ids = store.dataset_ids(session).map_err(session_error)?;
            let columns = names
                .into_iter()
                .zip(ids)
                .map(|(name, (id, units))| Column { name, id, units })
                .collect();
            // A project that no longer loads still has its data; it only lacks alarm bands.
            let bands = store
                .project(session)
                .map(|p| bands_of(&p))
                .unwrap_or_default();
            let end = to_s.unwrap_or(summary.duration_s).min(summary.duration_s);
            let note = (to_s.is_some_and(|t| t > summary.duration_s)
                || from_s > summary.duration_s)
                .then(|| format!("the session is {:.3} s long", summary.duration_s));
            Ok(Opened {
                window: WindowRead {
                    session: Some(session),
                    title: Some(summary.title.clone()),
                    from_s,
                    to_s: end.max(from_s),
                    note,
                },
                source,
                store: Some(store),
                columns,
                bands,
            })
        }
    }
}

impl Opened {
    /// The columns named (by id, `Group/Dataset`, or that ignoring case), in the order
    /// given; every column (up to [`MAX_DATASETS`]) when `None`. Returns the picks and how
    /// many were left out.
    fn pick(
        &self,
        names: Option<&[String]>,
        param: &str,
        most: usize,
    ) -> Result<(Vec<usize>, usize), CommandError> {
        let Some(names) = names else {
            let n = self.columns.len();
            return Ok(((0..n.min(most)).collect(), n.saturating_sub(most)));
        };
        if names.is_empty() || names.len() > most {
            return Err(CommandError::invalid(
                param,
                format!("name 1 to {most} datasets"),
            ));
        }
        let mut picked = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            picked.push(self.find(name).ok_or_else(|| {
                CommandError::invalid(format!("{param}[{i}]"), self.unknown(name))
            })?);
        }
        Ok((picked, 0))
    }

    fn find(&self, name: &str) -> Option<usize> {
        let name = name.trim();
        let cols = &self.columns;
        cols.iter()
            .position(|c| c.id == name)
            .or_else(|| cols.iter().position(|c| c.name == name))
            .or_else(|| cols.iter().position(|c| c.name.eq_ignore_ascii_case(name)))
            .or_else(|| {
                // The dataset's own title, when only one dataset has it.
                let title = |c: &Column| c.name.rsplit('/').next().unwrap_or("").to_string();
                let matches: Vec<usize> = (0..cols.len())
                    .filter(|&i| title(&cols[i]).eq_ignore_ascii_case(name))
                    .collect();
                (matches.len() == 1).then(|| matches[0])
            })
    }

    fn unknown(&self, name: &str) -> String {
        let known: Vec<&str> = self
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .take(40)
            .collect();
        if known.is_empty() {
            format!("no dataset `{name}`: this window has no datasets")
        } else {
            format!(
                "no dataset `{name}`; the datasets are: {}",
                known.join(", ")
            )
        }
    }

    fn named<T>(&self, column: usize, result: T) -> Named<T> {
        let c = &self.columns[column];
        Named {
            dataset: c.name.clone(),
            units: c.units.clone(),
            result,
        }
    }

    /// Feeds every sample of the picked columns in the window to `f(k, t, reading)` (`k`:
    /// index into `picked`), each column's samples in time order.
    fn scan(
        &self,
        picked: &[usize],
        mut f: impl FnMut(usize, f64, Reading),
    ) -> Result<(), CommandError> {
        match (&self.source, &self.store) {
            (Source::Live { recent, .. }, _) => {
                for (k, &col) in picked.iter().enumerate() {
                    let d = &recent.datasets[col];
                    for (t, v) in d.t.iter().zip(&d.v) {
                        f(k, *t, Reading::Number(*v));
                    }
                }
                Ok(())
            }
            (Source::Recorded { session, .. }, Some(store)) => scan_share(
                store,
                *session,
                self.recorded_range(),
                &Share::ALL,
                picked,
                f,
            ),
            (Source::Recorded { .. }, None) => {
                Err(CommandError::failed("the session could not be opened"))
            }
        }
    }

    /// The range a recorded window reads: without an end, to the last frame, however the
    /// counters rounded.
    fn recorded_range(&self) -> (f64, f64) {
        let to_s = match &self.source {
            Source::Recorded { to_s, .. } => *to_s,
            Source::Live { .. } => None,
        };
        (self.window.from_s, to_s.unwrap_or(f64::INFINITY))
    }

    /// Every picked column's summary. A long recorded window is split into shares of its
    /// blocks, each read and summarised on a thread of its own (as many as the machine has
    /// cores, at most 4) with a store connection of its own, and the shares' summaries are
    /// merged in order: an hour of 16 datasets at 1 kHz is 57.6 M samples, and reading
    /// them is as much of the work as summarising them, so both are shared out.
    fn summaries(&self, picked: &[usize]) -> Result<Vec<Summary>, CommandError> {
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 4);
        let (from, to) = self.recorded_range();
        let shares = match (&self.source, &self.store) {
            (Source::Recorded { session, .. }, Some(store)) if threads > 1 => store
                .shares(*session, from, to, threads)
                .map_err(session_error)?,
            _ => vec![Share::ALL],
        };
        let (Source::Recorded { db, session, .. }, [_, _, ..]) = (&self.source, &shares[..]) else {
            let mut acc = Accumulator::for_datasets(picked.len());
            self.scan(picked, |k, t, r| acc[k].push(t, r))?;
            return Ok(acc.into_iter().map(Accumulator::finish).collect());
        };
        let parts = shares.len();
        // A frame at a time: the frames' times are counted once, not once per dataset.
        let summarise = |share: &Share| -> Result<Frames, CommandError> {
            let store = SessionStore::open(db).map_err(session_error)?;
            let mut frames = Frames::for_parts(picked.len(), parts);
            let mut readings = vec![None; picked.len()];
            store
                .for_each_cells_in_share(*session, from, to, share, picked, |t, cells| {
                    for (reading, cell) in readings.iter_mut().zip(cells) {
                        *reading = match *cell {
                            Cell::Null => None,
                            Cell::Number(x) => Some(Reading::Number(x)),
                            Cell::Text => Some(Reading::Text),
                        };
                    }
                    frames.push_frame(t, &readings);
                    Ok(())
                })
                .map_err(session_error)?;
            Ok(frames)
        };
        let read: Vec<Result<Frames, CommandError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = shares[1..]
                .iter()
                .map(|share| scope.spawn(move || summarise(share)))
                .collect();
            let mut read = vec![summarise(&shares[0])];
            read.extend(
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a summary thread panicked")),
            );
            read
        });
        let mut read = read.into_iter();
        let mut frames = read.next().expect("at least two shares")?;
        for part in read {
            frames.merge(part?);
        }
        Ok(frames.finish())
    }
}

/// Feeds every sample of the picked columns in one share of a recorded window to
/// `f(k, t, reading)`, frame by frame.
fn scan_share(
    store: &SessionStore,
    session: i64,
    (from, to): (f64, f64),
    share: &Share,
    picked: &[usize],
    mut f: impl FnMut(usize, f64, Reading),
) -> Result<(), CommandError> {
    store
        .for_each_cells_in_share(session, from, to, share, picked, |t, cells| {
            for (k, cell) in cells.iter().enumerate() {
                match *cell {
                    Cell::Null => {}
                    Cell::Number(x) => f(k, t, Reading::Number(x)),
                    Cell::Text => f(k, t, Reading::Text),
                }
            }
            Ok(())
        })
        .map_err(session_error)?;
    Ok(())
}

fn data_summary(
    ws: &mut Workspace,
    p: SummaryParams,
) -> Result<Deferred<Workspace, SummaryReply>, CommandError> {
    let source = source(ws, &p.window, "window")?;
    Ok(Deferred::off(move || {
        let opened = open(source)?;
        let (picked, left_out) = opened.pick(p.datasets.as_deref(), "datasets", MAX_DATASETS)?;
        let summaries = opened.summaries(&picked)?;
        Ok(SummaryReply {
            datasets: picked
                .iter()
                .zip(summaries)
                .map(|(&c, s)| opened.named(c, s))
                .collect(),
            window: opened.window,
            left_out,
        })
    }))
}

fn data_find(
    ws: &mut Workspace,
    p: FindParams,
) -> Result<Deferred<Workspace, FindReply>, CommandError> {
    p.condition
        .check()
        .map_err(|why| CommandError::invalid("condition", why))?;
    if !(p.merge_s.is_finite() && p.merge_s >= 0.0) {
        return Err(CommandError::invalid(
            "mergeS",
            "mergeS must be 0 or more seconds",
        ));
    }
    let source = source(ws, &p.window, "window")?;
    Ok(Deferred::off(move || {
        let opened = open(source)?;
        let (picked, _) = opened.pick(Some(std::slice::from_ref(&p.dataset)), "dataset", 1)?;
        let column = &opened.columns[picked[0]];
        let bands = opened.bands.get(&column.id).cloned().unwrap_or_default();
        if p.condition == Condition::Alarm && bands.is_empty() {
            return Err(CommandError::invalid(
                "condition",
                format!("`{}` has no alarm bands to be inside of", column.name),
            ));
        }
        let mut finder = Finder::new(p.condition.clone(), bands, p.merge_s);
        opened.scan(&picked, |_, t, r| finder.push(t, r))?;
        Ok(FindReply {
            found: opened.named(picked[0], finder.finish()),
            window: opened.window,
        })
    }))
}

fn data_spectrum(
    ws: &mut Workspace,
    p: SpectrumParams,
) -> Result<Deferred<Workspace, SpectrumReply>, CommandError> {
    let segment = p
        .segment
        .unwrap_or(sextant_analysis::spectrum::DEFAULT_SEGMENT);
    if !sextant_analysis::spectrum::SEGMENT_RANGE.contains(&segment) {
        return Err(CommandError::invalid(
            "segment",
            "segment must be 16 to 65536 samples",
        ));
    }
    let peaks = p.peaks.unwrap_or(5);
    if !(1..=sextant_analysis::spectrum::MAX_PEAKS).contains(&peaks) {
        return Err(CommandError::invalid("peaks", "peaks must be 1 to 20"));
    }
    let source = source(ws, &p.window, "window")?;
    Ok(Deferred::off(move || {
        let opened = open(source)?;
        let (picked, _) = opened.pick(Some(std::slice::from_ref(&p.dataset)), "dataset", 1)?;
        let mut welch = Welch::new(segment);
        opened.scan(&picked, |_, t, r| welch.push(t, r))?;
        let spectrum = welch.finish(peaks).ok_or_else(|| {
            CommandError::failed(format!(
                "`{}` has fewer than 16 numeric samples spread over time in this window: \
                 too few for a spectrum",
                opened.columns[picked[0]].name
            ))
        })?;
        Ok(SpectrumReply {
            spectrum: opened.named(picked[0], spectrum),
            window: opened.window,
        })
    }))
}

fn data_compare(
    ws: &mut Workspace,
    p: CompareParams,
) -> Result<Deferred<Workspace, CompareReply>, CommandError> {
    let a = source(ws, &p.a, "a")?;
    let b = source(ws, &p.b, "b")?;
    Ok(Deferred::off(move || {
        let (a, b) = (open(a)?, open(b)?);
        // Pairs of columns by name: the named ones, or every one both windows have.
        let pairs: Vec<(usize, usize)> = match &p.datasets {
            Some(names) => {
                let (in_a, _) = a.pick(Some(names), "datasets", MAX_DATASETS)?;
                let (in_b, _) = b.pick(Some(names), "datasets", MAX_DATASETS)?;
                in_a.into_iter().zip(in_b).collect()
            }
            None => a
                .columns
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    b.columns
                        .iter()
                        .position(|d| d.name == c.name)
                        .map(|j| (i, j))
                })
                .take(MAX_DATASETS)
                .collect(),
        };
        if pairs.is_empty() {
            return Err(CommandError::failed(
                "the two windows share no dataset (compared by `Group/Dataset` name)",
            ));
        }
        let sa = a.summaries(&pairs.iter().map(|p| p.0).collect::<Vec<_>>())?;
        let sb = b.summaries(&pairs.iter().map(|p| p.1).collect::<Vec<_>>())?;
        let datasets = pairs
            .iter()
            .zip(sa.into_iter().zip(sb))
            .map(|(&(i, _), (sa, sb))| {
                let difference = compare(&sa, &sb);
                a.named(
                    i,
                    Side {
                        a: sa,
                        b: sb,
                        difference,
                    },
                )
            })
            .collect();
        Ok(CompareReply {
            a: a.window,
            b: b.window,
            datasets,
        })
    }))
}

/// A sample's time and value.
type Point = (f64, f64);

/// Min/max decimation into buckets over a known time span, one pass.
struct Buckets {
    from: f64,
    width: f64,
    /// Per bucket: its lowest and highest sample.
    cells: Vec<Option<(Point, Point)>>,
}

impl Buckets {
    fn new(from: f64, to: f64, n: usize) -> Buckets {
        Buckets {
            from,
            width: ((to - from) / n as f64).max(f64::MIN_POSITIVE),
            cells: vec![None; n],
        }
    }

    fn push(&mut self, t: f64, r: Reading) {
        let Reading::Number(v) = r else { return };
        if !v.is_finite() {
            return;
        }
        let i =
            (((t - self.from) / self.width).floor().max(0.0) as usize).min(self.cells.len() - 1);
        match &mut self.cells[i] {
            Some((lo, hi)) => {
                if v < lo.1 {
                    *lo = (t, v);
                }
                if v > hi.1 {
                    *hi = (t, v);
                }
            }
            cell @ None => *cell = Some(((t, v), (t, v))),
        }
    }

    fn line(self) -> Line {
        let mut line = Line {
            t: Vec::new(),
            v: Vec::new(),
        };
        for (lo, hi) in self.cells.into_iter().flatten() {
            let (first, second) = if lo.0 <= hi.0 { (lo, hi) } else { (hi, lo) };
            line.t.push(first.0);
            line.v.push(first.1);
            if second != first {
                line.t.push(second.0);
                line.v.push(second.1);
            }
        }
        line
    }
}

fn data_series(
    ws: &mut Workspace,
    p: SeriesParams,
) -> Result<Deferred<Workspace, SeriesReply>, CommandError> {
    let points = p.points.unwrap_or(400);
    if !(10..=MAX_POINTS).contains(&points) {
        return Err(CommandError::invalid("points", "points must be 10 to 2000"));
    }
    let source = source(ws, &p.window, "window")?;
    Ok(Deferred::off(move || {
        let opened = open(source)?;
        let (picked, _) = opened.pick(Some(&p.datasets), "datasets", MAX_CHART_DATASETS)?;
        let (from, to) = (opened.window.from_s, opened.window.to_s);
        let mut buckets: Vec<Buckets> = picked
            .iter()
            .map(|_| Buckets::new(from, to, points / 2))
            .collect();
        opened.scan(&picked, |k, t, r| buckets[k].push(t, r))?;
        Ok(SeriesReply {
            datasets: picked
                .iter()
                .zip(buckets)
                .map(|(&c, b)| opened.named(c, b.line()))
                .collect(),
            window: opened.window,
        })
    }))
}
