//! The CSV player: a CSV export (`elapsed_s, Group/Dataset, …`) played back through the
//! pipeline as if a device were sending its rows, with the replay controls of [`crate::replay`].
//!
//! The file is read with the `csv` crate, the same one the export writes with, so quoted
//! fields (a text value holding a comma, a quote or a line break) come back whole. Each row
//! is sent stamped with its `elapsed_s`, in one of two forms ([`RowFormat`]): a JSON array
//! of its fields on one line, which the project [`project_for_csv`] makes reads back exactly,
//! or, for a project whose source parses comma-separated lines, the fields joined by commas.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sextant_telemetry::project::{
    Connection, Dataset, Group, GroupWidget, ParserConfig, Project, Source,
};
use sextant_telemetry::Timestamp;

use crate::replay::{ReplayControl, ReplayLink, ReplayRecords};
use crate::source::{DeviceError, Driver};

/// How each row is sent to the pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RowFormat {
    /// `["1.25","say \"hi\"",""]` and a line break: every value survives, whatever it
    /// holds; read by the JSON parser with the paths `[0]`, `[1]`, … (as [`project_for_csv`]
    /// sets up).
    #[default]
    JsonArray,
    /// `1.25,say "hi",` and a line break, for projects that parse comma-separated lines; a
    /// value holding a comma or a line break does not survive this form.
    Lines,
}

impl RowFormat {
    /// The form a source with `parser` reads: JSON arrays for the JSON parser, lines for
    /// every other.
    pub fn for_parser(parser: &ParserConfig) -> RowFormat {
        match parser {
            ParserConfig::Json { .. } => RowFormat::JsonArray,
            _ => RowFormat::Lines,
        }
    }

    fn encode(self, fields: &csv::StringRecord) -> Bytes {
        let values = fields.iter().skip(1);
        let mut out = match self {
            RowFormat::JsonArray => {
                serde_json::to_string(&values.collect::<Vec<_>>()).expect("strings serialize")
            }
            RowFormat::Lines => values.collect::<Vec<_>>().join(","),
        };
        out.push('\n');
        Bytes::from(out)
    }
}

/// Rows of a CSV export, ready to replay.
pub struct CsvRecords {
    times: Vec<u64>,
    rows: Vec<csv::StringRecord>,
    format: RowFormat,
}

impl CsvRecords {
    /// Sends the rows in `format` (JSON arrays unless set).
    pub fn with_format(self, format: RowFormat) -> CsvRecords {
        CsvRecords { format, ..self }
    }
}

/// The line (from 1) a record of `text` starts on. The `csv` crate's position of a record
/// is where it began reading it, before the empty lines (and, with `comments`, the `#`
/// lines) it skipped on the way.
pub(crate) fn record_line(text: &str, position: &csv::Position, comments: bool) -> usize {
    let mut rest = text.get(position.byte() as usize..).unwrap_or_default();
    let mut skipped = 0;
    loop {
        let after = if let Some(r) = rest.strip_prefix("\r\n") {
            r
        } else if let Some(r) = rest.strip_prefix(['\n', '\r']) {
            r
        } else if comments && rest.starts_with('#') {
            rest.split_once('\n').map_or("", |(_, r)| r)
        } else {
            break;
        };
        skipped += 1;
        rest = after;
    }
    position.line() as usize + skipped
}

/// Reads a CSV export: its dataset columns and its rows.
pub fn load_csv(path: &Path) -> Result<(Vec<String>, CsvRecords), DeviceError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| DeviceError::fatal(format!("could not read {}: {e}", path.display())))?;
    parse_csv(&text, path)
}

/// A CSV export's text, read from `path` (named in messages): its dataset columns and its
/// rows. For a caller that reads the file itself ([`load_csv`] does both).
pub fn parse_csv(text: &str, path: &Path) -> Result<(Vec<String>, CsvRecords), DeviceError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let malformed = |e: csv::Error| {
        DeviceError::fatal(format!(
            "{} is not a readable CSV file: {e}",
            path.display()
        ))
    };
    let mut records = reader.records();
    let header = match records.next() {
        Some(header) => header.map_err(malformed)?,
        None => return Err(DeviceError::fatal(format!("{} is empty", path.display()))),
    };
    if header.get(0).map(str::trim) != Some("elapsed_s") || header.len() < 2 {
        return Err(DeviceError::fatal(format!(
            "{} is not a Sextant CSV export: its first column must be `elapsed_s`, then one per dataset",
            path.display()
        )));
    }
    let mut times = Vec::new();
    let mut rows = Vec::new();
    for record in records {
        let record = record.map_err(malformed)?;
        if record.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        let line = record.position().map_or(0, |p| record_line(text, p, false));
        let time = record.get(0).unwrap_or_default();
        let elapsed: f64 = time.trim().parse().map_err(|_| {
            DeviceError::fatal(format!(
                "{} line {line}: `{time}` is not a time in seconds",
                path.display(),
            ))
        })?;
        if !(elapsed.is_finite() && elapsed >= 0.0) {
            return Err(DeviceError::fatal(format!(
                "{} line {line}: negative or invalid time",
                path.display(),
            )));
        }
        times.push((elapsed * 1e9).round() as u64);
        rows.push(record);
    }
    // Replay needs play order to be time order; an edited file may not be.
    if times.windows(2).any(|w| w[1] < w[0]) {
        return Err(DeviceError::fatal(format!(
            "{}: rows are not in time order",
            path.display()
        )));
    }
    let columns = header.iter().skip(1).map(String::from).collect();
    Ok((
        columns,
        CsvRecords {
            times,
            rows,
            format: RowFormat::default(),
        },
    ))
}

impl ReplayRecords for CsvRecords {
    fn times(&self) -> &[u64] {
        &self.times
    }

    fn load(&mut self, i: usize) -> Result<(Bytes, Timestamp), DeviceError> {
        let t = self.times[i];
        Ok((
            self.format.encode(&self.rows[i]),
            Timestamp {
                elapsed_ns: t,
                unix_ns: 0,
            },
        ))
    }
}

/// Plays a CSV export.
pub struct CsvReplayDriver {
    pub path: PathBuf,
    pub control: Arc<ReplayControl>,
    /// The form the source's parser reads ([`RowFormat::for_parser`]).
    pub format: RowFormat,
}

impl Driver for CsvReplayDriver {
    type Link = ReplayLink<CsvRecords>;

    fn describe(&self) -> String {
        format!("csv player {}", self.path.display())
    }

    async fn open(&mut self) -> Result<Self::Link, DeviceError> {
        let path = self.path.clone();
        let format = self.format;
        let (_, records) = tokio::task::spawn_blocking(move || load_csv(&path))
            .await
            .map_err(|e| DeviceError::fatal(format!("reading the CSV failed: {e}")))??;
        Ok(ReplayLink::new(
            records.with_format(format),
            self.control.clone(),
        ))
    }
}

/// A project that plays `path`: one group per `Group/` prefix, one dataset per column, read
/// from the rows as JSON arrays ([`RowFormat::JsonArray`]).
pub fn project_for_csv(columns: &[String], path: &Path, speed: f64) -> Project {
    let mut groups: Vec<Group> = Vec::new();
    for (i, column) in columns.iter().enumerate() {
        let (group, title) = column.split_once('/').unwrap_or(("CSV", column.as_str()));
        let gi = match groups.iter().position(|g| g.title == group) {
            Some(gi) => gi,
            None => {
                groups.push(Group {
                    id: format!("grp-{}", groups.len() + 1),
                    title: group.to_string(),
                    widget: GroupWidget::MultiPlot,
                    ..Group::default()
                });
                groups.len() - 1
            }
        };
        groups[gi].datasets.push(Dataset {
            id: format!("ds-{}", i + 1),
            title: title.to_string(),
            index: i as u32 + 1,
            ..Dataset::default()
        });
    }
    Project {
        title: format!(
            "CSV {}",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ),
        sources: vec![Source {
            id: "src-1".into(),
            title: "CSV player".into(),
            connection: Connection::Replay {
                path: path.display().to_string(),
                speed,
            },
            parser: ParserConfig::Json {
                paths: (0..columns.len()).map(|i| format!("[{i}]")).collect(),
            },
            ..Source::default()
        }],
        groups,
        ..Project::default()
    }
}

/// How `open` reads the CSV `path` when it was exported from `open` (or a project with the
/// same `Group/Dataset` columns): `open` with one CSV source that feeds each dataset its
/// column, for [`PlaybackError::Unmatched`] otherwise.
///
/// An export holds final values, so transforms do not run again and virtual datasets read
/// their column instead of computing; ids, order, units, widgets, tabs and alarms stay, so
/// the dashboard the person built shows the file. Columns the project has no dataset for
/// are left out.
pub fn project_playing_into(
    open: &Project,
    columns: &[String],
    path: &Path,
    speed: f64,
) -> Result<Project, PlaybackError> {
    let mut playback = open.clone();
    let mut missing = Vec::new();
    let mut used = vec![false; columns.len()];
    for group in &mut playback.groups {
        for ds in &mut group.datasets {
            let name = sextant_telemetry::pipeline::column_name(&group.title, &ds.title);
            // Two datasets of one name read the columns of that name in order.
            match (0..columns.len()).find(|&i| !used[i] && columns[i] == name) {
                Some(i) => {
                    used[i] = true;
                    ds.index = i as u32 + 1;
                    ds.source = None;
                    ds.is_virtual = false;
                    ds.transform = None;
                }
                None => missing.push(name),
            }
        }
    }
    if !missing.is_empty() || !used.iter().any(|u| *u) {
        return Err(PlaybackError::Unmatched { missing });
    }
    playback.sources = project_for_csv(columns, path, speed).sources;
    Ok(playback)
}

/// Why a CSV cannot play into the open project.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlaybackError {
    #[error("{}", unmatched(missing))]
    Unmatched { missing: Vec<String> },
}

fn unmatched(missing: &[String]) -> String {
    const SHOWN: usize = 5;
    if missing.is_empty() {
        return "the file has no column of the open project".into();
    }
    let mut names = missing
        .iter()
        .take(SHOWN)
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if missing.len() > SHOWN {
        names.push_str(&format!(" and {} more", missing.len() - SHOWN));
    }
    format!("the file has no column for {names} of the open project")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_encode_in_both_forms() {
        let row = csv::StringRecord::from(vec!["0.5", "1.25", "a,\"b\"\nc", ""]);
        assert_eq!(
            RowFormat::JsonArray.encode(&row),
            "[\"1.25\",\"a,\\\"b\\\"\\nc\",\"\"]\n"
        );
        assert_eq!(RowFormat::Lines.encode(&row), "1.25,a,\"b\"\nc,\n");
        assert_eq!(
            RowFormat::for_parser(&ParserConfig::Json { paths: vec![] }),
            RowFormat::JsonArray
        );
        assert_eq!(
            RowFormat::for_parser(&ParserConfig::QuickPlot),
            RowFormat::Lines
        );
    }

    #[test]
    fn an_export_of_the_open_project_plays_into_it_and_others_are_named() {
        let open: Project = serde_json::from_value(serde_json::json!({
            "schemaVersion": 1,
            "title": "Rover",
            "sources": [{"id": "uart", "connection": {"type": "simulator"}}],
            "groups": [{"id": "g", "title": "Power", "datasets": [
                {"id": "v", "title": "Voltage", "units": "V", "index": 1,
                 "transform": {"language": "expression", "code": "value / 1000"}},
                {"id": "p", "title": "Power", "virtual": true,
                 "transform": {"language": "expression", "code": "1"}}]}]
        }))
        .unwrap();
        let columns: Vec<String> = ["Extra/x", "Power/Power", "Power/Voltage"]
            .map(String::from)
            .into();
        let path = Path::new("run.csv");
        let p = project_playing_into(&open, &columns, path, 2.0).unwrap();
        assert_eq!(p.title, "Rover");
        let ds = &p.groups[0].datasets;
        assert_eq!(
            (ds[0].id.as_str(), ds[0].units.as_str(), ds[0].index),
            ("v", "V", 3)
        );
        assert!(ds[0].transform.is_none(), "exported values are final");
        assert_eq!((ds[1].index, ds[1].is_virtual), (2, false));
        assert!(
            matches!(&p.sources[0].connection, Connection::Replay { path, speed } if path == "run.csv" && *speed == 2.0)
        );
        assert!(matches!(&p.sources[0].parser, ParserConfig::Json { paths } if paths.len() == 3));

        let other: Vec<String> = ["Power/Voltage", "Temp/Inside"].map(String::from).into();
        let e = project_playing_into(&open, &other, path, 1.0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the file has no column for `Power/Power` of the open project"
        );
    }

    #[test]
    fn errors_name_the_line_past_blank_lines_and_quoted_breaks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.csv");
        std::fs::write(&path, "elapsed_s,G/a\n0,\"two\nlines\"\n\n\r\nsoon,2\n").unwrap();
        let e = load_csv(&path).err().unwrap().to_string();
        assert!(e.contains("line 6: `soon` is not a time"), "{e}");
    }
}
