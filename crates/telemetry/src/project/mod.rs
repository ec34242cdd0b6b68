//! Projects: the model, its JSON Schema, loading with precise error paths, validation, and
//! atomic saving.
//!
//! Loading is two steps on purpose. Deserializing checks *shape* (types, enums) and reports
//! the exact path of the first bad value; [`Project::validate`] then checks *meaning*
//! (unique ids, references that resolve, delimiter limits) and reports every problem at
//! once, so an editor or the assistant can fix them in one pass.

mod model;
pub mod patch;
mod save;
mod validate;

pub use model::*;
pub use patch::{merge_patch, PatchError};
pub use save::{save_atomic, SaveError};
pub use validate::ValidationIssue;

use std::path::Path;

/// Why a project file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("could not read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("invalid value at `{path}`: {message}")]
    Shape { path: String, message: String },
    #[error(
        "this is not a Sextant project (it lacks `\"format\": \"{FORMAT_MARKER}\"`); \
         if it is a Serial Studio project, convert it with `sextant import`"
    )]
    NotASextantProject,
    #[error("this file is schemaVersion {found}, written by a newer Sextant (this one reads up to {SCHEMA_VERSION}); update Sextant to open it")]
    TooNew { found: u64 },
    #[error("the project has {} problem(s): {}", .0.len(), render_issues(.0))]
    Invalid(Vec<ValidationIssue>),
}

fn render_issues(issues: &[ValidationIssue]) -> String {
    issues
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl Project {
    /// Parses and validates a project from JSON text.
    pub fn from_json_str(text: &str) -> Result<Project, LoadError> {
        let raw: serde_json::Value = serde_json::from_str(text).map_err(|e| LoadError::Syntax {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        if raw.get("format").and_then(|f| f.as_str()) != Some(FORMAT_MARKER) {
            return Err(LoadError::NotASextantProject);
        }
        if let Some(v) = raw.get("schemaVersion").and_then(|v| v.as_u64()) {
            if v > SCHEMA_VERSION as u64 {
                return Err(LoadError::TooNew { found: v });
            }
        }
        let project: Project = serde_path_to_error::deserialize(raw).map_err(|e| {
            let path = e.path().to_string();
            LoadError::Shape {
                path,
                message: e.into_inner().to_string(),
            }
        })?;
        let issues = project.validate();
        if issues.is_empty() {
            Ok(project)
        } else {
            Err(LoadError::Invalid(issues))
        }
    }

    /// Reads, parses and validates a project file.
    pub fn load(path: &Path) -> Result<Project, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Project::from_json_str(&text)
    }

    /// Pretty JSON, the on-disk form.
    pub fn to_json_string(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        let mut text = serde_json::to_string_pretty(self).expect("project serializes");
        text.push('\n');
        text
    }

    /// Writes the project atomically: a crash mid-save leaves the old file or the new one.
    pub fn save(&self, path: &Path) -> Result<(), SaveError> {
        save_atomic(path, self.to_json_string().as_bytes())
    }

    /// The published JSON Schema of the project file.
    pub fn json_schema() -> serde_json::Value {
        let schema = schemars::schema_for!(Project);
        serde_json::to_value(schema).expect("schema serializes")
    }
}
