//! The request layout and Anthropic's prompt cache, measured: the first ten turns of a
//! recorded chat (`fixtures/assistant/long-chats/dashboard.json`, every call run against the
//! real registry) replayed through the chat door against the scripted Anthropic server, and
//! each request body put through a model of Anthropic's documented prompt cache.
//!
//! The cache model: the prefix order is tools, system, messages; a block carrying
//! `cache_control` writes the prefix that ends with it; a request reads the longest written
//! prefix that ends on one of its block boundaries at most 20 blocks before one of its own
//! breakpoints (the documented look-back). Sizes are in bytes of the blocks' JSON (minus the
//! markers) – the scripted server has no tokenizer; divide by about four for tokens.
//!
//! "Before" is the layout the client sent until the per-request blocks moved: all system
//! blocks (the live state with its nonce last) ahead of the history and no breakpoint in the
//! history. It is rebuilt from the same request – the trailing per-request blocks moved
//! back into `system`, the history's marker dropped – so both columns see the same chat.
//!
//! `cargo run --release -p sextant-assistant-runtime-tests --example prompt_cache`

#[path = "support/recorded.rs"]
mod recorded;

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use serde_json::{json, Value};

/// How far before a breakpoint Anthropic looks for an earlier prefix.
const LOOKBACK_BLOCKS: usize = 20;
const TURNS: usize = 10;

/// One cacheable unit of a request: where it sits (tools, system, or a message of a role),
/// and its JSON without the cache marker.
struct Unit {
    key: String,
    bytes: usize,
    breakpoint: bool,
}

fn units(body: &Value) -> Vec<Unit> {
    let mut out = Vec::new();
    let mut push = |place: String, block: &Value| {
        let mut block = block.clone();
        let breakpoint = block
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        let text = block.to_string();
        out.push(Unit {
            bytes: text.len(),
            key: format!("{place}:{text}"),
            breakpoint,
        });
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push("tool".into(), tool);
    }
    for block in body["system"].as_array().into_iter().flatten() {
        push("system".into(), block);
    }
    for (i, message) in body["messages"].as_array().unwrap().iter().enumerate() {
        for block in message["content"].as_array().unwrap() {
            push(format!("{i}{}", message["role"]), block);
        }
    }
    out
}

/// The prefix hashes of a request, one per block boundary.
fn prefix_hashes(units: &[Unit]) -> Vec<u64> {
    let mut hasher = DefaultHasher::new();
    units
        .iter()
        .map(|u| {
            u.key.hash(&mut hasher);
            hasher.finish()
        })
        .collect()
}

/// Bytes read from the cache, written to it, and not cached.
type Sizes = (usize, usize, usize);

#[derive(Default)]
struct Cache {
    written: HashSet<u64>,
}

impl Cache {
    /// What one request reads, writes and leaves uncached.
    fn request(&mut self, body: &Value) -> Sizes {
        let units = units(body);
        let hashes = prefix_hashes(&units);
        let total: usize = units.iter().map(|u| u.bytes).sum();
        let breakpoints: Vec<usize> = (0..units.len()).filter(|&i| units[i].breakpoint).collect();
        let size = |end: usize| units[..end].iter().map(|u| u.bytes).sum::<usize>();
        let hit = breakpoints
            .iter()
            .flat_map(|&b| (b.saturating_sub(LOOKBACK_BLOCKS)..=b).rev())
            .filter(|&i| self.written.contains(&hashes[i]))
            .max()
            .map_or(0, |i| i + 1);
        let last = breakpoints.last().map_or(0, |&b| b + 1).max(hit);
        for &b in &breakpoints {
            self.written.insert(hashes[b]);
        }
        (size(hit), size(last) - size(hit), total - size(last))
    }
}

/// The same request as the client laid it out before: the per-request blocks back in
/// `system`, no marker in the history.
fn before_layout(body: &Value) -> Value {
    let mut body = body.clone();
    let messages = body["messages"].as_array_mut().unwrap();
    let marked = |m: &Value| {
        m["content"]
            .as_array()
            .and_then(|c| c.iter().rposition(|b| b.get("cache_control").is_some()))
    };
    let n = messages.len();
    let tail: Vec<Value> = match marked(&messages[n - 1]) {
        Some(i) => messages[n - 1]["content"]
            .as_array_mut()
            .unwrap()
            .split_off(i + 1),
        None if n > 1 && marked(&messages[n - 2]).is_some() => {
            let last = messages.pop().unwrap();
            last["content"].as_array().unwrap().clone()
        }
        None => Vec::new(),
    };
    for message in messages.iter_mut() {
        for block in message["content"].as_array_mut().unwrap() {
            block.as_object_mut().unwrap().remove("cache_control");
        }
    }
    body["system"].as_array_mut().unwrap().extend(tail);
    body
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let chat = recorded::load("dashboard");
    let bodies = recorded::replay(&chat, TURNS, json!({})).await;
    // Each turn's first request is the one a person waits on; its later requests (after
    // tool calls) are reported in the totals.
    // A turn starts where the newest message is the person's own text (later requests of
    // the turn end in tool results).
    let firsts: Vec<usize> = bodies
        .iter()
        .enumerate()
        .filter(|(_, b)| {
            b["messages"].as_array().unwrap().last().unwrap()["content"][0]["type"] == "text"
        })
        .map(|(i, _)| i)
        .collect();
    let (mut before, mut after) = (Cache::default(), Cache::default());
    let mut rows = Vec::new();
    for body in &bodies {
        rows.push((before.request(&before_layout(body)), after.request(body)));
    }
    println!(
        "{} requests over {} turns of `{}`; bytes: read from the cache / written to it / not cached",
        bodies.len(),
        firsts.len(),
        chat.title
    );
    println!();
    println!(
        "| turn | request | before: read / written / uncached | after: read / written / uncached |"
    );
    println!("|---|---|---|---|");
    for (turn, &i) in firsts.iter().enumerate() {
        let ((br, bw, bu), (ar, aw, au)) = rows[i];
        println!(
            "| {} | {} | {br} / {bw} / {bu} | {ar} / {aw} / {au} |",
            turn + 1,
            i + 1
        );
    }
    let sum = |rows: &[Sizes]| {
        rows.iter()
            .fold((0, 0, 0), |a, r| (a.0 + r.0, a.1 + r.1, a.2 + r.2))
    };
    let later = &rows[1..];
    let (b, a) = (
        sum(&later.iter().map(|r| r.0).collect::<Vec<_>>()),
        sum(&later.iter().map(|r| r.1).collect::<Vec<_>>()),
    );
    let share = |t: (usize, usize, usize)| t.0 as f64 / (t.0 + t.1 + t.2) as f64 * 100.0;
    println!(
        "| all requests after the first | | {} / {} / {} ({:.0} % read) | {} / {} / {} ({:.0} % read) |",
        b.0,
        b.1,
        b.2,
        share(b),
        a.0,
        a.1,
        a.2,
        share(a)
    );
}
