//! The CSV player: a CSV export (`elapsed_s, Group/Dataset, …`) played back through the
//! pipeline as if a device were sending its rows, with the replay controls of [`crate::replay`].
//!
//! Each row becomes one line `v1,v2,…\n` stamped with its `elapsed_s`, so a project whose
//! source parses comma-separated lines (see [`project_for_csv`]) shows the same values.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sextant_telemetry::project::{
    Connection, Dataset, Group, GroupWidget, ParserConfig, Project, Source,
};
use sextant_telemetry::Timestamp;

use crate::replay::{ReplayControl, ReplayLink, ReplayRecords};
use crate::source::{DeviceError, Driver};

/// Rows of a CSV export, ready to replay.
pub struct CsvRecords {
    times: Vec<u64>,
    lines: Vec<Bytes>,
}

/// Splits one CSV line (RFC 4180 quoting, no embedded line breaks).
pub fn split_csv_line(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            other => field.push(other),
        }
    }
    fields.push(field);
    fields
}

/// Reads a CSV export: its dataset columns and its rows.
pub fn load_csv(path: &Path) -> Result<(Vec<String>, CsvRecords), DeviceError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| DeviceError::fatal(format!("could not read {}: {e}", path.display())))?;
    let mut lines = text.lines().enumerate();
    let (_, header) = lines
        .next()
        .ok_or_else(|| DeviceError::fatal(format!("{} is empty", path.display())))?;
    let header = split_csv_line(header.trim_start_matches('\u{feff}'));
    if header.first().map(|h| h.trim()) != Some("elapsed_s") || header.len() < 2 {
        return Err(DeviceError::fatal(format!(
            "{} is not a Sextant CSV export: its first column must be `elapsed_s`, then one per dataset",
            path.display()
        )));
    }
    let mut times = Vec::new();
    let mut rows = Vec::new();
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let fields = split_csv_line(line);
        let elapsed: f64 = fields[0].trim().parse().map_err(|_| {
            DeviceError::fatal(format!(
                "{} line {}: `{}` is not a time in seconds",
                path.display(),
                n + 1,
                fields[0]
            ))
        })?;
        if !(elapsed.is_finite() && elapsed >= 0.0) {
            return Err(DeviceError::fatal(format!(
                "{} line {}: negative or invalid time",
                path.display(),
                n + 1
            )));
        }
        let mut out = fields[1..].join(",");
        out.push('\n');
        times.push((elapsed * 1e9).round() as u64);
        rows.push(Bytes::from(out));
    }
    // Replay needs play order to be time order; an edited file may not be.
    if times.windows(2).any(|w| w[1] < w[0]) {
        return Err(DeviceError::fatal(format!(
            "{}: rows are not in time order",
            path.display()
        )));
    }
    Ok((header[1..].to_vec(), CsvRecords { times, lines: rows }))
}

impl ReplayRecords for CsvRecords {
    fn times(&self) -> &[u64] {
        &self.times
    }

    fn load(&mut self, i: usize) -> Result<(Bytes, Timestamp), DeviceError> {
        let t = self.times[i];
        Ok((
            self.lines[i].clone(),
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
}

impl Driver for CsvReplayDriver {
    type Link = ReplayLink<CsvRecords>;

    fn describe(&self) -> String {
        format!("csv player {}", self.path.display())
    }

    async fn open(&mut self) -> Result<Self::Link, DeviceError> {
        let path = self.path.clone();
        let (_, records) = tokio::task::spawn_blocking(move || load_csv(&path))
            .await
            .map_err(|e| DeviceError::fatal(format!("reading the CSV failed: {e}")))??;
        Ok(ReplayLink::new(records, self.control.clone()))
    }
}

/// A project that plays `path`: one group per `Group/` prefix, one dataset per column.
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
            parser: ParserConfig::Delimited {
                separator: ",".into(),
            },
            ..Source::default()
        }],
        groups,
        ..Project::default()
    }
}

#[cfg(test)]
mod tests {
    use super::split_csv_line;

    #[test]
    fn quoted_fields() {
        assert_eq!(
            split_csv_line(r#"1,"a,b","say ""hi""",,x"#),
            vec!["1", "a,b", r#"say "hi""#, "", "x"]
        );
    }
}
