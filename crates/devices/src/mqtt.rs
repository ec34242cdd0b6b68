//! MQTT subscriber (3.1.1 and 5) through `rumqttc`. One publish is one chunk.
//!
//! Reconnection is the runner's job, not rumqttc's: every (re)open builds a fresh client,
//! waits for the broker's CONNACK (so a bad password is reported as such), subscribes,
//! and only then reports the source connected. A broker restart therefore always ends
//! with the subscription restored. The password and TLS material are passed in at run
//! time from the secret store ([`Credentials`]); they are never part of the project.

use std::time::Duration;

use bytes::Bytes;
use sextant_telemetry::project::{MqttSettings, MqttVersion};
use sextant_telemetry::Timestamp;
use tokio::sync::mpsc;

use crate::source::{DeviceError, Driver, Link};
use crate::tls::{client_config, Credentials};

/// How long to wait for the broker's CONNACK and SUBACK.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

pub struct MqttDriver {
    settings: MqttSettings,
    credentials: Credentials,
    /// The settings' client id, or one made for this source (see [`default_client_id`]);
    /// the same on every reconnect, so a persistent session finds its subscription again.
    client_id: String,
    /// QoS of the subscription (0, 1 or 2).
    pub qos: u8,
}

/// A client id for a connection that was given none: unique among this process's
/// connections as well as among processes. A broker drops the older of two connections
/// with one id, so two MQTT sources of one project (or a source and the publisher) on one
/// broker sharing an id would knock each other off in turn. At most 23 characters, the
/// length MQTT 3.1.1 brokers must accept.
pub fn default_client_id(role: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let id = format!("sextant-{role}{}-{n}", std::process::id());
    id.chars().take(23).collect()
}

impl MqttDriver {
    pub fn new(settings: MqttSettings, credentials: Credentials) -> Result<Self, DeviceError> {
        if settings.topic.trim().is_empty() {
            return Err(DeviceError::fatal(
                "an MQTT source needs a topic filter (e.g. `sensors/#`)",
            ));
        }
        validate_filter(&settings.topic).map_err(DeviceError::fatal)?;
        let client_id = if settings.client_id.is_empty() {
            default_client_id("")
        } else {
            settings.client_id.clone()
        };
        Ok(MqttDriver {
            settings,
            credentials,
            client_id,
            qos: 1,
        })
    }

    fn client_id(&self) -> String {
        self.client_id.clone()
    }
}

/// Checks the wildcard rules: `#` only last and alone in its level, `+` alone in its level.
pub fn validate_filter(filter: &str) -> Result<(), String> {
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        if level.contains('#') && (*level != "#" || i != levels.len() - 1) {
            return Err(format!(
                "topic filter `{filter}`: `#` must be a whole last level, as in `a/b/#`"
            ));
        }
        if level.contains('+') && *level != "+" {
            return Err(format!(
                "topic filter `{filter}`: `+` must be a whole level, as in `a/+/c`"
            ));
        }
    }
    Ok(())
}

type Delivery = Result<Bytes, String>;

pub struct MqttLink {
    rx: mpsc::Receiver<Delivery>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MqttLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Link for MqttLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        match self.rx.recv().await {
            Some(Ok(payload)) => Ok(Some((payload, None))),
            Some(Err(e)) => Err(DeviceError::transient(e)),
            None => Err(DeviceError::transient("the MQTT connection ended")),
        }
    }
}

impl Driver for MqttDriver {
    type Link = MqttLink;

    fn describe(&self) -> String {
        format!(
            "mqtt {}:{} {}",
            self.settings.host, self.settings.port, self.settings.topic
        )
    }

    async fn open(&mut self) -> Result<MqttLink, DeviceError> {
        match self.settings.version {
            MqttVersion::V311 => self.open_v4().await,
            MqttVersion::V5 => self.open_v5().await,
        }
    }
}

fn connection_error(host: &str, port: u16, e: impl std::fmt::Display) -> DeviceError {
    DeviceError::transient(format!("MQTT broker {host}:{port}: {e}"))
}

/// The broker's own reason for refusing a connection, in words; fatal when retrying the
/// same sign-in cannot help (credentials, client id, protocol), retried otherwise.
fn refused(host: &str, port: u16, reason: &str, signed_in: bool) -> DeviceError {
    let (words, fatal) = match reason {
        "BadUserNamePassword" => ("wrong user name or password", true),
        "NotAuthorized" => ("not authorized", true),
        "BadAuthenticationMethod" => ("this way of signing in is not accepted", true),
        "Banned" => ("this client is banned", true),
        "BadClientId" | "ClientIdentifierNotValid" => ("the client id is not accepted", true),
        "RefusedProtocolVersion" | "UnsupportedProtocolVersion" => (
            "this MQTT version is not supported; try the other version",
            true,
        ),
        "ServiceUnavailable" | "ServerUnavailable" => ("the service is unavailable", false),
        "ServerBusy" => ("the broker is busy", false),
        "ConnectionRateExceeded" => ("too many connections too fast", false),
        _ => ("the connection was refused", false),
    };
    let hint = match (reason, signed_in) {
        ("BadUserNamePassword" | "NotAuthorized", true) => {
            "; check the user name, and enter the password again in the connection settings"
        }
        ("BadUserNamePassword" | "NotAuthorized", false) => {
            "; this broker wants a user name and password: enter them in the connection settings"
        }
        _ => "",
    };
    let text = format!("the broker at {host}:{port} refused the connection: {words}{hint}");
    if fatal {
        DeviceError::fatal(text)
    } else {
        DeviceError::transient(text)
    }
}

impl MqttDriver {
    /// The TLS transport when TLS is on: the stored CA, else the project's CA file, else
    /// the system's roots; a client certificate when one is stored.
    fn transport(&self) -> Result<Option<rumqttc::Transport>, DeviceError> {
        if !self.settings.tls {
            return Ok(None);
        }
        let config = client_config(&self.credentials, self.settings.ca_file.as_deref())?;
        Ok(Some(rumqttc::Transport::tls_with_config(
            rumqttc::TlsConfiguration::Rustls(config),
        )))
    }

    /// Whether a user name and password go with the CONNECT.
    fn signs_in(&self) -> bool {
        self.settings.username.is_some() && self.credentials.password.is_some()
    }

    async fn open_v4(&mut self) -> Result<MqttLink, DeviceError> {
        use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
        let s = &self.settings;
        let mut options = MqttOptions::new(self.client_id(), &s.host, s.port);
        options.set_keep_alive(Duration::from_secs(s.keep_alive_s.max(5) as u64));
        options.set_clean_session(s.clean_session);
        options.set_max_packet_size(16 * 1024 * 1024, 1024 * 1024);
        if let (Some(user), Some(pass)) = (&s.username, &self.credentials.password) {
            options.set_credentials(user, pass);
        }
        if let Some(t) = self.transport()? {
            options.set_transport(t);
        }
        let (client, mut events) = AsyncClient::new(options, 64);
        let qos = match self.qos {
            0 => QoS::AtMostOnce,
            2 => QoS::ExactlyOnce,
            _ => QoS::AtLeastOnce,
        };
        let (host, port, signed_in) = (s.host.clone(), s.port, self.signs_in());
        let handshake = async {
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => break,
                    Ok(_) => {}
                    Err(rumqttc::ConnectionError::ConnectionRefused(code)) => {
                        return Err(refused(&host, port, &format!("{code:?}"), signed_in))
                    }
                    Err(e) => return Err(connection_error(&host, port, e)),
                }
            }
            client
                .subscribe(s.topic.clone(), qos)
                .await
                .map_err(|e| DeviceError::transient(format!("subscribe failed: {e}")))?;
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::SubAck(ack))) => {
                        if ack
                            .return_codes
                            .iter()
                            .any(|c| matches!(c, rumqttc::SubscribeReasonCode::Failure))
                        {
                            return Err(DeviceError::fatal(format!(
                                "the broker refused the subscription to `{}`",
                                s.topic
                            )));
                        }
                        return Ok(());
                    }
                    Ok(_) => {}
                    Err(e) => return Err(connection_error(&host, port, e)),
                }
            }
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .map_err(|_| {
                DeviceError::transient(format!("MQTT broker {host}:{port} did not answer in time"))
            })??;
        let (tx, rx) = mpsc::channel::<Delivery>(1024);
        let task = tokio::spawn(async move {
            // Keeps the client alive for as long as the event loop runs.
            let _client = client;
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        if tx.send(Ok(p.payload)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.send(Err(format!("MQTT connection lost: {e}"))).await;
                        return;
                    }
                }
            }
        });
        Ok(MqttLink { rx, task })
    }

    async fn open_v5(&mut self) -> Result<MqttLink, DeviceError> {
        use rumqttc::v5::mqttbytes::v5::Packet;
        use rumqttc::v5::mqttbytes::QoS;
        use rumqttc::v5::{AsyncClient, Event, MqttOptions};
        let s = &self.settings;
        let mut options = MqttOptions::new(self.client_id(), &s.host, s.port);
        options.set_keep_alive(Duration::from_secs(s.keep_alive_s.max(5) as u64));
        options.set_clean_start(s.clean_session);
        options.set_max_packet_size(Some(16 * 1024 * 1024));
        if let (Some(user), Some(pass)) = (&s.username, &self.credentials.password) {
            options.set_credentials(user, pass);
        }
        if let Some(t) = self.transport()? {
            options.set_transport(t);
        }
        let (client, mut events) = AsyncClient::new(options, 64);
        let qos = match self.qos {
            0 => QoS::AtMostOnce,
            2 => QoS::ExactlyOnce,
            _ => QoS::AtLeastOnce,
        };
        let (host, port, signed_in) = (s.host.clone(), s.port, self.signs_in());
        let handshake = async {
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => break,
                    Ok(_) => {}
                    Err(rumqttc::v5::ConnectionError::ConnectionRefused(code)) => {
                        return Err(refused(&host, port, &format!("{code:?}"), signed_in))
                    }
                    Err(e) => return Err(connection_error(&host, port, e)),
                }
            }
            client
                .subscribe(s.topic.clone(), qos)
                .await
                .map_err(|e| DeviceError::transient(format!("subscribe failed: {e}")))?;
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::SubAck(_))) => return Ok(()),
                    Ok(_) => {}
                    Err(e) => return Err(connection_error(&host, port, e)),
                }
            }
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .map_err(|_| {
                DeviceError::transient(format!("MQTT broker {host}:{port} did not answer in time"))
            })??;
        let (tx, rx) = mpsc::channel::<Delivery>(1024);
        let task = tokio::spawn(async move {
            let _client = client;
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        if tx.send(Ok(p.payload)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.send(Err(format!("MQTT connection lost: {e}"))).await;
                        return;
                    }
                }
            }
        });
        Ok(MqttLink { rx, task })
    }
}

#[cfg(test)]
mod tests {
    use super::validate_filter;

    #[test]
    fn wildcard_rules() {
        for ok in ["#", "a/#", "a/+/c", "+", "+/+", "a/b"] {
            assert!(validate_filter(ok).is_ok(), "{ok}");
        }
        for bad in ["a/#/c", "a#", "a/b+", "#/a"] {
            assert!(validate_filter(bad).is_err(), "{bad}");
        }
    }
}
