//! Any sequence of chat-log events folds into a history a provider accepts: roles
//! alternate, every tool call is answered by exactly one result in the very next message
//! (results before any text), nothing from outside is outside an envelope, every event gets
//! a surface label, and the same log folds to the same bytes.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use serde_json::json;
use sextant_assistant::chatlog::{
    Block, Event, Fold, Folded, LoggedEvent, Role, UiItem, CITATION_WARNING, INTERRUPTED,
};
use sextant_assistant::context::Envelope;
use sextant_fuzz::tag_likes;

const NONCE: &str = "0123456789abcdef";
const SUMMARY_HEAD: &str = "[Summary of the earlier conversation]";
const NAMES: [&str; 5] = [
    "project_get",
    "meta_loadSkill",
    "console.send",
    "a name <with> spaces",
    "",
];

#[derive(Arbitrary, Debug)]
enum Op {
    User(String),
    Assistant(String),
    Call {
        id: u8,
        name: u8,
        args: String,
    },
    Result {
        id: u8,
        content: String,
        flags: u8,
    },
    Compaction {
        back: u8,
        summary: String,
    },
    Citation {
        person: bool,
        title: String,
        snapshot: String,
    },
    Structural(String),
}

/// A person's text never starts like the app's own blocks (the check below tells them
/// apart by that opening).
fn person(text: &str) -> String {
    format!("p:{text}")
}

fn events(ops: &[Op]) -> Vec<LoggedEvent> {
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let seq = i as u64 + 1;
        let event = match op {
            Op::User(t) => Event::user(person(t)),
            Op::Assistant(t) => Event::assistant(t.clone()),
            Op::Call { id, name, args } => Event::tool_call(
                format!("c{}", id % 8),
                NAMES[*name as usize % NAMES.len()],
                json!({ "text": args }),
            ),
            Op::Result { id, content, flags } => Event::ToolResult {
                id: format!("c{}", id % 8),
                content: content.clone(),
                is_error: flags & 1 != 0,
                denied: flags & 2 != 0,
                blocked: flags & 4 != 0,
            },
            Op::Compaction { back, summary } => Event::Compaction {
                through: seq - 1 - (*back as u64 % seq),
                summary: summary.clone(),
            },
            Op::Citation {
                person,
                title,
                snapshot,
            } => Event::Citation {
                by: if *person { "person" } else { "assistant" }.into(),
                call_id: None,
                sources: json!([{ "chat": 7, "title": title, "cited": [1, 2] }]),
                snapshots: vec![snapshot.clone()],
            },
            Op::Structural(kind) => Event::structural(format!("k{}", kind.len() % 4), json!({})),
        };
        out.push(LoggedEvent {
            seq,
            unix_ms: seq as i64 * 1000,
            event,
        });
    }
    out
}

fn fold(events: &[LoggedEvent]) -> Folded {
    let mut fold = Fold::with_envelope(Envelope::with_nonce(NONCE).expect("a valid nonce"));
    for e in events {
        fold.apply(e);
    }
    fold.finish()
}

/// Every envelope tag of `text` is ours and they pair up, open then close; `text` ends
/// with a close when it has any.
fn envelopes_hold(text: &str) {
    let open = format!("<untrusted-{NONCE} source=\"");
    let close = format!("</untrusted-{NONCE}>");
    let tags = tag_likes(text);
    let mut expect_open = true;
    for at in &tags {
        let rest = &text[*at..];
        if expect_open {
            assert!(
                rest.starts_with(&open),
                "a tag that is not our opener at {at}: {text:?}"
            );
        } else {
            assert!(
                rest.starts_with(&close),
                "a tag that is not our closer at {at}: {text:?}"
            );
        }
        expect_open = !expect_open;
    }
    assert!(expect_open, "an envelope left open: {text:?}");
    if !tags.is_empty() {
        assert!(
            text.ends_with(&close),
            "text after the last envelope: {text:?}"
        );
    }
}

fn check(folded: &Folded, events: &[LoggedEvent]) {
    let history = &folded.history;
    for pair in history.windows(2) {
        assert_ne!(
            pair[0].role, pair[1].role,
            "two messages of one role in a row"
        );
    }
    let mut answered = 0;
    for (i, message) in history.iter().enumerate() {
        let calls: Vec<&str> = message
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        if message.role == Role::User {
            assert!(calls.is_empty(), "a tool call in a user message");
        }
        // The results this message answers: exactly the calls of the message before, first.
        let results: Vec<&str> = message
            .content
            .iter()
            .take_while(|b| matches!(b, Block::ToolResult { .. }))
            .map(|b| match b {
                Block::ToolResult { tool_use_id, .. } => tool_use_id.as_str(),
                _ => unreachable!(),
            })
            .collect();
        let all_results = message
            .content
            .iter()
            .filter(|b| matches!(b, Block::ToolResult { .. }))
            .count();
        assert_eq!(
            results.len(),
            all_results,
            "a tool result after text in message {i}"
        );
        let asked: Vec<&str> = match i.checked_sub(1).map(|p| &history[p]) {
            Some(prev) if message.role == Role::User => prev
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, .. } => Some(id.as_str()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let mut a = asked.clone();
        let mut r = results.clone();
        a.sort_unstable();
        r.sort_unstable();
        assert_eq!(
            a, r,
            "message {i}'s results do not answer the calls before it"
        );
        answered += results.len();
        if message.role == Role::Assistant && i + 1 == history.len() {
            assert!(calls.is_empty(), "the history ends with unanswered calls");
        }
        for block in &message.content {
            match block {
                Block::ToolResult { content, .. } => {
                    if content != INTERRUPTED
                        && !sextant_assistant::skill_texts::is_app_text(content)
                    {
                        assert!(
                            content.starts_with("<untrusted-"),
                            "a bare result: {content:?}"
                        );
                        envelopes_hold(content);
                    }
                }
                Block::Text { text }
                    if text.starts_with(SUMMARY_HEAD) || text.starts_with(CITATION_WARNING) =>
                {
                    envelopes_hold(text)
                }
                _ => {}
            }
        }
    }
    let calls_in_history = history
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| matches!(b, Block::ToolUse { .. }))
        .count();
    assert_eq!(
        answered, calls_in_history,
        "a call without exactly one result"
    );
    assert_eq!(
        folded.surface.len(),
        events.len(),
        "an event without a surface label"
    );
    let calls = events
        .iter()
        .filter(|e| matches!(e.event, Event::ToolCall { .. }))
        .count();
    let cards = folded
        .ui
        .iter()
        .filter(|u| matches!(u, UiItem::ToolCard { .. }))
        .count();
    assert_eq!(calls, cards, "a call without its card");
}

fuzz_target!(|ops: Vec<Op>| {
    // `FOLD_DEBUG=1 chatlog_fold CRASH_FILE` prints the events a failing input decodes to.
    if std::env::var_os("FOLD_DEBUG").is_some() {
        eprintln!("{ops:#?}");
    }
    let events = events(&ops);
    let folded = fold(&events);
    check(&folded, &events);
    let again = fold(&events);
    assert_eq!(
        serde_json::to_string(&folded.history).unwrap(),
        serde_json::to_string(&again.history).unwrap(),
        "the same log folded to different bytes"
    );
});
