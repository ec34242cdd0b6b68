//! Staying on topic (spec 40) through the chat door, the real registry and the scripted
//! provider server: what each mechanism puts in the request body, that each off is zero
//! bytes, that the cached prefix keeps its bytes, and that narrowing changes only what the
//! model is shown.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{
    cached_prefix, ok, open_auto_approving, per_request_blocks, prompt_blocks, serve, turn,
};
use serde_json::{json, Value};
use sextant_assistant::compress::reference_pointer;
use sextant_assistant::door::ChatDoor;
use sextant_assistant::focus::{FOCUS_EN, FOCUS_ZH};
use sextant_assistant::intent::{Intent, Intents};
use sextant_assistant::tools::tool_name;
use sextant_providers::script::ScriptServer;

const GAUGE: &str = "Add a gauge for the battery voltage to the dashboard";
const MQTT: &str = "Subscribe to the sensors topic on the MQTT broker";

async fn setup(dir: &Path, server: &ScriptServer) -> ChatDoor {
    open_auto_approving(dir, server, "claude-focus").await
}

const ALL_OFF: [&str; 4] = [
    "focusPrompt",
    "intentNarrowing",
    "toolResultCompression",
    "topicMarker",
];

async fn set(door: &ChatDoor, key: &str, on: bool) {
    let mut request = json!({"op": "setSettings"});
    request[key] = json!(on);
    ok(door, request).await;
}

fn tool_names(body: &Value) -> BTreeSet<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// A request's system blocks: up to and including the cache breakpoint, and after it.
fn split_at_breakpoint(body: &Value) -> (Vec<Value>, Vec<Value>) {
    let mut system = prompt_blocks(body);
    let end = system
        .iter()
        .position(|b| b.get("cache_control").is_some())
        .unwrap();
    let after = system.split_off(end + 1);
    (system, after)
}

/// The system blocks up to and including the cache breakpoint.
fn cached_system(body: &Value) -> String {
    serde_json::to_string(&split_at_breakpoint(body).0).unwrap()
}

/// The blocks after the breakpoint, as text.
fn per_request_system(body: &Value) -> String {
    split_at_breakpoint(body)
        .1
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of the result of call `id` in a request.
fn result_text(body: &Value, id: &str) -> String {
    let content = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("a result for {id}"))["content"]
        .clone();
    match content {
        Value::String(s) => s,
        Value::Array(parts) => parts
            .iter()
            .map(|p| p["text"].as_str().unwrap_or(""))
            .collect(),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn every_tool_the_intent_table_names_is_one_a_turn_offers() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_never_compliant").await;
    let door = setup(dir.path(), &server).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &chat, "hello there").await;
    let offered = tool_names(&server.requests()[0].json());
    for command in Intents::shipped().all_tools() {
        let tool = tool_name(&command).unwrap();
        assert!(
            offered.contains(&tool),
            "the intent table names `{command}`, which no turn offers: {offered:?}"
        );
    }
}

#[tokio::test]
async fn the_focus_section_is_in_the_cached_prefix_byte_stable_in_the_ui_language_and_off_is_absent(
) {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_never_compliant").await;
    let door = setup(dir.path(), &server).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &chat, GAUGE).await;
    turn(&door, &chat, MQTT).await;
    let (first, second) = (server.requests()[0].json(), server.requests()[1].json());
    let role = first["system"][0]["text"].as_str().unwrap().to_string();
    assert!(role.contains(FOCUS_EN), "{role}");
    assert_eq!(role.matches("## Focus").count(), 1);
    // Every turn of the chat: the same bytes up to the breakpoint.
    assert_eq!(cached_system(&first), cached_system(&second));

    // The UI in Chinese: the Chinese section, not the English one.
    ok(&door, json!({"op": "setSettings", "language": "zh"})).await;
    let zh_chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &zh_chat, "把仪表盘的布局改成两列").await;
    let zh = serde_json::to_string(&server.requests()[2].json()).unwrap();
    assert!(zh.contains(&serde_json::to_string(FOCUS_ZH).unwrap()[1..20]));
    assert!(!zh.contains("## Focus"));
    let settings = ok(&door, json!({"op": "getSettings"})).await;
    assert_eq!(settings["language"], "zh", "{settings}");

    // Off: not a byte of either, and the role block is what it was without it.
    ok(&door, json!({"op": "setSettings", "language": "en"})).await;
    set(&door, "focusPrompt", false).await;
    let off_chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &off_chat, GAUGE).await;
    let off = server.requests()[3].json();
    let text = serde_json::to_string(&off).unwrap();
    assert!(!text.contains("## Focus") && !text.contains("聚焦准则"));
    assert_eq!(
        off["system"][0]["text"].as_str().unwrap(),
        role.replace(&format!("\n\n{FOCUS_EN}"), "")
    );
}

#[tokio::test]
async fn narrowing_shows_the_intents_tools_compression_shortens_old_results_and_off_restores_both()
{
    let intents = Intents::shipped();
    let dashboard: BTreeSet<String> = intents
        .tools(Intent::DashboardLayout)
        .iter()
        .map(|c| tool_name(c).unwrap())
        .collect();

    // On (the default).
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_focus").await;
    let door = setup(dir.path(), &server).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &chat, GAUGE).await;
    turn(&door, &chat, "thanks, and is the device there?").await;
    let on: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(on.len(), 4);
    let narrowed = tool_names(&on[0]);
    let offered_dashboard: BTreeSet<String> = dashboard
        .iter()
        .filter(|t| narrowed.contains(*t))
        .cloned()
        .collect();
    assert_eq!(narrowed, offered_dashboard, "only the dashboard's tools");
    assert!(narrowed.len() >= 3);
    assert!(!narrowed.contains("meta_listCommands") && !narrowed.contains("io_status"));
    // Both requests of the turn see the same narrowed set.
    assert_eq!(tool_names(&on[1]), narrowed);
    // An unknown message: every tool.
    let full = tool_names(&on[2]);
    assert!(full.is_superset(&narrowed) && full.len() > narrowed.len());
    assert!(full.contains("meta_listCommands") && full.contains("io_status"));

    // The model called meta.listCommands, outside the set it was shown: it still ran.
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    let logged = serde_json::to_string(&history).unwrap();
    assert!(logged.contains("meta.listCommands") || logged.contains("meta_listCommands"));
    let fresh = result_text(&on[1], "toolu_f1");
    assert!(!fresh.to_lowercase().contains("unknown tool"), "{fresh}");

    // Off: every tool every time, and the earlier result whole.
    let dir_off = tempfile::tempdir().unwrap();
    let server_off = serve("anthropic_focus").await;
    let door_off = setup(dir_off.path(), &server_off).await;
    for key in ALL_OFF {
        set(&door_off, key, false).await;
    }
    let chat_off = ok(&door_off, json!({"op": "create"})).await["id"].clone();
    turn(&door_off, &chat_off, GAUGE).await;
    turn(&door_off, &chat_off, "thanks, and is the device there?").await;
    let off: Vec<Value> = server_off.requests().iter().map(|r| r.json()).collect();
    for body in &off {
        assert_eq!(tool_names(body), full);
    }
    // Off, the tools are the same bytes every request (the cache keys on them).
    assert_eq!(
        serde_json::to_string(&off[0]["tools"]).unwrap(),
        serde_json::to_string(&off[2]["tools"]).unwrap()
    );
    let whole = result_text(&off[2], "toolu_f1");
    assert!(
        whole.len() > 2_000,
        "the listing is big: {} bytes",
        whole.len()
    );
    assert_eq!(result_text(&off[1], "toolu_f1"), whole);
    // On, the same result in the next turn is a pointer: command documentation read in an
    // earlier turn (the model calls meta_listCommands again when it needs it).
    let shown = result_text(&on[2], "toolu_f1");
    assert_eq!(shown, reference_pointer("meta.listCommands"));
    assert!(shown.len() < whole.len() / 10);
    // The log keeps the whole result: reopening the chat shows every byte.
    let history_on = serde_json::to_string(&history).unwrap();
    let marker = "project.dataset.add";
    assert!(
        history_on.contains(marker),
        "the full listing is in the log"
    );
    assert!(!history_on.contains("elided by Sextant"));
}

#[tokio::test]
async fn a_topic_switch_puts_a_note_after_the_breakpoint_and_off_puts_none() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_never_compliant").await;
    let door = setup(dir.path(), &server).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &chat, GAUGE).await;
    turn(&door, &chat, MQTT).await;
    turn(&door, &chat, "and what QoS does the broker use?").await;
    let on: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert!(!per_request_system(&on[0]).contains("Topic note"));
    let note = per_request_system(&on[1]);
    assert!(
        note.contains("switched from the dashboard layout to MQTT"),
        "{note}"
    );
    // Still MQTT: no note; the note never entered the cached prefix or the history.
    assert!(!per_request_system(&on[2]).contains("Topic note"));
    for body in &on {
        assert!(!cached_system(body).contains("Topic note"));
        // The history: the messages up to the history's breakpoint.
        let mut history = body["messages"].as_array().unwrap().clone();
        let last = history.last_mut().unwrap()["content"]
            .as_array_mut()
            .unwrap();
        last.truncate(last.len() - per_request_blocks(body).len());
        assert!(!serde_json::to_string(&history)
            .unwrap()
            .contains("Topic note"));
    }
    assert_eq!(cached_system(&on[0]), cached_system(&on[1]));
    // Two turns of the same intent: the whole cached prefix, narrowed tools included, is
    // the same bytes (a change of intent changes the tools, and the provider re-caches).
    assert_eq!(cached_prefix(&on[1]), cached_prefix(&on[2]));
    assert_ne!(tool_names(&on[0]), tool_names(&on[1]));
    // Reopening the log derives the same note: nothing of it is stored.
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    assert!(!serde_json::to_string(&history)
        .unwrap()
        .contains("Topic note"));

    set(&door, "topicMarker", false).await;
    let other = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &other, GAUGE).await;
    turn(&door, &other, MQTT).await;
    let off = server.requests()[4].json();
    assert!(!serde_json::to_string(&off).unwrap().contains("Topic note"));
    assert!(!serde_json::to_string(&off)
        .unwrap()
        .contains("switched from"));
    // The system array off is the one on without the note's block.
    assert_eq!(prompt_blocks(&off).len() + 1, prompt_blocks(&on[1]).len());
}

/// The four requests of the `anthropic_focus` chat with one mechanism switched off.
async fn focus_chat_with(off: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_focus").await;
    let door = setup(dir.path(), &server).await;
    set(&door, off, false).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &chat, GAUGE).await;
    turn(&door, &chat, "thanks, and is the device there?").await;
    server.requests().iter().map(|r| r.json()).collect()
}

#[tokio::test]
async fn narrowing_off_alone_and_compression_off_alone_each_remove_only_their_own_bytes() {
    let no_narrowing = focus_chat_with("intentNarrowing").await;
    let no_compression = focus_chat_with("toolResultCompression").await;
    // Narrowing off: the dashboard message sees every tool, as the unknown one does...
    assert_eq!(tool_names(&no_narrowing[0]), tool_names(&no_narrowing[2]));
    assert!(tool_names(&no_narrowing[0]).contains("io_status"));
    // ...while compression still shortens the earlier listing (documentation read in an
    // earlier turn: a pointer).
    let shown = result_text(&no_narrowing[2], "toolu_f1");
    assert_eq!(shown, reference_pointer("meta.listCommands"));

    // Compression off: the listing is whole in the next turn...
    let whole = result_text(&no_compression[2], "toolu_f1");
    assert!(whole.len() > 2_000 && !whole.contains("elided by Sextant"));
    assert_eq!(
        whole.len(),
        result_text(&no_compression[1], "toolu_f1").len()
    );
    // ...while narrowing still shows the dashboard message fewer tools.
    assert!(tool_names(&no_compression[0]).len() < tool_names(&no_compression[2]).len());
    assert!(!tool_names(&no_compression[0]).contains("io_status"));
}
