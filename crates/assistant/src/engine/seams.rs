//! The seams of a turn: the named places where an assistant mechanism plugs in, each a
//! small trait, so a mechanism is one module with one impl instead of more lines in the
//! conversation loop.
//!
//! One turn, in order:
//!
//! ```text
//! user message ─▶ inbound routers      (InboundRouter: events logged after the message)
//!              ─▶ prompt contributors  (PromptContributor: blocks before / after the
//!                                       cache breakpoint)
//!              ─▶ tool-surface filters (ToolFilter)
//!              ─▶ compactor            (Compactor: over budget, a `compaction` event)
//!              ─▶ history transforms   (HistoryTransform: the model's view, not the log)
//!              ─▶ provider stream ─▶ display filters (DisplayFilter: what a person sees)
//!              ─▶ tool calls ─▶ the tool pipeline (crate::engine::pipeline, its own stations)
//!              ─▶ final reply ─▶ reply evaluators (ReplyEvaluator: events logged after it)
//! ```
//!
//! The loop iterates over the [`Seams`] it was given and knows no mechanism by name. Off
//! means absent: the service builds the lists from the settings for each turn, so a
//! mechanism that is off is not constructed and adds nothing to a request. Today's
//! behaviour is expressed through the seams: the role, docs and live-state blocks are
//! contributors ([`RoleBlock`], [`DocsBlock`], [`LiveStateBlock`]) and the history budget
//! is a transform ([`HistoryBudget`]).

use std::sync::Arc;

use sextant_providers::{Message, StopReason, SystemBlock, ToolDefinition};

use crate::engine::chatlog::{Event, LoggedEvent};
use crate::engine::context::{Envelope, LiveState, ROLE_TEXT};
use crate::engine::model::{budget, ChatModel, SystemSource};
use crate::engine::pipeline::BoxFuture;
use crate::Commands;

/// [inbound] Sees the person's message before the turn's first request; the events it
/// returns are logged right after the message (a router answering with a synthetic
/// call-and-result pair, say).
pub trait InboundRouter: Send + Sync {
    fn route(&self, text: &str) -> Vec<Event>;
}

/// Where a contributed block goes in the system array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Before the cache breakpoint: must be byte-identical for every request of a chat.
    Cached,
    /// After the breakpoint: read afresh for every request.
    PerRequest,
}

/// [prompt] One block of the system array, or none. `envelope` wraps anything from
/// outside (it changes per turn, so only per-request blocks may use it).
pub trait PromptContributor: Send + Sync {
    fn placement(&self) -> Placement;
    fn block<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Option<String>>;
}

/// [tools] Narrows the tools a request offers.
pub trait ToolFilter: Send + Sync {
    fn filter(&self, tools: Vec<ToolDefinition>) -> Vec<ToolDefinition>;
}

/// [history] Changes the model's view of the history for a request; the log is untouched.
pub trait HistoryTransform: Send + Sync {
    fn transform(&self, messages: Vec<Message>) -> Vec<Message>;
}

/// [display] Filters the streamed text on its way to the person (not to the log). One per
/// reply, made by a [`DisplayFilters`] factory.
pub trait DisplayFilter: Send {
    /// The part of `delta` to show now (text may be held back until [`finish`](Self::finish)).
    fn push(&mut self, delta: &str) -> String;
    /// What was held back, at the end of the reply.
    fn finish(&mut self) -> String {
        String::new()
    }
}

/// Makes a fresh [`DisplayFilter`] for each reply.
pub trait DisplayFilters: Send + Sync {
    fn start(&self) -> Box<dyn DisplayFilter>;
}

/// [verdict] Reads the turn's final reply (its raw text, and why it stopped); the events it
/// returns are logged after it.
pub trait ReplyEvaluator: Send + Sync {
    fn evaluate(&self, reply: &str, stop: &StopReason) -> Vec<Event>;
}

/// [compaction] Before a turn's first request, when the history the model would see is
/// over its budget: the event that replaces its older part (a `compaction`), or none. The
/// loop logs it; the fold does the replacing, so the request and a reopened chat agree.
pub trait Compactor: Send + Sync {
    fn compact<'a>(
        &'a self,
        events: &'a [LoggedEvent],
        budget_tokens: usize,
        model: &'a dyn ChatModel,
        model_name: &'a str,
    ) -> BoxFuture<'a, Option<Event>>;
}

/// What a turn is built from, besides the model, the log and the tool pipeline.
#[derive(Clone, Default)]
pub struct Seams {
    pub inbound: Vec<Arc<dyn InboundRouter>>,
    pub tools: Vec<Arc<dyn ToolFilter>>,
    pub history: Vec<Arc<dyn HistoryTransform>>,
    pub display: Vec<Arc<dyn DisplayFilters>>,
    pub verdict: Vec<Arc<dyn ReplyEvaluator>>,
    pub compaction: Option<Arc<dyn Compactor>>,
}

impl Seams {
    pub(crate) fn tools(&self, mut tools: Vec<ToolDefinition>) -> Vec<ToolDefinition> {
        for f in &self.tools {
            tools = f.filter(tools);
        }
        tools
    }

    pub(crate) fn history(&self, mut messages: Vec<Message>) -> Vec<Message> {
        for t in &self.history {
            messages = t.transform(messages);
        }
        messages
    }

    pub(crate) fn display(&self) -> Display {
        Display(self.display.iter().map(|f| f.start()).collect())
    }
}

/// A reply's display filters, applied in order.
pub(crate) struct Display(Vec<Box<dyn DisplayFilter>>);

impl Display {
    /// No filters: every delta is shown as it came (empty ones included).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn push(&mut self, delta: &str) -> String {
        let mut text = delta.to_string();
        for f in &mut self.0 {
            text = f.push(&text);
        }
        text
    }

    pub(crate) fn finish(&mut self) -> String {
        let mut out = String::new();
        for i in 0..self.0.len() {
            // What an earlier filter releases at the end still passes the later ones.
            let mut text = self.0[i].finish();
            for later in &mut self.0[i + 1..] {
                text = later.push(&text);
            }
            out.push_str(&text);
        }
        out
    }
}

/// The history budget: the oldest messages beyond the token budget are left out (the
/// current turn always goes). [`crate::engine::conversation::Conversation`] applies it after the
/// [`Seams`]' transforms, from its settings.
pub struct HistoryBudget {
    pub tokens: usize,
}

impl HistoryTransform for HistoryBudget {
    fn transform(&self, messages: Vec<Message>) -> Vec<Message> {
        budget(messages, self.tokens)
    }
}

/// The system array from contributors, in their order: the cached blocks, the cache
/// breakpoint on the last of them, then the per-request blocks. A contributor with
/// nothing to say adds zero bytes.
pub struct Contributors {
    contributors: Vec<Arc<dyn PromptContributor>>,
    /// One per turn: the nonce stays out of the cached blocks either way.
    envelope: Envelope,
}

impl Contributors {
    pub fn new(contributors: Vec<Arc<dyn PromptContributor>>, envelope: Envelope) -> Contributors {
        Contributors {
            contributors,
            envelope,
        }
    }

    pub async fn blocks(&self) -> Vec<SystemBlock> {
        let mut cached = Vec::new();
        let mut per_request = Vec::new();
        for c in &self.contributors {
            if let Some(text) = c.block(&self.envelope).await.filter(|t| !t.is_empty()) {
                match c.placement() {
                    Placement::Cached => cached.push(SystemBlock::new(text)),
                    Placement::PerRequest => per_request.push(SystemBlock::new(text)),
                }
            }
        }
        // Anthropic caches tools + system up to the marked block, so one mark covers both.
        if let Some(last) = cached.last_mut() {
            last.cache = true;
        }
        cached.extend(per_request);
        cached
    }
}

impl SystemSource for Contributors {
    fn system(&self) -> BoxFuture<'_, Vec<SystemBlock>> {
        Box::pin(self.blocks())
    }
}

/// The role block: who the assistant is and how it works, plus the probe's instruction
/// when there is one (it sits in the cached prefix).
pub struct RoleBlock {
    /// The focus section (spec 40 §1), a constant of the UI's language.
    pub focus: Option<&'static str>,
    pub probe_instruction: Option<String>,
}

impl PromptContributor for RoleBlock {
    fn placement(&self) -> Placement {
        Placement::Cached
    }

    fn block<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, Option<String>> {
        let mut text = ROLE_TEXT.to_string();
        for part in [self.focus, self.probe_instruction.as_deref()]
            .into_iter()
            .flatten()
            .filter(|p| !p.is_empty())
        {
            text.push_str("\n\n");
            text.push_str(part);
        }
        Box::pin(async move { Some(text) })
    }
}

/// The docs block (how Sextant's commands fit together).
pub struct DocsBlock(pub String);

impl PromptContributor for DocsBlock {
    fn placement(&self) -> Placement {
        Placement::Cached
    }

    fn block<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move { Some(self.0.clone()) })
    }
}

/// The live state, read afresh through the commands for every request, so after the
/// model's own edits it reads the project as it now is. Left out (and logged) when it
/// cannot be read: a request without it is still useful, the model can read it.
pub struct LiveStateBlock {
    pub commands: Commands,
    /// For the log line when the state cannot be read.
    pub chat: i64,
}

impl PromptContributor for LiveStateBlock {
    fn placement(&self) -> Placement {
        Placement::PerRequest
    }

    fn block<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            match LiveState::fetch(self.commands.as_ref()).await {
                Ok(live) => Some(live.render(envelope)),
                Err(e) => {
                    tracing::warn!(chat = self.chat, error = %e, "live state left out of the prompt");
                    None
                }
            }
        })
    }
}

/// Text from outside (memory, an old chat's digest) after a heading, inside the envelope.
pub struct EnvelopedBlock {
    pub heading: &'static str,
    /// The envelope's source name (`memory`, `handoff`).
    pub source: &'static str,
    pub text: String,
}

impl PromptContributor for EnvelopedBlock {
    fn placement(&self) -> Placement {
        Placement::PerRequest
    }

    fn block<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            (!self.text.is_empty()).then(|| {
                format!(
                    "{}\n{}",
                    self.heading,
                    envelope.wrap(self.source, &self.text)
                )
            })
        })
    }
}
