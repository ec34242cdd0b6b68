//! The workspace: the project and everything that changes with it.
//!
//! Every project edit goes through [`Workspace::edit`]: it runs on a copy's worth of undo
//! history, is rejected whole if the result does not validate (the project is left exactly
//! as it was), and queues an [`Event`] for the doors. Checkpoints are named snapshots kept
//! in a rolling window of [`CHECKPOINT_LIMIT`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;
use sextant_commands::{CommandError, ErrorCode};
use sextant_devices::wiring::Wiring;
use sextant_devices::SourceHandle;
use sextant_sessions::Recorder;
use sextant_telemetry::project::{save_atomic, Project};

/// Undo steps kept.
pub const UNDO_LIMIT: usize = 200;
/// Checkpoints kept (oldest dropped first).
pub const CHECKPOINT_LIMIT: usize = 50;

/// Something the doors should know about.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum Event {
    ProjectChanged {
        label: String,
    },
    ProjectSaved {
        path: String,
    },
    CheckpointTaken {
        id: u64,
        label: String,
    },
    Connected,
    Disconnected,
    ViewChanged {
        view: DashboardView,
    },
    /// An automatic save (after edits, or at shutdown) failed; the edits are still only in
    /// memory, and the file on disk is what it was. Doors show it to the person.
    AutoSaveFailed {
        path: String,
        problem: sextant_fsutil::WriteProblem,
    },
}

/// A named snapshot of the project.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub id: u64,
    pub label: String,
    pub taken: SystemTime,
    pub project: Project,
}

/// Running sources and their pipeline.
pub struct Live {
    pub handles: Vec<SourceHandle>,
    pub wiring: Option<Wiring>,
    /// Records the run into a session on `sessions.startRecording`.
    pub recorder: Recorder,
    /// The last frames, for `dashboard.tail`.
    pub tail: crate::tail::Tail,
    /// Controls of every replaying source (captures, CSV files, sessions).
    pub replay: Vec<std::sync::Arc<sextant_devices::replay::ReplayControl>>,
    /// Each source as the destination of a send, in source order.
    pub(crate) senders: Vec<crate::actions::Sender>,
    /// The actions' sends on connect and timers; dropped with the run, which stops them.
    pub(crate) actions: crate::actions::ActionTimers,
    /// The image groups' newest pictures.
    pub images: crate::images::ImageViews,
    /// The PostgreSQL sink's counters; its writer finishes what is queued after the run.
    pub postgres: Option<sextant_postgres::SinkHandle>,
}

/// What a replay put aside when it took the sources' place, brought back when it stops.
#[derive(Debug, Clone)]
pub struct PutAside {
    /// The project whose live sources were connected: they connect again when the replay
    /// stops, if that is still the open project (a project changed meanwhile waits for
    /// the person to connect it, so nothing they did not see connects).
    pub live_project: Option<Project>,
    /// The replay opened its own project, which left the workspace at this revision: the
    /// person's project comes back (undo) when it stops, unless it was edited meanwhile.
    pub replaced_at: Option<u64>,
}

/// How the dashboard shows data: view state, not project data (it is not saved).
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardView {
    /// Seconds of history on time plots.
    pub time_range_s: f64,
    /// Points per plot after decimation.
    pub points: u32,
    /// Frozen: `dashboard.*` reads return the frame at which the view was paused.
    pub paused: bool,
    /// Display refresh rate (1 to 240 Hz).
    pub refresh_hz: u32,
}

impl Default for DashboardView {
    fn default() -> Self {
        DashboardView {
            time_range_s: 10.0,
            points: 1000,
            paused: false,
            refresh_hz: 60,
        }
    }
}

pub struct Workspace {
    project: Project,
    path: Option<PathBuf>,
    dirty: bool,
    /// Bumped on every change; auto-save compares it with `saved_revision`.
    revision: u64,
    saved_revision: u64,
    undo: Vec<(String, Project)>,
    redo: Vec<(String, Project)>,
    checkpoints: VecDeque<Checkpoint>,
    next_checkpoint: u64,
    events: Vec<Event>,
    pub(crate) live: Option<Live>,
    /// The Serial Studio file the open project was imported from, and what its import
    /// report said: the editor shows the report even when the project was opened at
    /// start-up (`--project X.ssproj`). Cleared by any other replacement of the project.
    pub(crate) last_import: Option<(String, Vec<sextant_import::SummaryItem>)>,
    /// Set while a replay has the sources' place.
    pub(crate) after_replay: Option<PutAside>,
    /// The sessions database (a setting, not project data); recording is off without one.
    pub(crate) sessions_db: Option<PathBuf>,
    /// Export parsed frames to this CSV file while connected (a setting, not project data).
    pub(crate) csv_export: Option<PathBuf>,
    /// Record every chunk and frame to this MCAP file while connected (a setting).
    pub(crate) mcap_export: Option<PathBuf>,
    /// The counters of the last run's CSV export (kept after the run ends, so a failure
    /// stays visible).
    /// The checkpoint the newest one pushed out of the ring, and that newest one's id: put
    /// back if the newest is discarded (its call changed nothing).
    evicted_checkpoint: Option<(u64, Checkpoint)>,
    /// Why the last save failed, when it did (an automatic save tells the doors).
    pub(crate) last_save_problem: Option<sextant_fsutil::WriteProblem>,
    pub(crate) csv_export_run: Option<std::sync::Arc<sextant_devices::wiring::CsvExportStatus>>,
    /// The counters of the last run's MCAP recording, kept like the CSV export's.
    pub(crate) mcap_export_run: Option<std::sync::Arc<sextant_export::LiveMcapStatus>>,
    pub(crate) view: DashboardView,
    /// What `dashboard.latestFrame` shows while paused.
    pub(crate) frozen: Option<serde_json::Value>,
    /// What the dashboard draws: outlives runs, so display subscribers survive reconnects.
    pub(crate) scope: sextant_display::Scope,
    /// Where the sources' passwords and certificates are kept (never in the project).
    pub(crate) credentials: crate::credentials::CredentialVault,
}

fn invalid(issues: Vec<sextant_telemetry::project::ValidationIssue>) -> CommandError {
    let first = issues.first().map(|i| i.path.clone());
    CommandError {
        code: ErrorCode::InvalidParams,
        message: format!(
            "the change would make the project invalid: {}",
            issues
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ),
        path: first,
        question: None,
    }
}

impl Workspace {
    pub fn new(project: Project) -> Workspace {
        Workspace {
            project,
            path: None,
            dirty: false,
            revision: 0,
            saved_revision: 0,
            undo: Vec::new(),
            redo: Vec::new(),
            checkpoints: VecDeque::new(),
            next_checkpoint: 1,
            events: Vec::new(),
            live: None,
            last_import: None,
            after_replay: None,
            sessions_db: None,
            csv_export: None,
            csv_export_run: None,
            mcap_export: None,
            mcap_export_run: None,
            last_save_problem: None,
            evicted_checkpoint: None,
            view: DashboardView::default(),
            frozen: None,
            scope: sextant_display::Scope::new(),
            credentials: crate::credentials::CredentialVault::none(),
        }
    }

    /// A workspace for a project loaded from `path`; edits are saved back there.
    pub fn opened(project: Project, path: PathBuf) -> Workspace {
        Workspace {
            path: Some(path),
            ..Workspace::new(project)
        }
    }

    /// The live display buffers (see `sextant-display`).
    pub fn scope(&self) -> &sextant_display::Scope {
        &self.scope
    }

    pub fn project(&self) -> &Project {
        &self.project
    }

    /// Where `sessions.*` keep recorded sessions (the file is created when first used).
    pub fn set_sessions_db(&mut self, path: Option<PathBuf>) {
        self.sessions_db = path;
    }

    pub fn sessions_db(&self) -> Option<&std::path::Path> {
        self.sessions_db.as_deref()
    }

    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Whether there are edits since the last save (or load).
    pub fn has_unsaved_edits(&self) -> bool {
        self.revision != self.saved_revision
    }

    /// Events since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Applies `f` to the project as one undoable step. On error, or if the result does not
    /// validate, the project is left untouched.
    pub fn edit<R>(
        &mut self,
        label: &str,
        f: impl FnOnce(&mut Project) -> Result<R, CommandError>,
    ) -> Result<R, CommandError> {
        let before = self.project.clone();
        let result = match f(&mut self.project) {
            Ok(r) => r,
            Err(e) => {
                self.project = before;
                return Err(e);
            }
        };
        let issues = self.project.validate();
        if !issues.is_empty() {
            self.project = before;
            return Err(invalid(issues));
        }
        if self.project != before {
            self.undo.push((label.to_string(), before));
            if self.undo.len() > UNDO_LIMIT {
                self.undo.remove(0);
            }
            self.redo.clear();
            self.changed(label);
        }
        Ok(result)
    }

    fn changed(&mut self, label: &str) {
        self.dirty = true;
        self.revision += 1;
        self.events.push(Event::ProjectChanged {
            label: label.to_string(),
        });
    }

    /// Replaces the whole project (new/open/import): undoable like any edit.
    pub fn replace(
        &mut self,
        label: &str,
        project: Project,
        path: Option<PathBuf>,
    ) -> Result<(), CommandError> {
        let issues = project.validate();
        if !issues.is_empty() {
            return Err(invalid(issues));
        }
        let before = std::mem::replace(&mut self.project, project);
        self.undo.push((label.to_string(), before));
        self.redo.clear();
        self.path = path;
        self.last_import = None;
        self.changed(label);
        Ok(())
    }

    pub fn undo(&mut self) -> Option<String> {
        let (label, previous) = self.undo.pop()?;
        let current = std::mem::replace(&mut self.project, previous);
        self.redo.push((label.clone(), current));
        self.changed(&format!("undo {label}"));
        Some(label)
    }

    pub fn redo(&mut self) -> Option<String> {
        let (label, next) = self.redo.pop()?;
        let current = std::mem::replace(&mut self.project, next);
        self.undo.push((label.clone(), current));
        self.changed(&format!("redo {label}"));
        Some(label)
    }

    pub fn undo_labels(&self) -> (Vec<String>, Vec<String>) {
        (
            self.undo.iter().map(|(l, _)| l.clone()).collect(),
            self.redo.iter().map(|(l, _)| l.clone()).collect(),
        )
    }

    /// Saves atomically to `path` (or the current path) and remembers it.
    pub fn save(&mut self, path: Option<PathBuf>) -> Result<PathBuf, CommandError> {
        let path = path.or_else(|| self.path.clone()).ok_or_else(|| {
            CommandError::failed("the project has no file yet; give a path to save it")
        })?;
        save_atomic(&path, self.project.to_json_string().as_bytes()).map_err(|e| {
            self.last_save_problem = Some(sextant_fsutil::WriteProblem::from_io(&e.source));
            CommandError::failed(e.to_string())
        })?;
        self.last_save_problem = None;
        if self.path.as_deref() != Some(path.as_path()) {
            // Saved under a new name: the sources keep their credentials.
            let mut targets: Vec<_> = self
                .project
                .sources
                .iter()
                .map(|s| crate::credentials::CredentialTarget::Source { id: s.id.clone() })
                .collect();
            targets.push(crate::credentials::CredentialTarget::Publisher);
            targets.push(crate::credentials::CredentialTarget::Postgres);
            self.credentials.copy(self.path.as_deref(), &path, targets);
        }
        self.path = Some(path.clone());
        self.dirty = false;
        self.saved_revision = self.revision;
        self.events.push(Event::ProjectSaved {
            path: path.display().to_string(),
        });
        Ok(path)
    }

    /// Tells the doors an automatic save failed, and why.
    pub(crate) fn auto_save_failed(&mut self) {
        let problem = self
            .last_save_problem
            .clone()
            .unwrap_or(sextant_fsutil::WriteProblem {
                kind: sextant_fsutil::WriteProblemKind::Other,
                detail: "the project has no file".into(),
            });
        let path = self
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        self.events.push(Event::AutoSaveFailed { path, problem });
    }

    pub fn checkpoint(&mut self, label: &str) -> u64 {
        let id = self.next_checkpoint;
        self.next_checkpoint += 1;
        self.checkpoints.push_back(Checkpoint {
            id,
            label: label.to_string(),
            taken: SystemTime::now(),
            project: self.project.clone(),
        });
        // The one pushed out is kept aside until this checkpoint is known to stay: a call
        // that changes nothing discards its checkpoint, and must not cost the oldest one.
        self.evicted_checkpoint = None;
        while self.checkpoints.len() > CHECKPOINT_LIMIT {
            let oldest = self.checkpoints.pop_front();
            self.evicted_checkpoint = oldest.map(|c| (id, c));
        }
        self.events.push(Event::CheckpointTaken {
            id,
            label: label.to_string(),
        });
        id
    }

    /// Drops the newest checkpoint if it equals the current project (an edit that changed
    /// nothing needs no restore point).
    pub(crate) fn discard_checkpoint_if_unchanged(&mut self, id: u64) {
        if self
            .checkpoints
            .back()
            .is_some_and(|c| c.id == id && c.project == self.project)
        {
            self.checkpoints.pop_back();
            if let Some((by, oldest)) = self.evicted_checkpoint.take() {
                if by == id {
                    self.checkpoints.push_front(oldest);
                }
            }
            self.events
                .retain(|e| !matches!(e, Event::CheckpointTaken { id: i, .. } if *i == id));
        }
    }

    pub fn checkpoints(&self) -> impl Iterator<Item = &Checkpoint> {
        self.checkpoints.iter()
    }

    /// Restores a checkpoint as an undoable edit.
    pub fn restore(&mut self, id: u64) -> Result<String, CommandError> {
        let cp = self
            .checkpoints
            .iter()
            .find(|c| c.id == id)
            .cloned()
            .ok_or_else(|| {
                CommandError::not_found(format!(
                    "no checkpoint {id}; `assistant.listCheckpoints` lists them"
                ))
            })?;
        let path = self.path.clone();
        self.replace(
            &format!("restore checkpoint {id} ({})", cp.label),
            cp.project,
            path,
        )?;
        Ok(cp.label)
    }

    pub(crate) fn push_event(&mut self, e: Event) {
        self.events.push(e);
    }
}
