//! The hot path: byte chunks → frames → decoded payloads → rows → dataset values.
//!
//! A [`Pipeline`] is built from a [`Project`] and owns, per source, a framer, a decoder, a
//! parser and the slot → dataset map; and for the whole project, the current raw and final
//! value of every dataset plus the compiled transforms. It is synchronous and pure: the
//! devices layer calls [`Pipeline::push`] from its own task with timestamped chunks and
//! gets a callback per produced frame. Nothing in here blocks or allocates per frame in
//! the steady state for the built-in parsers.
//!
//! Multi-source projects: a frame from one source updates that source's datasets; the
//! others keep their last values, and every frame event carries the whole current row.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sextant_scripting::{Host, Limits, ScriptValue, SharedTables};

use crate::decode::decode;
use crate::framing::{DelimiterError, Framer, FramerConfig, FramingStats};
use crate::parse::script::to_script;
use crate::parse::{build_parser, FrameParser, ParseError};
use crate::project::{Decoder, ParserConfig, Project, Source, TableValue};
use crate::transform::{CompiledTransform, TransformError};
use crate::value::{Rows, Value};

/// When a chunk arrived: monotonic nanoseconds since the session started, and wall clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timestamp {
    pub elapsed_ns: u64,
    pub unix_ns: i64,
}

impl Timestamp {
    pub fn elapsed_s(&self) -> f64 {
        self.elapsed_ns as f64 / 1e9
    }
}

/// One produced frame: which source it came from, when, and every dataset's current value.
#[derive(Debug)]
pub struct FrameEvent<'a> {
    pub source: usize,
    pub timestamp: Timestamp,
    /// Final (transformed) values, indexed like [`Pipeline::datasets`].
    pub values: &'a [Value],
}

/// Why a pipeline could not be built. Each variant names where in the project to look.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("sources[{source_index}].framing: {error}")]
    Framing {
        source_index: usize,
        error: DelimiterError,
    },
    #[error("sources[{source_index}].parser: {error}")]
    Parser {
        source_index: usize,
        error: ParseError,
    },
    #[error("transform of dataset `{dataset}`: {error}")]
    Transform {
        dataset: String,
        error: TransformError,
    },
    #[error("the project has no sources")]
    NoSources,
}

/// Counters for one source; all monotonically increasing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceStats {
    pub bytes: u64,
    pub framing: FramingStats,
    /// Frames whose payload the decoder rejected (bad COBS/SLIP).
    pub decode_errors: u64,
    /// Frames the parser rejected (script errors, malformed JSON, short binary frames).
    pub parse_errors: u64,
    /// Frames that produced at least one row.
    pub frames_parsed: u64,
    /// Rows produced (a batched script return gives several per frame).
    pub rows: u64,
    /// The most recent decode or parse error, for the UI.
    pub last_error: Option<String>,
}

/// Most datasets Quick Plot makes for one source. One bad line (`0,0,0,…` fills a 64 KiB
/// frame with 32 768 columns) would otherwise make a plot, a window and a session column
/// per value, for the rest of the run; wider rows keep their first columns and say so.
pub const MAX_AUTO_DATASETS: usize = 256;

/// What the pipeline knows about a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetInfo {
    pub id: String,
    pub title: String,
    pub group: String,
    pub units: String,
    /// Index into the project's sources; `None` for virtual datasets.
    pub source: Option<usize>,
    /// 0-based slot in the parser's row.
    pub slot: Option<usize>,
}

impl DatasetInfo {
    /// The CSV column name, `Group/Dataset`.
    pub fn column(&self) -> String {
        column_name(&self.group, &self.title)
    }
}

/// The CSV column of a dataset titled `title` in group `group`: `Group/Dataset`, or the
/// title alone outside a group. The one rule every export and every reader of one uses.
pub fn column_name(group: &str, title: &str) -> String {
    if group.is_empty() {
        title.to_string()
    } else {
        format!("{group}/{title}")
    }
}

struct SourceStage {
    framer: Framer,
    decoder: Decoder,
    parser: Box<dyn FrameParser>,
    /// (0-based slot, dataset index) for every dataset this source feeds.
    feeds: Vec<(usize, usize)>,
    /// Grow datasets from the data (quick plot with nothing configured).
    auto_datasets: bool,
    stats: SourceStats,
    /// When this source's previous frame arrived: the rows of a batch are spread over the
    /// time since then.
    last_frame: Option<Timestamp>,
}

/// Current values, shared with scripts through the host functions.
struct Values {
    raw: Vec<Value>,
    fin: Vec<Value>,
}

/// The host functions scripts see: shared tables plus read access to dataset values.
struct PipelineHost {
    tables: SharedTables,
    values: Mutex<Values>,
    by_id: Mutex<HashMap<String, usize>>,
    clear_requested: std::sync::atomic::AtomicBool,
}

impl PipelineHost {
    fn lookup(&self, id: &str, raw: bool) -> ScriptValue {
        let Some(i) = self.by_id.lock().ok().and_then(|m| m.get(id).copied()) else {
            return ScriptValue::Null;
        };
        // A script runs while the pipeline does not hold the lock, so this never deadlocks;
        // `try_lock` still guards against a host call from inside a future sink.
        match self.values.try_lock() {
            Ok(v) => to_script(if raw { &v.raw[i] } else { &v.fin[i] }),
            Err(_) => ScriptValue::Null,
        }
    }
}

impl Host for PipelineHost {
    fn table_get(&self, table: &str, name: &str) -> ScriptValue {
        self.tables.table_get(table, name)
    }
    fn table_set(
        &self,
        table: &str,
        name: &str,
        value: ScriptValue,
    ) -> Result<(), sextant_scripting::TablesFull> {
        self.tables.table_set(table, name, value)
    }
    fn dataset_raw(&self, id: &str) -> ScriptValue {
        self.lookup(id, true)
    }
    fn dataset_final(&self, id: &str) -> ScriptValue {
        self.lookup(id, false)
    }
    fn clear_plots(&self) {
        self.clear_requested
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl PipelineHost {
    /// A host holding the project's data tables, with no datasets yet.
    fn for_project(project: &Project) -> Arc<PipelineHost> {
        let tables = SharedTables::new();
        for table in &project.tables {
            for entry in &table.entries {
                let v = match &entry.value {
                    TableValue::Number(n) => ScriptValue::Number(*n),
                    TableValue::Text(t) => ScriptValue::Text(t.clone()),
                };
                // The project's own tables: as big as the project file, never refused.
                tables.set(&table.name, &entry.name, v);
            }
        }
        Arc::new(PipelineHost {
            tables,
            values: Mutex::new(Values {
                raw: Vec::new(),
                fin: Vec::new(),
            }),
            by_id: Mutex::new(HashMap::new()),
            clear_requested: Default::default(),
        })
    }

    /// Makes `datasets` addressable by scripts (by id, and by title as an alias), each
    /// with no value yet.
    fn index_datasets(&self, datasets: &[DatasetInfo]) {
        let mut by_id = self.by_id.lock().expect("fresh mutex");
        for (i, d) in datasets.iter().enumerate() {
            by_id.insert(d.id.clone(), i);
            // Serial Studio scripts may address datasets by title as an alias.
            by_id.entry(d.title.clone()).or_insert(i);
        }
        let mut values = self.values.lock().expect("fresh mutex");
        values.raw = vec![Value::Null; datasets.len()];
        values.fin = vec![Value::Null; datasets.len()];
    }
}

/// Every dataset of the project in group order, with its compiled transform, and the
/// indices of the virtual ones.
type BuiltDatasets = (Vec<DatasetInfo>, Vec<Option<CompiledTransform>>, Vec<usize>);

/// Resolves each dataset's source and slot and compiles its transform.
fn build_datasets(
    project: &Project,
    options: PipelineOptions,
    host: &Arc<dyn Host>,
) -> Result<BuiltDatasets, BuildError> {
    let source_index: HashMap<&str, usize> = project
        .sources
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();

    let mut datasets = Vec::new();
    let mut transforms = Vec::new();
    let mut virtuals = Vec::new();
    for group in &project.groups {
        for d in &group.datasets {
            let i = datasets.len();
            let source = if d.is_virtual {
                None
            } else {
                project
                    .source_of(d)
                    .and_then(|id| source_index.get(id).copied())
            };
            datasets.push(DatasetInfo {
                id: d.id.clone(),
                title: d.title.clone(),
                group: group.title.clone(),
                units: d.units.clone(),
                source,
                slot: (!d.is_virtual && d.index > 0).then(|| d.index as usize - 1),
            });
            let compiled = match &d.transform {
                Some(t) => Some(
                    CompiledTransform::compile(t, options.script_limits, host.clone()).map_err(
                        |error| BuildError::Transform {
                            dataset: d.id.clone(),
                            error,
                        },
                    )?,
                ),
                None => None,
            };
            transforms.push(compiled);
            if d.is_virtual {
                virtuals.push(i);
            }
        }
    }
    Ok((datasets, transforms, virtuals))
}

/// The framer, decoder and parser of source `si`, feeding the datasets that read it.
fn build_source(
    si: usize,
    s: &Source,
    datasets: &[DatasetInfo],
    options: PipelineOptions,
    host: &Arc<dyn Host>,
) -> Result<SourceStage, BuildError> {
    let config = FramerConfig::from_project(&s.framing).map_err(|error| BuildError::Framing {
        source_index: si,
        error,
    })?;
    let parser = build_parser(&s.parser, options.script_limits, host.clone()).map_err(|error| {
        BuildError::Parser {
            source_index: si,
            error,
        }
    })?;
    let feeds: Vec<(usize, usize)> = datasets
        .iter()
        .enumerate()
        .filter(|(_, d)| d.source == Some(si))
        .filter_map(|(i, d)| d.slot.map(|slot| (slot, i)))
        .collect();
    Ok(SourceStage {
        framer: Framer::new(config),
        decoder: s.decoder,
        auto_datasets: feeds.is_empty() && s.parser == ParserConfig::QuickPlot,
        parser,
        feeds,
        stats: SourceStats::default(),
        last_frame: None,
    })
}

/// A project's whole parsing pipeline.
pub struct Pipeline {
    sources: Vec<SourceStage>,
    core: Core,
    rows: Rows,
}

/// Everything shared by all sources: datasets, their transforms and current values.
/// Kept apart from the per-source stages so both can be borrowed at once on the hot path.
struct Core {
    datasets: Vec<DatasetInfo>,
    transforms: Vec<Option<CompiledTransform>>,
    /// Dataset indices of virtual datasets, evaluated after every row.
    virtuals: Vec<usize>,
    transform_errors: u64,
    last_transform_error: Option<String>,
    host: Arc<PipelineHost>,
}

/// Options for building a pipeline.
#[derive(Debug, Clone, Copy, Default)]
pub struct PipelineOptions {
    pub script_limits: Limits,
}

impl Pipeline {
    pub fn new(project: &Project) -> Result<Pipeline, BuildError> {
        Pipeline::with_options(project, PipelineOptions::default())
    }

    pub fn with_options(
        project: &Project,
        options: PipelineOptions,
    ) -> Result<Pipeline, BuildError> {
        if project.sources.is_empty() {
            return Err(BuildError::NoSources);
        }
        let host = PipelineHost::for_project(project);
        let dyn_host: Arc<dyn Host> = host.clone();

        let (datasets, transforms, virtuals) = build_datasets(project, options, &dyn_host)?;
        let mut sources = Vec::new();
        for (si, s) in project.sources.iter().enumerate() {
            sources.push(build_source(si, s, &datasets, options, &dyn_host)?);
        }
        host.index_datasets(&datasets);

        Ok(Pipeline {
            sources,
            core: Core {
                datasets,
                transforms,
                virtuals,
                transform_errors: 0,
                last_transform_error: None,
                host,
            },
            rows: Rows::new(),
        })
    }

    /// Every dataset, in project order (quick-plot sources append theirs as they appear).
    pub fn datasets(&self) -> &[DatasetInfo] {
        &self.core.datasets
    }

    pub fn source_count(&self) -> usize {
        self.sources.len()
    }

    pub fn stats(&self, source: usize) -> Option<&SourceStats> {
        self.sources.get(source).map(|s| &s.stats)
    }

    /// Transform failures so far, and the last message.
    pub fn transform_errors(&self) -> (u64, Option<&str>) {
        (
            self.core.transform_errors,
            self.core.last_transform_error.as_deref(),
        )
    }

    /// Whether a script called `clearPlots()` since the last call; resets the flag.
    pub fn take_clear_request(&self) -> bool {
        self.core
            .host
            .clear_requested
            .swap(false, std::sync::atomic::Ordering::Relaxed)
    }

    /// Channel names a quick-plot source learned from a header row.
    pub fn channel_names(&self, source: usize) -> Option<&[String]> {
        self.sources.get(source)?.parser.channel_names()
    }

    /// Forgets partial frames of `source` (call after a reconnect).
    pub fn reset_source(&mut self, source: usize) {
        if let Some(s) = self.sources.get_mut(source) {
            s.framer.reset();
            s.last_frame = None;
        }
    }

    /// Feeds one chunk from `source`; calls `sink` once per produced row.
    ///
    /// Panics if `source` is out of range (a wiring bug, not a data problem).
    pub fn push(
        &mut self,
        source: usize,
        timestamp: Timestamp,
        chunk: &[u8],
        sink: &mut dyn FnMut(&FrameEvent<'_>),
    ) {
        let SourceStage {
            framer,
            decoder,
            parser,
            feeds,
            auto_datasets,
            stats,
            last_frame,
        } = &mut self.sources[source];
        let core = &mut self.core;
        let rows = &mut self.rows;
        stats.bytes += chunk.len() as u64;
        framer.push(chunk, &mut |payload| {
            let decoded = match decode(*decoder, payload) {
                Ok(d) => d,
                Err(e) => {
                    stats.decode_errors += 1;
                    stats.last_error = Some(e.to_string());
                    return;
                }
            };
            rows.clear();
            if let Err(e) = parser.parse(&decoded, rows) {
                stats.parse_errors += 1;
                stats.last_error = Some(e.to_string());
                return;
            }
            if rows.is_empty() {
                return;
            }
            stats.frames_parsed += 1;
            let batch = rows.len();
            for (i, row) in rows.iter().enumerate() {
                stats.rows += 1;
                if *auto_datasets && row.len() > feeds.len() {
                    let width = row.len().min(MAX_AUTO_DATASETS);
                    if width > feeds.len() {
                        core.grow_auto_datasets(source, parser.channel_names(), feeds, width);
                    }
                    if row.len() > MAX_AUTO_DATASETS {
                        stats.last_error = Some(format!(
                            "a row had {} values; Quick Plot shows the first {MAX_AUTO_DATASETS}",
                            row.len()
                        ));
                    }
                }
                let at = spread(*last_frame, timestamp, i, batch);
                core.apply_row(source, feeds, row, at, sink);
            }
            *last_frame = Some(timestamp);
        });
        stats.framing = framer.stats();
    }
}

/// The time of row `i` of a frame of `batch` rows that arrived at `at`, when the source's
/// previous frame arrived at `previous`.
///
/// A device that sends many samples in one packet (an IMU's 120-sample block) gives them
/// one arrival time; drawn as they came, they stand on one x and a plot shows a vertical
/// line per packet. The samples were taken over the time since the previous packet, so the
/// rows are spread evenly over (previous, at]: the last row keeps the arrival time, times
/// never go backwards and a single-row frame is untouched. The first frame of a source
/// (nothing to measure the interval by) and frames that share an arrival time with the
/// previous one (several frames in one read) keep `at` for every row.
pub fn spread(previous: Option<Timestamp>, at: Timestamp, i: usize, batch: usize) -> Timestamp {
    let Some(previous) = previous else { return at };
    if batch <= 1 || previous.elapsed_ns >= at.elapsed_ns {
        return at;
    }
    let interval = u128::from(at.elapsed_ns - previous.elapsed_ns);
    let before_end = interval * (batch - 1 - i) as u128 / batch as u128;
    // `before_end` < `interval`, which came from a u64.
    let before_end = before_end as u64;
    Timestamp {
        elapsed_ns: at.elapsed_ns - before_end,
        unix_ns: at.unix_ns.saturating_sub(before_end as i64),
    }
}

impl Core {
    fn values(&self) -> std::sync::MutexGuard<'_, Values> {
        // A poisoned lock only means a sink panicked mid-frame; the values are still whole.
        self.host.values.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn apply_row(
        &mut self,
        source: usize,
        feeds: &[(usize, usize)],
        row: &[Value],
        timestamp: Timestamp,
        sink: &mut dyn FnMut(&FrameEvent<'_>),
    ) {
        let mut any_transform = false;
        let mut values = self.values();
        for &(slot, ds) in feeds {
            match row.get(slot) {
                Some(Value::Null) | None => {}
                Some(v) => {
                    if self.transforms[ds].is_none() {
                        values.fin[ds].clone_from(v);
                    } else {
                        any_transform = true;
                    }
                    values.raw[ds].clone_from(v);
                }
            }
        }
        if any_transform || !self.virtuals.is_empty() {
            // Transforms may call back into the host, so they run without holding the lock.
            drop(values);
            self.run_transforms(feeds, row);
            values = self.values();
        }
        sink(&FrameEvent {
            source,
            timestamp,
            values: &values.fin,
        });
    }

    fn run_transforms(&mut self, feeds: &[(usize, usize)], row: &[Value]) {
        for &(slot, ds) in feeds {
            if row.get(slot).is_none_or(Value::is_null) || self.transforms[ds].is_none() {
                continue;
            }
            let raw = self.values().raw[ds].clone();
            let out = self.transform(ds, &raw);
            self.values().fin[ds] = out;
        }
        for i in 0..self.virtuals.len() {
            let ds = self.virtuals[i];
            let out = self.transform(ds, &Value::Null);
            if !out.is_null() {
                let mut v = self.values();
                v.raw[ds] = out.clone();
                v.fin[ds] = out;
            }
        }
    }

    fn transform(&mut self, ds: usize, raw: &Value) -> Value {
        let Some(t) = self.transforms[ds].as_mut() else {
            return raw.clone();
        };
        match t.apply(raw) {
            Ok(v) => v,
            Err(e) => {
                self.transform_errors += 1;
                self.last_transform_error = Some(e.to_string());
                raw.clone()
            }
        }
    }

    fn grow_auto_datasets(
        &mut self,
        source: usize,
        names: Option<&[String]>,
        feeds: &mut Vec<(usize, usize)>,
        width: usize,
    ) {
        let mut values = self.host.values.lock().unwrap_or_else(|p| p.into_inner());
        let mut by_id = self.host.by_id.lock().unwrap_or_else(|p| p.into_inner());
        for slot in feeds.len()..width {
            let i = self.datasets.len();
            let title = names
                .and_then(|n| n.get(slot).cloned())
                .unwrap_or_else(|| format!("Channel {}", slot + 1));
            let id = format!("auto-{}-{}", source + 1, slot + 1);
            by_id.insert(id.clone(), i);
            self.datasets.push(DatasetInfo {
                id,
                title,
                group: "Quick Plot".into(),
                units: String::new(),
                source: Some(source),
                slot: Some(slot),
            });
            self.transforms.push(None);
            values.raw.push(Value::Null);
            values.fin.push(Value::Null);
            feeds.push((slot, i));
        }
    }
}
