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

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sextant_commands::CommandDoor;
use sextant_commands::{CommandError, ErrorCode};
use sextant_secrets::{Backend, SecretStore};

use crate::chatlog::{
    ChatId, ChatLogError, ChatSummary, HitRef, SearchRequest, UiItem, Visibility,
};
use crate::memory::Memory;
use crate::probe::{Compliance, Degraded, COMPLIANCE_FILE};
use crate::retrieval::Retrieval;
use crate::service::{
    ChatService, ConstrainedCalls, Mechanisms, ProviderKind, ServiceError, ServiceEventKind,
    ServiceSettings,
};

/// How long a settings change waits for the key store.
const KEY_STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The settings file, next to the chat database.
pub const SETTINGS_FILE: &str = "assistant.json";
/// The chat database.
pub const CHATS_FILE: &str = "chats.sqlite";
/// The consented memory.
pub const MEMORY_FILE: &str = "memory.sqlite";

/// Settings as stored in `assistant.json`: everything the person chose except the key.
/// Every field has a default, so a file from an older version still loads.
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
    language: crate::focus::Language,
    /// Tools as a JSON schema the reply must match: `auto` (local servers), `on`, `off`.
    constrained_calls: ConstrainedCalls,
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
            language: crate::focus::Language::En,
            constrained_calls: ConstrainedCalls::Auto,
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
        let stored = load_settings(&dir.join(SETTINGS_FILE));
        let mut settings = ServiceSettings::new(stored.provider, &stored.base_url, &stored.model);
        settings.auto_approve_edits = stored.auto_approve_edits;
        settings.allow_device_control = stored.allow_device_control;
        settings.mechanisms = stored.mechanisms;
        settings.language = stored.language;
        settings.constrained_calls = stored.constrained_calls;
        settings.api_key = read_key(&secrets, &stored);
        let service =
            ChatService::open(dir.join(CHATS_FILE), runtime, settings).map_err(service_error)?;
        let retrieval = std::sync::Arc::new(Retrieval::open(dir));
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
        })
    }

    pub fn service(&self) -> &ChatService {
        &self.service
    }

    pub fn key_backend(&self) -> Backend {
        self.secrets.backend()
    }

    /// Answers one request `{"op": …, …}`; any `type`/`id` framing is ignored.
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
        let service = &self.service;
        match op.as_str() {
            "list" => {
                let chats = service.list_chats().map_err(service_error)?;
                let list: Vec<ChatListEntry> = chats
                    .into_iter()
                    .map(|summary| ChatListEntry {
                        running: service.is_running(summary.id),
                        summary,
                    })
                    .collect();
                Ok(to_value(&list))
            }
            "create" => {
                let title = optional_str(&fields, "title")?.unwrap_or("New chat");
                // In the project open now: the archive's project-scoped searches see it there.
                let id = service.create_chat_here(title).await.map_err(service_error)?;
                Ok(json!({ "id": id }))
            }
            // The archive (spec 30, A2): `{query, filter?, cursor?, limit?}`, and `chat` for
            // one chat's events.
            "searchSessions" | "searchEvents" => {
                let chat = match op.as_str() {
                    "searchEvents" => {
                        let chat = chat_id(&fields)?;
                        fields.remove("chat");
                        Some(chat)
                    }
                    _ => None,
                };
                let request: SearchRequest = parse_fields(fields)?;
                let reader = service.clone();
                let page = tokio::task::spawn_blocking(move || match chat {
                    Some(chat) => reader.search_events(chat, &request),
                    None => reader.search_sessions(&request),
                })
                .await
                .map_err(|e| CommandError::failed(format!("the search stopped: {e}")))?
                .map_err(service_error)?;
                Ok(to_value(&page))
            }
            // "Cite in this chat" (spec 30, A3): `{chat, hits: [{chat, seq}], visibility?}`.
            "cite" => {
                let chat = chat_id(&fields)?;
                fields.remove("chat");
                let request: CiteRequest = parse_fields(fields)?;
                let cited = service
                    .cite(chat, &request.hits, &request.visibility)
                    .map_err(service_error)?;
                Ok(to_value(&cited))
            }
            // "Start fresh chat" and the list's "New chat from handoff".
            "newChatFromHandoff" => {
                let from = chat_id(&fields)?;
                let title = optional_str(&fields, "title")?
                    .map(str::trim)
                    .filter(|t| !t.is_empty());
                let id = service
                    .new_chat_from_handoff(from, title)
                    .map_err(service_error)?;
                Ok(json!({ "id": id }))
            }
            "rename" => {
                let chat = chat_id(&fields)?;
                let title = required_str(&fields, "title")?;
                service.rename_chat(chat, title).map_err(service_error)?;
                Ok(Value::Null)
            }
            "delete" => {
                service
                    .delete_chat(chat_id(&fields)?)
                    .map_err(service_error)?;
                Ok(Value::Null)
            }
            "history" => {
                let chat = chat_id(&fields)?;
                // A long chat's fold takes milliseconds of CPU under the log's lock: off
                // the async workers, which also carry telemetry and the other chats.
                let reader = service.clone();
                let ((items, live), degraded) = tokio::task::spawn_blocking(move || {
                    Ok::<_, ServiceError>((reader.history_live(chat)?, reader.degraded(chat)?))
                })
                .await
                .map_err(|e| CommandError::failed(format!("reading the chat stopped: {e}")))?
                .map_err(service_error)?;
                Ok(to_value(&HistoryReply {
                    items,
                    running: live.is_some(),
                    approvals: service.pending_approvals(chat),
                    streaming: live.map(|l| StreamingText {
                        text: l.text,
                        end: l.streamed,
                    }),
                    degraded,
                }))
            }
            "send" => {
                let chat = chat_id(&fields)?;
                let text = required_str(&fields, "text")?;
                if text.trim().is_empty() {
                    return Err(CommandError::invalid("text", "the message is empty"));
                }
                service.send(chat, text).await.map_err(service_error)?;
                Ok(Value::Null)
            }
            "retry" => {
                service
                    .retry(chat_id(&fields)?)
                    .await
                    .map_err(service_error)?;
                Ok(Value::Null)
            }
            "approve" => {
                service
                    .approve(chat_id(&fields)?, required_str(&fields, "callId")?)
                    .map_err(service_error)?;
                Ok(Value::Null)
            }
            "deny" => {
                let reason = optional_str(&fields, "reason")?;
                service
                    .deny(chat_id(&fields)?, required_str(&fields, "callId")?, reason)
                    .map_err(service_error)?;
                Ok(Value::Null)
            }
            "approveAll" => {
                service
                    .approve_all(chat_id(&fields)?)
                    .map_err(service_error)?;
                Ok(Value::Null)
            }
            "cancel" => {
                service.cancel(chat_id(&fields)?);
                Ok(Value::Null)
            }
            "getSettings" => {
                let stored = self.settings.lock().await.clone();
                Ok(self.settings_view(&stored))
            }
            "setSettings" => self.set_settings(fields).await,
            // Read-only and content-free (numbers, booleans, closed enums): the Health view.
            "health" => {
                let retrieval = self.retrieval.clone();
                let health = tokio::task::spawn_blocking(move || retrieval.health())
                    .await
                    .map_err(|e| {
                        CommandError::failed(format!("reading the health stopped: {e}"))
                    })?;
                Ok(to_value(&health))
            }
            "listModels" => {
                let models = service.list_models().await.map_err(service_error)?;
                let models: Vec<ModelEntry> = models
                    .into_iter()
                    .map(|m| ModelEntry {
                        id: m.id,
                        display_name: m.display_name,
                    })
                    .collect();
                Ok(to_value(&models))
            }
            "memoryList" | "memorySearch" | "memoryAdd" | "memoryEdit" | "memoryDelete"
            | "memoryClear" => {
                let answered = answered_proposal(&fields)?;
                let result = self.memory_op(op.as_str(), fields).await?;
                // A chip's answer is part of its chat's record, so it stays answered.
                if let (Some((chat, about)), "memoryAdd") = (answered, op.as_str()) {
                    let payload =
                        json!({"about": about, "kept": true, "fact": result["fact"]["id"]});
                    service
                        .record(chat, MEMORY_ANSWERED, payload)
                        .map_err(service_error)?;
                }
                Ok(result)
            }
            "memoryDismiss" => {
                let (chat, about) = answered_proposal(&fields)?.ok_or_else(|| {
                    CommandError::invalid("about", "which proposal (`chat` and `about`)")
                })?;
                service
                    .record(
                        chat,
                        MEMORY_ANSWERED,
                        json!({"about": about, "kept": false}),
                    )
                    .map_err(service_error)?;
                Ok(Value::Null)
            }
            other => Err(CommandError::invalid(
                "op",
                format!(
                    "unknown chat op `{other}`; expected one of list, create, newChatFromHandoff, rename, delete, \
                     history, send, retry, approve, deny, approveAll, cancel, getSettings, \
                     setSettings, listModels, health, memoryList, memorySearch, memoryAdd, \
                     memoryEdit, memoryDelete, memoryClear, memoryDismiss"
                ),
            )),
        }
    }

    /// The memory manager's ops. Every write is the person's (this door is the UI's, never
    /// the model's); `memoryClear` needs `confirmed: true`, which the UI sends only after
    /// the person confirmed in a dialog.
    async fn memory_op(&self, op: &str, fields: Map<String, Value>) -> Result<Value, CommandError> {
        let project = crate::memory::project_path(self.service.runtime()).await;
        let memory = self.memory.clone();
        let op = op.to_string();
        tokio::task::spawn_blocking(move || memory_call(&memory, &op, &fields, project.as_deref()))
            .await
            .map_err(|e| CommandError::failed(format!("the memory stopped: {e}")))?
    }

    fn settings_view(&self, stored: &StoredSettings) -> Value {
        to_value(&SettingsView {
            stored: stored.clone(),
            has_api_key: self.service.settings().api_key.is_some(),
            key_storage: self.secrets.backend(),
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
        save_settings(&self.dir.join(SETTINGS_FILE), &next)?;
        let mut settings = self.service.settings();
        settings.provider = next.provider;
        settings.base_url = next.base_url.clone();
        settings.model = next.model.clone();
        settings.auto_approve_edits = next.auto_approve_edits;
        settings.allow_device_control = next.allow_device_control;
        settings.mechanisms = next.mechanisms;
        settings.language = next.language;
        settings.constrained_calls = next.constrained_calls;
        settings.api_key = key;
        self.service.set_settings(settings);
        let view = self.settings_view(&next);
        *guard = next;
        Ok(view)
    }
}

/// The log-only event that records a person's answer to a memory proposal:
/// `{about, kept, fact?}` (`about` names the proposal: `call:<id>`, `seq:<n>`, `msg:<n>`).
pub const MEMORY_ANSWERED: &str = "memory_answered";

/// The proposal an op answers, when it names one (`chat` and `about`).
fn answered_proposal(
    fields: &Map<String, Value>,
) -> Result<Option<(ChatId, String)>, CommandError> {
    match fields.get("about") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(about)) if !about.is_empty() && about.len() <= 200 => {
            Ok(Some((chat_id(fields)?, about.clone())))
        }
        Some(_) => Err(CommandError::invalid(
            "about",
            "expected the proposal's key (a short string)",
        )),
    }
}

/// One memory-manager op on the store.
fn memory_call(
    memory: &Memory,
    op: &str,
    fields: &Map<String, Value>,
    project: Option<&str>,
) -> Result<Value, CommandError> {
    use sextant_memory::Category;
    let category = |fields: &Map<String, Value>| -> Result<Option<Category>, CommandError> {
        match fields.get("category") {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|_| {
                CommandError::invalid(
                    "category",
                    "expected preference, correction, reference or project",
                )
            }),
        }
    };
    let id = |fields: &Map<String, Value>| -> Result<i64, CommandError> {
        // `fact`, not `id`: `id` is the request's own framing.
        fields
            .get("fact")
            .and_then(Value::as_i64)
            .ok_or_else(|| CommandError::invalid("fact", "expected a fact id (a number)"))
    };
    let failed = |e: sextant_memory::MemoryError| CommandError::invalid("text", e.to_string());
    match op {
        "memoryList" => {
            let c = category(fields)?;
            let facts = memory.with(|m| m.list(c)).map_err(failed)?;
            Ok(json!({ "facts": facts }))
        }
        "memorySearch" => {
            let query = required_str(fields, "query")?;
            let facts = memory
                .with(|m| m.search(query, project, 20))
                .map_err(failed)?;
            Ok(json!({ "facts": facts }))
        }
        "memoryAdd" => {
            let c = category(fields)?
                .ok_or_else(|| CommandError::invalid("category", "choose a category"))?;
            let text = required_str(fields, "text")?;
            let project = if c == Category::Project {
                Some(project.ok_or_else(|| {
                    CommandError::invalid("category", "a project fact needs an open, saved project")
                })?)
            } else {
                None
            };
            let written = memory.with(|m| m.add(c, text, project)).map_err(failed)?;
            Ok(to_value(&written))
        }
        "memoryEdit" => {
            let (id, text) = (id(fields)?, required_str(fields, "text")?);
            Ok(to_value(
                &memory.with(|m| m.edit(id, text)).map_err(failed)?,
            ))
        }
        "memoryDelete" => {
            let id = id(fields)?;
            Ok(json!({ "deleted": memory.with(|m| m.delete(id)).map_err(failed)? }))
        }
        "memoryClear" => {
            if fields.get("confirmed") != Some(&Value::Bool(true)) {
                return Err(CommandError::new(
                    ErrorCode::NeedsConfirmation,
                    "clearing the memory deletes every fact; ask the person, then send confirmed: true",
                ));
            }
            Ok(json!({ "deleted": memory.with(|m| m.clear()).map_err(failed)? }))
        }
        _ => unreachable!("memory ops are matched by the caller"),
    }
}

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

/// Reads the settings; a damaged file is moved aside (kept, never overwritten) and the
/// defaults are used.
fn load_settings(path: &Path) -> StoredSettings {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return StoredSettings::default(),
        Err(e) => {
            tracing::warn!("could not read {}: {e}; using defaults", path.display());
            return StoredSettings::default();
        }
    };
    match serde_json::from_str(&text) {
        Ok(settings) => settings,
        Err(e) => {
            let aside = path.with_extension("json.damaged");
            let moved = std::fs::rename(path, &aside);
            tracing::warn!(
                "{} is damaged ({e}); using defaults{}",
                path.display(),
                match moved {
                    Ok(()) => format!(", the old file is kept as {}", aside.display()),
                    Err(_) => String::new(),
                }
            );
            StoredSettings::default()
        }
    }
}

/// Writes the settings atomically (a crash leaves the old file or the new one), readable by
/// the user only, as the rest of the assistant's data.
fn save_settings(path: &Path, settings: &StoredSettings) -> Result<(), CommandError> {
    let text = serde_json::to_string_pretty(settings).expect("plain data serializes");
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

fn chat_id(fields: &Map<String, Value>) -> Result<ChatId, CommandError> {
    fields
        .get("chat")
        .and_then(Value::as_i64)
        .ok_or_else(|| CommandError::invalid("chat", "missing `chat` (a chat id, an integer)"))
}

fn required_str<'a>(fields: &'a Map<String, Value>, name: &str) -> Result<&'a str, CommandError> {
    optional_str(fields, name)?
        .ok_or_else(|| CommandError::invalid(name, format!("missing `{name}` (a string)")))
}

fn optional_str<'a>(
    fields: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, CommandError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(CommandError::invalid(name, "expected a string")),
    }
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

fn parse_fields<T: for<'de> Deserialize<'de>>(
    fields: Map<String, Value>,
) -> Result<T, CommandError> {
    serde_path_to_error::deserialize(Value::Object(fields)).map_err(|e| {
        let path = e.path().to_string();
        CommandError::invalid(
            if path == "." { "request" } else { &path },
            e.inner().to_string(),
        )
    })
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
