//! Staying on topic, measured (spec 40): every long recorded chat replayed through the chat
//! door with the five mechanisms off and on, from the request bodies the provider received.
//!
//! Each chat in `fixtures/assistant/long-chats/` is a person's messages and, for each, the
//! model's replies (text and tool calls) as recorded; the replies become Anthropic SSE turns
//! of the scripted provider server (real HTTP, the real wire format), and every call runs
//! against the real registry (a simulator source, edits auto-approved), so tool results
//! have their real sizes. The model is scripted, so it cannot react to what it is shown:
//! the empty-echo rate is the recording's, the same in both runs.
//!
//! Reported per chat and mode: requests; tool-definition bytes per request (all requests,
//! and the requests narrowing narrowed); tool-output bytes per request and their share of
//! the request (narrowing shrinks the rest of the request too, so the share falls less);
//! bytes per request (mean, largest); compaction requests.
//!
//! `cargo run --release -p sextant-assistant-runtime-tests --example long_chats`

#[path = "support/recorded.rs"]
mod recorded;

use recorded::{replay, Recorded, Reply};
use serde_json::{json, Value};
use sextant_assistant::compaction::COMPACTION_PROMPT;

const MECHANISMS: [&str; 5] = [
    "focusPrompt",
    "intentNarrowing",
    "toolResultCompression",
    "topicCompaction",
    "topicMarker",
];

struct Figures {
    requests: usize,
    compactions: usize,
    tool_def_bytes: Vec<usize>,
    tool_output_bytes: Vec<usize>,
    bytes: Vec<usize>,
    tool_counts: Vec<usize>,
}

fn tool_output(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| match &b["content"] {
            Value::String(s) => s.len(),
            other => other.to_string().len(),
        })
        .sum()
}

async fn run(chat: &Recorded, on: bool) -> Figures {
    let settings: serde_json::Map<String, Value> = MECHANISMS
        .iter()
        .map(|m| (m.to_string(), json!(on)))
        .collect();
    let bodies = replay(chat, chat.turns.len(), Value::Object(settings)).await;
    let is_compaction = |b: &Value| b["system"][0]["text"] == COMPACTION_PROMPT;
    let turns: Vec<&Value> = bodies.iter().filter(|b| !is_compaction(b)).collect();
    Figures {
        requests: turns.len(),
        compactions: bodies.len() - turns.len(),
        tool_def_bytes: turns.iter().map(|b| b["tools"].to_string().len()).collect(),
        tool_output_bytes: turns.iter().map(|b| tool_output(b)).collect(),
        bytes: turns.iter().map(|b| b.to_string().len()).collect(),
        tool_counts: turns
            .iter()
            .map(|b| b["tools"].as_array().map_or(0, Vec::len))
            .collect(),
    }
}

fn mean(v: &[usize]) -> f64 {
    v.iter().sum::<usize>() as f64 / v.len().max(1) as f64
}

fn down(off: f64, on: f64) -> String {
    format!("{:+.0} %", (on - off) / off * 100.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("| chat | messages / calls / empty echoes | mode | requests | tool defs B/request (narrowed requests) | tool output B/request | tool output share | B/request mean (max) | compactions |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for name in recorded::names() {
        let name = name.as_str();
        let chat = recorded::load(name);
        let replies: Vec<&Reply> = chat.turns.iter().flat_map(|t| &t.replies).collect();
        let calls: usize = replies.iter().map(|r| r.calls.len()).sum();
        let echoes = replies
            .iter()
            .filter(|r| r.text.is_empty() && !r.calls.is_empty())
            .count();
        let messages = chat.turns.len() + replies.len() + calls;
        let off = run(&chat, false).await;
        let on = run(&chat, true).await;
        assert_eq!(off.requests, on.requests, "the same scripted replies");
        // The requests narrowing narrowed, compared with the same requests off.
        let narrowed: Vec<usize> = (0..on.requests)
            .filter(|&i| on.tool_counts[i] < off.tool_counts[i])
            .collect();
        let pick =
            |f: &Figures| -> Vec<usize> { narrowed.iter().map(|&i| f.tool_def_bytes[i]).collect() };
        let share = |f: &Figures| {
            f.tool_output_bytes.iter().sum::<usize>() as f64 / f.bytes.iter().sum::<usize>() as f64
        };
        let echo_rate = echoes as f64 / replies.len() as f64 * 100.0;
        for (mode, f) in [("off", &off), ("on", &on)] {
            println!(
                "| {name} | {messages} / {calls} / {echo_rate:.0} % | {mode} | {} | {:.0} ({:.0} on {} requests) | {:.0} | {:.1} % | {:.0} ({}) | {} |",
                f.requests,
                mean(&f.tool_def_bytes),
                mean(&pick(f)),
                narrowed.len(),
                mean(&f.tool_output_bytes),
                share(f) * 100.0,
                mean(&f.bytes),
                f.bytes.iter().max().unwrap(),
                f.compactions,
            );
        }
        println!(
            "| {name} | | change | | {} ({} narrowed) | {} | {} | {} | |",
            down(mean(&off.tool_def_bytes), mean(&on.tool_def_bytes)),
            down(mean(&pick(&off)), mean(&pick(&on))),
            down(mean(&off.tool_output_bytes), mean(&on.tool_output_bytes)),
            down(share(&off), share(&on)),
            down(mean(&off.bytes), mean(&on.bytes)),
        );
    }
}
