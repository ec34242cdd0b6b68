//! The MQTT publisher: parsed frames out to a broker at 1–30 Hz, as JSON or CSV.
//!
//! The pipeline thread only overwrites a "latest frame" slot (it never waits); a task of
//! its own wakes at the publish rate and sends the newest frame, if there is a new one.
//! This is how a fleet outgrows one machine: many Sextant instances publish to one broker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::{AsyncClient, MqttOptions, QoS, Transport};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::project::{MqttPublisher, PublishFormat};
use sextant_telemetry::{FrameEvent, Value};

use crate::source::DeviceError;
use crate::tls::{client_config, Credentials};
use crate::wiring::FrameSink;

/// Counters of a publisher.
#[derive(Debug, Default)]
pub struct PublisherStats {
    pub published: AtomicU64,
    /// Frames that arrived between two publish ticks and were superseded (by design).
    pub superseded: AtomicU64,
    pub errors: AtomicU64,
}

/// The newest frame, overwritten in place (no allocation per frame in the steady state).
struct Latest {
    fresh: bool,
    t: f64,
    values: Vec<Value>,
    columns: Vec<String>,
}

/// A [`FrameSink`] that publishes the newest frame at a fixed rate.
pub struct MqttPublisherSink {
    latest: Arc<Mutex<Latest>>,
    pub stats: Arc<PublisherStats>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

fn csv_line(t: f64, values: &[Value]) -> String {
    sextant_telemetry::csv::record(t, values)
}

fn json_payload(t: f64, columns: &[String], values: &[Value]) -> String {
    let mut map = serde_json::Map::new();
    for (c, v) in columns.iter().zip(values) {
        let j = match v {
            Value::Number(n) => serde_json::Number::from_f64(*n)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Value::Text(t) => serde_json::Value::String(t.clone()),
            Value::Null => serde_json::Value::Null,
        };
        map.insert(c.clone(), j);
    }
    serde_json::json!({ "elapsedS": t, "values": map }).to_string()
}

impl MqttPublisherSink {
    /// Starts publishing per `config` (must be called inside a tokio runtime). The password
    /// and TLS material, if any, come from the secret store, never from the project.
    pub fn start(config: &MqttPublisher, credentials: &Credentials) -> Result<Self, DeviceError> {
        if !(1..=30).contains(&config.rate_hz) {
            return Err(DeviceError::fatal(format!(
                "publish rate {} Hz is out of range (1 to 30)",
                config.rate_hz
            )));
        }
        if config.topic.is_empty() || config.topic.contains(['+', '#']) {
            return Err(DeviceError::fatal(format!(
                "`{}` cannot be published to: give a topic without wildcards",
                config.topic
            )));
        }
        if config.format == PublishFormat::Raw {
            return Err(DeviceError::fatal(
                "raw-byte publishing is not available yet; use json or csv",
            ));
        }
        let client_id = if config.client_id.is_empty() {
            crate::mqtt::default_client_id("pub")
        } else {
            config.client_id.clone()
        };
        let mut options = MqttOptions::new(client_id, &config.host, config.port);
        options.set_keep_alive(Duration::from_secs(30));
        if let (Some(user), Some(pass)) = (&config.username, &credentials.password) {
            options.set_credentials(user, pass);
        }
        if config.tls {
            let tls = client_config(credentials, None)?;
            options.set_transport(Transport::tls_with_config(
                rumqttc::TlsConfiguration::Rustls(tls),
            ));
        }
        let (client, mut events) = AsyncClient::new(options, 64);
        let latest = Arc::new(Mutex::new(Latest {
            fresh: false,
            t: 0.0,
            values: Vec::new(),
            columns: Vec::new(),
        }));
        let stats = Arc::new(PublisherStats::default());
        let (slot, counters, topic, format) = (
            latest.clone(),
            stats.clone(),
            config.topic.clone(),
            config.format,
        );
        let period = Duration::from_secs_f64(1.0 / config.rate_hz as f64);
        // rumqttc reconnects by itself when polled again after an error; back off a little.
        let pump = tokio::spawn(async move {
            loop {
                if events.poll().await.is_err() {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        });
        let publish = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            loop {
                tick.tick().await;
                let next = {
                    let mut l = slot.lock().unwrap_or_else(|p| p.into_inner());
                    if !l.fresh {
                        continue;
                    }
                    l.fresh = false;
                    (l.t, l.values.clone(), l.columns.clone())
                };
                let (t, values, columns) = next;
                let payload = match format {
                    PublishFormat::Csv => csv_line(t, &values),
                    _ => json_payload(t, &columns, &values),
                };
                match client.try_publish(topic.clone(), QoS::AtMostOnce, false, payload) {
                    Ok(()) => counters.published.fetch_add(1, Ordering::Relaxed),
                    Err(_) => counters.errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        });
        Ok(MqttPublisherSink {
            latest,
            stats,
            tasks: [pump, publish],
        })
    }
}

impl Drop for MqttPublisherSink {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl FrameSink for MqttPublisherSink {
    fn frame(&mut self, event: &FrameEvent<'_>, datasets: &[DatasetInfo]) {
        let mut l = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        if l.columns.len() != datasets.len() {
            l.columns = datasets.iter().map(|d| d.column()).collect();
        }
        if l.fresh {
            self.stats.superseded.fetch_add(1, Ordering::Relaxed);
        }
        l.fresh = true;
        l.t = event.timestamp.elapsed_s();
        l.values.clone_from_slice_or_extend(event.values);
    }
}

/// `clone_from_slice` that also copes with a change of length (quick-plot datasets grow).
trait CloneFromSliceOrExtend {
    fn clone_from_slice_or_extend(&mut self, src: &[Value]);
}

impl CloneFromSliceOrExtend for Vec<Value> {
    fn clone_from_slice_or_extend(&mut self, src: &[Value]) {
        if self.len() == src.len() {
            self.clone_from_slice(src);
        } else {
            self.clear();
            self.extend_from_slice(src);
        }
    }
}
