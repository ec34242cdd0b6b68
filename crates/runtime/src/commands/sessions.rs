//! `sessions.*`: recorded sessions – choose the database, browse, tag, rename, delete,
//! export to CSV, record the live run, and replay a session in place of the live sources.
//!
//! The database is a workspace setting (`sessions.setDatabase`, or
//! [`Workspace::set_sessions_db`] from the app), not project data. Each command opens its
//! own connection: reads run in WAL snapshots, so none of them waits for a recording.
//!
//! The database is a file the caller named, and a session can be large: choosing it
//! (opening, upgrading an older file), browsing, tagging, renaming, deleting and exporting
//! run on jobs off the owner task ([`Deferred`]); the owner only takes what they need from
//! the workspace (the file, the session being recorded) and, for `sessions.setDatabase`,
//! sets the file once it opened. A path that is not a regular file is refused before
//! SQLite opens it ([`check_user_file`]). Recording and replaying stay on the owner: they
//! start and stop the live run.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sextant_commands::{CommandError, Deferred, Registry, Tier};
use sextant_devices::replay::ReplayControl;

use crate::session_replay::SessionReplayDriver;
use sextant_devices::wiring::{Wiring, WiringOptions};
use sextant_devices::{Clock, Reconnect, RunOptions, Source};
use sextant_sessions::{
    Recorder, SessionDetail, SessionError, SessionStore, SessionSummary, WriterOptions,
    WriterReport,
};
use sextant_telemetry::Pipeline;

use super::project::{Done, NoParams};
use crate::user_file::check_user_file;
use crate::workspace::{Event, Live};
use crate::Workspace;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DatabaseParams {
    /// SQLite file for recorded sessions; created when first used.
    path: PathBuf,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListParams {
    /// Only sessions carrying this tag.
    #[serde(default)]
    tag: Option<String>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Listing {
    /// The sessions database; absent when none is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    database: Option<PathBuf>,
    sessions: Vec<SessionSummary>,
    /// The session being recorded now, with its counts so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    recording: Option<WriterReport>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdParams {
    /// Session id, from `sessions.list`.
    id: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TagParams {
    /// Session id, from `sessions.list`.
    id: i64,
    /// Tags to add (1 to 64 characters each).
    #[serde(default)]
    add: Vec<String>,
    /// Tags to remove.
    #[serde(default)]
    remove: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
struct Tags {
    id: i64,
    tags: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RenameParams {
    /// Session id, from `sessions.list`.
    id: i64,
    title: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteParams {
    /// Session id, from `sessions.list`.
    id: i64,
    /// Also compact the file afterwards (slow on a big database).
    #[serde(default)]
    vacuum: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExportParams {
    /// Session id, from `sessions.list`.
    id: i64,
    /// CSV file to write (`elapsed_s, Group/Dataset, …`, one row per frame).
    path: PathBuf,
}

#[derive(Serialize, JsonSchema)]
struct Exported {
    /// The file written, as a full path (so a person reads where it went).
    path: PathBuf,
    rows: u64,
}

/// A file format other tools open a session in.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ExportFormat {
    /// MCAP, for Foxglove Studio and PlotJuggler: a channel per group of values and per
    /// source of raw bytes.
    Mcap,
    /// Parquet, for pandas, polars and DuckDB: a row per frame, a typed column per dataset.
    Parquet,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExportToParams {
    /// Session id, from `sessions.list`.
    id: i64,
    format: ExportFormat,
    /// File to write (`.mcap` or `.parquet`).
    path: PathBuf,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ExportedTo {
    /// The file written, as a full path (so a person reads where it went).
    path: PathBuf,
    /// Frames of parsed values written.
    frames: u64,
    /// Raw chunks written (MCAP only).
    chunks: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CsvParams {
    /// Session id, from `sessions.list`.
    id: i64,
}

/// A session's CSV as text, for a page to download.
#[derive(Serialize, JsonSchema)]
struct SessionCsv {
    /// A file name for it: `<title>.csv`, made safe.
    name: String,
    rows: u64,
    /// The CSV, exactly as `sessions.exportCsv` writes it.
    csv: String,
}

/// The largest file `sessions.csv` and `sessions.download` hand over; a bigger one is
/// exported to a file.
pub const MAX_DOWNLOAD_BYTES: usize = 64 << 20;

/// A format a page downloads a session in.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum DownloadFormat {
    /// The CSV `sessions.exportCsv` writes.
    Csv,
    /// MCAP, as `sessions.export` writes it.
    Mcap,
    /// Parquet, as `sessions.export` writes it.
    Parquet,
}

impl DownloadFormat {
    /// The format's name, as a person reads it.
    fn title(self) -> &'static str {
        match self {
            DownloadFormat::Csv => "CSV",
            DownloadFormat::Mcap => "MCAP",
            DownloadFormat::Parquet => "Parquet",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            DownloadFormat::Csv => "csv",
            DownloadFormat::Mcap => "mcap",
            DownloadFormat::Parquet => "parquet",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DownloadParams {
    /// Session id, from `sessions.list`.
    id: i64,
    format: DownloadFormat,
}

/// A session as a file's bytes, for a page to save.
#[derive(Serialize, JsonSchema)]
struct SessionFile {
    /// A file name for it: `<title>.<csv|mcap|parquet>`, made safe.
    name: String,
    format: DownloadFormat,
    /// Frames (rows of parsed values) in the file.
    frames: u64,
    /// The file's length in bytes.
    size: u64,
    /// The file, base64 (standard alphabet, padded).
    base64: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StartParams {
    /// Shown in `sessions.list`; `Session <id>` when absent.
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
struct Started {
    /// The new session's id.
    id: i64,
}

#[derive(Serialize, JsonSchema)]
struct Stopped {
    stopped: bool,
    /// The closed session's final counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<WriterReport>,
}

fn one() -> f64 {
    1.0
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReplayParams {
    /// Session id, from `sessions.list`.
    id: i64,
    /// 1 = real time, 10 = ten times faster, 0 = as fast as possible.
    #[serde(default = "one")]
    speed: f64,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Replaying {
    id: i64,
    /// Sources replayed (one per source of the session's project).
    sources: usize,
    /// Whether the session's project replaced the open one (undoable); it is left alone
    /// when it already equals the recorded one.
    project_replaced: bool,
}

fn to_command_error(e: SessionError, param: &str) -> CommandError {
    match e {
        SessionError::NotFound(_) => CommandError::not_found(e.to_string()),
        SessionError::Invalid(m) => CommandError::invalid(param, m),
        other => CommandError::failed(other.to_string()),
    }
}

fn database(ws: &Workspace) -> Result<PathBuf, CommandError> {
    ws.sessions_db().map(PathBuf::from).ok_or_else(|| {
        CommandError::failed("no sessions database is set; choose a file with sessions.setDatabase")
    })
}

fn store(ws: &Workspace) -> Result<SessionStore, CommandError> {
    open_store(&database(ws)?)
}

fn open_store(db: &Path) -> Result<SessionStore, CommandError> {
    SessionStore::open(db).map_err(|e| to_command_error(e, "path"))
}

fn recorder(ws: &Workspace) -> Option<&Recorder> {
    ws.live.as_ref().map(|l| &l.recorder)
}

/// The `sessions.*` commands, one line each; the handler of `sessions.startRecording` is
/// `sessions_start_recording`, and so on, below in the same order. Kept out of rustfmt so that each
/// command stays one line.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    r.register_deferred("sessions.setDatabase", Tier::Confirm, SESSIONS_SET_DATABASE, sessions_set_database);
    r.register_deferred("sessions.list", Tier::Safe, SESSIONS_LIST, sessions_list);
    r.register_deferred("sessions.get", Tier::Safe, "One session: its summary, CSV columns, per-source raw data and embedded project.", sessions_get);
    r.register_deferred("sessions.tag", Tier::Confirm, "Adds and removes tags of a session.", sessions_tag)
        .example("mark a bench run", json!({"id": 3, "add": ["bench", "firmware 1.2"], "remove": ["todo"]}));
    r.register_deferred("sessions.rename", Tier::Confirm, "Changes a session's title.", sessions_rename);
    r.register_deferred("sessions.delete", Tier::AlwaysConfirm, "Deletes a session with all its raw data and frames. Cannot be undone.", sessions_delete);
    r.register_deferred("sessions.exportCsv", Tier::Confirm, SESSIONS_EXPORT_CSV, sessions_export_csv);
    r.register_deferred("sessions.export", Tier::Confirm, SESSIONS_EXPORT, sessions_export)
        .example("open session 3 in Foxglove Studio", json!({"id": 3, "format": "mcap", "path": "run-3.mcap"}));
    r.register_deferred("sessions.csv", Tier::Safe, SESSIONS_CSV, sessions_csv);
    r.register_deferred("sessions.download", Tier::Safe, SESSIONS_DOWNLOAD, sessions_download);
    r.register("sessions.startRecording", Tier::Confirm, SESSIONS_START_RECORDING, sessions_start_recording);
    r.register("sessions.stopRecording", Tier::Confirm, "Stops recording and closes the session; the live run goes on.", sessions_stop_recording);
    r.register("sessions.replay", Tier::Confirm, SESSIONS_REPLAY, sessions_replay)
        .example("replay session 3 at ten times real time", json!({"id": 3, "speed": 10}));
}

const SESSIONS_SET_DATABASE: &str =
    "Chooses the SQLite file recorded sessions are kept in (created when missing; an \
    older file is upgraded, a newer one refused).";

fn sessions_set_database(
    _: &mut Workspace,
    p: DatabaseParams,
) -> Result<Deferred<Workspace, Done>, CommandError> {
    let path = p.path;
    Ok(Deferred::off_then(
        {
            let path = path.clone();
            move || {
                check_user_file(&path, "a sessions database file").map_err(|e| CommandError {
                    path: Some("path".into()),
                    ..e
                })?;
                // Open it now so a bad path or a newer file is reported here, not
                // mid-recording (an older one is upgraded here too).
                open_store(&path).map(drop)
            }
        },
        move |ws: &mut Workspace, ()| {
            ws.set_sessions_db(Some(path));
            Ok(Done::ok())
        },
    ))
}

const SESSIONS_LIST: &str =
    "Recorded sessions, oldest first, with their tags, frame/chunk/byte counts, drops \
    and duration; and the session being recorded now.";

fn sessions_list(
    ws: &mut Workspace,
    p: ListParams,
) -> Result<Deferred<Workspace, Listing>, CommandError> {
    let recording = recorder(ws).and_then(Recorder::current);
    let Some(db) = ws.sessions_db().map(PathBuf::from) else {
        return Ok(Deferred::now(Listing {
            database: None,
            sessions: Vec::new(),
            recording,
        }));
    };
    Ok(Deferred::off(move || {
        let sessions = SessionStore::open(&db)
            .and_then(|s| s.list(p.tag.as_deref()))
            .map_err(|e| to_command_error(e, "tag"))?;
        Ok(Listing {
            database: Some(db),
            sessions,
            recording,
        })
    }))
}

fn sessions_get(
    ws: &mut Workspace,
    p: IdParams,
) -> Result<Deferred<Workspace, SessionDetail>, CommandError> {
    let db = database(ws)?;
    Ok(Deferred::off(move || {
        open_store(&db)?
            .get(p.id)
            .map_err(|e| to_command_error(e, "id"))
    }))
}

fn sessions_tag(
    ws: &mut Workspace,
    p: TagParams,
) -> Result<Deferred<Workspace, Tags>, CommandError> {
    let db = database(ws)?;
    Ok(Deferred::off(move || {
        let store = open_store(&db)?;
        let mut tags = store
            .summary(p.id)
            .map_err(|e| to_command_error(e, "id"))?
            .tags;
        for (i, tag) in p.add.iter().enumerate() {
            tags = store
                .tag(p.id, tag)
                .map_err(|e| to_command_error(e, &format!("add[{i}]")))?;
        }
        for tag in &p.remove {
            tags = store
                .untag(p.id, tag)
                .map_err(|e| to_command_error(e, "remove"))?;
        }
        Ok(Tags { id: p.id, tags })
    }))
}

fn sessions_rename(
    ws: &mut Workspace,
    p: RenameParams,
) -> Result<Deferred<Workspace, Done>, CommandError> {
    let db = database(ws)?;
    Ok(Deferred::off(move || {
        open_store(&db)?
            .rename(p.id, &p.title)
            .map_err(|e| to_command_error(e, "title"))?;
        Ok(Done::ok())
    }))
}

fn sessions_delete(
    ws: &mut Workspace,
    p: DeleteParams,
) -> Result<Deferred<Workspace, Done>, CommandError> {
    if recorder(ws)
        .and_then(Recorder::current)
        .is_some_and(|r| r.id == p.id)
    {
        return Err(CommandError::failed(format!(
            "session {} is being recorded; stop it with sessions.stopRecording first",
            p.id
        )));
    }
    let db = database(ws)?;
    Ok(Deferred::off(move || {
        let mut store = open_store(&db)?;
        store.delete(p.id).map_err(|e| to_command_error(e, "id"))?;
        if p.vacuum {
            store.vacuum().map_err(|e| to_command_error(e, "vacuum"))?;
        }
        Ok(Done::ok())
    }))
}

const SESSIONS_EXPORT_CSV: &str =
    "Writes a session's frames to a CSV file, exactly as the live CSV export does \
    (`elapsed_s, Group/Dataset, …`, one row per frame).";

fn sessions_export_csv(
    ws: &mut Workspace,
    p: ExportParams,
) -> Result<Deferred<Workspace, Exported>, CommandError> {
    let db = database(ws)?;
    Ok(Deferred::off(move || {
        let rows = open_store(&db)?
            .export_csv_file(p.id, &p.path)
            .map_err(|e| to_command_error(e, "path"))?;
        let path = std::path::absolute(&p.path).unwrap_or(p.path);
        Ok(Exported { path, rows })
    }))
}

const SESSIONS_EXPORT: &str =
    "Writes a session to a file other tools open: `mcap` for Foxglove Studio and PlotJuggler \
    (a channel per group of values and per source of raw bytes), `parquet` for pandas, polars \
    and DuckDB (a row per frame, a typed column per dataset).";

fn sessions_export(
    ws: &mut Workspace,
    p: ExportToParams,
) -> Result<Deferred<Workspace, ExportedTo>, CommandError> {
    let db = database(ws)?;
    Ok(Deferred::off(move || {
        let format = match p.format {
            ExportFormat::Mcap => sextant_export::Format::Mcap,
            ExportFormat::Parquet => sextant_export::Format::Parquet,
        };
        let exported =
            sextant_export::export_file(&db, p.id, format, &p.path).map_err(|e| match e {
                sextant_export::ExportError::Session(e) => to_command_error(e, "path"),
                other => CommandError::failed(other.to_string()),
            })?;
        let path = std::path::absolute(&p.path).unwrap_or(p.path);
        Ok(ExportedTo {
            path,
            frames: exported.frames,
            chunks: exported.chunks,
        })
    }))
}

const SESSIONS_CSV: &str =
    "A session's frames as CSV text (the same CSV sessions.exportCsv writes), for a page \
    to download; at most 64 MiB – export a bigger session to a file.";

fn sessions_csv(
    ws: &mut Workspace,
    p: CsvParams,
) -> Result<Deferred<Workspace, SessionCsv>, CommandError> {
    let db = database(ws)?;
    Ok(Deferred::off(move || {
        let file = download(&db, p.id, DownloadFormat::Csv)?;
        let csv = String::from_utf8(file.bytes)
            .map_err(|_| CommandError::failed("the session's CSV is not valid text"))?;
        Ok(SessionCsv {
            name: file.name,
            rows: file.frames,
            csv,
        })
    }))
}

const SESSIONS_DOWNLOAD: &str =
    "A session as a file's bytes (base64) in CSV, MCAP or Parquet, for a page to save; at \
    most 64 MiB – export a bigger session to a file with sessions.export or \
    sessions.exportCsv. Nothing in it is meant to be read here.";

fn sessions_download(
    ws: &mut Workspace,
    p: DownloadParams,
) -> Result<Deferred<Workspace, SessionFile>, CommandError> {
    let db = database(ws)?;
    Ok(Deferred::off(move || {
        let file = download(&db, p.id, p.format)?;
        Ok(SessionFile {
            name: file.name,
            format: p.format,
            frames: file.frames,
            size: file.bytes.len() as u64,
            base64: base64::engine::general_purpose::STANDARD.encode(&file.bytes),
        })
    }))
}

/// A session written in memory for a page: what `sessions.csv` and `sessions.download`
/// hand over.
struct Download {
    /// `<title>.<extension>`, made safe.
    name: String,
    frames: u64,
    bytes: Vec<u8>,
}

/// Session `id` of the database at `db` as `format`, held in memory up to
/// [`MAX_DOWNLOAD_BYTES`].
fn download(db: &Path, id: i64, format: DownloadFormat) -> Result<Download, CommandError> {
    let store = open_store(db)?;
    let title = store
        .summary(id)
        .map_err(|e| to_command_error(e, "id"))?
        .title;
    let mut out = Capped::default();
    let written = match format {
        DownloadFormat::Csv => store
            .export_csv(id, &mut out)
            .map_err(sextant_export::ExportError::from),
        DownloadFormat::Mcap => {
            sextant_export::export_into(&store, id, sextant_export::Format::Mcap, &mut out)
                .map(|e| e.frames)
        }
        DownloadFormat::Parquet => {
            sextant_export::export_into(&store, id, sextant_export::Format::Parquet, &mut out)
                .map(|e| e.frames)
        }
    };
    out.refused(format.title())?;
    let frames = written.map_err(|e| match e {
        sextant_export::ExportError::Session(e) => to_command_error(e, "id"),
        other => CommandError::failed(other.to_string()),
    })?;
    Ok(Download {
        name: file_name(&title, id, format.extension()),
        frames,
        bytes: out.into_bytes(),
    })
}

/// A file held in memory for a download, refusing to grow past [`MAX_DOWNLOAD_BYTES`] and
/// remembering that it did. Seekable, as an MCAP writer goes back to fill in offsets.
#[derive(Default)]
struct Capped {
    file: std::io::Cursor<Vec<u8>>,
    over: bool,
}

impl Capped {
    /// The refusal a person reads when the file grew past the cap.
    fn refused(&self, format: &str) -> Result<(), CommandError> {
        if self.over {
            return Err(CommandError::failed(format!(
                "the session's {format} is over {} MiB, too large to download; export it to a \
                 file instead",
                MAX_DOWNLOAD_BYTES >> 20
            )));
        }
        Ok(())
    }

    fn into_bytes(self) -> Vec<u8> {
        self.file.into_inner()
    }
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let end = self.file.position() as usize + buf.len();
        if end > MAX_DOWNLOAD_BYTES {
            self.over = true;
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        self.file.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::io::Seek for Capped {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.file.seek(to)
    }
}

/// `Bench run 3` → `Bench run 3.csv`: a session's title as a file name any system takes.
fn file_name(title: &str, id: i64, extension: &str) -> String {
    let safe: String = title
        .chars()
        .map(|c| {
            if c.is_control() || "/\\:*?\"<>|".contains(c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    let safe = safe.trim().trim_matches('.');
    if safe.is_empty() {
        format!("session-{id}.{extension}")
    } else {
        format!("{safe}.{extension}")
    }
}

const SESSIONS_START_RECORDING: &str =
    "Records the live run (raw bytes and parsed frames, with the project it runs) into \
    a new session, until sessions.stopRecording or io.disconnect.";

fn sessions_start_recording(ws: &mut Workspace, p: StartParams) -> Result<Started, CommandError> {
    let db = database(ws)?;
    let recorder = recorder(ws)
        .ok_or_else(|| CommandError::failed("not connected; run io.connect first, then record"))?;
    let id = recorder
        .record(
            &db,
            p.title.as_deref().unwrap_or(""),
            p.tags,
            WriterOptions::default(),
        )
        .map_err(|e| to_command_error(e, "tags"))?;
    Ok(Started { id })
}

fn sessions_stop_recording(ws: &mut Workspace, _: NoParams) -> Result<Stopped, CommandError> {
    let Some(writer) = recorder(ws).and_then(Recorder::stop) else {
        return Ok(Stopped {
            stopped: false,
            session: None,
        });
    };
    // Waits for the rows queued so far to be committed (one batch, typically).
    let report = writer
        .close()
        .map_err(|e| CommandError::failed(e.to_string()))?;
    Ok(Stopped {
        stopped: true,
        session: Some(report),
    })
}

const SESSIONS_REPLAY: &str =
    "Opens a session's project (undoably, unless it is already open) and connects its \
    recorded raw data in place of the live sources, through a fresh pipeline. It holds \
    at its end (seek or resume with replay.setState); io.disconnect ends it and brings \
    back the project and live sources it took the place of.";

fn sessions_replay(ws: &mut Workspace, p: ReplayParams) -> Result<Replaying, CommandError> {
    if !(p.speed.is_finite() && p.speed >= 0.0) {
        return Err(CommandError::invalid(
            "speed",
            "speed must be 0 (as fast as possible) or a positive factor",
        ));
    }
    let db = database(ws)?;
    let project = store(ws)?
        .project(p.id)
        .map_err(|e| to_command_error(e, "id"))?;
    let pipeline = Pipeline::new(&project)
        .map_err(|e| CommandError::failed(format!("the session's project does not build: {e}")))?;
    let live_project = super::io::make_room_for_replay(ws)?;
    let project_replaced = *ws.project() != project;
    let mut replaced_at = None;
    if project_replaced {
        if let Err(e) = ws.replace(&format!("replay session {}", p.id), project.clone(), None) {
            super::io::put_back(ws, live_project);
            return Err(e);
        }
        replaced_at = Some(ws.revision());
    }
    let clock = Clock::start();
    let mut inputs = Vec::new();
    let mut handles = Vec::new();
    let mut replay = Vec::new();
    for i in 0..project.sources.len() {
        let control = ReplayControl::new(p.speed);
        // Holds at the end, so seek and Play go on from there.
        control.hold_at_end();
        replay.push(control.clone());
        let source = Source::spawn(
            SessionReplayDriver {
                db: db.clone(),
                session: p.id,
                source: i,
                control,
            },
            RunOptions {
                reconnect: Reconnect::off(),
                clock,
                ..RunOptions::default()
            },
        );
        let (chunks, handle) = source.into_parts();
        inputs.push((i, chunks));
        handles.push(handle);
    }
    let sources = handles.len();
    // A recorded session's raw bytes hold its pictures too: image views play back.
    let images = crate::images::ImageViews::of(&project);
    let recorder = Recorder::new(project);
    let tail = crate::tail::Tail::default();
    let mut sinks: Vec<Box<dyn sextant_devices::wiring::FrameSink>> = vec![
        Box::new(recorder.sink()),
        Box::new(tail.sink()),
        Box::new(ws.scope.sink()),
    ];
    if !images.is_empty() {
        sinks.push(Box::new(images.sink()));
    }
    let wiring = Wiring::start(pipeline, inputs, sinks, WiringOptions::default());
    // A session plays back what was received: nothing is sent, so no action is armed.
    let senders = handles
        .iter()
        .enumerate()
        .map(|(i, h)| crate::actions::Sender::new(h.clone(), i, ws.scope.clone(), clock))
        .collect();
    ws.live = Some(Live {
        handles,
        wiring: Some(wiring),
        recorder,
        tail,
        replay,
        senders,
        actions: Default::default(),
        images,
        // A session played back is no new measurement: nothing goes to the database.
        postgres: None,
    });
    ws.after_replay = Some(crate::workspace::PutAside {
        live_project,
        replaced_at,
    });
    ws.push_event(Event::Connected);
    Ok(Replaying {
        id: p.id,
        sources,
        project_replaced,
    })
}
