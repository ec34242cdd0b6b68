//! `io.*` (connecting the project's devices), `console.*` (sending to them) and
//! `dashboard.*` (what is on screen now).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sextant_commands::{CommandError, Registry, Tier};
use sextant_devices::connect::{start, NoSecrets};
use sextant_devices::publisher::MqttPublisherSink;
use sextant_devices::wiring::{CsvSink, FrameSink, Wiring, WiringOptions};
use sextant_devices::{Clock, RunOptions};
use sextant_sessions::Recorder;
use sextant_telemetry::checksum::ChecksumKind;
use sextant_telemetry::framing::parse_hex_bytes;
use sextant_telemetry::project::{LineEnding, MqttPublisher};
use sextant_telemetry::Pipeline;

use super::project::{Done, NoParams};
use crate::convert::value_to_json;
use crate::workspace::{Event, Live};
use crate::Workspace;

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SourceStatus {
    id: String,
    status: String,
    bytes: u64,
    chunks: u64,
    dropped_chunks: u64,
    frames: u64,
    checksum_failed: u64,
    oversize_dropped: u64,
    parse_errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
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
struct PublisherConfig {
    /// The publisher settings, stored in the project (the password stays in the keyring).
    publisher: MqttPublisher,
}

pub fn register(r: &mut Registry<Workspace>) {
    r.register(
        "csvExport.enable",
        Tier::Confirm,
        "Exports every parsed frame to a CSV file from the next io.connect on, on a writer \
         thread that never stalls ingestion.",
        |ws: &mut Workspace, p: CsvEnable| {
            ws.csv_export = Some(p.path);
            Ok(Done::detail(if ws.live.is_some() {
                "takes effect at the next io.connect"
            } else {
                "enabled"
            }))
        },
    );
    r.register(
        "csvExport.disable",
        Tier::Confirm,
        "Stops CSV export (from the next connect).",
        |ws: &mut Workspace, _: NoParams| {
            ws.csv_export = None;
            Ok(Done::ok())
        },
    );
    r.register(
        "csvExport.status",
        Tier::Safe,
        "The CSV export file, if enabled.",
        |ws: &mut Workspace, _: NoParams| {
            Ok(json!({ "enabled": ws.csv_export.is_some(), "path": ws.csv_export }))
        },
    );
    r.register(
        "mqtt.publisher.configure",
        Tier::Confirm,
        "Sets the MQTT publisher (frames as JSON or CSV at 1–30 Hz to a broker); used from the next io.connect.",
        |ws: &mut Workspace, p: PublisherConfig| {
            if !(1..=30).contains(&p.publisher.rate_hz) {
                return Err(CommandError::invalid("publisher.rateHz", "the publish rate must be 1 to 30 Hz"));
            }
            ws.edit("configure MQTT publisher", |proj| {
                proj.mqtt_publisher = Some(p.publisher);
                Ok(Done::ok())
            })
        },
    )
    .example(
        "publish JSON at 10 Hz",
        json!({"publisher": {"enabled": true, "host": "127.0.0.1", "port": 1883, "topic": "lab/rover/frames", "format": "json", "rateHz": 10}}),
    );
    r.register(
        "io.connect",
        Tier::Confirm,
        "Connects every source of the project and starts parsing.",
        |ws: &mut Workspace, _: NoParams| {
            if ws.live.is_some() {
                return Ok(Done::detail("already connected"));
            }
            let project = ws.project().clone();
            let pipeline =
                Pipeline::new(&project).map_err(|e| CommandError::failed(e.to_string()))?;
            let clock = Clock::start();
            let mut inputs = Vec::new();
            let mut handles = Vec::new();
            for (i, config) in project.sources.iter().enumerate() {
                let options = RunOptions {
                    clock,
                    ..RunOptions::default()
                };
                let (source, _) = start(config, i, options, &NoSecrets)
                    .map_err(|e| CommandError::failed(format!("source `{}`: {e}", config.id)))?;
                let (chunks, handle) = source.into_parts();
                inputs.push((i, chunks));
                handles.push(handle);
            }
            let mut sinks: Vec<Box<dyn FrameSink>> = Vec::new();
            if let Some(path) = &ws.csv_export {
                sinks.push(Box::new(CsvSink::new(path.clone())));
            }
            if let Some(config) = project.mqtt_publisher.as_ref().filter(|c| c.enabled) {
                let publisher = MqttPublisherSink::start(config, None)
                    .map_err(|e| CommandError::failed(format!("MQTT publisher: {e}")))?;
                sinks.push(Box::new(publisher));
            }
            // Idle until sessions.startRecording; closes its session when the sources end.
            let recorder = Recorder::new(project.clone());
            sinks.push(Box::new(recorder.sink()));
            let wiring = Wiring::start(pipeline, inputs, sinks, WiringOptions::default());
            ws.live = Some(Live {
                handles,
                wiring: Some(wiring),
                recorder,
            });
            ws.push_event(Event::Connected);
            Ok(Done::ok())
        },
    );
    r.register(
        "io.disconnect",
        Tier::Confirm,
        "Disconnects every source.",
        |ws: &mut Workspace, _: NoParams| {
            let Some(mut live) = ws.live.take() else {
                return Ok(Done::detail("not connected"));
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
            Ok(Done::ok())
        },
    );
    r.register(
        "io.status",
        Tier::Safe,
        "Status and counters of every source (connected, reconnecting, errors, drops).",
        |ws: &mut Workspace, _: NoParams| {
            let Some(live) = &ws.live else {
                return Ok(json!({ "connected": false, "sources": [] }));
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
            Ok(json!({ "connected": true, "sources": sources }))
        },
    );
    r.register(
        "dashboard.latestFrame",
        Tier::Safe,
        "The latest value of every dataset while connected.",
        |ws: &mut Workspace, _: NoParams| {
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
            Ok(json!({ "elapsedS": snap.last_timestamp.elapsed_s(), "values": values }))
        },
    );
    r.register(
        "console.send",
        Tier::DeviceGated,
        "Sends text or hex bytes to a connected device, with an optional line ending and checksum.",
        |ws: &mut Workspace, p: Send| {
            let mut bytes = if p.hex {
                parse_hex_bytes(&p.data)
                    .map_err(|e| CommandError::invalid("data", e.to_string()))?
            } else {
                p.data.into_bytes()
            };
            bytes.extend_from_slice(match p.line_ending {
                LineEnding::None => b"",
                LineEnding::Lf => b"\n",
                LineEnding::Cr => b"\r",
                LineEnding::CrLf => b"\r\n",
            });
            if let Some(kind) = p.checksum {
                let sum = kind.encode(&bytes);
                bytes.extend_from_slice(&sum);
            }
            let index = match &p.source {
                None => 0,
                Some(id) => ws
                    .project()
                    .sources
                    .iter()
                    .position(|s| &s.id == id)
                    .ok_or_else(|| CommandError::not_found(format!("no source has id `{id}`")))?,
            };
            let live = ws
                .live
                .as_ref()
                .ok_or_else(|| CommandError::failed("not connected; run io.connect first"))?;
            let handle = live
                .handles
                .get(index)
                .cloned()
                .ok_or_else(|| CommandError::failed("the project has no source to send to"))?;
            let n = bytes.len();
            // The write completes on the source's task; its outcome shows in io.status.
            tokio::spawn(async move {
                if let Err(e) = handle.write(bytes).await {
                    tracing::warn!(source = handle.name(), "console write failed: {e}");
                }
            });
            Ok(json!({ "queuedBytes": n }))
        },
    )
    .example(
        "a command with CRLF",
        json!({"data": "RESET", "lineEnding": "crLf"}),
    );
}
