//! The chat service: the one object the doors (the desktop app, `sextant serve`) talk to.
//!
//! Owns the chats as a door sees them – list, create, rename, delete, the UI history – and
//! running turns: [`ChatService::send`] (and [`ChatService::retry`]) builds each turn's
//! prompt (role and docs blocks, the live state read through the runtime before every
//! request, the essential tools plus discovery), runs the [`Conversation`] on a task of
//! its own and publishes what happens as
//! [`ServiceEvent`]s on one broadcast channel (each carries its chat id and serializes to
//! JSON, so a door forwards them verbatim). It also owns approvals through the UI: a call
//! that needs a person publishes [`ServiceEventKind::ApprovalRequested`] and waits for
//! [`ChatService::approve`], [`ChatService::deny`], [`ChatService::approve_all`], a cancel,
//! or the approval timeout (then it is denied with "no answer"); every answer is recorded
//! in the chat log with who gave it.
//!
//! One turn at a time per chat: a second `send` while one runs is refused, because two
//! turns appending to one log would interleave their calls and results.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use sextant_commands::CommandDoor;
use sextant_commands::Tier;
use sextant_providers::capabilities::{self, ServerFacts, ToolSupport};
use sextant_providers::{Client, ModelInfo, ProviderError, StopReason};

use crate::Commands;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::engine::chatlog::cite::Cited;
use crate::engine::chatlog::{
    kinds, ChatId, ChatLog, ChatLogError, ChatSummary, CitedBy, Event, HitRef, SearchPage,
    SearchRequest, UiItem, Visibility,
};
use crate::engine::context::Envelope;
use crate::engine::conversation::{
    utf16_len, Conversation, ConversationError, Prompt, Settings, SystemSource, TurnEnd, TurnEvent,
    TurnReport, UnloggedText,
};
use crate::engine::pipeline::{
    Approval, Approver, AskRequest, BoxFuture, CallContext, CallerInfo, CancelToken, Pipeline,
    ResultStatus, RuntimeExecutor,
};
use crate::engine::seams::{Contributors, RoleBlock, Seams};
use crate::engine::tools::{ToolSet, ToolsError, DISCOVERY, ESSENTIAL};
use crate::mechanisms::handoff;
use crate::mechanisms::memory::Memory;
use crate::mechanisms::probe::{self, Compliance};
use crate::mechanisms::{self, TurnInputs, TurnParts, TurnServices};

/// How many events a subscriber may fall behind before it misses some (it then gets
/// `RecvError::Lagged` and should re-read [`ChatService::history`]).
pub const EVENT_CAPACITY: usize = 1024;

pub use crate::settings::{ConstrainedCalls, Limits, Mechanisms, ProviderKind, ServiceSettings};

/// One event of one chat, as doors forward it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceEvent {
    pub chat: ChatId,
    #[serde(flatten)]
    pub kind: ServiceEventKind,
}

/// What happened. Mirrors [`TurnEvent`] plus the approval prompts.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ServiceEventKind {
    TextDelta {
        text: String,
        /// Where it starts in the turn's streamed text (UTF-16 code units), so a page that
        /// read the history mid-reply can skip what that already had.
        at: u64,
    },
    ToolCallStarted {
        id: String,
        name: String,
    },
    ToolCallPending {
        id: String,
        name: String,
        args: Value,
    },
    ToolCallRunning {
        id: String,
    },
    ToolCallDone {
        id: String,
        status: ResultStatus,
        content: String,
    },
    Usage {
        input_tokens: u64,
        output_tokens: u64,
        cache_read_tokens: u64,
        cache_creation_tokens: u64,
        /// The output count is an estimate (a stopped reply).
        estimated: bool,
    },
    /// The server has sent nothing for `seconds` (a local model reading a long prompt, or a
    /// stalled server); repeated while the silence lasts. The next event ends it.
    Waiting {
        seconds: u64,
    },
    /// A call waits for the person: answer with approve / deny / approveAll.
    ApprovalRequested {
        call_id: String,
        name: String,
        args: Value,
        tier: Option<Tier>,
        /// What this very call does that needs a person's yes beyond its tier (it runs a
        /// program, writes outside the user's folders, sends to a device), as data the UI
        /// words in the person's language.
        #[serde(skip_serializing_if = "Option::is_none")]
        question: Option<sextant_commands::Question>,
    },
    /// The prompt is closed (answered, timed out or cancelled).
    ApprovalResolved {
        call_id: String,
        approved: bool,
        by: Decider,
        /// A denial's reason, as the model reads it.
        reason: Option<String>,
    },
    /// Always the last event of a turn; a new `send` is accepted from here on.
    TurnEnded {
        end: TurnEndKind,
        /// The stop reason, the call limit or the failure, as text.
        detail: Option<String>,
    },
}

impl ServiceEventKind {
    fn from_turn(event: TurnEvent) -> Option<ServiceEventKind> {
        Some(match event {
            // `at` is filled in by the forwarder, which counts the turn's text.
            TurnEvent::TextDelta(text) => ServiceEventKind::TextDelta { text, at: 0 },
            TurnEvent::ToolCallStarted { id, name } => {
                ServiceEventKind::ToolCallStarted { id, name }
            }
            TurnEvent::ToolCallPending { id, name, args } => {
                ServiceEventKind::ToolCallPending { id, name, args }
            }
            TurnEvent::ToolCallRunning { id } => ServiceEventKind::ToolCallRunning { id },
            TurnEvent::ToolCallDone {
                id,
                status,
                content,
            } => ServiceEventKind::ToolCallDone {
                id,
                status,
                content,
            },
            TurnEvent::Usage(u) => ServiceEventKind::Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cache_read_tokens: u.cache_read_tokens,
                cache_creation_tokens: u.cache_creation_tokens,
                estimated: u.estimated,
            },
            TurnEvent::Waiting { seconds } => ServiceEventKind::Waiting { seconds },
            // The service publishes the end itself, after the chat is free again.
            TurnEvent::Ended(_) => return None,
        })
    }

    fn ended(end: &TurnEnd) -> ServiceEventKind {
        let (end, detail) = match end {
            TurnEnd::Finished { stop } => (TurnEndKind::Finished, Some(stop_text(stop))),
            TurnEnd::ToolCallLimit { limit } => {
                (TurnEndKind::ToolCallLimit, Some(limit.to_string()))
            }
            TurnEnd::Cancelled => (TurnEndKind::Cancelled, None),
            TurnEnd::Failed { message } => (TurnEndKind::Failed, Some(message.clone())),
        };
        ServiceEventKind::TurnEnded { end, detail }
    }
}

/// What ended a turn (`turnEnded.end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TurnEndKind {
    Finished,
    ToolCallLimit,
    Cancelled,
    Failed,
}

/// Who or what closed an approval prompt. Recorded in the chat log with the decision
/// (a structural `approval` event), so a chat shows afterwards who let each edit through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Decider {
    /// The person pressed Approve or Deny.
    Person,
    /// The person's "approve all" for this turn's project edits.
    ApproveAll,
    /// Nobody answered within the approval timeout.
    Timeout,
    /// The person stopped the turn.
    Cancelled,
    /// The turn ended while the prompt was open.
    TurnEnded,
}

fn stop_text(stop: &StopReason) -> String {
    match stop {
        StopReason::EndTurn => "end_turn".into(),
        StopReason::MaxTokens => "max_tokens".into(),
        StopReason::ToolUse => "tool_use".into(),
        StopReason::StopSequence => "stop_sequence".into(),
        StopReason::Refusal => "refusal".into(),
        StopReason::Other(other) => other.clone(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("chat log: {0}")]
    Log(#[from] ChatLogError),
    #[error("chat {0} already has a turn running; wait for it to end or cancel it")]
    TurnRunning(ChatId),
    #[error("chat {0} has nothing to retry: the assistant already answered its last message; send a new one")]
    NothingToRetry(ChatId),
    #[error("no approval is pending for call `{0}` (already answered, timed out or cancelled)")]
    NoPendingApproval(String),
    #[error("could not set up the provider client: {0}; check the provider settings")]
    Provider(#[from] ProviderError),
    #[error("could not build the tool list: {0}")]
    Tools(#[from] ToolsError),
    #[error(transparent)]
    Conversation(#[from] ConversationError),
    #[error("the turn of chat {0} stopped unexpectedly (its task panicked or was aborted)")]
    TurnAborted(ChatId),
}

/// A running turn, returned by [`ChatService::send`]. Dropping it does not stop the turn.
pub struct TurnHandle {
    chat: ChatId,
    task: JoinHandle<Result<TurnReport, ConversationError>>,
}

impl TurnHandle {
    pub fn chat(&self) -> ChatId {
        self.chat
    }

    /// Waits for the turn to end.
    pub async fn wait(self) -> Result<TurnReport, ServiceError> {
        match self.task.await {
            Ok(result) => Ok(result?),
            Err(_) => Err(ServiceError::TurnAborted(self.chat)),
        }
    }
}

/// What the service keeps about a running turn.
struct RunningTurn {
    cancel: CancelToken,
    /// Set by `approve_all`: the rest of this turn's Confirm calls need no prompt.
    approve_confirm: Arc<AtomicBool>,
    /// The reply text streamed but not logged yet (read under the log's lock).
    unlogged: Arc<Mutex<UnloggedText>>,
}

struct PendingApproval {
    name: String,
    args: Value,
    tier: Option<Tier>,
    question: Option<sextant_commands::Question>,
    answer: oneshot::Sender<(Approval, Decider)>,
}

struct Inner {
    log: Arc<Mutex<ChatLog>>,
    runtime: Commands,
    settings: Mutex<ServiceSettings>,
    events: broadcast::Sender<ServiceEvent>,
    turns: Mutex<HashMap<ChatId, RunningTurn>>,
    pending: Mutex<HashMap<PendingKey, PendingApproval>>,
    /// The consented memory, when the app has one (the door opens it in its data folder).
    memory: Mutex<Option<Arc<Memory>>>,
    /// Which models reproduce the probe's sentinel (in memory until the door gives the
    /// persisted one).
    compliance: Mutex<Arc<Compliance>>,
    /// What each local server said about the model it runs – its tool support and context
    /// window – by base URL and model (asked once per service), and the context a server
    /// named when it refused a request as too long (which wins: it is what the server
    /// really enforces).
    servers: Mutex<HashMap<(String, String), KnownServer>>,
    /// The provider client of the last turn and what it was built from: reused while the
    /// provider, address and key stay the same, so turns share its connection pool (no new
    /// TCP and TLS handshake per turn) and do not rebuild its TLS configuration.
    client: Mutex<Option<(ClientFor, Client)>>,
}

/// What a provider client is built from.
#[derive(PartialEq, Eq)]
struct ClientFor {
    provider: crate::settings::ProviderKind,
    base_url: String,
    api_key: Option<String>,
}

/// What is known of one server and model.
#[derive(Debug, Clone, Copy, Default)]
struct KnownServer {
    facts: Option<ServerFacts>,
    refused_above: Option<u32>,
}

/// The log-only notice that the server drops the tools sent to it: `{model, baseUrl}`.
pub const TOOLS_UNAVAILABLE: &str = "tools_unavailable";

/// Logs [`TOOLS_UNAVAILABLE`] after the person's message.
struct ToolsUnavailableNotice(Value);

impl crate::engine::seams::InboundRouter for ToolsUnavailableNotice {
    fn route(&self, _text: &str) -> Vec<Event> {
        vec![Event::structural(TOOLS_UNAVAILABLE, self.0.clone())]
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a map update or a log append (a transaction): a panic
    // elsewhere cannot leave them half-done.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Prompts are per chat: two chats may well use the same call id (`call_0`).
type PendingKey = (ChatId, String);

impl Inner {
    fn publish(&self, chat: ChatId, kind: ServiceEventKind) {
        // No subscriber is fine: the log has everything.
        let _ = self.events.send(ServiceEvent { chat, kind });
    }

    /// Answers a pending prompt; `false` when there was none, or when the asking call had
    /// already gone (timed out or cancelled in between): then nothing was decided here.
    fn answer(&self, chat: ChatId, call_id: &str, approval: Approval, by: Decider) -> bool {
        let key = (chat, call_id.to_string());
        let Some(pending) = lock(&self.pending).remove(&key) else {
            return false;
        };
        let (name, tier) = (pending.name.clone(), pending.tier);
        if pending.answer.send((approval.clone(), by)).is_err() {
            return false;
        }
        self.resolved(chat, call_id, &name, tier, &approval, by);
        true
    }

    /// Tells the UI a prompt closed and records the decision in the chat log (who let the
    /// call through, or why not). The decision stands even if the record cannot be
    /// written (it is also in the call's result); that failure is logged.
    fn resolved(
        &self,
        chat: ChatId,
        call_id: &str,
        name: &str,
        tier: Option<Tier>,
        approval: &Approval,
        by: Decider,
    ) {
        let reason = match approval {
            Approval::Denied(reason) => Some(reason.clone()),
            _ => None,
        };
        let approved = reason.is_none();
        let reason = reason.flatten();
        self.publish(
            chat,
            ServiceEventKind::ApprovalResolved {
                call_id: call_id.to_string(),
                approved,
                by,
                reason: reason.clone(),
            },
        );
        let event = Event::structural(
            kinds::APPROVAL,
            serde_json::json!({
                "callId": call_id,
                "name": name,
                "tier": tier,
                "approved": approved,
                "by": by,
                "reason": reason,
            }),
        );
        if let Err(e) = lock(&self.log).append(chat, &event) {
            tracing::warn!(chat, call = call_id, error = %e, "approval not recorded");
        }
    }

    fn deny_all(&self, chat: ChatId, reason: &str, by: Decider) {
        let ids: Vec<String> = lock(&self.pending)
            .keys()
            .filter(|(c, _)| *c == chat)
            .map(|(_, id)| id.clone())
            .collect();
        for id in ids {
            self.answer(chat, &id, Approval::Denied(Some(reason.to_string())), by);
        }
    }
}

/// The approver of one turn: asks through the service's events.
struct UiApprover {
    inner: Arc<Inner>,
    chat: ChatId,
    approve_confirm: Arc<AtomicBool>,
    timeout: Duration,
}

impl Approver for UiApprover {
    fn ask<'a>(
        &'a self,
        ctx: &'a CallContext,
        _request: &'a AskRequest,
    ) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            // "Approve all" is consent to this turn's project edits only: device control
            // and destructive steps are asked about one by one, always.
            if ctx.tier() == Some(Tier::Confirm) && self.approve_confirm.load(Ordering::SeqCst) {
                let approval = Approval::AllowedOnce;
                self.inner.resolved(
                    self.chat,
                    ctx.id(),
                    ctx.name(),
                    ctx.tier(),
                    &approval,
                    Decider::ApproveAll,
                );
                return approval;
            }
            let (tx, rx) = oneshot::channel();
            let key = (self.chat, ctx.id().to_string());
            lock(&self.inner.pending).insert(
                key.clone(),
                PendingApproval {
                    name: ctx.name().to_string(),
                    args: ctx.args().clone(),
                    tier: ctx.tier(),
                    question: ctx.needs_person().cloned(),
                    answer: tx,
                },
            );
            // Closes the prompt as cancelled if this future is dropped (the turn stopped).
            let guard = ScopedPending {
                inner: &self.inner,
                key,
            };
            self.inner.publish(
                self.chat,
                ServiceEventKind::ApprovalRequested {
                    call_id: ctx.id().to_string(),
                    name: ctx.name().to_string(),
                    args: ctx.args().clone(),
                    tier: ctx.tier(),
                    question: ctx.needs_person().cloned(),
                },
            );
            let (answer, timed_out) = match tokio::time::timeout(self.timeout, rx).await {
                Ok(Ok((answer, _by))) => (answer, false),
                // The sender went without a word: only a cancel does that; the guard
                // reports it.
                Ok(Err(_)) => (Approval::Denied(Some("cancelled".into())), false),
                Err(_) => (Approval::Denied(Some("no answer".into())), true),
            };
            if timed_out {
                // Take the prompt back, so a late Approve finds nothing to answer. An
                // Approve that took it in the meantime could not deliver (the wait was
                // over) and reported nothing, so the timeout is reported either way.
                lock(&self.inner.pending).remove(&guard.key);
                self.inner.resolved(
                    self.chat,
                    ctx.id(),
                    ctx.name(),
                    ctx.tier(),
                    &answer,
                    Decider::Timeout,
                );
            }
            drop(guard);
            answer
        })
    }
}

/// Closes a prompt nobody answered when the asking call goes away (a cancel): the UI is
/// told and the chat log records it.
struct ScopedPending<'a> {
    inner: &'a Inner,
    key: PendingKey,
}

impl Drop for ScopedPending<'_> {
    fn drop(&mut self) {
        let Some(p) = lock(&self.inner.pending).remove(&self.key) else {
            return;
        };
        let (chat, call_id) = &self.key;
        self.inner.resolved(
            *chat,
            call_id,
            &p.name,
            p.tier,
            &Approval::Denied(Some("cancelled".into())),
            Decider::Cancelled,
        );
    }
}

/// The chat service; cheap to clone (all clones share the chats and turns).
#[derive(Clone)]
pub struct ChatService {
    inner: Arc<Inner>,
}

impl ChatService {
    /// Opens (or creates) the chat database at `db_path`.
    pub fn open(
        db_path: impl AsRef<Path>,
        runtime: impl CommandDoor + 'static,
        settings: ServiceSettings,
    ) -> Result<ChatService, ServiceError> {
        let log = ChatLog::open(db_path)?;
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        Ok(ChatService {
            inner: Arc::new(Inner {
                log: Arc::new(Mutex::new(log)),
                runtime: Arc::new(runtime),
                settings: Mutex::new(settings),
                events,
                turns: Mutex::new(HashMap::new()),
                pending: Mutex::new(HashMap::new()),
                memory: Mutex::new(None),
                compliance: Mutex::new(Arc::new(Compliance::in_memory())),
                servers: Mutex::new(HashMap::new()),
                client: Mutex::new(None),
            }),
        })
    }

    /// The provider client for `settings`: the last one while it was built from the same
    /// provider, address and key.
    fn client(&self, settings: &ServiceSettings) -> Result<Client, ProviderError> {
        let wanted = ClientFor {
            provider: settings.provider,
            base_url: settings.base_url.clone(),
            api_key: settings.api_key.clone(),
        };
        let mut kept = lock(&self.inner.client);
        if let Some((built_for, client)) = kept.as_ref() {
            if *built_for == wanted {
                return Ok(client.clone());
            }
        }
        let client = settings.client()?;
        *kept = Some((wanted, client.clone()));
        Ok(client)
    }

    /// The install's key, kept in the chat database: what binds the door's settings file to
    /// this install (each use of it is domain-separated).
    pub(crate) fn install_key(&self) -> Result<Vec<u8>, ServiceError> {
        Ok(lock(&self.inner.log).install_key()?)
    }

    /// The commands the assistant works through.
    pub fn runtime(&self) -> &Commands {
        &self.inner.runtime
    }

    /// Records a log-only event in a chat (a person's answer to a memory proposal, say).
    pub fn record(&self, chat: ChatId, kind: &str, payload: Value) -> Result<(), ServiceError> {
        let mut log = lock(&self.inner.log);
        log.check_exists(chat)?;
        log.append(chat, &Event::structural(kind, payload))?;
        Ok(())
    }

    /// The probe's compliance store the turns use (the door's is persisted in its folder).
    pub fn set_compliance(&self, compliance: Arc<Compliance>) {
        *lock(&self.inner.compliance) = compliance;
    }

    /// Starts a chat from `from`: with `handoff_seeding` on, seeded with `from`'s digest (a
    /// `handoff_seeded` event its requests carry); off, an empty chat. `title` defaults to
    /// `from`'s.
    pub fn new_chat_from_handoff(
        &self,
        from: ChatId,
        title: Option<&str>,
    ) -> Result<ChatId, ServiceError> {
        let seeding = self.settings().mechanisms.handoff_seeding;
        let specs = self.inner.runtime.specs();
        let tier = |command: &str| specs.iter().find(|s| s.name == command).map(|s| s.tier);
        let mut log = lock(&self.inner.log);
        let source = log.chat(from)?;
        let digest = handoff::digest(&source.title, &log.events(from)?, &tier);
        let id = log.create_chat(title.unwrap_or(&source.title))?;
        if seeding {
            if let Err(e) = log.append(id, &handoff::seed_event(from, &digest)) {
                // No half-made chat: a seeded chat or none.
                let _ = log.delete_chat(id);
                return Err(e.into());
            }
        }
        Ok(id)
    }

    /// The chat's degraded state (spec 20 §1), folded from its probe verdicts.
    pub fn degraded(&self, chat: ChatId) -> Result<Option<probe::Degraded>, ServiceError> {
        Ok(probe::degraded(&lock(&self.inner.log).events(chat)?))
    }

    /// The memory the turns read (while the `memory` setting is on).
    pub fn set_memory(&self, memory: Arc<Memory>) {
        *lock(&self.inner.memory) = Some(memory);
    }

    /// Every chat's events, each with its chat id.
    pub fn subscribe(&self) -> broadcast::Receiver<ServiceEvent> {
        self.inner.events.subscribe()
    }

    pub fn settings(&self) -> ServiceSettings {
        lock(&self.inner.settings).clone()
    }

    /// Takes effect from the next turn; a running turn keeps the settings it started with.
    pub fn set_settings(&self, settings: ServiceSettings) {
        *lock(&self.inner.settings) = settings;
    }

    pub fn list_chats(&self) -> Result<Vec<ChatSummary>, ServiceError> {
        Ok(lock(&self.inner.log).list_chats()?)
    }

    pub fn create_chat(&self, title: &str) -> Result<ChatId, ServiceError> {
        Ok(lock(&self.inner.log).create_chat(title)?)
    }

    /// A chat started in the project open now (its archive visibility).
    pub async fn create_chat_here(&self, title: &str) -> Result<ChatId, ServiceError> {
        let project = self.open_project().await;
        Ok(lock(&self.inner.log).create_chat_in(title, project.as_deref())?)
    }

    /// The open project's file (`None`: never saved, or the runtime cannot say).
    pub async fn open_project(&self) -> Option<String> {
        let reply = self
            .inner
            .runtime
            .call(
                sextant_commands::Caller::Ui,
                "project.file",
                serde_json::json!({}),
                sextant_commands::Policy::default(),
            )
            .await;
        match reply {
            Ok(v) => v["path"].as_str().map(str::to_string),
            Err(e) => {
                tracing::debug!(target: "assistant", "no project file for the archive: {e}");
                None
            }
        }
    }

    /// Searches every chat `request`'s visibility allows (the person's search view).
    pub fn search_sessions(&self, request: &SearchRequest) -> Result<SearchPage, ServiceError> {
        Ok(lock(&self.inner.log).search_sessions(request)?)
    }

    /// Searches one chat.
    pub fn search_events(
        &self,
        chat: ChatId,
        request: &SearchRequest,
    ) -> Result<SearchPage, ServiceError> {
        Ok(lock(&self.inner.log).search_events(chat, request)?)
    }

    /// The person cites `hits` into `chat`; refused while a turn runs there (the citation
    /// moves the conversation on, like a message).
    pub fn cite(
        &self,
        chat: ChatId,
        hits: &[HitRef],
        visibility: &Visibility,
    ) -> Result<Cited, ServiceError> {
        let turns = lock(&self.inner.turns);
        if turns.contains_key(&chat) {
            return Err(ServiceError::TurnRunning(chat));
        }
        let cited = lock(&self.inner.log).cite(chat, hits, CitedBy::Person, visibility);
        drop(turns);
        Ok(cited?)
    }

    pub fn rename_chat(&self, chat: ChatId, title: &str) -> Result<(), ServiceError> {
        Ok(lock(&self.inner.log).rename_chat(chat, title)?)
    }

    /// Deletes a chat; refused while it has a turn running.
    pub fn delete_chat(&self, chat: ChatId) -> Result<(), ServiceError> {
        // Held while deleting: a `send` registers its turn under this lock and only then
        // checks the chat, so it either blocks this delete or finds the chat gone.
        let turns = lock(&self.inner.turns);
        if turns.contains_key(&chat) {
            return Err(ServiceError::TurnRunning(chat));
        }
        let deleted = lock(&self.inner.log).delete_chat(chat);
        drop(turns);
        Ok(deleted?)
    }

    /// The chat as the UI shows it, folded afresh from the log.
    pub fn history(&self, chat: ChatId) -> Result<Vec<UiItem>, ServiceError> {
        Ok(lock(&self.inner.log).fold(chat)?.ui)
    }

    /// The history plus, while a turn streams, its text not yet in the log: one consistent
    /// snapshot (both read under the log's lock, which the turn holds while it logs text).
    pub fn history_live(
        &self,
        chat: ChatId,
    ) -> Result<(Vec<UiItem>, Option<UnloggedText>), ServiceError> {
        // The turns lock is never held while waiting for the log's (delete holds it while
        // deleting), so take the buffer first.
        let unlogged = lock(&self.inner.turns)
            .get(&chat)
            .map(|t| t.unlogged.clone());
        let log = lock(&self.inner.log);
        let ui = log.fold(chat)?.ui;
        let live = unlogged.map(|u| lock(&u).clone());
        drop(log);
        Ok((ui, live))
    }

    /// The prompts of `chat` still waiting for an answer, as `approvalRequested` events (a
    /// page opened mid-turn shows them from here).
    pub fn pending_approvals(&self, chat: ChatId) -> Vec<ServiceEventKind> {
        let pending = lock(&self.inner.pending);
        let mut open: Vec<(&String, &PendingApproval)> = pending
            .iter()
            .filter(|((c, _), _)| *c == chat)
            .map(|((_, id), p)| (id, p))
            .collect();
        // A stable order for the page (the map has none).
        open.sort_by_key(|(id, _)| *id);
        open.into_iter()
            .map(|(id, p)| ServiceEventKind::ApprovalRequested {
                call_id: id.clone(),
                name: p.name.clone(),
                args: p.args.clone(),
                tier: p.tier,
                question: p.question.clone(),
            })
            .collect()
    }

    /// The models the configured provider offers.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ServiceError> {
        let client = self.client(&self.settings())?;
        Ok(client.list_models().await?)
    }

    /// Whether `chat` has a turn running.
    pub fn is_running(&self, chat: ChatId) -> bool {
        lock(&self.inner.turns).contains_key(&chat)
    }

    /// Starts a turn for the user's `text`. Its events go to the subscribers ([`subscribe`](Self::subscribe));
    /// the last one is `turnEnded`.
    pub async fn send(&self, chat: ChatId, text: &str) -> Result<TurnHandle, ServiceError> {
        self.start(chat, Some(text.to_string())).await
    }

    /// Runs the chat's last message again without repeating it: for a turn that failed or
    /// was stopped before the assistant answered (a cut stream, a provider error, a cancel).
    /// Refused when the assistant's answer is the last thing in the chat.
    pub async fn retry(&self, chat: ChatId) -> Result<TurnHandle, ServiceError> {
        let events = lock(&self.inner.log).events(chat)?;
        if !reply_owed(events.iter().map(|e| &e.event)) {
            return Err(ServiceError::NothingToRetry(chat));
        }
        self.start(chat, None).await
    }

    async fn start(&self, chat: ChatId, text: Option<String>) -> Result<TurnHandle, ServiceError> {
        self.start_with(chat, text, true).await
    }

    /// [`start`](Self::start); `recover`: a request too long for the model's context is
    /// asked again once, fitted to what the server takes (false for that second try).
    fn start_with(
        &self,
        chat: ChatId,
        text: Option<String>,
        recover: bool,
    ) -> BoxFuture<'_, Result<TurnHandle, ServiceError>> {
        Box::pin(self.start_inner(chat, text, recover))
    }

    async fn start_inner(
        &self,
        chat: ChatId,
        text: Option<String>,
        recover: bool,
    ) -> Result<TurnHandle, ServiceError> {
        let settings = self.settings();
        let cancel = CancelToken::new();
        let approve_confirm = Arc::new(AtomicBool::new(false));
        let unlogged = Arc::new(Mutex::new(UnloggedText::default()));
        {
            let mut turns = lock(&self.inner.turns);
            if turns.contains_key(&chat) {
                return Err(ServiceError::TurnRunning(chat));
            }
            turns.insert(
                chat,
                RunningTurn {
                    cancel: cancel.clone(),
                    approve_confirm: approve_confirm.clone(),
                    unlogged: unlogged.clone(),
                },
            );
        }
        // Frees the chat again if preparing fails or this future is dropped.
        let slot = TurnSlot {
            inner: &self.inner,
            chat,
        };
        // Checked after the turn is registered: a concurrent delete either saw the turn
        // and refused, or finished before this check.
        lock(&self.inner.log).check_exists(chat)?;
        // The message this turn answers (for a retry, the last one in the log).
        let message = match &text {
            Some(t) => t.clone(),
            None => last_user_text(&lock(&self.inner.log).events(chat)?),
        };
        let (conversation, prompt) = self
            .prepare(
                chat,
                &settings,
                approve_confirm,
                unlogged,
                &message,
                text.is_some(),
            )
            .await?;
        // From here the turn's task owns the chat's entry and frees it when it ends.
        std::mem::forget(slot);
        let inner = self.inner.clone();
        let turn = Turn {
            inner,
            chat,
            settings,
            // A turn that is itself the recovery does not recover again.
            recover,
        };
        let task = tokio::spawn(run_turn(turn, conversation, prompt, text, cancel));
        Ok(TurnHandle { chat, task })
    }

    /// Builds a turn ([`build`](Self::build)); when the context the server runs cannot hold
    /// even its fixed part (the system blocks, the tools, the reply), builds it again lean
    /// – without what only helps (skill texts, memory, the docs block, the job's own tools,
    /// the focus and probe texts) – and says so in the chat once.
    async fn prepare(
        &self,
        chat: ChatId,
        settings: &ServiceSettings,
        approve_confirm: Arc<AtomicBool>,
        unlogged: Arc<Mutex<UnloggedText>>,
        message: &str,
        fresh: bool,
    ) -> Result<(Conversation<Client>, Prompt), ServiceError> {
        let (conversation, prompt, overflows) = self
            .build(
                chat,
                settings,
                approve_confirm.clone(),
                unlogged.clone(),
                message,
                fresh,
            )
            .await?;
        let Some(window) = overflows else {
            return Ok((conversation, prompt));
        };
        let lean = lean_for_context(settings);
        let told = lock(&self.inner.log)
            .events(chat)?
            .iter()
            .any(|e| matches!(&e.event, Event::Structural(s) if s.kind == CONTEXT_LEAN));
        if !told {
            self.record(chat, CONTEXT_LEAN, serde_json::json!({ "window": window }))?;
        }
        tracing::info!(target: "assistant", window, "the context is small: the turn is built lean");
        let (conversation, prompt, _) = self
            .build(chat, &lean, approve_confirm, unlogged, message, fresh)
            .await?;
        Ok((conversation, prompt))
    }

    /// Builds a turn by walking the mechanism table stage by stage
    /// ([`crate::mechanisms`]): what is off is never asked, so it adds zero bytes. Also says
    /// whether its fixed part overflows the context (`Some(window)`).
    async fn build(
        &self,
        chat: ChatId,
        settings: &ServiceSettings,
        approve_confirm: Arc<AtomicBool>,
        unlogged: Arc<Mutex<UnloggedText>>,
        message: &str,
        // The message is new (not in the log yet); false for a retry.
        fresh: bool,
    ) -> Result<(Conversation<Client>, Prompt, Option<u32>), ServiceError> {
        let events = lock(&self.inner.log).events(chat)?;
        let cx = TurnInputs {
            service: self,
            chat,
            settings,
            message,
            fresh,
            events: &events,
        };
        let mut role = RoleBlock {
            focus: None,
            probe_instruction: None,
        };
        for m in mechanisms::on(settings) {
            m.role(&cx, &mut role);
        }
        let mut turn = TurnParts {
            contributors: vec![Arc::new(role)],
            seams: Seams::default(),
            commands: self.inner.runtime.clone(),
            offered: ESSENTIAL.iter().chain(DISCOVERY).copied().collect(),
        };
        for m in mechanisms::on(settings) {
            m.assemble(&cx, &mut turn).await;
        }
        let limits = self.limits(settings).await;
        let mut request = turn_settings(settings, &limits);
        for m in mechanisms::on(settings) {
            m.sized(&cx, &mut turn, &request).await;
        }
        let TurnParts {
            contributors,
            mut seams,
            commands,
            offered,
        } = turn;
        let system = Arc::new(Contributors::new(contributors, Envelope::random()));
        let tools = ToolSet::with_commands(commands.specs(), &offered)?;
        let prompt = Prompt::new(system.system().await, tools.definitions().to_vec());
        for m in mechanisms::on(settings) {
            m.history(&mut seams, &commands, &prompt);
        }
        // The history gets what the context has left once the fixed part and the reply
        // are in: a server running a small context is never sent more than it takes.
        request.history_budget_tokens = fit_history(
            &prompt,
            &limits,
            request.history_budget_tokens,
            settings.constrained(),
        );
        let overflows = fixed_overflows(&prompt, &limits, settings.constrained())
            .then_some(limits.context_window.value);
        tracing::debug!(
            target: "assistant",
            fixed = prompt_tokens(&prompt, settings.constrained()),
            window = limits.capabilities.context_window,
            history = request.history_budget_tokens,
            ?overflows,
            "the turn's size"
        );
        let approver = UiApprover {
            inner: self.inner.clone(),
            chat,
            approve_confirm,
            timeout: settings.approval_timeout,
        };
        let mut pipeline = Pipeline::new(RuntimeExecutor::new(commands.clone()))
            .approver(approver)
            .with_safety_tiers(commands.clone());
        for m in mechanisms::on(settings) {
            pipeline = m.pipeline(pipeline, &commands);
        }
        let conversation = Conversation::new(
            self.client(settings)?,
            self.inner.log.clone(),
            chat,
            Arc::new(pipeline),
            CallerInfo::assistant(settings.policy()),
            request,
        )
        .with_tools(Arc::new(tools))
        .with_seams(seams)
        .with_system_source(system)
        .with_unlogged_text(unlogged);
        Ok((conversation, prompt, overflows))
    }

    /// What the local server of `settings` says about its model (asked once, then cached);
    /// `None` for a cloud API, which is not asked.
    async fn server_facts(&self, settings: &ServiceSettings) -> Option<ServerFacts> {
        if settings.provider != ProviderKind::OpenaiCompatible
            || !capabilities::is_local(&settings.base_url)
        {
            return None;
        }
        let key = (settings.base_url.clone(), settings.model.clone());
        if let Some(facts) = lock(&self.inner.servers).get(&key).and_then(|k| k.facts) {
            return Some(facts);
        }
        let Ok(Client::OpenAi(client)) = self.client(settings) else {
            return None;
        };
        let facts = client.probe(&settings.model).await;
        tracing::info!(target: "assistant", ?facts, model = %settings.model, "what the server runs");
        lock(&self.inner.servers).entry(key).or_default().facts = Some(facts);
        Some(facts)
    }

    /// The limits this turn is sized by, each with where it came from: the person's own
    /// setting, else what the server enforces or says, else the capability table.
    pub async fn limits(&self, settings: &ServiceSettings) -> Limits {
        let facts = self.server_facts(settings).await;
        let key = (settings.base_url.clone(), settings.model.clone());
        let refused_above = lock(&self.inner.servers)
            .get(&key)
            .and_then(|k| k.refused_above);
        Limits::of(settings, facts.and_then(|f| f.context), refused_above)
    }

    /// [`limits`](Self::limits) from what is known already, without asking the server.
    pub fn known_limits(&self, settings: &ServiceSettings) -> Limits {
        let key = (settings.base_url.clone(), settings.model.clone());
        let known = lock(&self.inner.servers)
            .get(&key)
            .copied()
            .unwrap_or_default();
        Limits::of(
            settings,
            known.facts.and_then(|f| f.context),
            known.refused_above,
        )
    }

    /// Remembers that the server refused a request as longer than `limit` tokens.
    fn learn_context(&self, settings: &ServiceSettings, limit: u32) {
        let key = (settings.base_url.clone(), settings.model.clone());
        lock(&self.inner.servers)
            .entry(key)
            .or_default()
            .refused_above = Some(limit);
    }

    /// The notice for a chat whose local server drops native tools, unless the chat has
    /// it already. Only local OpenAI-compatible servers are asked (a cloud API's tools
    /// work, and it has no such endpoint).
    async fn tools_unavailable(
        &self,
        settings: &ServiceSettings,
        events: &[crate::engine::chatlog::LoggedEvent],
    ) -> Option<ToolsUnavailableNotice> {
        if settings.provider != ProviderKind::OpenaiCompatible
            || !capabilities::is_local(&settings.base_url)
        {
            return None;
        }
        let support = self.server_facts(settings).await?.tools;
        let told = events
            .iter()
            .any(|e| matches!(&e.event, Event::Structural(s) if s.kind == TOOLS_UNAVAILABLE));
        (support == ToolSupport::Unsupported && !told).then(|| {
            ToolsUnavailableNotice(serde_json::json!({
                "model": settings.model,
                "baseUrl": settings.base_url,
            }))
        })
    }

    /// Approves one pending call.
    pub fn approve(&self, chat: ChatId, call_id: &str) -> Result<(), ServiceError> {
        if self
            .inner
            .answer(chat, call_id, Approval::AllowedOnce, Decider::Person)
        {
            Ok(())
        } else {
            Err(ServiceError::NoPendingApproval(call_id.to_string()))
        }
    }

    /// Denies one pending call; the model reads "the user declined" and `reason`, if any,
    /// in the call's `Error:` result.
    pub fn deny(
        &self,
        chat: ChatId,
        call_id: &str,
        reason: Option<&str>,
    ) -> Result<(), ServiceError> {
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        if self.inner.answer(
            chat,
            call_id,
            Approval::Denied(reason.map(str::to_string)),
            Decider::Person,
        ) {
            Ok(())
        } else {
            Err(ServiceError::NoPendingApproval(call_id.to_string()))
        }
    }

    /// Approves every pending Confirm-tier call of `chat` and the rest of the running
    /// turn's Confirm calls. DeviceGated and AlwaysConfirm calls still ask one by one.
    /// Without a running turn there is nothing to approve and nothing happens.
    pub fn approve_all(&self, chat: ChatId) -> Result<(), ServiceError> {
        match lock(&self.inner.turns).get(&chat) {
            Some(turn) => turn.approve_confirm.store(true, Ordering::SeqCst),
            None => return Ok(()),
        }
        let ids: Vec<String> = lock(&self.inner.pending)
            .iter()
            .filter(|((c, _), p)| *c == chat && p.tier == Some(Tier::Confirm))
            .map(|((_, id), _)| id.clone())
            .collect();
        for id in ids {
            self.inner
                .answer(chat, &id, Approval::AllowedOnce, Decider::ApproveAll);
        }
        Ok(())
    }

    /// Stops the chat's running turn (no-op without one). Every logged call gets a result.
    pub fn cancel(&self, chat: ChatId) {
        if let Some(turn) = lock(&self.inner.turns).get(&chat) {
            turn.cancel.cancel();
        }
        self.inner.deny_all(chat, "cancelled", Decider::Cancelled);
    }
}

/// Whether the model still owes the chat a reply, reading the log from its end: the last
/// turn failed, was stopped or hit the call cap, or a message or tool result is unanswered.
/// An answer (assistant text) after all of those means the turn finished.
fn reply_owed<'a>(events: impl DoubleEndedIterator<Item = &'a Event>) -> bool {
    use crate::engine::conversation::kinds as turn;
    for event in events.rev() {
        match event {
            Event::Assistant { .. } => return false,
            Event::User { .. } | Event::ToolResult { .. } => return true,
            Event::Structural(s)
                if [
                    turn::TURN_FAILED,
                    turn::TURN_CANCELLED,
                    turn::TOOL_CALL_LIMIT,
                ]
                .contains(&s.kind.as_str()) =>
            {
                return true
            }
            // Calls, approvals, checkpoints, compactions: look further back.
            _ => {}
        }
    }
    false
}

/// A turn's task: its chat, the settings it was built with, and whether a request found
/// too long for the model's context may be recovered from (once).
struct Turn {
    inner: Arc<Inner>,
    chat: ChatId,
    settings: ServiceSettings,
    recover: bool,
}

/// The log-only notice that the server refused a request as longer than the model's
/// context and the turn was asked again with less of the chat: `{limit}`.
pub const CONTEXT_REDUCED: &str = "context_reduced";

async fn run_turn(
    turn: Turn,
    conversation: Conversation<Client>,
    prompt: Prompt,
    text: Option<String>,
    cancel: CancelToken,
) -> Result<TurnReport, ConversationError> {
    let Turn {
        inner,
        chat,
        settings,
        recover,
    } = turn;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let forward = {
        let inner = inner.clone();
        tokio::spawn(async move {
            // Counts as the conversation's buffer does, in the same order.
            let mut streamed = 0;
            while let Some(event) = rx.recv().await {
                if let Some(mut kind) = ServiceEventKind::from_turn(event) {
                    if let ServiceEventKind::TextDelta { text, at } = &mut kind {
                        *at = streamed;
                        streamed += utf16_len(text);
                    }
                    inner.publish(chat, kind);
                }
            }
        })
    };
    // Announces the end even if the conversation panics (declared first, so it drops
    // after the slot: the chat is free by the time the UI hears the turn ended).
    let mut end_guard = EndGuard {
        inner: &inner,
        chat,
        armed: true,
    };
    // Frees the chat even if the conversation panics.
    let slot = TurnSlot {
        inner: &inner,
        chat,
    };
    let result = match &text {
        Some(text) => conversation.send(text, &prompt, &tx, &cancel).await,
        None => conversation.resume(&prompt, &tx, &cancel).await,
    };
    drop(tx);
    let _ = forward.await;
    // Free the chat before announcing the end, so a door may send again on `turnEnded`.
    drop(slot);
    inner.deny_all(chat, "the turn ended", Decider::TurnEnded);
    // Too long for the model's context: remember what the server takes, say so, and ask
    // again once with the history fitted to it – never a chat that fails every turn after.
    let exceeded = result.as_ref().ok().and_then(|r| r.context_exceeded);
    if let (Some(exceeded), true) = (exceeded, recover) {
        let service = ChatService {
            inner: inner.clone(),
        };
        let window = service.known_limits(&settings).capabilities.context_window;
        let limit = match exceeded.limit {
            // The server's own figure, when it is below what the request was sized for.
            Some(limit) if limit < window => limit,
            // Sized for what the server takes and still refused: the estimate ran short.
            _ => window / 4 * 3,
        }
        .max(MIN_CONTEXT_TOKENS);
        service.learn_context(&settings, limit);
        tracing::info!(target: "assistant", limit, "the request was too long for the model's context; asking again");
        if service
            .record(chat, CONTEXT_REDUCED, serde_json::json!({ "limit": limit }))
            .is_ok()
        {
            if let Ok(again) = service.start_with(chat, None, false).await {
                end_guard.armed = false;
                return match again.task.await {
                    Ok(result) => result,
                    // The retry's own guard announced its end.
                    Err(_) => Ok(TurnReport {
                        end: TurnEnd::Cancelled,
                        requests: 0,
                        tool_calls: 0,
                        usage: Default::default(),
                        context_exceeded: None,
                    }),
                };
            }
        }
    }
    let end = match &result {
        Ok(report) => report.end.clone(),
        Err(e) => TurnEnd::Failed {
            message: e.to_string(),
        },
    };
    end_guard.armed = false;
    inner.publish(chat, ServiceEventKind::ended(&end));
    result
}

/// Publishes a failed `turnEnded` for a turn that stopped without ending (a panic, an
/// aborted task): the protocol promises every turn ends with one.
struct EndGuard<'a> {
    inner: &'a Inner,
    chat: ChatId,
    armed: bool,
}

impl Drop for EndGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.inner
                .deny_all(self.chat, "the turn stopped", Decider::TurnEnded);
            self.inner.publish(
                self.chat,
                ServiceEventKind::TurnEnded {
                    end: TurnEndKind::Failed,
                    detail: Some("the turn stopped unexpectedly; see the log".into()),
                },
            );
        }
    }
}

/// A running turn's entry in the service; removed when the turn's task ends, however.
struct TurnSlot<'a> {
    inner: &'a Inner,
    chat: ChatId,
}

impl Drop for TurnSlot<'_> {
    fn drop(&mut self) {
        lock(&self.inner.turns).remove(&self.chat);
    }
}

/// What the service lends the mechanism table while it builds a turn.
impl TurnServices for ChatService {
    fn runtime(&self) -> &Commands {
        &self.inner.runtime
    }

    fn memory_store(&self) -> Option<Arc<Memory>> {
        lock(&self.inner.memory).clone()
    }

    fn compliance(&self) -> Arc<Compliance> {
        lock(&self.inner.compliance).clone()
    }

    fn log_handle(&self) -> Arc<Mutex<ChatLog>> {
        self.inner.log.clone()
    }

    fn open_project(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(ChatService::open_project(self))
    }

    fn tools_notice<'a>(
        &'a self,
        settings: &'a ServiceSettings,
        events: &'a [crate::engine::chatlog::LoggedEvent],
    ) -> BoxFuture<'a, Option<Arc<dyn crate::engine::seams::InboundRouter>>> {
        Box::pin(async move {
            self.tools_unavailable(settings, events)
                .await
                .map(|n| Arc::new(n) as Arc<dyn crate::engine::seams::InboundRouter>)
        })
    }
}

/// The text of the last user message of a log ("" when there is none).
fn last_user_text(events: &[crate::engine::chatlog::LoggedEvent]) -> String {
    events
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::User { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}
/// Tokens of a prompt's fixed part (system blocks and tool definitions), estimated as the
/// history is (bytes / 4, plus framing). Constrained calls send each tool as a line of the
/// menu (name and description); its parameters go to the server's grammar, not the prompt.
fn prompt_tokens(prompt: &Prompt, constrained: bool) -> usize {
    let system: usize = prompt.system.iter().map(|b| b.text.len()).sum();
    let tools: usize = prompt
        .tools
        .iter()
        .map(|t| {
            let parameters = if constrained {
                0
            } else {
                t.parameters.to_string().len()
            };
            t.name.len() + t.description.len() + parameters
        })
        .sum();
    (system + tools).div_ceil(4) + 8 * (prompt.system.len() + prompt.tools.len())
}

/// The history budget that fits the context: the window less the fixed part, the reply
/// cap and a margin for the difference between this estimate and the server's tokenizer
/// (an eighth); never below a few hundred tokens (the message being answered always goes).
fn fit_history(prompt: &Prompt, limits: &Limits, budget: usize, constrained: bool) -> usize {
    let window = limits.capabilities.context_window as usize;
    let margin = window / 8;
    let left = window
        .saturating_sub(prompt_tokens(prompt, constrained))
        .saturating_sub(limits.capabilities.max_output_tokens as usize)
        .saturating_sub(margin);
    budget.min(left).max(MIN_HISTORY_TOKENS)
}

/// Whether the fixed part and the reply leave the history less than its least (the margin
/// as [`fit_history`] reckons it).
fn fixed_overflows(prompt: &Prompt, limits: &Limits, constrained: bool) -> bool {
    let window = limits.capabilities.context_window as usize;
    prompt_tokens(prompt, constrained)
        + limits.capabilities.max_output_tokens as usize
        + window / 8
        + MIN_HISTORY_TOKENS
        > window
}

/// The settings a turn is built with when the context cannot hold its fixed part: what only
/// helps is left out for this turn (the person's settings are unchanged).
fn lean_for_context(settings: &ServiceSettings) -> ServiceSettings {
    let mut lean = settings.clone();
    lean.docs_block = false;
    let m = &mut lean.mechanisms;
    m.memory = false;
    m.skill_routing = false;
    m.handoff_seeding = false;
    m.archive_tools = false;
    m.intent_narrowing = false;
    m.focus_prompt = false;
    m.context_probe = false;
    lean
}

/// The log-only notice that the model's context is too small for the full turn, so turns
/// are built lean: `{window}` (once per chat).
pub const CONTEXT_LEAN: &str = "context_lean";

/// The smallest context a server is taken to have, whatever it refused.
const MIN_CONTEXT_TOKENS: u32 = 1024;

/// The least history a turn is given, however full the context.
const MIN_HISTORY_TOKENS: usize = 256;

/// The turn's request settings, sized by what the model can do: a small local model gets a
/// reply cap that fits its context (not the whole context) and a history budget of half.
fn turn_settings(settings: &ServiceSettings, limits: &Limits) -> Settings {
    let caps = limits.capabilities;
    let mut turn = Settings::new(settings.model.clone());
    turn.max_tokens = caps.max_output_tokens;
    turn.max_tool_calls = caps.max_tool_calls as usize;
    turn.history_budget_tokens = turn
        .history_budget_tokens
        .min(caps.context_window as usize / 2);
    turn.constrained_tools = settings.constrained();
    turn.stall_notice = settings.stall_notice;
    turn
}
