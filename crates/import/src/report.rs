//! The import report: every setting of the source file that did not make it into the
//! Sextant project unchanged, each with the JSON path where it sits in the source file.
//!
//! The report is the importer's promise that nothing is lost silently. An item either says
//! what was dropped, or what was approximated and how, so a user can fix it by hand.
//!
//! Each item has a [`Severity`]: behaviour the project loses (a control script, a painter,
//! output controls), a setting carried over differently, or a display detail Sextant
//! chooses itself. [`ImportReport::summary`] is what a person reads: lost behaviour first,
//! each item named by the group, dataset or source it belongs to (not by JSON path), and the
//! display details folded into one line per kind of detail.

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

/// How much an unmapped setting matters to the person who imported the file.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ReportSeverity")]
pub enum Severity {
    /// Something the project did in Serial Studio that it does not do here.
    Lost,
    /// Carried over, but differently (a default was used, a range merged).
    Changed,
    /// A display detail Sextant chooses itself (colours, tick counts, layout).
    Note,
}

/// One thing the importer could not map exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportItem {
    /// JSON path in the *source* file, e.g. `groups[1].datasets[0].widget`; empty for the
    /// document as a whole.
    pub path: String,
    pub message: String,
    pub severity: Severity,
}

/// What a report item is about, by the name the person gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ReportSubject")]
pub struct Subject {
    /// `group`, `dataset`, `source`, `action`, `table`, `workspace` or `project`.
    pub kind: &'static str,
    /// `VU Meter`, `VU Meter/Mic L`; empty for the project.
    pub name: String,
}

/// A line of the report as a person reads it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ImportReportLine")]
pub struct SummaryItem {
    pub severity: Severity,
    pub subject: Subject,
    pub message: String,
    /// Where in the file (the first, for a folded line).
    pub path: String,
    /// How many settings the line stands for (display details of many datasets fold into
    /// one line).
    pub count: usize,
}

impl fmt::Display for ReportItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Everything that was not mapped, in the order the importer met it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub items: Vec<ReportItem>,
}

impl ImportReport {
    /// True when the whole file was mapped.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// A setting carried over differently.
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.add(Severity::Changed, path, message);
    }

    /// Behaviour the imported project does not have.
    pub fn lost(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.add(Severity::Lost, path, message);
    }

    /// A display detail Sextant chooses itself.
    pub fn note(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.add(Severity::Note, path, message);
    }

    pub fn add(&mut self, severity: Severity, path: impl Into<String>, message: impl Into<String>) {
        self.items.push(ReportItem {
            path: path.into(),
            message: message.into(),
            severity,
        });
    }

    /// The report as a person reads it, for the file `root` it was made from: lost
    /// behaviour first, then changes, then notes; each named by its subject's title; notes
    /// with the same message (the same detail of many datasets) folded into one line.
    pub fn summary(&self, root: &Map<String, Value>) -> Vec<SummaryItem> {
        let mut out: Vec<SummaryItem> = Vec::new();
        for item in &self.items {
            if item.severity == Severity::Note {
                if let Some(same) = out
                    .iter_mut()
                    .find(|s| s.severity == Severity::Note && s.message == item.message)
                {
                    same.count += 1;
                    continue;
                }
            }
            out.push(SummaryItem {
                severity: item.severity,
                subject: subject(root, &item.path),
                message: item.message.clone(),
                path: item.path.clone(),
                count: 1,
            });
        }
        // Stable: within a severity, the order the file has.
        out.sort_by_key(|s| s.severity);
        out
    }

    /// The items whose path is `path` exactly.
    pub fn at<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a ReportItem> + 'a {
        self.items.iter().filter(move |i| i.path == path)
    }

    /// Whether some item sits at `path` or below it (`groups[2]` matches
    /// `groups[2].widget`, not `groups[20]`).
    pub fn mentions(&self, path: &str) -> bool {
        self.items.iter().any(|i| {
            i.path == path
                || i.path
                    .strip_prefix(path)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }
}

impl fmt::Display for ImportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

/// The group, dataset, source… that `path` (`groups[1].datasets[0].widget`) sits in.
fn subject(root: &Map<String, Value>, path: &str) -> Subject {
    let steps = steps(path);
    let title = |v: &Value, keys: &[&str]| {
        keys.iter()
            .find_map(|k| {
                v.get(*k)
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
            })
            .map(String::from)
    };
    let at = |key: &str, i: usize| root.get(key).and_then(|a| a.get(i));
    let project = || Subject {
        kind: "project",
        name: String::new(),
    };
    match steps.as_slice() {
        [("groups", Some(g)), ("datasets", Some(d)), ..] => {
            let group = at("groups", *g);
            let group_title = group
                .and_then(|g| title(g, &["title"]))
                .unwrap_or_else(|| format!("#{}", g + 1));
            let dataset_title = group
                .and_then(|g| g.get("datasets")?.get(*d))
                .and_then(|d| title(d, &["title"]))
                .unwrap_or_else(|| format!("#{}", d + 1));
            Subject {
                kind: "dataset",
                name: format!("{group_title}/{dataset_title}"),
            }
        }
        [(key, Some(i)), ..] => {
            let (kind, keys): (&'static str, &[&str]) = match *key {
                "groups" => ("group", &["title"]),
                "sources" => ("source", &["title"]),
                "actions" => ("action", &["title"]),
                "tables" => ("table", &["name"]),
                "workspaces" => ("workspace", &["title"]),
                _ => return project(),
            };
            let name = at(key, *i)
                .and_then(|v| title(v, keys))
                .unwrap_or_else(|| format!("#{}", i + 1));
            Subject { kind, name }
        }
        _ => project(),
    }
}

/// `groups[1].datasets[0].widget` → [("groups", Some(1)), ("datasets", Some(0)), ("widget", None)].
fn steps(path: &str) -> Vec<(&str, Option<usize>)> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .map(|step| match step.split_once('[') {
            Some((key, rest)) => (key, rest.trim_end_matches(']').parse().ok()),
            None => (step, None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_summary_names_subjects_puts_lost_behaviour_first_and_folds_notes() {
        let root = json!({
            "title": "Rig",
            "sources": [{"title": "Rig UART"}],
            "groups": [{"title": "VU Meter", "datasets": [{"title": "Mic L"}, {"title": "Mic R"}]}],
        });
        let mut r = ImportReport::default();
        r.note(
            "groups[0].datasets[0].color",
            "colour not imported: Sextant picks dataset colours itself",
        );
        r.push(
            "sources[0].connection.baudRate",
            "baud rate 0 is not valid; using 115200",
        );
        r.note(
            "groups[0].datasets[1].color",
            "colour not imported: Sextant picks dataset colours itself",
        );
        r.lost(
            "groups[0].widget",
            "painter widget: Sextant cannot run painter scripts",
        );
        r.lost("controlScriptCode", "control scripts are not supported");
        let s = r.summary(root.as_object().unwrap());
        let lines: Vec<(Severity, &str, &str, usize)> = s
            .iter()
            .map(|i| (i.severity, i.subject.kind, i.subject.name.as_str(), i.count))
            .collect();
        assert_eq!(
            lines,
            [
                (Severity::Lost, "group", "VU Meter", 1),
                (Severity::Lost, "project", "", 1),
                (Severity::Changed, "source", "Rig UART", 1),
                (Severity::Note, "dataset", "VU Meter/Mic L", 2),
            ]
        );
        assert_eq!(r.len(), 5, "the report itself keeps every item");
    }
}
