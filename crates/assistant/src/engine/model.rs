//! What a turn talks to, and how much history it sends: the streaming model
//! ([`ChatModel`]), the source of a turn's system blocks ([`SystemSource`]) and the history
//! budget ([`estimate_tokens`], [`budget`]). A leaf under both the loop
//! ([`crate::engine::conversation`]) and its seams ([`crate::engine::seams`]), so that neither needs the
//! other for them.

use sextant_providers::{Client, EventStream, Message, ProviderError, Request, SystemBlock};

use crate::engine::pipeline::BoxFuture;

/// A model that streams replies. Implemented for the provider clients; a trait so the
/// loop does not care which one it talks to.
pub trait ChatModel: Send + Sync {
    fn stream<'a>(
        &'a self,
        request: &'a Request,
    ) -> BoxFuture<'a, Result<EventStream, ProviderError>>;
}

impl ChatModel for Client {
    fn stream<'a>(
        &'a self,
        request: &'a Request,
    ) -> BoxFuture<'a, Result<EventStream, ProviderError>> {
        Box::pin(Client::stream(self, request))
    }
}

/// Rebuilds a turn's system blocks before each of its requests after the first: the live
/// state block says "read for this request", and after the model's own edits in this turn
/// the ids it read before may be gone. Must keep the cached blocks (role, docs) identical,
/// so only the per-request blocks after the breakpoint change.
pub trait SystemSource: Send + Sync {
    fn system(&self) -> crate::engine::pipeline::BoxFuture<'_, Vec<SystemBlock>>;
}

/// A rough token count: bytes / 4, which over-counts English a little and is all a budget
/// needs (providers tokenize differently anyway).
pub fn estimate_tokens(message: &Message) -> usize {
    let bytes = match message {
        Message::User { text } => text.len(),
        Message::Assistant { text, tool_calls } => {
            text.len()
                + tool_calls
                    .iter()
                    .map(|c| c.id.len() + c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        }
        Message::ToolResult {
            call_id, content, ..
        } => call_id.len() + content.len(),
    };
    // A few tokens of framing per message (role, block type).
    bytes.div_ceil(4) + 4
}

/// Keeps the newest messages that fit `max_tokens`. Messages are kept in units – a user
/// message alone, or an assistant message with the tool results after it – so a call is
/// never sent without its result or a result without its call. Everything from the last
/// user message on (the turn in progress) is always kept, and the history starts with a
/// user message, as providers require.
pub fn budget(messages: Vec<Message>, max_tokens: usize) -> Vec<Message> {
    // Unit boundaries: every user or assistant message starts one; results join the unit.
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| !matches!(m, Message::ToolResult { .. }))
        .map(|(i, _)| i)
        .collect();
    let Some(current) = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
    else {
        return messages;
    };
    let mut used: usize = messages[current..].iter().map(estimate_tokens).sum();
    let mut keep_from = current;
    for window in starts.windows(2).rev() {
        let (start, end) = (window[0], window[1]);
        if end > current {
            continue;
        }
        let cost: usize = messages[start..end].iter().map(estimate_tokens).sum();
        if used + cost > max_tokens {
            break;
        }
        used += cost;
        keep_from = start;
    }
    // Begin at a user message; a unit cut off at its front cannot be sent.
    while !matches!(messages.get(keep_from), Some(Message::User { .. })) {
        keep_from += 1;
    }
    messages.into_iter().skip(keep_from).collect()
}
