//! The import report: every setting of the source file that did not make it into the
//! Sextant project unchanged, each with the JSON path where it sits in the source file.
//!
//! The report is the importer's promise that nothing is lost silently. An item either says
//! what was dropped, or what was approximated and how, so a user can fix it by hand.

use std::fmt;

/// One thing the importer could not map exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportItem {
    /// JSON path in the *source* file, e.g. `groups[1].datasets[0].widget`; empty for the
    /// document as a whole.
    pub path: String,
    pub message: String,
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

    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.items.push(ReportItem {
            path: path.into(),
            message: message.into(),
        });
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
