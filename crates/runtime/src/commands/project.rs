//! `project.*` file and history commands, and `assistant.*` checkpoints.
//!
//! Opening and importing read the file the caller names, and parse it, on a job off the
//! owner task ([`Deferred::off_then`]) through [`read_user_text`], which refuses what is
//! not a regular file or is over [`crate::user_file::MAX_PROJECT_BYTES`]; only replacing
//! the project happens on the owner. `project.openContent` parses its text off the owner
//! too.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sextant_commands::{CommandError, Deferred, Registry, Tier};
use sextant_telemetry::project::{LoadError, Project};

use crate::user_file::{read_user_text, PROJECT_FILE};
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
#[serde(rename_all = "camelCase")]
struct ProjectFile {
    /// `null` for a project never saved.
    path: Option<PathBuf>,
    /// The Serial Studio file the open project was imported from, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    imported_from: Option<String>,
    /// That import's report (what could not be carried over), if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<Vec<sextant_import::SummaryItem>>,
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
    r.register_deferred("project.open", Tier::Confirm, "Opens a Sextant project file, or imports a Serial Studio one.", project_open)
        .example("open a project", json!({"path": "rover.sextant.json"}));
    r.register_deferred("project.openContent", Tier::Confirm, PROJECT_OPEN_CONTENT, project_open_content);
    r.register("project.setTitle", Tier::Confirm, "Renames the project (its title, not its file).", project_set_title)
        .example("rename", json!({"title": "Rover telemetry"}));
    r.register_deferred("project.import", Tier::Confirm, "Imports a Serial Studio project (.ssproj/.json); returns what could not be mapped.", project_import);
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

/// What a project's text held: a Sextant project, or a Serial Studio one converted.
enum Loaded {
    Sextant(Project),
    Imported(sextant_import::Imported),
}

/// Parses a project's text (`name`: its file, for messages). Off the owner: a large file
/// takes its time.
fn load(text: &str, name: &str) -> Result<Loaded, CommandError> {
    match Project::from_json_str(text) {
        Ok(project) => Ok(Loaded::Sextant(project)),
        Err(LoadError::NotASextantProject) => sextant_import::import_serial_studio(text)
            .map(Loaded::Imported)
            .map_err(|e| CommandError::failed(format!("could not open {name}: {e}"))),
        Err(e) => Err(CommandError::failed(format!("could not open {name}: {e}"))),
    }
}

/// Makes what was loaded the open project (undoably), its file `file` when it is a
/// Sextant project.
fn open_loaded(
    ws: &mut Workspace,
    loaded: Loaded,
    name: &str,
    file: Option<PathBuf>,
) -> Result<Opened, CommandError> {
    match loaded {
        Loaded::Sextant(project) => {
            ws.replace(&format!("open {name}"), project, file.clone())?;
            Ok(Opened {
                ok: true,
                file,
                detail: None,
                report: None,
            })
        }
        Loaded::Imported(imported) => {
            // An imported file is not ours to overwrite: it gets no path until saved.
            ws.replace(&format!("import {name}"), imported.project, None)?;
            ws.last_import = Some((name.to_string(), imported.summary.clone()));
            Ok(Opened {
                ok: true,
                file: None,
                detail: Some("imported from Serial Studio format".into()),
                report: Some(imported.summary),
            })
        }
    }
}

fn project_open(
    _: &mut Workspace,
    p: PathParams,
) -> Result<Deferred<Workspace, Opened>, CommandError> {
    let path = p.path;
    let name = path.display().to_string();
    Ok(Deferred::off_then(
        {
            let (path, name) = (path.clone(), name.clone());
            move || load(&read_user_text(&path, PROJECT_FILE)?, &name)
        },
        move |ws, loaded| open_loaded(ws, loaded, &name, Some(path)),
    ))
}

const PROJECT_OPEN_CONTENT: &str =
    "Opens a project from its text (a file dropped on a browser window, which has no path): \
    a Sextant project, or a Serial Studio one imported. It has no file until saved.";

/// The largest text `project.openContent` takes (bytes of UTF-8); more is refused
/// before it is parsed.
pub const MAX_OPEN_CONTENT_BYTES: usize = 16 << 20;

fn project_open_content(
    _: &mut Workspace,
    p: ContentParams,
) -> Result<Deferred<Workspace, Opened>, CommandError> {
    if p.content.len() > MAX_OPEN_CONTENT_BYTES {
        return Err(CommandError::invalid(
            "content",
            format!(
                "a project file over {} MiB is not a project file",
                MAX_OPEN_CONTENT_BYTES >> 20
            ),
        ));
    }
    let name = p.name;
    Ok(Deferred::off_then(
        {
            let name = name.clone();
            move || load(&p.content, &name)
        },
        move |ws, loaded| open_loaded(ws, loaded, &name, None),
    ))
}

fn project_set_title(ws: &mut Workspace, p: TitleParams) -> Result<Done, CommandError> {
    ws.edit("rename project", |proj| {
        proj.title = p.title.clone();
        Ok(Done::ok())
    })
}

fn project_import(
    _: &mut Workspace,
    p: PathParams,
) -> Result<Deferred<Workspace, Imported>, CommandError> {
    let name = p.path.display().to_string();
    Ok(Deferred::off_then(
        {
            let name = name.clone();
            move || {
                let text = read_user_text(&p.path, PROJECT_FILE)?;
                sextant_import::import_serial_studio(&text)
                    .map_err(|e| CommandError::failed(format!("could not import {name}: {e}")))
            }
        },
        move |ws: &mut Workspace, imported: sextant_import::Imported| {
            ws.replace(&format!("import {name}"), imported.project, None)?;
            ws.last_import = Some((name.clone(), imported.summary.clone()));
            Ok(Imported {
                report: imported.summary,
            })
        },
    ))
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
    let (imported_from, report) = match &ws.last_import {
        Some((from, report)) => (Some(from.clone()), Some(report.clone())),
        None => (None, None),
    };
    Ok(ProjectFile {
        path: ws.path().map(|p| p.to_path_buf()),
        imported_from,
        report,
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
