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
/// user message, as providers require. When the turn in progress alone is over the budget,
/// its tool results are shortened, oldest first, to what fits – said in each – so a small
/// context is never sent more than it takes.
pub fn budget(messages: Vec<Message>, max_tokens: usize) -> Vec<Message> {
    let kept = budget_units(messages, max_tokens);
    fit_turn(kept, max_tokens)
}

/// Shortens the tool results of the turn in progress (oldest first) until the messages fit
/// `max_tokens`; each keeps its head and says how much of it was left out.
fn fit_turn(mut messages: Vec<Message>, max_tokens: usize) -> Vec<Message> {
    let mut used: usize = messages.iter().map(estimate_tokens).sum();
    if used <= max_tokens {
        return messages;
    }
    let current = messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }))
        .unwrap_or(0);
    let results: Vec<usize> = (current..messages.len())
        .filter(|i| matches!(messages[*i], Message::ToolResult { .. }))
        .collect();
    for i in results {
        if used <= max_tokens {
            break;
        }
        let Message::ToolResult { content, .. } = &mut messages[i] else {
            continue;
        };
        let before = estimate_tokens_of(content);
        let over = used - max_tokens;
        // Keep what still fits of it (at least a line's worth, so the model sees what it was).
        // (The note saying so costs a few tokens of its own.)
        let keep_tokens = before.saturating_sub(over + NOTE_TOKENS).max(32);
        if keep_tokens >= before {
            continue;
        }
        let mut end = (keep_tokens * 4).min(content.len());
        while !content.is_char_boundary(end) {
            end -= 1;
        }
        let total = content.len();
        let shortened = format!(
            "{}… [shortened by Sextant to fit the model's context: {end} of {total} bytes]",
            &content[..end]
        );
        *content = shortened;
        used = used - before + estimate_tokens_of(content);
    }
    messages
}

/// What the note on a shortened result costs, at most.
const NOTE_TOKENS: usize = 24;

fn estimate_tokens_of(text: &str) -> usize {
    text.len().div_ceil(4)
}

fn budget_units(messages: Vec<Message>, max_tokens: usize) -> Vec<Message> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use sextant_providers::ToolCall;

    fn call(id: &str) -> Message {
        Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "project_get".into(),
                arguments: serde_json::json!({}),
            }],
        }
    }

    #[test]
    fn a_turn_over_the_budget_has_its_tool_results_shortened_oldest_first() {
        let big = "x".repeat(8000);
        let messages = vec![
            Message::user("old question"),
            Message::User {
                text: "what is in the project?".into(),
            },
            call("a"),
            Message::tool_result("a", big.clone()),
            call("b"),
            Message::tool_result("b", big.clone()),
        ];
        let kept = budget(messages, 2500);
        let used: usize = kept.iter().map(estimate_tokens).sum();
        assert!(used <= 2500, "{used} tokens");
        // The old turn went first; the current one is all there, its results shortened.
        assert!(matches!(&kept[0], Message::User { text } if text.starts_with("what is")));
        let results: Vec<&str> = kept
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(results.len(), 2);
        assert!(
            results[0].contains("shortened by Sextant"),
            "the older first"
        );
        assert!(
            results[0].len() < results[1].len(),
            "the newest keeps the most"
        );
        // Under the budget nothing changes.
        let small = vec![
            Message::user("hi"),
            call("c"),
            Message::tool_result("c", "ok"),
        ];
        assert_eq!(budget(small.clone(), 2500), small);
    }
}
