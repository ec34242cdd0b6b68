//! The chat door's ops: one request type and one handler function each, and [`OPS`], the
//! one table that dispatches them (in the manner of rust-analyzer's
//! `.on::<Request>(handlers::x)`).
//!
//! A request type reads its fields from the request object (its `op`, `type` and `id`
//! already taken off) the way the wire has always been read – the same fields, the same
//! error codes and messages, checked in the same order – and its handler answers it. An op
//! is one [`Request`] impl, one handler and one line in [`OPS`]; the unknown-op error lists
//! the table, and a test checks the table against `docs/ui-protocol.md`, so neither can
//! drift.
//!
//! Most requests are read field by field with the readers at the end of this file, not
//! derived with serde: a derived reader would answer a bad request with serde's messages and
//! report whichever bad field it met first, where the wire's errors are fixed. The archive's
//! requests (`searchSessions`, `searchEvents`, `cite`) are serde types, as they always were.

use std::borrow::Cow;
use std::sync::LazyLock;

use schemars::{generate::SchemaSettings, JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use sextant_commands::{BoxFuture, CommandError, ErrorCode};
use sextant_memory::Category;

use super::{
    service_error, to_value, ChatDoor, ChatListEntry, CiteRequest, HistoryReply, ModelEntry,
    StreamingText, MEMORY_ANSWERED,
};
use crate::engine::chatlog::{ChatId, SearchRequest};
use crate::mechanisms::memory::Memory;
use crate::service::ServiceError;

/// A request's fields, without `op`, `type` and `id`.
type Fields = Map<String, Value>;

/// What a handler answers.
type Reply<'a> = BoxFuture<'a, Result<Value, CommandError>>;

/// One op's request: its name on the wire, its fields as the wire carries them, and how it
/// is read.
trait Request: Sized + Send + 'static {
    const OP: &'static str;
    /// The fields as the wire carries them, for [`request_schema`]; often the request type
    /// itself. A test checks that `read` demands exactly the fields this marks required.
    type Wire: JsonSchema;
    fn read(fields: Fields) -> Result<Self, CommandError>;
}

/// An op's request read from its fields and handled.
type Run = Box<dyn for<'a> Fn(&'a ChatDoor, Fields) -> Reply<'a> + Send + Sync>;

/// One row of [`OPS`]: an op's name, and its request read and handled.
pub(super) struct Op {
    pub(super) name: &'static str,
    run: Run,
    /// The schema of the request's fields ([`Request::Wire`]).
    wire: fn(&mut SchemaGenerator) -> Schema,
    /// Reads a request without answering it (the schema's test).
    #[cfg_attr(not(test), allow(dead_code))]
    check: fn(Fields) -> Result<(), CommandError>,
}

/// The row of request `R`, answered by `handler`.
fn on<R: Request>(handler: for<'a> fn(&'a ChatDoor, R) -> Reply<'a>) -> Op {
    Op {
        name: R::OP,
        run: Box::new(move |door, fields| match R::read(fields) {
            Ok(request) => handler(door, request),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }),
        wire: |generator| generator.subschema_for::<R::Wire>(),
        check: |fields| R::read(fields).map(drop),
    }
}

/// Every op, in the order of `docs/ui-protocol.md`.
pub(super) static OPS: LazyLock<Vec<Op>> = LazyLock::new(|| {
    vec![
        on::<List>(list),
        on::<Create>(create),
        on::<NewChatFromHandoff>(new_chat_from_handoff),
        on::<SearchSessions>(search_sessions),
        on::<SearchEvents>(search_events),
        on::<Cite>(cite),
        on::<Rename>(rename),
        on::<Delete>(delete),
        on::<History>(history),
        on::<SendMessage>(send),
        on::<Retry>(retry),
        on::<Approve>(approve),
        on::<Deny>(deny),
        on::<ApproveAll>(approve_all),
        on::<Cancel>(cancel),
        on::<GetSettings>(get_settings),
        on::<SetSettings>(set_settings),
        on::<ListModels>(list_models),
        on::<MemoryList>(memory_list),
        on::<MemorySearch>(memory_search),
        on::<MemoryAdd>(memory_add),
        on::<MemoryEdit>(memory_edit),
        on::<MemoryDelete>(memory_delete),
        on::<MemoryDismiss>(memory_dismiss),
        on::<MemoryClear>(memory_clear),
        on::<Health>(health),
    ]
});

/// Answers `op` with `fields`; an op not in [`OPS`] is refused, naming every one that is.
pub(super) fn dispatch<'a>(door: &'a ChatDoor, op: &str, fields: Fields) -> Reply<'a> {
    match OPS.iter().find(|o| o.name == op) {
        Some(found) => (found.run)(door, fields),
        None => {
            let known: Vec<&str> = OPS.iter().map(|o| o.name).collect();
            let error = CommandError::invalid(
                "op",
                format!(
                    "unknown chat op `{op}`; expected one of {}",
                    known.join(", ")
                ),
            );
            Box::pin(std::future::ready(Err(error)))
        }
    }
}

/// Every op's request as one JSON Schema (draft 7, as the wire schema is): `oneOf` objects,
/// each with its `op` and its fields as a request is read (optional fields not required),
/// with every subschema inline so it sits beside the reply types without a name clash.
pub fn request_schema() -> serde_json::Value {
    let mut generator = SchemaSettings::draft07()
        .for_deserialize()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let variants: Vec<serde_json::Value> = OPS
        .iter()
        .map(|op| {
            let mut variant = (op.wire)(&mut generator).to_value();
            let object = variant.as_object_mut().expect("a request is an object");
            object.remove("title");
            object.insert("type".into(), json!("object"));
            let properties = object
                .entry("properties")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("properties");
            let mut with_op = Map::new();
            with_op.insert("op".into(), json!({ "type": "string", "enum": [op.name] }));
            with_op.append(properties);
            *properties = with_op;
            let required = object.entry("required").or_insert_with(|| json!([]));
            let required = required.as_array_mut().expect("required");
            required.insert(0, json!("op"));
            variant
        })
        .collect();
    json!({
        "title": "ChatRequest",
        "description": "A request to the assistant's chat door, by `op` (docs/ui-protocol.md).",
        "oneOf": variants,
    })
}

/// The fields of a request that carries nothing but its op.
#[derive(JsonSchema)]
struct NoFields {}

/// A request that carries nothing but its op.
macro_rules! bare {
    ($($name:ident = $op:literal),* $(,)?) => {$(
        struct $name;
        impl Request for $name {
            const OP: &'static str = $op;
            type Wire = NoFields;
            fn read(_: Fields) -> Result<Self, CommandError> {
                Ok($name)
            }
        }
    )*};
}

/// A request that names one chat (`chat`).
macro_rules! of_chat {
    ($($name:ident = $op:literal),* $(,)?) => {$(
        #[derive(JsonSchema)]
        struct $name {
            chat: ChatId,
        }
        impl Request for $name {
            const OP: &'static str = $op;
            type Wire = Self;
            fn read(fields: Fields) -> Result<Self, CommandError> {
                Ok($name { chat: chat_id(&fields)? })
            }
        }
    )*};
}

bare!(
    List = "list",
    GetSettings = "getSettings",
    ListModels = "listModels",
    Health = "health"
);
of_chat!(
    Delete = "delete",
    History = "history",
    Retry = "retry",
    ApproveAll = "approveAll",
    Cancel = "cancel"
);

// ---- chats ---------------------------------------------------------------------------------

fn list(door: &ChatDoor, _: List) -> Reply<'_> {
    Box::pin(async move {
        let service = &door.service;
        let chats = service.list_chats().map_err(service_error)?;
        let list: Vec<ChatListEntry> = chats
            .into_iter()
            .map(|summary| ChatListEntry {
                running: service.is_running(summary.id),
                summary,
            })
            .collect();
        Ok(to_value(&list))
    })
}

/// `create {title?}`.
#[derive(JsonSchema)]
struct Create {
    title: Option<String>,
}

impl Request for Create {
    type Wire = Self;
    const OP: &'static str = "create";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        let title = optional_str(&fields, "title")?.map(str::to_string);
        Ok(Create { title })
    }
}

fn create(door: &ChatDoor, request: Create) -> Reply<'_> {
    Box::pin(async move {
        let title = request.title.as_deref().unwrap_or("New chat");
        // In the project open now: the archive's project-scoped searches see it there.
        let id = door
            .service
            .create_chat_here(title)
            .await
            .map_err(service_error)?;
        Ok(json!({ "id": id }))
    })
}

/// "Start fresh chat" and the list's "New chat from handoff": `{chat, title?}`.
struct NewChatFromHandoff {
    from: ChatId,
    title: Option<String>,
}

impl Request for NewChatFromHandoff {
    type Wire = NewChatFromHandoffWire;
    const OP: &'static str = "newChatFromHandoff";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        let from = chat_id(&fields)?;
        let title = optional_str(&fields, "title")?
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        Ok(NewChatFromHandoff { from, title })
    }
}

/// `newChatFromHandoff` on the wire: the chat to start from is `chat`.
#[derive(JsonSchema)]
struct NewChatFromHandoffWire {
    /// The chat whose handoff seeds the new one.
    #[allow(dead_code)]
    chat: ChatId,
    #[allow(dead_code)]
    title: Option<String>,
}

fn new_chat_from_handoff(door: &ChatDoor, request: NewChatFromHandoff) -> Reply<'_> {
    Box::pin(async move {
        let id = door
            .service
            .new_chat_from_handoff(request.from, request.title.as_deref())
            .map_err(service_error)?;
        Ok(json!({ "id": id }))
    })
}

/// `rename {chat, title}`.
#[derive(JsonSchema)]
struct Rename {
    chat: ChatId,
    title: String,
}

impl Request for Rename {
    type Wire = Self;
    const OP: &'static str = "rename";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        let chat = chat_id(&fields)?;
        let title = required_str(&fields, "title")?.to_string();
        Ok(Rename { chat, title })
    }
}

fn rename(door: &ChatDoor, request: Rename) -> Reply<'_> {
    Box::pin(async move {
        door.service
            .rename_chat(request.chat, &request.title)
            .map_err(service_error)?;
        Ok(Value::Null)
    })
}

fn delete(door: &ChatDoor, request: Delete) -> Reply<'_> {
    Box::pin(async move {
        door.service
            .delete_chat(request.chat)
            .map_err(service_error)?;
        Ok(Value::Null)
    })
}

fn history(door: &ChatDoor, request: History) -> Reply<'_> {
    Box::pin(async move {
        let (service, chat) = (&door.service, request.chat);
        // A long chat's fold takes milliseconds of CPU under the log's lock: off the async
        // workers, which also carry telemetry and the other chats.
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
    })
}

// ---- the archive (spec 30, A2–A3) ----------------------------------------------------------

/// `searchSessions {query, filter?, cursor?, limit?}`.
struct SearchSessions(SearchRequest);

impl Request for SearchSessions {
    type Wire = SearchRequest;
    const OP: &'static str = "searchSessions";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        parse_fields(fields).map(SearchSessions)
    }
}

/// `searchEvents`: `chat` and the fields of `searchSessions`, within that chat.
#[derive(JsonSchema)]
struct SearchEvents {
    chat: ChatId,
    #[serde(flatten)]
    request: SearchRequest,
}

impl Request for SearchEvents {
    type Wire = Self;
    const OP: &'static str = "searchEvents";
    fn read(mut fields: Fields) -> Result<Self, CommandError> {
        let chat = chat_id(&fields)?;
        fields.remove("chat");
        let request = parse_fields(fields)?;
        Ok(SearchEvents { chat, request })
    }
}

fn search_sessions(door: &ChatDoor, request: SearchSessions) -> Reply<'_> {
    Box::pin(search(door, None, request.0))
}

fn search_events(door: &ChatDoor, request: SearchEvents) -> Reply<'_> {
    Box::pin(search(door, Some(request.chat), request.request))
}

async fn search(
    door: &ChatDoor,
    chat: Option<ChatId>,
    request: SearchRequest,
) -> Result<Value, CommandError> {
    let reader = door.service.clone();
    let page = tokio::task::spawn_blocking(move || match chat {
        Some(chat) => reader.search_events(chat, &request),
        None => reader.search_sessions(&request),
    })
    .await
    .map_err(|e| CommandError::failed(format!("the search stopped: {e}")))?
    .map_err(service_error)?;
    Ok(to_value(&page))
}

/// "Cite in this chat": `{chat, hits: [{chat, seq}], visibility?}`.
#[derive(JsonSchema)]
struct Cite {
    chat: ChatId,
    #[serde(flatten)]
    request: CiteRequest,
}

impl Request for Cite {
    type Wire = Self;
    const OP: &'static str = "cite";
    fn read(mut fields: Fields) -> Result<Self, CommandError> {
        let chat = chat_id(&fields)?;
        fields.remove("chat");
        let request = parse_fields(fields)?;
        Ok(Cite { chat, request })
    }
}

fn cite(door: &ChatDoor, request: Cite) -> Reply<'_> {
    Box::pin(async move {
        let Cite { chat, request } = request;
        let cited = door
            .service
            .cite(chat, &request.hits, &request.visibility)
            .map_err(service_error)?;
        Ok(to_value(&cited))
    })
}

// ---- a turn --------------------------------------------------------------------------------

/// `send {chat, text}`; the text may not be blank.
#[derive(JsonSchema)]
struct SendMessage {
    chat: ChatId,
    text: String,
}

impl Request for SendMessage {
    type Wire = Self;
    const OP: &'static str = "send";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        let chat = chat_id(&fields)?;
        let text = required_str(&fields, "text")?;
        if text.trim().is_empty() {
            return Err(CommandError::invalid("text", "the message is empty"));
        }
        Ok(SendMessage {
            chat,
            text: text.to_string(),
        })
    }
}

fn send(door: &ChatDoor, request: SendMessage) -> Reply<'_> {
    Box::pin(async move {
        door.service
            .send(request.chat, &request.text)
            .await
            .map_err(service_error)?;
        Ok(Value::Null)
    })
}

fn retry(door: &ChatDoor, request: Retry) -> Reply<'_> {
    Box::pin(async move {
        door.service
            .retry(request.chat)
            .await
            .map_err(service_error)?;
        Ok(Value::Null)
    })
}

/// `approve {chat, callId}`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Approve {
    chat: ChatId,
    call_id: String,
}

impl Request for Approve {
    type Wire = Self;
    const OP: &'static str = "approve";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        let chat = chat_id(&fields)?;
        let call_id = required_str(&fields, "callId")?.to_string();
        Ok(Approve { chat, call_id })
    }
}

fn approve(door: &ChatDoor, request: Approve) -> Reply<'_> {
    Box::pin(async move {
        door.service
            .approve(request.chat, &request.call_id)
            .map_err(service_error)?;
        Ok(Value::Null)
    })
}

/// `deny {chat, callId, reason?}` (the model reads the reason).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Deny {
    chat: ChatId,
    call_id: String,
    reason: Option<String>,
}

impl Request for Deny {
    type Wire = Self;
    const OP: &'static str = "deny";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        let reason = optional_str(&fields, "reason")?.map(str::to_string);
        let chat = chat_id(&fields)?;
        let call_id = required_str(&fields, "callId")?.to_string();
        Ok(Deny {
            chat,
            call_id,
            reason,
        })
    }
}

fn deny(door: &ChatDoor, request: Deny) -> Reply<'_> {
    Box::pin(async move {
        door.service
            .deny(request.chat, &request.call_id, request.reason.as_deref())
            .map_err(service_error)?;
        Ok(Value::Null)
    })
}

fn approve_all(door: &ChatDoor, request: ApproveAll) -> Reply<'_> {
    Box::pin(async move {
        door.service
            .approve_all(request.chat)
            .map_err(service_error)?;
        Ok(Value::Null)
    })
}

fn cancel(door: &ChatDoor, request: Cancel) -> Reply<'_> {
    Box::pin(async move {
        door.service.cancel(request.chat);
        Ok(Value::Null)
    })
}

// ---- settings and the provider -------------------------------------------------------------

fn get_settings(door: &ChatDoor, _: GetSettings) -> Reply<'_> {
    Box::pin(async move {
        let stored = door.settings.lock().await.clone();
        Ok(door.settings_view(&stored))
    })
}

/// `setSettings`: any settings fields, and `apiKey`; checked by the settings themselves.
struct SetSettings(Fields);

impl Request for SetSettings {
    type Wire = SettingsUpdate;
    const OP: &'static str = "setSettings";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        Ok(SetSettings(fields))
    }
}

/// `setSettings` on the wire: any of the settings, and `apiKey` (absent: keep; null or
/// blank: forget; a string: store in the key store).
struct SettingsUpdate;

impl JsonSchema for SettingsUpdate {
    fn schema_name() -> Cow<'static, str> {
        "SettingsUpdate".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = generator.subschema_for::<super::StoredSettings>();
        schema.remove("required");
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.insert(
                "apiKey".into(),
                json!({
                    "description": "The provider's API key: null or blank forgets it.",
                    "type": ["string", "null"],
                }),
            );
        }
        schema
    }
}

fn set_settings(door: &ChatDoor, request: SetSettings) -> Reply<'_> {
    Box::pin(door.set_settings(request.0))
}

fn list_models(door: &ChatDoor, _: ListModels) -> Reply<'_> {
    Box::pin(async move {
        let models = door.service.list_models().await.map_err(service_error)?;
        let models: Vec<ModelEntry> = models
            .into_iter()
            .map(|m| ModelEntry {
                id: m.id,
                display_name: m.display_name,
            })
            .collect();
        Ok(to_value(&models))
    })
}

/// Read-only and content-free (numbers, booleans, closed enums): the Health view.
fn health(door: &ChatDoor, _: Health) -> Reply<'_> {
    Box::pin(async move {
        let retrieval = door.retrieval.clone();
        let health = tokio::task::spawn_blocking(move || retrieval.health())
            .await
            .map_err(|e| CommandError::failed(format!("reading the health stopped: {e}")))?;
        Ok(to_value(&health))
    })
}

// ---- the memory manager --------------------------------------------------------------------
//
// Every write is the person's (this door is the UI's, never the model's). Every memory op
// may name the proposal it answers (`chat` and `about`); only `memoryAdd` records it.

/// The proposal a memory op answers, if it names one.
type Answered = Option<(ChatId, String)>;

/// `category?`: `None` when absent or null.
fn category(fields: &Fields) -> Result<Option<Category>, CommandError> {
    match fields.get("category") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|_| {
            CommandError::invalid(
                "category",
                "expected preference, correction, reference or project",
            )
        }),
    }
}

/// `fact`, not `id`: `id` is the request's own framing.
fn fact_id(fields: &Fields) -> Result<i64, CommandError> {
    fields
        .get("fact")
        .and_then(Value::as_i64)
        .ok_or_else(|| CommandError::invalid("fact", "expected a fact id (a number)"))
}

fn store_error(e: sextant_memory::MemoryError) -> CommandError {
    CommandError::invalid("text", e.to_string())
}

/// Runs `f` on the store, off the async workers, with the open project's file.
async fn on_store(
    door: &ChatDoor,
    f: impl FnOnce(&Memory, Option<&str>) -> Result<Value, CommandError> + Send + 'static,
) -> Result<Value, CommandError> {
    let project = crate::mechanisms::memory::project_path(door.service.runtime()).await;
    let memory = door.memory.clone();
    tokio::task::spawn_blocking(move || f(&memory, project.as_deref()))
        .await
        .map_err(|e| CommandError::failed(format!("the memory stopped: {e}")))?
}

/// `memoryList {category?}`.
#[derive(JsonSchema)]
struct MemoryList {
    category: Option<Category>,
}

impl Request for MemoryList {
    type Wire = Self;
    const OP: &'static str = "memoryList";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        answered_proposal(&fields)?;
        Ok(MemoryList {
            category: category(&fields)?,
        })
    }
}

fn memory_list(door: &ChatDoor, request: MemoryList) -> Reply<'_> {
    Box::pin(on_store(door, move |memory, _| {
        let facts = memory
            .with(|m| m.list(request.category))
            .map_err(store_error)?;
        Ok(json!({ "facts": facts }))
    }))
}

/// `memorySearch {query}`.
#[derive(JsonSchema)]
struct MemorySearch {
    query: String,
}

impl Request for MemorySearch {
    type Wire = Self;
    const OP: &'static str = "memorySearch";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        answered_proposal(&fields)?;
        let query = required_str(&fields, "query")?.to_string();
        Ok(MemorySearch { query })
    }
}

fn memory_search(door: &ChatDoor, request: MemorySearch) -> Reply<'_> {
    Box::pin(on_store(door, move |memory, project| {
        let facts = memory
            .with(|m| m.search(&request.query, project, 20))
            .map_err(store_error)?;
        Ok(json!({ "facts": facts }))
    }))
}

/// `memoryAdd {category, text, chat?, about?}`.
struct MemoryAdd {
    answered: Answered,
    category: Category,
    text: String,
}

impl Request for MemoryAdd {
    type Wire = MemoryAddWire;
    const OP: &'static str = "memoryAdd";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        let answered = answered_proposal(&fields)?;
        let category = category(&fields)?
            .ok_or_else(|| CommandError::invalid("category", "choose a category"))?;
        let text = required_str(&fields, "text")?.to_string();
        Ok(MemoryAdd {
            answered,
            category,
            text,
        })
    }
}

/// `memoryAdd` on the wire: a chip's answer also names its proposal (`chat`, `about`).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct MemoryAddWire {
    category: Category,
    text: String,
    /// The chat of the proposal this answers.
    chat: Option<ChatId>,
    /// The proposal this answers (`call:<id>`, `seq:<n>`, `msg:<n>`).
    about: Option<String>,
}

fn memory_add(door: &ChatDoor, request: MemoryAdd) -> Reply<'_> {
    Box::pin(async move {
        let MemoryAdd {
            answered,
            category,
            text,
        } = request;
        let result = on_store(door, move |memory, project| {
            let project = if category == Category::Project {
                Some(project.ok_or_else(|| {
                    CommandError::invalid("category", "a project fact needs an open, saved project")
                })?)
            } else {
                None
            };
            let written = memory
                .with(|m| m.add(category, &text, project))
                .map_err(store_error)?;
            Ok(to_value(&written))
        })
        .await?;
        // A chip's answer is part of its chat's record, so it stays answered.
        if let Some((chat, about)) = answered {
            let payload = json!({"about": about, "kept": true, "fact": result["fact"]["id"]});
            door.service
                .record(chat, MEMORY_ANSWERED, payload)
                .map_err(service_error)?;
        }
        Ok(result)
    })
}

/// `memoryEdit {fact, text}`.
#[derive(JsonSchema)]
struct MemoryEdit {
    fact: i64,
    text: String,
}

impl Request for MemoryEdit {
    type Wire = Self;
    const OP: &'static str = "memoryEdit";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        answered_proposal(&fields)?;
        let fact = fact_id(&fields)?;
        let text = required_str(&fields, "text")?.to_string();
        Ok(MemoryEdit { fact, text })
    }
}

fn memory_edit(door: &ChatDoor, request: MemoryEdit) -> Reply<'_> {
    Box::pin(on_store(door, move |memory, _| {
        let edited = memory
            .with(|m| m.edit(request.fact, &request.text))
            .map_err(store_error)?;
        Ok(to_value(&edited))
    }))
}

/// `memoryDelete {fact}`.
#[derive(JsonSchema)]
struct MemoryDelete {
    fact: i64,
}

impl Request for MemoryDelete {
    type Wire = Self;
    const OP: &'static str = "memoryDelete";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        answered_proposal(&fields)?;
        Ok(MemoryDelete {
            fact: fact_id(&fields)?,
        })
    }
}

fn memory_delete(door: &ChatDoor, request: MemoryDelete) -> Reply<'_> {
    Box::pin(on_store(door, move |memory, _| {
        let deleted = memory
            .with(|m| m.delete(request.fact))
            .map_err(store_error)?;
        Ok(json!({ "deleted": deleted }))
    }))
}

/// `memoryDismiss {chat, about}`: the person dismissed that proposal.
#[derive(JsonSchema)]
struct MemoryDismiss {
    chat: ChatId,
    about: String,
}

impl Request for MemoryDismiss {
    type Wire = Self;
    const OP: &'static str = "memoryDismiss";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        let (chat, about) = answered_proposal(&fields)?
            .ok_or_else(|| CommandError::invalid("about", "which proposal (`chat` and `about`)"))?;
        Ok(MemoryDismiss { chat, about })
    }
}

fn memory_dismiss(door: &ChatDoor, request: MemoryDismiss) -> Reply<'_> {
    Box::pin(async move {
        let payload = json!({"about": request.about, "kept": false});
        door.service
            .record(request.chat, MEMORY_ANSWERED, payload)
            .map_err(service_error)?;
        Ok(Value::Null)
    })
}

/// `memoryClear {confirmed: true}`, which the UI sends only after the person confirmed in a
/// dialog; without it, `needsConfirmation`.
struct MemoryClear;

impl Request for MemoryClear {
    type Wire = MemoryClearWire;
    const OP: &'static str = "memoryClear";
    fn read(fields: Fields) -> Result<Self, CommandError> {
        answered_proposal(&fields)?;
        if fields.get("confirmed") != Some(&Value::Bool(true)) {
            return Err(CommandError::new(
                ErrorCode::NeedsConfirmation,
                "clearing the memory deletes every fact; ask the person, then send confirmed: true",
            ));
        }
        Ok(MemoryClear)
    }
}

/// `memoryClear` on the wire: `confirmed` is true only after the person confirmed.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct MemoryClearWire {
    confirmed: bool,
}

fn memory_clear(door: &ChatDoor, _: MemoryClear) -> Reply<'_> {
    Box::pin(on_store(door, |memory, _| {
        let deleted = memory.with(|m| m.clear()).map_err(store_error)?;
        Ok(json!({ "deleted": deleted }))
    }))
}

// ---- reading a request ------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{json, Map, Value};

    use super::{request_schema, OPS};

    /// The ops `docs/ui-protocol.md` lists in its table of the assistant's chats.
    fn documented() -> BTreeSet<String> {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/ui-protocol.md"
        ))
        .expect("docs/ui-protocol.md");
        let section = doc
            .split("## The assistant's chats")
            .nth(1)
            .expect("the chats section")
            .split("\n## ")
            .next()
            .unwrap_or_default()
            // The ops' table ends where the settings (and their table) begin.
            .split("\nSettings:")
            .next()
            .unwrap_or_default();
        section
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|row| row.split(" |").next())
            .flat_map(|cell| {
                cell.split('/')
                    .map(|name| name.trim().trim_matches('`').to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn every_documented_op_has_a_handler_and_every_handler_is_documented() {
        let handled: BTreeSet<String> = OPS.iter().map(|o| o.name.to_string()).collect();
        assert_eq!(handled.len(), OPS.len(), "an op is in the table twice");
        let documented = documented();
        assert!(documented.len() > 20, "{documented:?}");
        assert_eq!(handled, documented);
    }

    /// A valid value for each field a request may carry, by name.
    fn sample(field: &str) -> Value {
        match field {
            "chat" | "fact" | "limit" => json!(1),
            "title" | "text" | "query" | "reason" | "model" => json!("a"),
            "callId" => json!("call-1"),
            "about" => json!("call:1"),
            "category" => json!("preference"),
            "confirmed" => json!(true),
            "hits" => json!([{"chat": 1, "seq": 1}]),
            "filter" => json!({}),
            "cursor" | "apiKey" => Value::Null,
            other => panic!("no sample for the field `{other}`: add one"),
        }
    }

    /// The schema's promise is what reading a request does: a request with just the fields
    /// it marks required is read, and one without any of them is refused naming that field.
    #[test]
    fn the_request_schema_marks_required_exactly_the_fields_a_request_must_carry() {
        let schema = request_schema();
        let variants = schema["oneOf"].as_array().expect("oneOf");
        assert_eq!(variants.len(), OPS.len());
        for (op, variant) in OPS.iter().zip(variants) {
            assert_eq!(variant["properties"]["op"]["enum"], json!([op.name]));
            let required: Vec<&str> = variant["required"]
                .as_array()
                .expect("required")
                .iter()
                .filter_map(Value::as_str)
                .filter(|f| *f != "op")
                .collect();
            let fields: Map<String, Value> = required
                .iter()
                .map(|f| (f.to_string(), sample(f)))
                .collect();
            if let Err(e) = (op.check)(fields.clone()) {
                panic!("`{}` with its required fields {required:?}: {e}", op.name);
            }
            for missing in &required {
                let mut without = fields.clone();
                without.remove(*missing);
                assert!(
                    (op.check)(without).is_err(),
                    "`{}` read without `{missing}`, which its schema requires",
                    op.name
                );
            }
        }
    }
}
