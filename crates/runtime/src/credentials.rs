//! Source credentials: an MQTT or PostgreSQL password, the TLS certificate authority a source trusts, a
//! client certificate and its key – kept in the secret store (the OS keyring, or the
//! encrypted file where there is none), never in the project, and set only by a person.
//!
//! - **Keyed by project file and source.** One entry per (project file, source id), or per
//!   project file for the MQTT publisher and for the PostgreSQL sink. Another project with a source of the same id
//!   gets nothing.
//! - **Bound to where they go.** Each entry records the destination the person gave it
//!   for: kind, host, port and whether TLS is on. A source whose destination differs –
//!   a host changed by anyone, a model's edit included, or TLS turned off – does not get
//!   them, and its connect says why, so a password can never be redirected to another
//!   broker or sent in clear text by an edit nobody looked at.
//! - **Set only through a person's door.** [`crate::RuntimeHandle::credentials`] is not a
//!   registry command: the assistant, MCP and the TCP API cannot reach it. The desktop
//!   app's own window and the served UI (whose page proved the door's secret) call it.
//!   What they get back says which parts are saved and for which destination; a value
//!   never leaves the store except into the driver that uses it.
//! - **Any size, any keyring.** Windows' Credential Manager holds at most 2.5 KB per entry
//!   and a certificate chain is larger, so an entry over [`PART_LEN`] is stored in parts.

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sextant_commands::CommandError;
use sextant_devices::connect::Secrets;
use sextant_devices::tls::{check_certificates, check_private_key};
use sextant_devices::{Credentials, DeviceError};
use sextant_secrets::{Backend, SecretStore};
use sextant_telemetry::project::{Connection, MqttPublisher, PostgresSink, Source};
use sha2::{Digest, Sha256};

/// How long one look into the secret store may take before the caller gives up.
const STORE_TIMEOUT: Duration = Duration::from_secs(15);
/// The longest value stored as one keyring entry (well under Windows' 2 560 bytes).
const PART_LEN: usize = 1000;

/// What credentials are for: a source of the project, or the project's MQTT publisher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum CredentialTarget {
    /// The project's source with this id.
    Source { id: String },
    /// The project's MQTT publisher.
    Publisher,
    /// The project's PostgreSQL sink.
    Postgres,
}

/// Where credentials were given for; they go nowhere else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Protocol {
    Mqtt,
    Tcp,
    Postgres,
}

impl Destination {
    /// Where `source` connects, for the sources that can use credentials.
    pub fn of_source(source: &Source) -> Option<Destination> {
        match &source.connection {
            Connection::Mqtt(m) => Some(Destination {
                protocol: Protocol::Mqtt,
                host: m.host.trim().to_string(),
                port: m.port,
                tls: m.tls,
            }),
            Connection::Tcp { host, port, tls } => Some(Destination {
                protocol: Protocol::Tcp,
                host: host.trim().to_string(),
                port: *port,
                tls: *tls,
            }),
            _ => None,
        }
    }

    pub fn of_publisher(p: &MqttPublisher) -> Destination {
        Destination {
            protocol: Protocol::Mqtt,
            host: p.host.trim().to_string(),
            port: p.port,
            tls: p.tls,
        }
    }

    pub fn of_postgres(p: &PostgresSink) -> Destination {
        Destination {
            protocol: Protocol::Postgres,
            host: p.host.trim().to_string(),
            port: p.port,
            tls: p.tls,
        }
    }

    fn describe(&self) -> String {
        let what = match self.protocol {
            Protocol::Mqtt => "the MQTT broker",
            Protocol::Tcp => "the device",
            Protocol::Postgres => "the PostgreSQL server",
        };
        let tls = if self.tls {
            " over TLS"
        } else {
            " without TLS"
        };
        format!("{what} at {}:{}{tls}", self.host, self.port)
    }
}

/// One entry as stored (JSON, in the secret store).
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Entry {
    #[serde(rename = "for")]
    destination: Option<Destination>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca_pem: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_cert_pem: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_key_pem: Option<String>,
}

impl Entry {
    fn is_empty(&self) -> bool {
        self.password.is_none()
            && self.ca_pem.is_none()
            && self.client_cert_pem.is_none()
            && self.client_key_pem.is_none()
    }

    fn credentials(&self) -> Credentials {
        Credentials {
            password: self.password.clone(),
            ca_pem: self.ca_pem.clone(),
            client_cert_pem: self.client_cert_pem.clone(),
            client_key_pem: self.client_key_pem.clone(),
        }
    }
}

/// What a person's door asks of the credentials.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "op", deny_unknown_fields)]
pub enum CredentialsRequest {
    /// Which parts are saved for `target`, and for which destination.
    Status { target: CredentialTarget },
    /// Saves the parts given for `target`, bound to `destination` (what the person sees in
    /// the form they typed them into). Parts not given are kept when the destination is
    /// the one they were saved for, and dropped otherwise; `clear` removes parts.
    Set {
        target: CredentialTarget,
        destination: Destination,
        #[serde(default)]
        password: Option<String>,
        // Named one by one: `rename_all` on an enum renames its variants, not their fields.
        #[serde(default, rename = "caPem")]
        ca_pem: Option<String>,
        #[serde(default, rename = "clientCertPem")]
        client_cert_pem: Option<String>,
        #[serde(default, rename = "clientKeyPem")]
        client_key_pem: Option<String>,
        #[serde(default)]
        clear: Vec<CredentialPart>,
    },
    /// Removes everything saved for `target`.
    Forget { target: CredentialTarget },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CredentialPart {
    Password,
    CaCertificate,
    ClientCertificate,
    ClientKey,
}

/// What the door answers: which parts are saved – never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialStatus {
    pub password: bool,
    pub ca_certificate: bool,
    pub client_certificate: bool,
    pub client_key: bool,
    /// The destination they were saved for; null when nothing is saved.
    pub saved_for: Option<Destination>,
    /// Where they are kept.
    pub store: Option<Backend>,
}

/// Why a credentials request failed, in words for the person.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("{0}")]
    Invalid(String),
    #[error("the secret store could not be used: {0}")]
    Store(String),
    #[error("there is no secret store in this mode, so credentials cannot be saved")]
    NoStore,
}

impl From<CredentialError> for CommandError {
    fn from(e: CredentialError) -> CommandError {
        match e {
            CredentialError::Invalid(m) => CommandError::invalid("", m),
            other => CommandError::failed(other.to_string()),
        }
    }
}

/// The secret store the credentials live in, opened on first use (opening probes the OS
/// keyring, which can take seconds). Cheap to clone.
#[derive(Clone, Default)]
pub struct CredentialVault {
    inner: Arc<Mutex<Opening>>,
}

#[derive(Default)]
enum Opening {
    #[default]
    None,
    Later(std::path::PathBuf),
    Open(SecretStore),
}

impl CredentialVault {
    /// No store: nothing is found and nothing can be saved (tests, one-off command lines).
    pub fn none() -> CredentialVault {
        CredentialVault::default()
    }

    /// The OS keyring, or an encrypted file in `fallback_dir` – opened at first use.
    pub fn open(fallback_dir: &Path) -> CredentialVault {
        CredentialVault {
            inner: Arc::new(Mutex::new(Opening::Later(fallback_dir.to_path_buf()))),
        }
    }

    /// This store.
    pub fn with_store(store: SecretStore) -> CredentialVault {
        CredentialVault {
            inner: Arc::new(Mutex::new(Opening::Open(store))),
        }
    }

    fn store(&self) -> Option<SecretStore> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Opening::Later(dir) = &*inner {
            *inner = Opening::Open(SecretStore::open(dir));
        }
        match &*inner {
            Opening::Open(store) => Some(store.clone()),
            _ => None,
        }
    }

    /// Runs `f` on the store off this thread, giving up after [`STORE_TIMEOUT`] (a keyring
    /// waiting for an unlock prompt nobody sees must not hang a connect).
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&SecretStore) -> Result<T, CredentialError> + Send + 'static,
    ) -> Result<T, CredentialError> {
        let vault = self.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let result = match vault.store() {
                Some(store) => f(&store),
                None => Err(CredentialError::NoStore),
            };
            let _ = tx.send(result);
        });
        rx.recv_timeout(STORE_TIMEOUT).unwrap_or_else(|_| {
            Err(CredentialError::Store(
                "the keyring did not answer in time; unlock it and try again".into(),
            ))
        })
    }

    /// Answers a person's request for the project file `project_file`.
    pub fn handle(
        &self,
        project_file: Option<&Path>,
        request: CredentialsRequest,
    ) -> Result<CredentialStatus, CredentialError> {
        let (target, set) = match request {
            CredentialsRequest::Status { target } => (target, None),
            CredentialsRequest::Forget { target } => {
                let name = entry_name(project_file, &target);
                self.run(move |store| write_entry(store, &name, &Entry::default()))?;
                return self.status(project_file, &target);
            }
            CredentialsRequest::Set {
                target,
                destination,
                password,
                ca_pem,
                client_cert_pem,
                client_key_pem,
                clear,
            } => {
                check_destination(&destination)?;
                if let Some(pem) = &ca_pem {
                    check_certificates(pem, "the CA certificate")
                        .map_err(CredentialError::Invalid)?;
                }
                if let Some(pem) = &client_cert_pem {
                    check_certificates(pem, "the client certificate")
                        .map_err(CredentialError::Invalid)?;
                }
                if let Some(pem) = &client_key_pem {
                    check_private_key(pem).map_err(CredentialError::Invalid)?;
                }
                if password
                    .as_deref()
                    .is_some_and(|p| p.chars().any(char::is_control))
                {
                    return Err(CredentialError::Invalid(
                        "a password cannot contain control characters".into(),
                    ));
                }
                let update = Entry {
                    destination: Some(destination),
                    password,
                    ca_pem,
                    client_cert_pem,
                    client_key_pem,
                };
                (target, Some((update, clear)))
            }
        };
        if let Some((update, clear)) = set {
            let name = entry_name(project_file, &target);
            self.run(move |store| {
                let old = read_entry(store, &name)?;
                // Parts saved for another destination are not carried over to this one.
                let mut entry = if old.destination == update.destination {
                    old
                } else {
                    Entry::default()
                };
                entry.destination = update.destination;
                entry.password = update.password.or(entry.password);
                entry.ca_pem = update.ca_pem.or(entry.ca_pem);
                entry.client_cert_pem = update.client_cert_pem.or(entry.client_cert_pem);
                entry.client_key_pem = update.client_key_pem.or(entry.client_key_pem);
                for part in clear {
                    match part {
                        CredentialPart::Password => entry.password = None,
                        CredentialPart::CaCertificate => entry.ca_pem = None,
                        CredentialPart::ClientCertificate => entry.client_cert_pem = None,
                        CredentialPart::ClientKey => entry.client_key_pem = None,
                    }
                }
                write_entry(store, &name, &entry)
            })?;
        }
        self.status(project_file, &target)
    }

    fn status(
        &self,
        project_file: Option<&Path>,
        target: &CredentialTarget,
    ) -> Result<CredentialStatus, CredentialError> {
        let name = entry_name(project_file, target);
        let (entry, backend) =
            self.run(move |store| Ok((read_entry(store, &name)?, store.backend())))?;
        let empty = entry.is_empty();
        Ok(CredentialStatus {
            password: entry.password.is_some(),
            ca_certificate: entry.ca_pem.is_some(),
            client_certificate: entry.client_cert_pem.is_some(),
            client_key: entry.client_key_pem.is_some(),
            saved_for: entry.destination.filter(|_| !empty),
            store: Some(backend),
        })
    }

    /// The credentials saved for `target` of `project_file`, when they were given for
    /// `destination`; an error naming both when they were given for somewhere else.
    pub fn lookup(
        &self,
        project_file: Option<&Path>,
        target: &CredentialTarget,
        destination: &Destination,
    ) -> Result<Credentials, DeviceError> {
        if matches!(
            &*self.inner.lock().unwrap_or_else(|e| e.into_inner()),
            Opening::None
        ) {
            return Ok(Credentials::default());
        }
        let name = entry_name(project_file, target);
        let entry = self
            .run(move |store| read_entry(store, &name))
            .map_err(|e| DeviceError::transient(e.to_string()))?;
        if entry.is_empty() {
            return Ok(Credentials::default());
        }
        match &entry.destination {
            Some(saved) if saved == destination => Ok(entry.credentials()),
            Some(saved) => Err(DeviceError::fatal(format!(
                "the saved password and certificates were given for {}, and this \
                 connection now goes to {}; enter them again in the connection settings \
                 (or forget them there)",
                saved.describe(),
                destination.describe()
            ))),
            None => Ok(Credentials::default()),
        }
    }

    /// Copies what is saved for `targets` under `from` to `to` (a project saved under a
    /// new name keeps its sources' credentials). Best effort: a failure is logged.
    pub fn copy(&self, from: Option<&Path>, to: &Path, targets: Vec<CredentialTarget>) {
        let names: Vec<(String, String)> = targets
            .iter()
            .map(|t| (entry_name(from, t), entry_name(Some(to), t)))
            .collect();
        let copied = self.run(move |store| {
            for (from, to) in names {
                let entry = read_entry(store, &from)?;
                if !entry.is_empty() {
                    write_entry(store, &to, &entry)?;
                }
            }
            Ok(())
        });
        if let Err(e) = copied {
            if !matches!(e, CredentialError::NoStore) {
                tracing::warn!("credentials were not copied to the project's new file: {e}");
            }
        }
    }
}

fn check_destination(d: &Destination) -> Result<(), CredentialError> {
    if d.host.trim().is_empty() || d.host.chars().any(char::is_control) {
        return Err(CredentialError::Invalid(
            "give the host the credentials are for".into(),
        ));
    }
    Ok(())
}

/// The store's name for one entry: a digest of the project file and the target, so names
/// say nothing about the project and any source id fits.
fn entry_name(project_file: Option<&Path>, target: &CredentialTarget) -> String {
    let mut h = Sha256::new();
    h.update(crate::safeguards::project_key(project_file).as_bytes());
    h.update([0]);
    match target {
        CredentialTarget::Source { id } => {
            h.update(b"source\0");
            h.update(id.as_bytes());
        }
        CredentialTarget::Publisher => h.update(b"publisher"),
        CredentialTarget::Postgres => h.update(b"postgres"),
    }
    let digest = h.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("source-credentials-{hex}")
}

fn store_error(e: sextant_secrets::SecretError) -> CredentialError {
    CredentialError::Store(e.to_string())
}

/// An entry stored in more than one part says so in its first: `parts:N`.
fn read_entry(store: &SecretStore, name: &str) -> Result<Entry, CredentialError> {
    let Some(head) = store.get(name).map_err(store_error)? else {
        return Ok(Entry::default());
    };
    let text = match head
        .strip_prefix("parts:")
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n) => {
            let mut text = String::new();
            for i in 1..=n {
                match store.get(&format!("{name}/{i}")).map_err(store_error)? {
                    Some(part) => text.push_str(&part),
                    None => {
                        return Err(CredentialError::Store(
                            "a saved certificate is incomplete; enter the credentials again".into(),
                        ))
                    }
                }
            }
            text
        }
        None => head,
    };
    serde_json::from_str(&text).map_err(|_| {
        CredentialError::Store("the saved credentials cannot be read; enter them again".into())
    })
}

fn write_entry(store: &SecretStore, name: &str, entry: &Entry) -> Result<(), CredentialError> {
    let old_parts = match store.get(name).map_err(store_error)? {
        Some(head) => head
            .strip_prefix("parts:")
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0),
        None => 0,
    };
    let mut parts = 0;
    if entry.is_empty() {
        store.delete(name).map_err(store_error)?;
    } else {
        let text = serde_json::to_string(entry).expect("an entry serializes");
        if text.len() <= PART_LEN {
            store.set(name, &text).map_err(store_error)?;
        } else {
            // JSON of PEM text is ASCII, but cut on character boundaries all the same.
            let chars: Vec<char> = text.chars().collect();
            let pieces: Vec<String> = chars.chunks(PART_LEN).map(|c| c.iter().collect()).collect();
            parts = pieces.len();
            for (i, piece) in pieces.iter().enumerate() {
                store
                    .set(&format!("{name}/{}", i + 1), piece)
                    .map_err(store_error)?;
            }
            // The head last: a reader sees the old entry or the whole new one.
            store
                .set(name, &format!("parts:{parts}"))
                .map_err(store_error)?;
        }
    }
    for i in parts + 1..=old_parts {
        store.delete(&format!("{name}/{i}")).map_err(store_error)?;
    }
    Ok(())
}

/// The credentials of a project's sources, as the drivers ask for them.
pub struct ProjectSecrets<'a> {
    pub(crate) vault: &'a CredentialVault,
    pub(crate) project_file: Option<&'a Path>,
}

impl CredentialVault {
    /// What the sources of the project in `project_file` get when they connect.
    pub fn secrets_for<'a>(&'a self, project_file: Option<&'a Path>) -> ProjectSecrets<'a> {
        ProjectSecrets {
            vault: self,
            project_file,
        }
    }
}

impl Secrets for ProjectSecrets<'_> {
    fn credentials(&self, source: &Source) -> Result<Credentials, DeviceError> {
        let Some(destination) = Destination::of_source(source) else {
            return Ok(Credentials::default());
        };
        self.vault.lookup(
            self.project_file,
            &CredentialTarget::Source {
                id: source.id.clone(),
            },
            &destination,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqtt(host: &str, tls: bool) -> Destination {
        Destination {
            protocol: Protocol::Mqtt,
            host: host.into(),
            port: 8883,
            tls,
        }
    }

    fn vault(dir: &Path) -> CredentialVault {
        CredentialVault::with_store(SecretStore::encrypted_file(dir).unwrap())
    }

    #[test]
    fn a_big_entry_is_stored_in_parts_and_shrinks_back() {
        let dir = tempfile::tempdir().unwrap();
        let v = vault(dir.path());
        let store = v.store().unwrap();
        let big = Entry {
            destination: Some(mqtt("a", true)),
            password: Some("p".repeat(3500)),
            ..Entry::default()
        };
        write_entry(&store, "n", &big).unwrap();
        assert_eq!(store.get("n").unwrap().as_deref(), Some("parts:4"));
        assert_eq!(read_entry(&store, "n").unwrap().password, big.password);
        let small = Entry {
            password: Some("short".into()),
            ..big
        };
        write_entry(&store, "n", &small).unwrap();
        assert_eq!(
            read_entry(&store, "n").unwrap().password.as_deref(),
            Some("short")
        );
        assert!(store.get("n/1").unwrap().is_none(), "old parts are removed");
        write_entry(&store, "n", &Entry::default()).unwrap();
        assert!(store.get("n").unwrap().is_none());
    }

    #[test]
    fn credentials_go_only_where_they_were_given_for() {
        let dir = tempfile::tempdir().unwrap();
        let v = vault(dir.path());
        let file = dir.path().join("p.json");
        let target = CredentialTarget::Source {
            id: "broker".into(),
        };
        v.handle(
            Some(&file),
            CredentialsRequest::Set {
                target: target.clone(),
                destination: mqtt("a.example", true),
                password: Some("s3cret".into()),
                ca_pem: None,
                client_cert_pem: None,
                client_key_pem: None,
                clear: vec![],
            },
        )
        .unwrap();
        let got = v
            .lookup(Some(&file), &target, &mqtt("a.example", true))
            .unwrap();
        assert_eq!(got.password.as_deref(), Some("s3cret"));
        for elsewhere in [mqtt("evil.example", true), mqtt("a.example", false)] {
            let e = v.lookup(Some(&file), &target, &elsewhere).unwrap_err();
            assert!(e.to_string().contains("enter them again"), "{e}");
            assert!(!e.to_string().contains("s3cret"));
        }
        // Another project file, or another source, gets nothing.
        let other = dir.path().join("other.json");
        assert_eq!(
            v.lookup(Some(&other), &target, &mqtt("a.example", true))
                .unwrap(),
            Credentials::default()
        );
        // A new destination starts empty: the old password is not carried over.
        let status = v
            .handle(
                Some(&file),
                CredentialsRequest::Set {
                    target: target.clone(),
                    destination: mqtt("b.example", true),
                    password: None,
                    ca_pem: None,
                    client_cert_pem: None,
                    client_key_pem: None,
                    clear: vec![],
                },
            )
            .unwrap();
        assert!(!status.password);
        assert_eq!(status.saved_for, None);
    }

    #[test]
    fn files_that_are_not_certificates_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let v = vault(dir.path());
        let e = v
            .handle(
                None,
                CredentialsRequest::Set {
                    target: CredentialTarget::Publisher,
                    destination: mqtt("a", true),
                    password: None,
                    ca_pem: Some("not a certificate".into()),
                    client_cert_pem: None,
                    client_key_pem: None,
                    clear: vec![],
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("no certificate"), "{e}");
    }
}
