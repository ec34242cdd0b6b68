//! `io.*` (connecting the project's devices), `console.*` (sending to them) and
//! `dashboard.*` (what is on screen now).
//!
//! `csvPlayer.open` reads the caller's CSV file on a job off the owner task
//! ([`Deferred::off_then`], through [`read_user_text`]); starting the replay happens on the
//! owner once the file has been read.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sextant_commands::{CommandError, Deferred, Registry, Tier};
use sextant_devices::connect::start;
use sextant_devices::publisher::MqttPublisherSink;
use sextant_devices::wiring::{CsvSink, FrameSink, Wiring, WiringOptions};
use sextant_devices::{Clock, RunOptions};
use sextant_sessions::Recorder;
use sextant_telemetry::checksum::ChecksumKind;
use sextant_telemetry::framing::parse_hex_bytes;
use sextant_telemetry::project::{Action, LineEnding, MqttPublisher, PostgresSink};
use sextant_telemetry::{Pipeline, Project};

use super::project::{Done, NoParams};
use crate::actions::{ActionTimers, Armed, Click, Sender};
use crate::convert::value_to_json;
use crate::user_file::{read_user_text, CSV_FILE};
use crate::workspace::{DashboardView, Event, Live, PutAside};
use crate::Workspace;

/// What `io.status` returns: whether a run is live, and each of its sources.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IoStatus {
    /// A run is live (`io.connect`); its sources may still be connecting or failing.
    pub connected: bool,
    /// The project's sources in order; empty when not connected.
    pub sources: Vec<SourceStatus>,
    /// The actions whose timer a click started and that still run (their buttons show it).
    pub running_actions: Vec<String>,
    /// The run is a replay that played to its end and holds there (its sources still
    /// answer, to be sought in): a person reads "replay ended", not "connected".
    pub replay_ended: bool,
    /// The project's PostgreSQL sink in this run; absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresStatus>,
}

/// The PostgreSQL sink of a live run: what went in, what was lost, and why not now.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostgresStatus {
    /// A connection to the server is up.
    pub connected: bool,
    /// Frames, and values (rows), in the table.
    pub written_frames: u64,
    pub written_rows: u64,
    /// Frames lost: the queue was full while the server was slow or away, or it refused them.
    pub dropped_frames: u64,
    /// Why values are not going in right now; absent while they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One source of a live run: its status and counters since it started.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// The source's id in the project.
    pub id: String,
    /// `connecting`, `connected`, `reconnecting (attempt N, next try in S s): reason`,
    /// `error: reason`, `finished` or `closed`.
    pub status: String,
    /// Bytes read from the device.
    pub bytes: u64,
    /// Reads from the device.
    pub chunks: u64,
    /// Reads thrown away because the pipeline's queue was full.
    pub dropped_chunks: u64,
    /// Frames cut from the bytes whose checksum (if any) passed.
    pub frames: u64,
    /// Frames whose checksum did not match.
    pub checksum_failed: u64,
    /// Frames dropped for being longer than the framing allows.
    pub oversize_dropped: u64,
    /// Frames the decoder (bad COBS/SLIP) or the parser rejected.
    pub parse_errors: u64,
    /// The most recent decode or parse error; absent when there was none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Send {
    /// Source id; the first source when absent.
    #[serde(default)]
    source: Option<String>,
    /// Text to send (escapes are not interpreted), or hex bytes with `hex: true`.
    data: String,
    #[serde(default)]
    hex: bool,
    #[serde(default)]
    line_ending: LineEnding,
    /// Append this checksum of the data (after the line ending is added).
    #[serde(default)]
    checksum: Option<ChecksumKind>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CsvEnable {
    /// CSV file to write (`elapsed_s, Group/Dataset, …`, one row per frame).
    path: std::path::PathBuf,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct McapEnable {
    /// MCAP file to write (`.mcap`): a channel per group of values and per source of raw
    /// bytes, as `sessions.export` writes.
    path: std::path::PathBuf,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PublisherConfig {
    /// The publisher settings, stored in the project (the password stays in the keyring).
    publisher: MqttPublisher,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PostgresConfig {
    /// The sink's settings, stored in the project (the password stays in the keyring).
    postgres: PostgresSink,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TailParams {
    /// How many of the newest frames (1 to 1000).
    #[serde(default = "hundred")]
    count: usize,
}

fn hundred() -> usize {
    100
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ViewParams {
    #[serde(default)]
    time_range_s: Option<f64>,
    #[serde(default)]
    points: Option<u32>,
    #[serde(default)]
    refresh_hz: Option<u32>,
    #[serde(default)]
    paused: Option<bool>,
}

/// A serial port, as listed for the Connect screen.
#[derive(Serialize, JsonSchema)]
struct SerialPort {
    /// Path to open (`/dev/ttyUSB0`, `COM3`).
    path: String,
    /// USB vendor/product/description when known.
    description: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ActionRun {
    /// Action id.
    id: String,
}

/// Starts every source of the project with the workspace's sinks (CSV export, MQTT
/// publisher, recorder, tail) on a fresh pipeline.
pub(crate) fn connect(ws: &mut Workspace) -> Result<(), CommandError> {
    let project = ws.project().clone();
    connect_project(ws, project)
}

/// [`connect`] for `project`, which reads like the open one (same datasets, in the same
/// order) but may take its data elsewhere (a CSV played into the open project).
pub(crate) fn connect_project(ws: &mut Workspace, project: Project) -> Result<(), CommandError> {
    let pipeline = Pipeline::new(&project).map_err(|e| CommandError::failed(e.to_string()))?;
    let clock = Clock::start();
    let mut inputs = Vec::new();
    let mut handles = Vec::new();
    let mut replay = Vec::new();
    let mut replayed = Vec::new();
    for (i, config) in project.sources.iter().enumerate() {
        let options = RunOptions {
            clock,
            ..RunOptions::default()
        };
        let secrets = crate::credentials::ProjectSecrets {
            vault: &ws.credentials,
            project_file: ws.path(),
        };
        let (source, extras) = start(config, i, options, &secrets)
            .map_err(|e| CommandError::failed(format!("source `{}`: {e}", config.id)))?;
        replayed.push(extras.replay.is_some());
        replay.extend(extras.replay);
        let (chunks, handle) = source.into_parts();
        inputs.push((i, chunks));
        handles.push(handle);
    }
    let mut sinks: Vec<Box<dyn FrameSink>> = Vec::new();
    ws.csv_export_run = None;
    if let Some(path) = &ws.csv_export {
        let sink = CsvSink::new(path.clone());
        ws.csv_export_run = Some(sink.status());
        sinks.push(Box::new(sink));
    }
    ws.mcap_export_run = None;
    if let Some(path) = &ws.mcap_export {
        let sink = sextant_export::McapSink::new(path.clone(), &project);
        ws.mcap_export_run = Some(sink.status());
        sinks.push(Box::new(sink));
    }
    if let Some(config) = project.mqtt_publisher.as_ref().filter(|c| c.enabled) {
        let credentials = ws
            .credentials
            .lookup(
                ws.path(),
                &crate::credentials::CredentialTarget::Publisher,
                &crate::credentials::Destination::of_publisher(config),
            )
            .map_err(|e| CommandError::failed(format!("MQTT publisher: {e}")))?;
        let publisher = MqttPublisherSink::start(config, &credentials)
            .map_err(|e| CommandError::failed(format!("MQTT publisher: {e}")))?;
        sinks.push(Box::new(publisher));
    }
    let mut postgres = None;
    // Replayed data is no new measurement: it would land in the table stamped with today's
    // time, beside the real rows. (Sessions played back never get here.)
    let replaying = !replay.is_empty();
    if let Some(config) = project
        .postgres
        .as_ref()
        .filter(|c| c.enabled && !replaying)
    {
        let credentials = ws
            .credentials
            .lookup(
                ws.path(),
                &crate::credentials::CredentialTarget::Postgres,
                &crate::credentials::Destination::of_postgres(config),
            )
            .map_err(|e| CommandError::failed(format!("PostgreSQL: {e}")))?;
        let target = sextant_postgres::Target {
            config: config.clone(),
            bench: sextant_postgres::bench_name(config, &project.title),
            credentials,
        };
        let (sink, handle) = sextant_postgres::PostgresSink::start(target, Default::default())
            .map_err(|e| CommandError::failed(format!("PostgreSQL: {e}")))?;
        postgres = Some(handle);
        sinks.push(Box::new(sink));
    }
    // Idle until sessions.startRecording; closes its session when the sources end.
    let recorder = Recorder::new(project.clone());
    sinks.push(Box::new(recorder.sink()));
    let tail = crate::tail::Tail::default();
    sinks.push(Box::new(tail.sink()));
    sinks.push(Box::new(ws.scope.sink()));
    let images = crate::images::ImageViews::of(&project);
    if !images.is_empty() {
        sinks.push(Box::new(images.sink()));
    }
    // A replay in the app holds at its end, so seek and Play go on from there.
    for control in &replay {
        control.hold_at_end();
    }
    let wiring = Wiring::start(pipeline, inputs, sinks, WiringOptions::default());
    let senders: Vec<Sender> = handles
        .iter()
        .enumerate()
        .map(|(i, h)| Sender::new(h.clone(), i, ws.scope.clone(), clock))
        .collect();
    // A replayed source is not a device: its actions stay unarmed.
    let armed = project
        .actions
        .iter()
        .filter_map(|a| arm(&project, &senders, a).ok())
        .filter(|a| !replayed[a.sender.index()])
        .collect();
    ws.live = Some(Live {
        handles,
        wiring: Some(wiring),
        recorder,
        tail,
        replay,
        senders,
        actions: ActionTimers::start(armed),
        images,
        postgres,
    });
    ws.push_event(Event::Connected);
    Ok(())
}

/// Stops the running sources, if any; whether there were some.
fn stop_sources(ws: &mut Workspace) -> bool {
    let Some(mut live) = ws.live.take() else {
        return false;
    };
    for h in &live.handles {
        let h = h.clone();
        tokio::spawn(async move { h.close().await });
    }
    // The pipeline thread ends once every source stream has; join it off this task.
    if let Some(w) = live.wiring.take() {
        std::thread::spawn(move || drop(w.join()));
    }
    ws.push_event(Event::Disconnected);
    true
}

/// Frees the sources for a replay: ends a running one (its project goes back) or stops the
/// live sources, remembered so they connect again when the replay stops. Refused while
/// recording, which would otherwise end without the person knowing.
pub(crate) fn make_room_for_replay(ws: &mut Workspace) -> Result<Option<Project>, CommandError> {
    if ws
        .live
        .as_ref()
        .is_some_and(|l| l.recorder.current().is_some())
    {
        return Err(CommandError::failed(
            "a recording is running; stop it first (sessions.stopRecording): a replay takes \
             the live sources' place",
        ));
    }
    if let Some(aside) = ws.after_replay.take() {
        stop_sources(ws);
        restore_project(ws, &aside);
        return Ok(aside.live_project);
    }
    let live = ws.live.is_some().then(|| ws.project().clone());
    stop_sources(ws);
    Ok(live)
}

/// Brings back the person's project after a replay that opened its own.
fn restore_project(ws: &mut Workspace, aside: &PutAside) {
    if aside.replaced_at == Some(ws.revision()) {
        ws.undo();
    }
}

/// Opens `project` (undoably, as `label`) and connects it; the revision it left the
/// workspace at. Nothing changes when it does not connect.
fn connect_own_project(
    ws: &mut Workspace,
    label: &str,
    project: Project,
) -> Result<u64, CommandError> {
    ws.replace(label, project, None)?;
    let at = ws.revision();
    if let Err(e) = connect(ws) {
        ws.undo();
        return Err(e);
    }
    Ok(at)
}

/// Undoes [`make_room_for_replay`] after a replay failed to start.
pub(crate) fn put_back(ws: &mut Workspace, live_project: Option<Project>) {
    if live_project.is_some_and(|p| p == *ws.project()) {
        if let Err(e) = connect(ws) {
            tracing::warn!("the live sources did not come back: {}", e.message);
        }
    }
}

/// The newest values as a JSON object, ignoring pause.
fn live_frame(ws: &Workspace) -> Json {
    let snap = ws
        .live
        .as_ref()
        .and_then(|l| l.wiring.as_ref())
        .map(|w| w.snapshot())
        .unwrap_or_default();
    let values: serde_json::Map<String, Json> = snap
        .datasets
        .iter()
        .zip(&snap.values)
        .map(|(d, v)| (d.id.clone(), value_to_json(v)))
        .collect();
    json!({ "elapsedS": snap.last_timestamp.elapsed_s(), "values": values })
}

fn latest_frame(ws: &Workspace) -> Json {
    ws.frozen.clone().unwrap_or_else(|| live_frame(ws))
}

/// Bytes to send: text or hex, then the line ending, then an optional checksum of both.
fn payload(
    data: &str,
    hex: bool,
    ending: LineEnding,
    checksum: Option<ChecksumKind>,
) -> Result<Vec<u8>, CommandError> {
    let mut bytes = if hex {
        parse_hex_bytes(data).map_err(|e| CommandError::invalid("data", e.to_string()))?
    } else {
        data.as_bytes().to_vec()
    };
    bytes.extend_from_slice(match ending {
        LineEnding::None => b"",
        LineEnding::Lf => b"\n",
        LineEnding::Cr => b"\r",
        LineEnding::CrLf => b"\r\n",
    });
    if let Some(kind) = checksum {
        let sum = kind.encode(&bytes);
        bytes.extend_from_slice(&sum);
    }
    Ok(bytes)
}

/// Queues `bytes` for source `index` of the live run.
pub(super) fn send_to(ws: &Workspace, index: usize, bytes: Vec<u8>) -> Result<Json, CommandError> {
    let sender = sender(ws, index)?;
    let n = bytes.len();
    // The write completes on the source's task; its outcome shows in io.status.
    sender
        .send_soon(bytes.into())
        .map_err(|busy| CommandError::failed(busy.message()))?;
    Ok(json!({ "queuedBytes": n }))
}

/// The live run's destination for source `index`.
fn sender(ws: &Workspace, index: usize) -> Result<Sender, CommandError> {
    let live = ws
        .live
        .as_ref()
        .ok_or_else(|| CommandError::failed("not connected; run io.connect first"))?;
    live.senders
        .get(index)
        .cloned()
        .ok_or_else(|| CommandError::failed("the project has no source to send to"))
}

/// `action` of `project` ready to send through `senders`: its bytes and its source.
fn arm(project: &Project, senders: &[Sender], action: &Action) -> Result<Armed, CommandError> {
    let bytes = payload(&action.payload, action.hex, action.line_ending, None)?;
    let index = match action.source.as_deref() {
        None => 0,
        Some(id) => project
            .sources
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| CommandError::not_found(format!("no source has id `{id}`")))?,
    };
    let sender = senders
        .get(index)
        .cloned()
        .ok_or_else(|| CommandError::failed("the project has no source to send to"))?;
    Ok(Armed {
        action: action.clone(),
        bytes: bytes.into(),
        sender,
    })
}

pub(super) fn source_position(ws: &Workspace, id: Option<&str>) -> Result<usize, CommandError> {
    match id {
        None => Ok(0),
        Some(id) => ws
            .project()
            .sources
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| CommandError::not_found(format!("no source has id `{id}`"))),
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CsvOpen {
    /// A CSV export (`elapsed_s, Group/Dataset, …`).
    path: std::path::PathBuf,
    /// 1 = real time, 10 = ten times faster, 0 = as fast as possible.
    #[serde(default = "one")]
    speed: f64,
    /// Play a file that is not an export of the open project in a project made from its
    /// columns (replacing the open one until the replay stops).
    #[serde(default)]
    replace_project: bool,
}

fn one() -> f64 {
    1.0
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReplayState {
    #[serde(default)]
    paused: Option<bool>,
    /// Release this many records while paused.
    #[serde(default)]
    step: Option<u32>,
    /// Jump to this many seconds into the recording.
    #[serde(default)]
    seek_s: Option<f64>,
    #[serde(default)]
    speed: Option<f64>,
}

/// Replays, actions, CSV export, the MQTT publisher, connecting, the dashboard and the console, one
/// line each; the handler of `io.connect` is `io_connect`, and so on, below in the same order. Kept
/// out of rustfmt so that each command stays one line.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    r.register_deferred("csvPlayer.open", Tier::Confirm, CSV_PLAYER_OPEN, csv_player_open);
    r.register("replay.setState", Tier::Safe, REPLAY_SET_STATE, replay_set_state);
    r.register("replay.getState", Tier::Safe, "Where every playing replay is: paused, speed, position and duration in seconds (empty when nothing replays).", replay_get_state);
    r.register("project.action.run", Tier::DeviceGated, "Sends an action's payload (text or hex, with its line ending) to its device now.", project_action_run);

    r.register("csvExport.enable", Tier::Confirm, CSV_EXPORT_ENABLE, csv_export_enable);
    r.register("csvExport.disable", Tier::Confirm, "Stops CSV export (from the next connect).", csv_export_disable);
    r.register("csvExport.status", Tier::Safe, "The CSV export file, if enabled.", csv_export_status);
    r.register("mcapExport.enable", Tier::Confirm, MCAP_EXPORT_ENABLE, mcap_export_enable);
    r.register("mcapExport.disable", Tier::Confirm, "Stops recording to MCAP (from the next connect).", mcap_export_disable);
    r.register("mcapExport.status", Tier::Safe, "The MCAP file recorded while connected, if enabled, and how far it got.", mcap_export_status);
    r.register("mqtt.publisher.configure", Tier::Confirm, "Sets the MQTT publisher (frames as JSON or CSV at 1–30 Hz to a broker); used from the next io.connect.", mqtt_publisher_configure)
        .example("publish JSON at 10 Hz", json!({"publisher": {"enabled": true, "host": "127.0.0.1", "port": 1883, "topic": "lab/rover/frames", "format": "json", "rateHz": 10}}));
    r.register("postgres.configure", Tier::Confirm, "Sets the PostgreSQL (or TimescaleDB) sink: every value of every frame as a row (time, bench, dataset, value, text) in a table, created when missing; used from the next io.connect. The password is entered by the person in the connection settings.", postgres_configure)
        .example("write to a lab database", json!({"postgres": {"enabled": true, "host": "db.lab.example", "port": 5432, "database": "telemetry", "user": "bench", "table": "sextant_samples", "bench": "rig-3", "tls": true}}));
    r.register("io.connect", Tier::Confirm, "Connects every source of the project and starts parsing. When the project's actions send by themselves (on connect, or a timer while connected), this call touches the device and is DeviceGated.", io_connect);
    r.register("io.disconnect", Tier::Confirm, "Disconnects every source.", io_disconnect);
    r.register("io.status", Tier::Safe, "Status and counters of every source (connected, reconnecting, errors, drops).", io_status);
    r.register("io.listSerialPorts", Tier::Safe, "Serial ports present on this machine now, with their USB description (call again after plugging a device in).", io_list_serial_ports);
    r.register("dashboard.latestFrame", Tier::Safe, "The latest value of every dataset while connected (frozen while the view is paused).", dashboard_latest_frame);
    r.register("io.recentBytes", Tier::Safe, "The newest raw bytes a source delivered in this run (up to 4096), as text when they are text, else as hex: what a changed parser can be dry-run on.", io_recent_bytes);
    r.register("dashboard.tail", Tier::Safe, "The last frames (up to 1000), oldest first, as rows of every dataset's value.", dashboard_tail);
    r.register("dashboard.getView", Tier::Safe, "The dashboard's time range, points per plot, refresh rate and pause state.", dashboard_get_view);
    r.register("dashboard.setView", Tier::Safe, "Changes how the dashboard shows data (view state only: the project is untouched).", dashboard_set_view)
        .example("last 30 s, paused", json!({"timeRangeS": 30, "paused": true}));
    r.register("console.send", Tier::DeviceGated, "Sends text or hex bytes to a connected device, with an optional line ending and checksum.", console_send)
        .example("a command with CRLF", json!({"data": "RESET", "lineEnding": "crLf"}));
}

const CSV_PLAYER_OPEN: &str =
    "Plays a CSV export through the pipeline in place of the live sources (which \
    connect again when it stops: io.disconnect). An export of the open project (every \
    dataset has its `Group/Dataset` column) plays into it, keeping its widgets, units \
    and tabs; any other file needs replaceProject: true and opens a project made from \
    its columns (undoable, and the open project comes back when the replay stops).";

fn csv_player_open(
    _: &mut Workspace,
    p: CsvOpen,
) -> Result<Deferred<Workspace, Json>, CommandError> {
    if !(p.speed.is_finite() && p.speed >= 0.0) {
        return Err(CommandError::invalid(
            "speed",
            "speed must be 0 (as fast as possible) or more",
        ));
    }
    let path = p.path.clone();
    Ok(Deferred::off_then(
        move || {
            let text = read_user_text(&path, CSV_FILE)?;
            let (columns, _) = sextant_devices::csv_replay::parse_csv(&text, &path)
                .map_err(|e| CommandError::failed(e.to_string()))?;
            Ok(columns)
        },
        move |ws, columns| play_csv(ws, p, columns),
    ))
}

/// Starts playing the CSV file of `p`, whose dataset columns are `columns`.
fn play_csv(ws: &mut Workspace, p: CsvOpen, columns: Vec<String>) -> Result<Json, CommandError> {
    let into_open =
        sextant_devices::csv_replay::project_playing_into(ws.project(), &columns, &p.path, p.speed);
    if let (Err(why), false) = (&into_open, p.replace_project) {
        return Err(CommandError::invalid(
            "replaceProject",
            format!(
                "{why}, so it cannot play into it; to play it in a project made from \
                 its columns instead (the open project comes back when the replay \
                 stops), run again with replaceProject: true"
            ),
        ));
    }
    let live_project = make_room_for_replay(ws)?;
    let started = match into_open {
        Ok(playback) => connect_project(ws, playback).map(|()| None),
        Err(_) => {
            let project = sextant_devices::csv_replay::project_for_csv(&columns, &p.path, p.speed);
            connect_own_project(ws, &format!("play {}", p.path.display()), project).map(Some)
        }
    };
    match started {
        Ok(replaced_at) => {
            ws.after_replay = Some(PutAside {
                live_project,
                replaced_at,
            });
            Ok(json!({ "datasets": columns.len(), "intoOpenProject": replaced_at.is_none() }))
        }
        Err(e) => {
            put_back(ws, live_project);
            Err(e)
        }
    }
}

const REPLAY_SET_STATE: &str =
    "Pauses, resumes, steps, seeks or changes the speed of every playing replay (captures, \
    CSV files, recorded sessions).";

fn replay_set_state(ws: &mut Workspace, p: ReplayState) -> Result<Json, CommandError> {
    let controls = ws
        .live
        .as_ref()
        .map(|l| l.replay.clone())
        .unwrap_or_default();
    if controls.is_empty() {
        return Err(CommandError::failed("nothing is replaying"));
    }
    for c in &controls {
        if let Some(speed) = p.speed {
            c.set_speed(speed);
        }
        if let Some(s) = p.seek_s {
            c.seek(std::time::Duration::from_secs_f64(s.max(0.0)));
        }
        match p.paused {
            Some(true) => c.pause(),
            Some(false) => c.resume(),
            None => {}
        }
        for _ in 0..p.step.unwrap_or(0) {
            c.step();
        }
    }
    Ok(json!({ "replays": controls.len(), "paused": controls[0].is_paused() }))
}

fn replay_get_state(ws: &mut Workspace, _: NoParams) -> Result<Json, CommandError> {
    let replays: Vec<Json> = ws
        .live
        .as_ref()
        .map(|l| {
            l.replay
                .iter()
                .map(|c| {
                    let p = c.progress();
                    json!({"paused": p.paused, "speed": p.speed, "atEnd": p.at_end,
                           "positionS": p.position_s, "durationS": p.duration_s})
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(json!({ "replays": replays }))
}

fn project_action_run(ws: &mut Workspace, p: ActionRun) -> Result<Json, CommandError> {
    let action = ws
        .project()
        .actions
        .iter()
        .find(|a| a.id == p.id)
        .cloned()
        .ok_or_else(|| CommandError::not_found(format!("no action has id `{}`", p.id)))?;
    let live = ws
        .live
        .as_ref()
        .ok_or_else(|| CommandError::failed("not connected; run io.connect first"))?;
    let armed = arm(ws.project(), &live.senders, &action)?;
    let queued = armed.bytes.len();
    let click = match ws.live.as_mut() {
        Some(live) => live
            .actions
            .click(armed)
            .map_err(|busy| CommandError::failed(busy.message()))?,
        None => unreachable!("checked above"),
    };
    let mut reply = json!({ "queuedBytes": queued, "timer": click.name() });
    if let Click::Repeating(times) = click {
        reply["repeats"] = json!(times);
    }
    Ok(reply)
}

const CSV_EXPORT_ENABLE: &str =
    "Exports every parsed frame to a CSV file from the next io.connect on, on a writer \
    thread that never stalls ingestion.";

fn csv_export_enable(ws: &mut Workspace, p: CsvEnable) -> Result<Done, CommandError> {
    ws.csv_export = Some(p.path);
    Ok(Done::detail(if ws.live.is_some() {
        "takes effect at the next io.connect"
    } else {
        "enabled"
    }))
}

fn csv_export_disable(ws: &mut Workspace, _: NoParams) -> Result<Done, CommandError> {
    ws.csv_export = None;
    Ok(Done::ok())
}

fn csv_export_status(ws: &mut Workspace, _: NoParams) -> Result<Json, CommandError> {
    let mut status = json!({ "enabled": ws.csv_export.is_some(), "path": ws.csv_export });
    // The export of the current run (or of the last one, once it ended): how far it got,
    // and why it stopped when it did (a full disk), which the person is shown.
    if let Some(run) = &ws.csv_export_run {
        status["rows"] = json!(run.rows.load(std::sync::atomic::Ordering::Relaxed));
        status["droppedRows"] = json!(run.dropped.load(std::sync::atomic::Ordering::Relaxed));
        if let Some(problem) = run.problem() {
            status["problem"] = json!(problem);
        }
    }
    Ok(status)
}

const MCAP_EXPORT_ENABLE: &str =
    "Records every raw chunk and parsed frame to an MCAP file from the next io.connect on, \
    for Foxglove Studio and PlotJuggler, on a writer thread that never stalls ingestion; the \
    file is complete when the connection ends.";

fn mcap_export_enable(ws: &mut Workspace, p: McapEnable) -> Result<Done, CommandError> {
    ws.mcap_export = Some(p.path);
    Ok(Done::detail(if ws.live.is_some() {
        "takes effect at the next io.connect"
    } else {
        "enabled"
    }))
}

fn mcap_export_disable(ws: &mut Workspace, _: NoParams) -> Result<Done, CommandError> {
    ws.mcap_export = None;
    Ok(Done::ok())
}

fn mcap_export_status(ws: &mut Workspace, _: NoParams) -> Result<Json, CommandError> {
    let mut status = json!({ "enabled": ws.mcap_export.is_some(), "path": ws.mcap_export });
    // The recording of the current run (or of the last one, once it ended).
    if let Some(run) = &ws.mcap_export_run {
        let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        status["frames"] = json!(count(&run.frames));
        status["chunks"] = json!(count(&run.chunks));
        status["dropped"] = json!(count(&run.dropped));
        if let Some(problem) = run.problem() {
            status["problem"] = json!(problem);
        }
    }
    Ok(status)
}

fn mqtt_publisher_configure(ws: &mut Workspace, p: PublisherConfig) -> Result<Done, CommandError> {
    if !(1..=30).contains(&p.publisher.rate_hz) {
        return Err(CommandError::invalid(
            "publisher.rateHz",
            "the publish rate must be 1 to 30 Hz",
        ));
    }
    ws.edit("configure MQTT publisher", |proj| {
        proj.mqtt_publisher = Some(p.publisher);
        Ok(Done::ok())
    })
}

fn postgres_configure(ws: &mut Workspace, p: PostgresConfig) -> Result<Done, CommandError> {
    sextant_postgres::TableName::parse(&p.postgres.table)
        .map_err(|e| CommandError::invalid("postgres.table", e.to_string()))?;
    if p.postgres.host.trim().is_empty() {
        return Err(CommandError::invalid(
            "postgres.host",
            "give the server's name or address",
        ));
    }
    for (field, value) in [
        ("postgres.database", &p.postgres.database),
        ("postgres.user", &p.postgres.user),
    ] {
        if value.trim().is_empty() || value.chars().any(char::is_control) {
            return Err(CommandError::invalid(field, "give a name on one line"));
        }
    }
    ws.edit("configure PostgreSQL sink", |proj| {
        proj.postgres = Some(p.postgres);
        Ok(Done::ok())
    })
}

fn io_connect(ws: &mut Workspace, _: NoParams) -> Result<Done, CommandError> {
    if ws.live.is_some() {
        return Ok(Done::detail("already connected"));
    }
    connect(ws)?;
    Ok(Done::ok())
}

fn io_disconnect(ws: &mut Workspace, _: NoParams) -> Result<Done, CommandError> {
    if !stop_sources(ws) {
        return Ok(Done::detail("not connected"));
    }
    // Stopping a replay brings back what it took the place of.
    let Some(aside) = ws.after_replay.take() else {
        return Ok(Done::ok());
    };
    restore_project(ws, &aside);
    match aside.live_project {
        Some(p) if p == *ws.project() => match connect(ws) {
            Ok(()) => Ok(Done::detail("replay stopped; the live sources are connected again")),
            Err(e) => Ok(Done::detail(format!(
                "replay stopped; the live sources did not connect again: {}",
                e.message
            ))),
        },
        Some(_) => Ok(Done::detail(
            "replay stopped; the project changed during the replay, so its sources wait for io.connect",
        )),
        None => Ok(Done::detail("replay stopped")),
    }
}

fn io_status(ws: &mut Workspace, _: NoParams) -> Result<IoStatus, CommandError> {
    let Some(live) = &ws.live else {
        return Ok(IoStatus {
            connected: false,
            sources: Vec::new(),
            running_actions: Vec::new(),
            replay_ended: false,
            postgres: None,
        });
    };
    let snap = live
        .wiring
        .as_ref()
        .map(|w| w.snapshot())
        .unwrap_or_default();
    let sources: Vec<SourceStatus> = ws
        .project()
        .sources
        .iter()
        .zip(&live.handles)
        .enumerate()
        .map(|(i, (s, h))| {
            let d = h.stats();
            let p = snap.sources.get(i).cloned().unwrap_or_default();
            SourceStatus {
                id: s.id.clone(),
                status: h.status().to_string(),
                bytes: d.bytes,
                chunks: d.chunks,
                dropped_chunks: d.dropped_chunks,
                frames: p.framing.frames,
                checksum_failed: p.framing.checksum_failed,
                oversize_dropped: p.framing.oversize_dropped,
                parse_errors: p.parse_errors + p.decode_errors,
                last_error: p.last_error,
            }
        })
        .collect();
    let running_actions = ws
        .project()
        .actions
        .iter()
        .filter(|a| live.actions.running(&a.id))
        .map(|a| a.id.clone())
        .collect();
    let replay_ended = !live.replay.is_empty() && live.replay.iter().all(|c| c.progress().at_end);
    let postgres = live.postgres.as_ref().map(|h| {
        let r = h.stats().report();
        PostgresStatus {
            connected: r.connected,
            written_frames: r.written_frames,
            written_rows: r.written_rows,
            dropped_frames: r.dropped_frames,
            problem: r.problem,
        }
    });
    Ok(IoStatus {
        connected: true,
        sources,
        running_actions,
        replay_ended,
        postgres,
    })
}

fn io_list_serial_ports(_: &mut Workspace, _: NoParams) -> Result<Vec<SerialPort>, CommandError> {
    let ports: Vec<SerialPort> = sextant_devices::serial::list_ports()
        .into_iter()
        .map(|p| SerialPort {
            path: p.path,
            description: p.description,
        })
        .collect();
    Ok(ports)
}

fn dashboard_latest_frame(ws: &mut Workspace, _: NoParams) -> Result<Json, CommandError> {
    Ok(latest_frame(ws))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecentBytesParams {
    /// The source's id; the first source when absent.
    #[serde(default)]
    source: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct RecentBytes {
    /// The bytes: text, or hex pairs (`AA 55 01`) when `hex`.
    data: String,
    hex: bool,
    /// How many bytes (0 while nothing arrived or nothing is connected).
    bytes: usize,
}

fn io_recent_bytes(ws: &mut Workspace, p: RecentBytesParams) -> Result<RecentBytes, CommandError> {
    let sources = &ws.project().sources;
    let index = match p.source.as_deref() {
        None if sources.is_empty() => {
            return Err(CommandError::failed(
                "the project has no source yet; add one first",
            ))
        }
        None => 0,
        Some(id) => sources
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| CommandError::not_found(format!("no source has id `{id}`")))?,
    };
    let bytes = ws
        .live
        .as_ref()
        .map(|live| live.tail.recent_bytes(index))
        .unwrap_or_default();
    // The ring may have cut a character in two at its start: drop that piece.
    let start = bytes
        .iter()
        .take(3)
        .take_while(|b| (0x80..0xC0).contains(*b))
        .count();
    let bytes = if std::str::from_utf8(&bytes[start..]).is_ok() {
        bytes[start..].to_vec()
    } else {
        bytes
    };
    let n = bytes.len();
    Ok(match String::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => RecentBytes {
            data: text,
            hex: false,
            bytes: n,
        },
        Ok(text) => RecentBytes {
            data: hex_pairs(text.as_bytes()),
            hex: true,
            bytes: n,
        },
        Err(e) => RecentBytes {
            data: hex_pairs(e.as_bytes()),
            hex: true,
            bytes: n,
        },
    })
}

fn hex_pairs(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn dashboard_tail(ws: &mut Workspace, p: TailParams) -> Result<Json, CommandError> {
    let Some(live) = &ws.live else {
        return Ok(json!({ "columns": [], "frames": [] }));
    };
    let (columns, frames) = live.tail.last(p.count.clamp(1, crate::tail::TAIL_FRAMES));
    Ok(json!({
        "columns": columns.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        "frames": frames
            .iter()
            .map(|(t, row)| json!({ "elapsedS": t, "values": row.iter().map(value_to_json).collect::<Vec<_>>() }))
            .collect::<Vec<_>>(),
    }))
}

fn dashboard_get_view(ws: &mut Workspace, _: NoParams) -> Result<DashboardView, CommandError> {
    Ok(ws.view.clone())
}

fn dashboard_set_view(ws: &mut Workspace, p: ViewParams) -> Result<DashboardView, CommandError> {
    // Check everything before changing anything: a bad field leaves the view as it was.
    if let Some(t) = p.time_range_s {
        if !(t.is_finite() && (0.1..=86_400.0).contains(&t)) {
            return Err(CommandError::invalid(
                "timeRangeS",
                "the time range must be 0.1 s to 24 h",
            ));
        }
    }
    if let Some(n) = p.points {
        if !(10..=1_000_000).contains(&n) {
            return Err(CommandError::invalid(
                "points",
                "points must be 10 to 1 000 000",
            ));
        }
    }
    if let Some(hz) = p.refresh_hz {
        // The display's own bounds, the one clamp of the rate (`sextant_display`).
        let (min, max) = (
            sextant_display::MIN_RATE_HZ as u32,
            sextant_display::MAX_RATE_HZ as u32,
        );
        if !(min..=max).contains(&hz) {
            return Err(CommandError::invalid(
                "refreshHz",
                format!("the refresh rate must be {min} to {max} Hz"),
            ));
        }
    }
    let before = ws.view.clone();
    if let Some(t) = p.time_range_s {
        ws.view.time_range_s = t;
    }
    if let Some(n) = p.points {
        ws.view.points = n;
    }
    if let Some(hz) = p.refresh_hz {
        ws.view.refresh_hz = hz;
    }
    if let Some(paused) = p.paused {
        // Freeze what the reads return; ingestion itself never pauses.
        ws.frozen = if paused { Some(live_frame(ws)) } else { None };
        ws.view.paused = paused;
    }
    // Every door's dashboard follows a change made from another (the assistant, the API).
    if ws.view != before {
        let view = ws.view.clone();
        ws.push_event(Event::ViewChanged { view });
    }
    Ok(ws.view.clone())
}

fn console_send(ws: &mut Workspace, p: Send) -> Result<Json, CommandError> {
    let bytes = payload(&p.data, p.hex, p.line_ending, p.checksum)?;
    let index = source_position(ws, p.source.as_deref())?;
    send_to(ws, index, bytes)
}
