//! `project.*` file and history commands, and `assistant.*` checkpoints.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sextant_commands::{CommandError, Registry, Tier};
use sextant_telemetry::project::Project;

use crate::Workspace;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TitleParams {
    /// The project's new title.
    title: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ContentParams {
    /// The file's name, for messages and the undo label (it has no path: save it to keep it).
    name: String,
    /// The file's text: a Sextant project or a Serial Studio one.
    content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NewParams {
    /// Title of the new, empty project.
    #[serde(default)]
    title: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PathParams {
    /// File path.
    path: PathBuf,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SaveParams {
    /// Where to save; the project's current file when absent.
    #[serde(default)]
    path: Option<PathBuf>,
}

#[derive(Serialize, JsonSchema)]
pub struct Done {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Done {
    pub fn ok() -> Done {
        Done {
            ok: true,
            detail: None,
        }
    }
    pub fn detail(d: impl Into<String>) -> Done {
        Done {
            ok: true,
            detail: Some(d.into()),
        }
    }
}

/// What `project.open` opened.
#[derive(Serialize, JsonSchema)]
struct Opened {
    ok: bool,
    /// The file edits are saved to; absent for an imported Serial Studio project, which has
    /// no file until it is saved (it is never written over).
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    /// For an imported Serial Studio project: what did not carry over, lost behaviour
    /// first, named by group/dataset/source.
    /// Present (maybe empty) exactly when a Serial Studio file was imported.
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<Vec<sextant_import::SummaryItem>>,
}

#[derive(Serialize, JsonSchema)]
struct Validation {
    valid: bool,
    issues: Vec<Issue>,
}

#[derive(Serialize, JsonSchema)]
struct Issue {
    path: String,
    message: String,
}

#[derive(Serialize, JsonSchema)]
struct Imported {
    /// What did not carry over, lost behaviour first, named by group/dataset/source.
    report: Vec<sextant_import::SummaryItem>,
}

/// The open project's file.
#[derive(Serialize, JsonSchema)]
struct ProjectFile {
    /// `null` for a project never saved.
    path: Option<PathBuf>,
}

#[derive(Serialize, JsonSchema)]
struct History {
    undo: Vec<String>,
    redo: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CheckpointParams {
    #[serde(default)]
    label: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RestoreParams {
    /// Checkpoint id from `assistant.listCheckpoints`.
    id: u64,
}

#[derive(Serialize, JsonSchema)]
struct CheckpointInfo {
    id: u64,
    label: String,
    /// Seconds since the Unix epoch.
    taken: u64,
}

/// The `project.*` file and history commands and the `assistant.*` checkpoints, one line
/// each; the handler of `project.setTitle` is `project_set_title`, and so on, below in the
/// same order. Kept out of rustfmt so that each command stays one line.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    r.register("project.get", Tier::Safe, "The whole project as JSON.", project_get);
    r.register("project.new", Tier::Confirm, "Starts a new, empty project (undoable).", project_new);
    r.register("project.open", Tier::Confirm, "Opens a Sextant project file, or imports a Serial Studio one.", project_open)
        .example("open a project", json!({"path": "rover.sextant.json"}));
    r.register("project.openContent", Tier::Confirm, PROJECT_OPEN_CONTENT, project_open_content);
    r.register("project.setTitle", Tier::Confirm, "Renames the project (its title, not its file).", project_set_title)
        .example("rename", json!({"title": "Rover telemetry"}));
    r.register("project.import", Tier::Confirm, "Imports a Serial Studio project (.ssproj/.json); returns what could not be mapped.", project_import);
    r.register("project.save", Tier::Confirm, "Saves the project atomically (to `path`, or its current file).", project_save);
    r.register("project.validate", Tier::Safe, "Checks the project and lists every problem with its path.", project_validate);
    r.register("project.undo", Tier::Confirm, "Undoes the last project edit.", project_undo);
    r.register("project.redo", Tier::Confirm, "Redoes the last undone edit.", project_redo);
    r.register("project.history", Tier::Safe, "Labels of the undo and redo stacks, oldest first.", project_history);
    r.register("project.file", Tier::Safe, "The open project's file (`path`: null when never saved).", project_file);
    r.register("assistant.checkpoint", Tier::Safe, "Takes a named checkpoint of the project (the last 50 are kept).", assistant_checkpoint);
    r.register("assistant.listCheckpoints", Tier::Safe, "Checkpoints, oldest first.", assistant_list_checkpoints);
    r.register("assistant.restore", Tier::AlwaysConfirm, "Restores the project to a checkpoint (undoable).", assistant_restore);
}

fn project_get(ws: &mut Workspace, _: NoParams) -> Result<Project, CommandError> {
    Ok(ws.project().clone())
}

fn project_new(ws: &mut Workspace, p: NewParams) -> Result<Done, CommandError> {
    let project = Project {
        title: p.title.unwrap_or_else(|| "Untitled".into()),
        ..Project::default()
    };
    ws.replace("new project", project, None)?;
    Ok(Done::ok())
}

fn project_open(ws: &mut Workspace, p: PathParams) -> Result<Opened, CommandError> {
    let text = std::fs::read_to_string(&p.path)
        .map_err(|e| CommandError::failed(format!("could not read {}: {e}", p.path.display())))?;
    match Project::from_json_str(&text) {
        Ok(project) => {
            let file = Some(p.path.clone());
            ws.replace(&format!("open {}", p.path.display()), project, Some(p.path))?;
            Ok(Opened {
                ok: true,
                file,
                detail: None,
                report: None,
            })
        }
        Err(sextant_telemetry::project::LoadError::NotASextantProject) => {
            let imported = sextant_import::import_serial_studio(&text).map_err(|e| {
                CommandError::failed(format!("could not open {}: {e}", p.path.display()))
            })?;
            // An imported file is not ours to overwrite: it gets no path until saved.
            ws.replace(
                &format!("import {}", p.path.display()),
                imported.project,
                None,
            )?;
            Ok(Opened {
                ok: true,
                file: None,
                detail: Some("imported from Serial Studio format".into()),
                report: Some(imported.summary),
            })
        }
        Err(e) => Err(CommandError::failed(format!(
            "could not open {}: {e}",
            p.path.display()
        ))),
    }
}

const PROJECT_OPEN_CONTENT: &str =
    "Opens a project from its text (a file dropped on a browser window, which has no path): \
    a Sextant project, or a Serial Studio one imported. It has no file until saved.";

fn project_open_content(ws: &mut Workspace, p: ContentParams) -> Result<Opened, CommandError> {
    if p.content.len() > 16 * 1024 * 1024 {
        return Err(CommandError::invalid(
            "content",
            "a project file over 16 MiB is not a project file",
        ));
    }
    match Project::from_json_str(&p.content) {
        Ok(project) => {
            ws.replace(&format!("open {}", p.name), project, None)?;
            Ok(Opened {
                ok: true,
                file: None,
                detail: None,
                report: None,
            })
        }
        Err(sextant_telemetry::project::LoadError::NotASextantProject) => {
            let imported = sextant_import::import_serial_studio(&p.content)
                .map_err(|e| CommandError::failed(format!("could not open {}: {e}", p.name)))?;
            ws.replace(&format!("import {}", p.name), imported.project, None)?;
            Ok(Opened {
                ok: true,
                file: None,
                detail: Some("imported from Serial Studio format".into()),
                report: Some(imported.summary),
            })
        }
        Err(e) => Err(CommandError::failed(format!(
            "could not open {}: {e}",
            p.name
        ))),
    }
}

fn project_set_title(ws: &mut Workspace, p: TitleParams) -> Result<Done, CommandError> {
    ws.edit("rename project", |proj| {
        proj.title = p.title.clone();
        Ok(Done::ok())
    })
}

fn project_import(ws: &mut Workspace, p: PathParams) -> Result<Imported, CommandError> {
    let text = std::fs::read_to_string(&p.path)
        .map_err(|e| CommandError::failed(format!("could not read {}: {e}", p.path.display())))?;
    let imported = sextant_import::import_serial_studio(&text)
        .map_err(|e| CommandError::failed(format!("could not import {}: {e}", p.path.display())))?;
    ws.replace(
        &format!("import {}", p.path.display()),
        imported.project,
        None,
    )?;
    Ok(Imported {
        report: imported.summary,
    })
}

fn project_save(ws: &mut Workspace, p: SaveParams) -> Result<Done, CommandError> {
    let path = ws.save(p.path)?;
    Ok(Done::detail(path.display().to_string()))
}

fn project_validate(ws: &mut Workspace, _: NoParams) -> Result<Validation, CommandError> {
    let issues = ws.project().validate();
    Ok(Validation {
        valid: issues.is_empty(),
        issues: issues
            .into_iter()
            .map(|i| Issue {
                path: i.path,
                message: i.message,
            })
            .collect(),
    })
}

fn project_undo(ws: &mut Workspace, _: NoParams) -> Result<Done, CommandError> {
    ws.undo()
        .map(Done::detail)
        .ok_or_else(|| CommandError::failed("nothing to undo"))
}

fn project_redo(ws: &mut Workspace, _: NoParams) -> Result<Done, CommandError> {
    ws.redo()
        .map(Done::detail)
        .ok_or_else(|| CommandError::failed("nothing to redo"))
}

fn project_file(ws: &mut Workspace, _: NoParams) -> Result<ProjectFile, CommandError> {
    Ok(ProjectFile {
        path: ws.path().map(|p| p.to_path_buf()),
    })
}

fn project_history(ws: &mut Workspace, _: NoParams) -> Result<History, CommandError> {
    let (undo, redo) = ws.undo_labels();
    Ok(History { undo, redo })
}

fn assistant_checkpoint(ws: &mut Workspace, p: CheckpointParams) -> Result<Json, CommandError> {
    let id = ws.checkpoint(p.label.as_deref().unwrap_or("manual checkpoint"));
    Ok(json!({ "id": id }))
}

fn assistant_list_checkpoints(
    ws: &mut Workspace,
    _: NoParams,
) -> Result<Vec<CheckpointInfo>, CommandError> {
    Ok(ws
        .checkpoints()
        .map(|c| CheckpointInfo {
            id: c.id,
            label: c.label.clone(),
            taken: c
                .taken
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        })
        .collect::<Vec<_>>())
}

fn assistant_restore(ws: &mut Workspace, p: RestoreParams) -> Result<Done, CommandError> {
    ws.restore(p.id).map(Done::detail)
}
