//! The chat door: what the UI's chat panel sends, answered the same way from the desktop
//! app (a Tauri command) and from `sextant serve` (WebSocket `{"type":"chat",…}`).
//!
//! Owns the assistant's data folder – `chats.sqlite` (the chat log), `assistant.json` (the
//! settings, never the key) – and the API keys, which live in a [`SecretStore`] (the OS
//! keyring, or an encrypted file where there is none). The wire format is
//! `docs/ui-protocol.md`, "The assistant's chats".
//!
//! This is deliberately not a registry command set: the assistant's tools are registry
//! commands, and a model that could call `chat.send` or `chat.approve` could approve its
//! own edits.
//!
//! `assistant.json` is bound to this install. It holds the provider's address – where the
//! chats and the key go – and the approval settings, so a file written by anyone else (a
//! program, or a command that could write into the data folder) must not be obeyed. It
//! stays readable JSON, with a top-level `"mac"`: hex of HMAC-SHA256, keyed by the install's
//! key (in `chats.sqlite`), over `sextant-assistant-settings-v1\0` and the canonical JSON of
//! every other field (keys sorted, no spaces). The seal lives in the file, not beside it:
//! one atomic write replaces settings and seal together, where a sidecar could be left
//! stale by a crash between two writes (and then the person's own settings would be
//! refused). On open, a missing or wrong seal or a field this version does not know makes
//! the file *refused*: moved aside to `assistant.json.refused` (kept, for the person to
//! look at), a warning logged, and the defaults used – never a value from it. A file that
//! is not JSON is moved to `assistant.json.damaged`, as before. A file written before the
//! seal existed has none and is refused once; the API key is never in it (it is in the key
//! store), so only the choices in it need making again.

/// The chat ops: one request type and handler each, and the table that dispatches them.
mod ops;

pub use ops::request_schema;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sextant_commands::CommandDoor;
use sextant_commands::{CommandError, ErrorCode};
use sextant_secrets::{Backend, SecretStore};

use crate::engine::chatlog::{ChatLogError, ChatSummary, HitRef, UiItem, Visibility};
use crate::mechanisms::memory::Memory;
use crate::mechanisms::probe::{Compliance, Degraded, COMPLIANCE_FILE};
use crate::mechanisms::retrieval::Retrieval;
use crate::service::{
    ChatService, ConstrainedCalls, Limits, Mechanisms, ProviderKind, ServiceError,
    ServiceEventKind, ServiceSettings,
};
use crate::settings::LimitOverrides;

/// How long a settings change waits for the key store.
const KEY_STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The settings file, next to the chat database.
pub const SETTINGS_FILE: &str = "assistant.json";
/// The chat database.
pub const CHATS_FILE: &str = "chats.sqlite";
/// The consented memory.
pub const MEMORY_FILE: &str = "memory.sqlite";

/// Settings as stored in `assistant.json`: everything the person chose except the key.
/// Every field has a default, so a sealed file written before a field existed still loads;
/// a field this version does not know refuses the file ([`unseal`] checks the names against
/// the ones this struct writes). Not `#[serde(deny_unknown_fields)]`: the struct is also
/// flattened into the wire type [`SettingsView`], whose generated schema (checked in for the
/// UI) that attribute changes, and a wrapper that denies them cannot flatten this struct,
/// which flattens [`Mechanisms`] itself (serde then refuses every field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
struct StoredSettings {
    provider: ProviderKind,
    base_url: String,
    model: String,
    auto_approve_edits: bool,
    allow_device_control: bool,
    /// The assistant's mechanisms (`memory`, `contextProbe`, `handoffSeeding`), each on
    /// by default.
    #[serde(flatten)]
    mechanisms: Mechanisms,
    /// The UI's language (`en`, `zh`): Sextant's own text in a request follows it.
    language: crate::mechanisms::focus::Language,
    /// Tools as a JSON schema the reply must match: `auto` (local servers), `on`, `off`.
    constrained_calls: ConstrainedCalls,
    /// The person's own limits for the model (`contextWindow`, `maxOutputTokens`,
    /// `maxToolCalls`); null: what the server says, else the table.
    #[serde(flatten)]
    limits: LimitOverrides,
}

impl Default for StoredSettings {
    fn default() -> Self {
        StoredSettings {
            provider: ProviderKind::Anthropic,
            base_url: default_base_url(ProviderKind::Anthropic).into(),
            model: "claude-sonnet-4-5".into(),
            auto_approve_edits: false,
            allow_device_control: false,
            mechanisms: Mechanisms::default(),
            language: crate::mechanisms::focus::Language::En,
            constrained_calls: ConstrainedCalls::Auto,
            limits: LimitOverrides::default(),
        }
    }
}

/// One chat of `list`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatListEntry {
    #[serde(flatten)]
    summary: ChatSummary,
    /// A turn is running in it now.
    running: bool,
}

/// What `getSettings` and `setSettings` answer: the stored settings, and where the key is
/// (never the key itself).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SettingsView {
    #[serde(flatten)]
    stored: StoredSettings,
    has_api_key: bool,
    key_storage: Backend,
    /// The limits turns are sized by now, each with where it came from (the server is
    /// asked at the first turn; until then the table's values show).
    effective_limits: Limits,
}

/// One model of `listModels`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    id: String,
    /// The provider's name for it, where it gives one.
    display_name: Option<String>,
}

/// What `history` answers.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryReply {
    items: Vec<UiItem>,
    running: bool,
    /// The approval prompts open now (`approvalRequested` events).
    approvals: Vec<ServiceEventKind>,
    /// The reply streaming now: its text not yet in `items`, and where the next
    /// `textDelta` starts, so the page skips what it has.
    streaming: Option<StreamingText>,
    /// The context probe's degraded state (spec 20 §1), folded from the log: the banner.
    degraded: Option<Degraded>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct StreamingText {
    text: String,
    /// UTF-16 code units of the turn's text streamed so far.
    end: u64,
}

fn default_base_url(provider: ProviderKind) -> &'static str {
    match provider {
        ProviderKind::Anthropic => "https://api.anthropic.com",
        ProviderKind::OpenaiCompatible => "https://api.openai.com/v1",
    }
}

/// The keyring entry of a provider's key. Per provider and address, so switching between a
/// local server and a hosted one keeps both keys.
fn key_name(provider: ProviderKind, base_url: &str) -> String {
    format!(
        "api-key:{}:{}",
        provider.name(),
        base_url.trim_end_matches('/')
    )
}

/// The chat panel's backend: one per app.
pub struct ChatDoor {
    service: ChatService,
    dir: PathBuf,
    secrets: SecretStore,
    /// Serializes settings changes (read-modify-write of the file and the key). Async: a
    /// change waits on the keyring, which may take a while (an unlock prompt).
    settings: tokio::sync::Mutex<StoredSettings>,
    /// The embedder and diagnostics of everything the assistant retrieves.
    retrieval: std::sync::Arc<Retrieval>,
    /// The consented memory (`memory.sqlite`).
    memory: std::sync::Arc<Memory>,
    /// The install's key: seals `assistant.json`.
    install_key: Vec<u8>,
}

impl ChatDoor {
    /// Opens the assistant's data in `dir` (created if missing), with API keys in the OS
    /// keyring when there is one.
    pub fn open(dir: &Path, runtime: impl CommandDoor + 'static) -> Result<ChatDoor, CommandError> {
        Self::open_with(dir, runtime, SecretStore::open(dir))
    }

    /// As [`open`](Self::open), with the key store chosen by the caller.
    pub fn open_with(
        dir: &Path,
        runtime: impl CommandDoor + 'static,
        secrets: SecretStore,
    ) -> Result<ChatDoor, CommandError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            CommandError::failed(format!(
                "could not create the assistant's folder {}: {e}",
                dir.display()
            ))
        })?;
        // The chat database first: it keeps the install's key, which the settings file must
        // be sealed with to be read.
        let defaults = StoredSettings::default();
        let base = ServiceSettings::new(defaults.provider, &defaults.base_url, &defaults.model);
        let service =
            ChatService::open(dir.join(CHATS_FILE), runtime, base).map_err(service_error)?;
        let install_key = service.install_key().map_err(service_error)?;
        let stored = load_settings(&dir.join(SETTINGS_FILE), &install_key);
        let key = read_key(&secrets, &stored);
        service.set_settings(apply(&stored, service.settings(), key));
        let retrieval = std::sync::Arc::new(Retrieval::open(dir));
        // The memory searches on a turn's first request and the archive on the model's
        // asking: load the embedder now, off this thread, rather than have the first
        // request of the first turn wait for it (~150 ms with the neural model). A request
        // that comes first waits for this same load, never starts another.
        let mechanisms = service.settings().mechanisms;
        if mechanisms.memory || mechanisms.archive_tools {
            let warm = retrieval.clone();
            let _ = std::thread::Builder::new()
                .name("embedder-load".into())
                .spawn(move || drop(warm.embedder()));
        }
        let memory = std::sync::Arc::new(Memory::new(dir.join(MEMORY_FILE), retrieval.clone()));
        service.set_memory(memory.clone());
        service.set_compliance(std::sync::Arc::new(Compliance::open(
            &dir.join(COMPLIANCE_FILE),
        )));
        Ok(ChatDoor {
            service,
            dir: dir.to_path_buf(),
            secrets,
            settings: tokio::sync::Mutex::new(stored),
            retrieval,
            memory,
            install_key,
        })
    }

    pub fn service(&self) -> &ChatService {
        &self.service
    }

    /// The embedder and retrieval health the memory and the archive share.
    pub fn retrieval(&self) -> &std::sync::Arc<Retrieval> {
        &self.retrieval
    }

    pub fn key_backend(&self) -> Backend {
        self.secrets.backend()
    }

    /// Answers one request `{"op": …, …}`; any `type`/`id` framing is ignored. Each op is
    /// a request type and a handler in `door::ops`, dispatched from its one table.
    pub async fn handle(&self, request: Value) -> Result<Value, CommandError> {
        let Value::Object(mut fields) = request else {
            return Err(CommandError::new(
                ErrorCode::BadRequest,
                "a chat request is a JSON object with an `op`",
            ));
        };
        fields.remove("type");
        fields.remove("id");
        let op = match fields.remove("op") {
            Some(Value::String(op)) => op,
            _ => return Err(CommandError::invalid("op", "missing `op` (a string)")),
        };
        ops::dispatch(self, &op, fields).await
    }

    fn settings_view(&self, stored: &StoredSettings) -> Value {
        to_value(&SettingsView {
            stored: stored.clone(),
            has_api_key: self.service.settings().api_key.is_some(),
            key_storage: self.secrets.backend(),
            effective_limits: self.service.known_limits(&self.service.settings()),
        })
    }

    async fn set_settings(&self, mut fields: Map<String, Value>) -> Result<Value, CommandError> {
        // `apiKey`: absent = keep, null or "" = forget, a string = store.
        let api_key = match fields.remove("apiKey") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(Value::String(k)) if k.trim().is_empty() => Some(None),
            Some(Value::String(k)) => Some(Some(k.trim().to_string())),
            Some(_) => return Err(CommandError::invalid("apiKey", "expected a string or null")),
        };
        let mut guard = self.settings.lock().await;
        let mut merged = to_value(&*guard);
        for (k, v) in fields {
            if merged.get(&k).is_none() {
                return Err(CommandError::invalid(
                    k.clone(),
                    format!("unknown setting `{k}`"),
                ));
            }
            merged[k] = v;
        }
        let mut next: StoredSettings = serde_path_to_error::deserialize(merged)
            .map_err(|e| CommandError::invalid(e.path().to_string(), e.inner().to_string()))?;
        next.base_url = next.base_url.trim().trim_end_matches('/').to_string();
        if !(next.base_url.starts_with("http://") || next.base_url.starts_with("https://")) {
            return Err(CommandError::invalid(
                "baseUrl",
                "the base URL must start with http:// or https://",
            ));
        }
        next.model = next.model.trim().to_string();
        if next.model.is_empty() {
            return Err(CommandError::invalid("model", "choose a model"));
        }
        if let Some((field, why)) = next.limits.invalid() {
            return Err(CommandError::invalid(field, why));
        }
        // The key store blocks (disk, or the keyring daemon over D-Bus): off the runtime.
        let (secrets, stored) = (self.secrets.clone(), next.clone());
        let store = tokio::task::spawn_blocking(move || {
            let name = key_name(stored.provider, &stored.base_url);
            match api_key {
                Some(Some(key)) => secrets.set(&name, &key).map(|()| Some(key)),
                Some(None) => secrets.delete(&name).map(|()| None),
                // The key of the (possibly new) provider and address.
                None => Ok(read_key(&secrets, &stored)),
            }
        });
        // A keyring waiting for an unlock prompt nobody sees would hold the settings forever.
        let key = tokio::time::timeout(KEY_STORE_TIMEOUT, store)
            .await
            .map_err(|_| {
                CommandError::failed(format!(
                    "the key store did not answer within {} s; if the system keyring is \
                     locked, unlock it and save again",
                    KEY_STORE_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| CommandError::failed(format!("the key store stopped: {e}")))?
            .map_err(|e| CommandError::failed(format!("could not store the API key: {e}")))?;
        save_settings(&self.dir.join(SETTINGS_FILE), &next, &self.install_key)?;
        self.service
            .set_settings(apply(&next, self.service.settings(), key));
        let view = self.settings_view(&next);
        *guard = next;
        Ok(view)
    }
}

/// The log-only event that records a person's answer to a memory proposal:
/// `{about, kept, fact?}` (`about` names the proposal: `call:<id>`, `seq:<n>`, `msg:<n>`).
pub const MEMORY_ANSWERED: &str = "memory_answered";

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("plain data serializes")
}

fn read_key(secrets: &SecretStore, stored: &StoredSettings) -> Option<String> {
    match secrets.get(&key_name(stored.provider, &stored.base_url)) {
        Ok(key) => key,
        Err(e) => {
            tracing::warn!("the API key could not be read: {e}");
            None
        }
    }
}

/// `stored` over `settings` (the rest of the service's settings kept), with `api_key`.
fn apply(
    stored: &StoredSettings,
    mut settings: ServiceSettings,
    api_key: Option<String>,
) -> ServiceSettings {
    settings.provider = stored.provider;
    settings.base_url = stored.base_url.clone();
    settings.model = stored.model.clone();
    settings.auto_approve_edits = stored.auto_approve_edits;
    settings.allow_device_control = stored.allow_device_control;
    settings.mechanisms = stored.mechanisms;
    settings.language = stored.language;
    settings.constrained_calls = stored.constrained_calls;
    settings.limits = stored.limits;
    settings.api_key = api_key;
    settings
}

/// The settings file's seal field.
const MAC_FIELD: &str = "mac";

/// What the seal signs: a label of its own (the install's key signs other things too), then
/// the canonical JSON of the file's other fields.
fn settings_mac(key: &[u8], fields: &Map<String, Value>) -> hmac::Hmac<sha2::Sha256> {
    use hmac::Mac;
    let mut mac =
        <hmac::Hmac<sha2::Sha256>>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(b"sextant-assistant-settings-v1\0");
    mac.update(canonical(&Value::Object(fields.clone())).as_bytes());
    mac
}

/// JSON with every object's keys sorted and no whitespace: the same text for the same
/// fields, whatever order or layout the file has.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&fields[k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

/// The settings file's text: the settings and their seal.
fn seal(settings: &StoredSettings, key: &[u8]) -> String {
    use hmac::Mac;
    let Value::Object(mut fields) = to_value(settings) else {
        unreachable!("the settings are a JSON object")
    };
    let tag = settings_mac(key, &fields).finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    fields.insert(MAC_FIELD.into(), Value::String(hex));
    serde_json::to_string_pretty(&Value::Object(fields)).expect("plain data serializes")
}

/// Why a settings file is not used.
#[derive(Debug, PartialEq)]
enum Unread {
    /// Not a JSON object at all.
    Damaged(String),
    /// JSON, but not sealed by this install, or with a field this version does not know.
    Refused(String),
}

/// The settings in `text`, if this install sealed them and every field is known.
fn unseal(text: &str, key: &[u8]) -> Result<StoredSettings, Unread> {
    use hmac::Mac;
    let mut fields = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => fields,
        Ok(_) => return Err(Unread::Damaged("not a JSON object".into())),
        Err(e) => return Err(Unread::Damaged(e.to_string())),
    };
    let tag = match fields.remove(MAC_FIELD) {
        Some(Value::String(hex)) => hex,
        None => {
            return Err(Unread::Refused(
                "it has no seal: an older Sextant or another program wrote it".into(),
            ))
        }
        Some(_) => return Err(Unread::Refused("its seal is not a hex string".into())),
    };
    let tag = (tag.len() == 64 && tag.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| {
            (0..32)
                .map(|i| u8::from_str_radix(&tag[2 * i..2 * i + 2], 16).ok())
                .collect::<Option<Vec<u8>>>()
        })
        .flatten()
        .ok_or_else(|| Unread::Refused("its seal is not 64 hex digits".into()))?;
    // Constant time: the seal cannot be found byte by byte.
    settings_mac(key, &fields).verify_slice(&tag).map_err(|_| {
        Unread::Refused(
            "its seal does not match: it was changed outside Sextant, or another install wrote it"
                .into(),
        )
    })?;
    // Every name must be one this version writes (the seal is off already).
    let Value::Object(known) = to_value(&StoredSettings::default()) else {
        unreachable!("the settings are a JSON object")
    };
    if let Some(unknown) = fields.keys().find(|k| !known.contains_key(*k)) {
        return Err(Unread::Refused(format!(
            "it has a setting this version does not know: `{unknown}`"
        )));
    }
    serde_path_to_error::deserialize(Value::Object(fields))
        .map_err(|e| Unread::Refused(format!("`{}`: {}", e.path(), e.inner())))
}

/// Reads the settings. A file that is not JSON is moved aside as `.damaged`, one this
/// install did not seal (or with a field this version does not know) as `.refused`; either
/// is kept, never overwritten by the next save, and the defaults are used – never a value
/// from it.
fn load_settings(path: &Path, key: &[u8]) -> StoredSettings {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return StoredSettings::default(),
        Err(e) => {
            tracing::warn!("could not read {}: {e}; using defaults", path.display());
            return StoredSettings::default();
        }
    };
    let (reason, suffix, what) = match unseal(&text, key) {
        Ok(settings) => return settings,
        Err(Unread::Damaged(reason)) => (reason, "json.damaged", "is damaged"),
        Err(Unread::Refused(reason)) => (reason, "json.refused", "was refused"),
    };
    let aside = path.with_extension(suffix);
    let moved = std::fs::rename(path, &aside);
    tracing::warn!(
        "{} {what} ({reason}); using the default assistant settings{}",
        path.display(),
        match moved {
            Ok(()) => format!(", the old file is kept as {}", aside.display()),
            Err(e) => format!(" (it could not be moved aside: {e})"),
        }
    );
    StoredSettings::default()
}

/// Writes the settings, sealed, atomically (a crash leaves the old file or the new one),
/// readable by the user only, as the rest of the assistant's data.
fn save_settings(path: &Path, settings: &StoredSettings, key: &[u8]) -> Result<(), CommandError> {
    let text = seal(settings, key);
    let options = sextant_fsutil::Options {
        private: true,
        ..sextant_fsutil::Options::default()
    };
    sextant_fsutil::write_atomic_with(path, text.as_bytes(), options).map_err(|e| {
        CommandError::failed(format!(
            "could not save the assistant settings to {}: {e}",
            path.display()
        ))
    })
}

/// What `cite` takes besides the citing chat.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CiteRequest {
    pub hits: Vec<HitRef>,
    /// Which chats may be cited; every chat by default (the person's own archive).
    #[serde(default)]
    pub visibility: Visibility,
}

fn service_error(e: ServiceError) -> CommandError {
    let code = match &e {
        ServiceError::Log(ChatLogError::NoChat(_)) => ErrorCode::NotFound,
        ServiceError::Log(ChatLogError::Invalid(_)) => ErrorCode::BadRequest,
        ServiceError::NoPendingApproval(_) => ErrorCode::NotFound,
        ServiceError::TurnRunning(_) | ServiceError::NothingToRetry(_) => ErrorCode::NotAllowed,
        _ => ErrorCode::Failed,
    };
    CommandError::new(code, e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KEY: [u8; 32] = [7; 32];
    const OTHER_INSTALL: [u8; 32] = [8; 32];

    /// Settings unlike the defaults in every field the tests look at.
    fn chosen() -> StoredSettings {
        StoredSettings {
            provider: ProviderKind::OpenaiCompatible,
            base_url: "http://127.0.0.1:11434/v1".into(),
            model: "qwen3".into(),
            auto_approve_edits: true,
            ..StoredSettings::default()
        }
    }

    fn saved(dir: &Path, key: &[u8]) -> PathBuf {
        let path = dir.join(SETTINGS_FILE);
        save_settings(&path, &chosen(), key).unwrap();
        path
    }

    /// Loads `path`, expecting it refused: the defaults come back and the file is kept
    /// aside as `.refused`, byte for byte.
    fn assert_refused(path: &Path, key: &[u8]) {
        let bytes = std::fs::read(path).unwrap();
        let loaded = load_settings(path, key);
        assert_eq!(
            loaded,
            StoredSettings::default(),
            "a refused file's values were used"
        );
        assert_eq!(loaded.base_url, "https://api.anthropic.com");
        assert!(!path.exists(), "the refused file was left in place");
        let aside = path.with_extension("json.refused");
        assert_eq!(
            std::fs::read(&aside).unwrap(),
            bytes,
            "the refused file is kept"
        );
    }

    #[test]
    fn a_settings_file_this_install_wrote_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path(), &KEY);
        let text = std::fs::read_to_string(&path).unwrap();
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            json["baseUrl"], "http://127.0.0.1:11434/v1",
            "still readable: {text}"
        );
        assert_eq!(json[MAC_FIELD].as_str().map(str::len), Some(64), "{text}");
        assert_eq!(load_settings(&path, &KEY), chosen());
        assert!(path.exists());
        // The seal is over the fields, not the layout: reformatted, it still reads.
        let compact = serde_json::to_string(&json).unwrap();
        std::fs::write(&path, compact).unwrap();
        assert_eq!(load_settings(&path, &KEY), chosen());
    }

    #[test]
    fn a_sealed_file_from_before_a_setting_existed_reads_with_its_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SETTINGS_FILE);
        let mut fields = Map::new();
        fields.insert("provider".into(), json!("openai-compatible"));
        fields.insert("baseUrl".into(), json!("http://localhost:8080/v1"));
        fields.insert("model".into(), json!("llama"));
        let tag = hmac::Mac::finalize(settings_mac(&KEY, &fields)).into_bytes();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        fields.insert(MAC_FIELD.into(), json!(hex));
        std::fs::write(&path, Value::Object(fields).to_string()).unwrap();
        let loaded = load_settings(&path, &KEY);
        assert_eq!(loaded.model, "llama");
        assert_eq!(loaded.base_url, "http://localhost:8080/v1");
        assert_eq!(loaded.mechanisms, Mechanisms::default());
        assert!(!loaded.auto_approve_edits);
    }

    #[test]
    fn a_hand_edited_provider_address_is_refused_and_the_default_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path(), &KEY);
        let text = std::fs::read_to_string(&path).unwrap();
        let edited = text.replace("http://127.0.0.1:11434/v1", "https://collector.example");
        assert_ne!(edited, text);
        std::fs::write(&path, edited).unwrap();
        assert_refused(&path, &KEY);
        // The next save writes a fresh, sealed file; the refused one stays as it was.
        save_settings(&path, &chosen(), &KEY).unwrap();
        assert_eq!(load_settings(&path, &KEY), chosen());
        let kept = std::fs::read_to_string(path.with_extension("json.refused")).unwrap();
        assert!(kept.contains("collector.example"));
    }

    #[test]
    fn a_field_this_version_does_not_know_refuses_the_file_even_when_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SETTINGS_FILE);
        let Value::Object(mut fields) = to_value(&chosen()) else {
            unreachable!()
        };
        fields.insert("proxyUrl".into(), json!("http://collector.example"));
        // Sealed with the right key: only the unknown field can refuse it.
        let tag = hmac::Mac::finalize(settings_mac(&KEY, &fields)).into_bytes();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        fields.insert(MAC_FIELD.into(), json!(hex));
        let text = Value::Object(fields).to_string();
        assert!(
            matches!(unseal(&text, &KEY), Err(Unread::Refused(r)) if r.contains("proxyUrl")),
            "{:?}",
            unseal(&text, &KEY)
        );
        std::fs::write(&path, &text).unwrap();
        assert_refused(&path, &KEY);
    }

    #[test]
    fn a_file_another_install_sealed_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path(), &OTHER_INSTALL);
        assert_eq!(
            load_settings(&path, &OTHER_INSTALL),
            chosen(),
            "valid there"
        );
        assert_refused(&path, &KEY);
    }

    #[test]
    fn a_file_without_a_seal_is_refused_and_a_broken_one_is_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SETTINGS_FILE);
        // As every Sextant before the seal wrote it.
        let unsealed = serde_json::to_string_pretty(&chosen()).unwrap();
        std::fs::write(&path, &unsealed).unwrap();
        assert!(
            matches!(unseal(&unsealed, &KEY), Err(Unread::Refused(r)) if r.contains("no seal"))
        );
        assert_refused(&path, &KEY);
        let refused = |text: &str| matches!(unseal(text, &KEY), Err(Unread::Refused(_)));
        assert!(refused(r#"{"model": "m", "mac": "zz"}"#));
        assert!(refused(r#"{"model": "m", "mac": 42}"#));
        assert!(refused(&format!(
            r#"{{"model": "m", "mac": "{}"}}"#,
            "é".repeat(32)
        )));
        assert!(refused(&format!(
            r#"{{"model": "m", "mac": "{}"}}"#,
            "0".repeat(64)
        )));
        assert!(matches!(unseal("[1]", &KEY), Err(Unread::Damaged(_))));
        std::fs::write(&path, "{ not json").unwrap();
        assert_eq!(load_settings(&path, &KEY), StoredSettings::default());
        assert_eq!(
            std::fs::read_to_string(path.with_extension("json.damaged")).unwrap(),
            "{ not json"
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a: Value =
            serde_json::from_str(r#"{"b": [1, {"y": 2, "x": "<"}], "a": null}"#).unwrap();
        assert_eq!(canonical(&a), r#"{"a":null,"b":[1,{"x":"<","y":2}]}"#);
    }
}
