//! What a session's columns are: the dataset behind each CSV column, its group, title,
//! units and source, read from the session's own tables and the project it was recorded
//! with.

use sextant_sessions::{SessionError, SessionId, SessionStore};
use sextant_telemetry::Project;

/// One column of a session's frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The dataset's id in the project.
    pub id: String,
    /// The CSV column: `Group/Dataset`.
    pub name: String,
    /// The group's title (empty for a dataset of no group).
    pub group: String,
    pub title: String,
    pub units: String,
    /// The source whose frames carry it, by index; `None` when any source's may (a virtual
    /// dataset, or one the project did not say).
    pub source: Option<usize>,
}

/// A session's columns and sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub columns: Vec<Column>,
    /// Each source's id, by index (`source N` when the project does not name it).
    pub sources: Vec<String>,
}

impl Layout {
    /// The layout of session `id`. A project that no longer loads (recorded by a version
    /// whose format this one cannot read) costs the groups' ids and sources, not the export:
    /// the column names still say each dataset's group and title.
    pub fn of(store: &SessionStore, id: SessionId) -> Result<Layout, SessionError> {
        let names = store.columns(id)?;
        let ids = store.dataset_ids(id)?;
        let project = store.project(id).ok();
        let sources: Vec<String> = project
            .as_ref()
            .map(|p| p.sources.iter().map(|s| s.id.clone()).collect())
            .unwrap_or_default();
        let columns = names
            .into_iter()
            .zip(ids)
            .map(|(name, (id, units))| {
                let known = project.as_ref().and_then(|p| find(p, &id));
                let (group, title, source) = match known {
                    Some(found) => found,
                    None => {
                        let (group, title) = split_column(&name);
                        (group, title, None)
                    }
                };
                Column {
                    id,
                    name,
                    group,
                    title,
                    units,
                    source,
                }
            })
            .collect();
        Ok(Layout { columns, sources })
    }

    /// The id of source `index`.
    pub fn source_id(&self, index: usize) -> String {
        self.sources
            .get(index)
            .cloned()
            .unwrap_or_else(|| format!("source {index}"))
    }
}

/// Group title, dataset title and source of dataset `id` in `project`.
fn find(project: &Project, id: &str) -> Option<(String, String, Option<usize>)> {
    project.groups.iter().find_map(|g| {
        let d = g.datasets.iter().find(|d| d.id == id)?;
        let source = if d.is_virtual {
            None
        } else {
            match &d.source {
                Some(s) => project.sources.iter().position(|x| &x.id == s),
                // A project of one source need not name it.
                None if project.sources.len() == 1 => Some(0),
                None => None,
            }
        };
        Some((g.title.clone(), d.title.clone(), source))
    })
}

/// `Group/Dataset` split at its last `/` (a quick-plot column is one name).
fn split_column(name: &str) -> (String, String) {
    match name.rsplit_once('/') {
        Some((group, title)) => (group.to_string(), title.to_string()),
        None => (String::new(), name.to_string()),
    }
}
