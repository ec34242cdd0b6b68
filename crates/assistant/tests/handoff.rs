//! The handoff digest (spec 20 §3): derived from the log alone, deterministic, capped at
//! 600 bytes, redacted; and a chat seeded from it.

use serde_json::json;
use sextant_assistant::chatlog::{fold, kinds, ChatLog, Event, LoggedEvent};
use sextant_assistant::handoff::{digest, seed, seed_event, MAX_DIGEST_BYTES};
use sextant_commands::Tier;

fn tier(command: &str) -> Option<Tier> {
    match command {
        "project.get" | "project.validate" | "assistant.checkpoint" => Some(Tier::Safe),
        "project.setTitle" | "project.dataset.update" | "project.group.add" => Some(Tier::Confirm),
        "io.write" => Some(Tier::DeviceGated),
        _ => None,
    }
}

fn logged(events: Vec<Event>) -> Vec<LoggedEvent> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| LoggedEvent {
            seq: i as u64 + 1,
            unix_ms: 1_700_000_000_000 + i as i64,
            event,
        })
        .collect()
}

fn ok(id: &str) -> Event {
    Event::tool_result(id, "{\"ok\":true}", false)
}

fn a_working_chat() -> Vec<LoggedEvent> {
    logged(vec![
        Event::user("show the IMU temperature as a gauge"),
        Event::tool_call("c1", "project_get", json!({})),
        ok("c1"),
        Event::tool_call("c2", "project_group_add", json!({"title": "IMU", "widget": "gauge"})),
        Event::structural(kinds::CHECKPOINT_CREATED, json!({"id": 4, "callId": "c2", "command": "project.group.add"})),
        ok("c2"),
        Event::assistant("Added."),
        Event::user("rename the project to Bench A; my key is sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"),
        Event::tool_call("c3", "meta_executeCommand", json!({"name": "project.setTitle", "params": {"title": "Bench A"}})),
        Event::structural(kinds::CHECKPOINT_CREATED, json!({"id": 5, "callId": "c3", "command": "project.setTitle"})),
        ok("c3"),
        // Denied and failed edits did not happen: not in the digest.
        Event::tool_call("c4", "project_dataset_update", json!({"id": 9, "patch": {"units": "K"}})),
        Event::ToolResult { id: "c4".into(), content: "Error: the user declined".into(), is_error: true, denied: true, blocked: false },
        Event::tool_call("c5", "project_dataset_update", json!({"id": 7, "patch": {"units": "°C"}})),
        Event::tool_result("c5", "Error: no dataset 7", true),
        Event::assistant("Renamed; dataset 7 does not exist."),
        Event::user("now send PING to the board"),
        Event::tool_call("c6", "io_write", json!({"data": "PING\n"})),
        ok("c6"),
        Event::user("thanks"),
    ])
}

#[test]
fn the_digest_names_the_questions_the_edits_and_the_checkpoints_and_nothing_secret() {
    let d = digest("IMU bench", &a_working_chat(), &tier);
    assert!(d.len() <= MAX_DIGEST_BYTES, "{} bytes", d.len());
    assert!(d.starts_with("Chat: IMU bench\n"), "{d}");
    // The last three questions, not the first.
    assert!(!d.contains("show the IMU temperature"), "{d}");
    assert!(d.contains("- rename the project to Bench A"), "{d}");
    assert!(d.contains("- now send PING to the board"), "{d}");
    assert!(d.contains("- thanks"), "{d}");
    // The successful mutating calls with what they changed; reads, denials and failures not.
    assert!(d.contains("- project.group.add title=\"IMU\""), "{d}");
    assert!(d.contains("- project.setTitle title=\"Bench A\""), "{d}");
    assert!(d.contains("- io.write data=\"PING\\n\""), "{d}");
    assert!(
        !d.contains("project.get") && !d.contains("dataset.update"),
        "{d}"
    );
    assert!(d.contains("Checkpoints: 4, 5"), "{d}");
    assert!(!d.contains("sk-ant-api03"), "the key is redacted: {d}");
    assert!(d.contains("[REDACTED:"), "{d}");
}

#[test]
fn the_same_log_gives_the_same_bytes_and_a_long_chat_still_fits() {
    let chat = a_working_chat();
    assert_eq!(digest("t", &chat, &tier), digest("t", &chat, &tier));

    let mut events = Vec::new();
    for i in 0..200 {
        events.push(Event::user(format!(
            "question {i} {}",
            "with many words ".repeat(30)
        )));
        let id = format!("c{i}");
        events.push(Event::tool_call(
            &id,
            "project_dataset_update",
            json!({"id": i, "patch": {"title": "x".repeat(300)}}),
        ));
        events.push(Event::structural(
            kinds::CHECKPOINT_CREATED,
            json!({"id": 1000 + i}),
        ));
        events.push(ok(&id));
    }
    let long = logged(events);
    let title = "a very long title ".repeat(20);
    let d = digest(&title, &long, &tier);
    assert!(d.len() <= MAX_DIGEST_BYTES, "{} bytes: {d}", d.len());
    assert_eq!(d, digest(&title, &long, &tier));
    // The newest of everything survives the cap.
    assert!(d.contains("question 199"), "{d}");
    assert!(d.contains("id=199"), "{d}");
    assert!(d.contains("1199"), "{d}");
    assert!(d.contains("earlier not listed"), "{d}");
    // Multi-byte text is cut on a character boundary.
    let cjk = logged(vec![Event::user("压缩架构".repeat(100))]);
    let d = digest(&"标题".repeat(100), &cjk, &tier);
    assert!(d.len() <= MAX_DIGEST_BYTES);
}

#[test]
fn an_empty_chat_has_a_digest_of_its_title_only() {
    assert_eq!(digest("New chat", &[], &tier), "Chat: New chat");
}

#[test]
fn a_seeded_chat_keeps_its_digest_and_chats_written_before_load_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = ChatLog::open(dir.path().join("chats.sqlite")).unwrap();
    // A chat as an older Sextant wrote it: only the kinds it knew.
    let old = log.create_chat("old").unwrap();
    for e in [
        Event::user("hello"),
        Event::tool_call("c1", "project_setTitle", json!({"title": "X"})),
        Event::structural(kinds::CHECKPOINT_CREATED, json!({"id": 7})),
        ok("c1"),
        Event::assistant("done"),
    ] {
        log.append(old, &e).unwrap();
    }
    let before = log.fold(old).unwrap();
    let events = log.events(old).unwrap();
    assert_eq!(seed(&events), None);
    let d = digest("old", &events, &tier);
    assert!(
        d.contains("project.setTitle title=\"X\"") && d.contains("Checkpoints: 7"),
        "{d}"
    );

    let new = log.create_chat("old (continued)").unwrap();
    log.append(new, &seed_event(old, &d)).unwrap();
    // The source changes later; the seed does not.
    log.append(old, &Event::user("more")).unwrap();
    log.delete_chat(old).unwrap();
    let seeded = log.events(new).unwrap();
    assert_eq!(seed(&seeded).as_deref(), Some(d.as_str()));
    // The seed is log-only: the model's history of the new chat is empty.
    assert!(fold(&seeded).history.is_empty());
    assert_eq!(before.ui.len(), 4, "{:?}", before.ui);
}
