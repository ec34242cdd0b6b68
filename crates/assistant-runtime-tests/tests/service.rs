//! The chat service end to end: the providers crate's scripted server as the model
//! (transcripts in fixtures/providers/service) and a real spawned runtime.

use std::time::Duration;

use serde_json::{json, Value};
use sextant_assistant::chatlog::{kinds, ChatId, Event};
use sextant_assistant::pipeline::ResultStatus;
use sextant_assistant::service::{
    ChatService, Decider, ProviderKind, ServiceError, ServiceEvent, ServiceEventKind,
    ServiceSettings, TurnEndKind, EVENT_CAPACITY,
};
use sextant_commands::{Policy, Tier};
use sextant_providers::script::{fixtures_dir, Script, ScriptServer};
use sextant_runtime::{Caller, Runtime, RuntimeHandle, Workspace};
use sextant_telemetry::project::{Project, Source};
use tokio::sync::broadcast;

// ---- harness ----------------------------------------------------------------------------

fn script(name: &str) -> Script {
    Script::load(&fixtures_dir().join("service").join(format!("{name}.json")))
}

struct Setup {
    dir: tempfile::TempDir,
    server: ScriptServer,
    runtime: RuntimeHandle,
    service: ChatService,
    events: broadcast::Receiver<ServiceEvent>,
    chat: ChatId,
}

fn settings(server: &ScriptServer) -> ServiceSettings {
    let mut settings = ServiceSettings::new(ProviderKind::Anthropic, server.url(), "claude-test");
    settings.api_key = Some("sk-ant-test".into());
    settings
}

async fn setup(script: Script, tweak: impl FnOnce(&mut ServiceSettings)) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptServer::start(script).await;
    // One source, so a dataset the model adds has something to feed it.
    let project = Project {
        sources: vec![Source::default()],
        ..Project::default()
    };
    let runtime = Runtime::new(Workspace::new(project)).spawn(None);
    let mut s = settings(&server);
    tweak(&mut s);
    let service = ChatService::open(dir.path().join("chats.sqlite"), runtime.clone(), s).unwrap();
    let events = service.subscribe();
    let chat = service.create_chat("test").unwrap();
    Setup {
        dir,
        server,
        runtime,
        service,
        events,
        chat,
    }
}

async fn next(events: &mut broadcast::Receiver<ServiceEvent>) -> ServiceEvent {
    tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .expect("an event within 20 s")
        .expect("no lag")
}

/// Runs until the turn ends, answering every approval prompt with `answer`; returns every
/// event seen.
async fn drive(
    events: &mut broadcast::Receiver<ServiceEvent>,
    mut answer: impl FnMut(&ServiceEventKind),
) -> Vec<ServiceEventKind> {
    let mut seen = Vec::new();
    loop {
        let event = next(events).await;
        answer(&event.kind);
        let end = matches!(event.kind, ServiceEventKind::TurnEnded { .. });
        seen.push(event.kind);
        if end {
            return seen;
        }
    }
}

fn asked(seen: &[ServiceEventKind]) -> Vec<(String, Option<Tier>)> {
    seen.iter()
        .filter_map(|e| match e {
            ServiceEventKind::ApprovalRequested { call_id, tier, .. } => {
                Some((call_id.clone(), *tier))
            }
            _ => None,
        })
        .collect()
}

fn done(seen: &[ServiceEventKind], id: &str) -> (ResultStatus, String) {
    seen.iter()
        .find_map(|e| match e {
            ServiceEventKind::ToolCallDone {
                id: i,
                status,
                content,
            } if i == id => Some((*status, content.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {id}: {seen:#?}"))
}

async fn ui_call(runtime: &RuntimeHandle, command: &str) -> Value {
    runtime
        .call(Caller::Ui, command, json!({}), Policy::default())
        .await
        .unwrap()
}

// ---- tests ------------------------------------------------------------------------------

#[tokio::test]
async fn the_model_builds_a_gauge_through_approved_tool_calls() {
    let mut s = setup(script("anthropic_gauge"), |_| {}).await;
    let turn = s
        .service
        .send(s.chat, "Show the RPM as a gauge")
        .await
        .unwrap();
    let service = s.service.clone();
    let chat = s.chat;
    let seen = drive(&mut s.events, |e| {
        if let ServiceEventKind::ApprovalRequested { call_id, .. } = e {
            service.approve(chat, call_id).unwrap();
        }
    })
    .await;
    let report = turn.wait().await.unwrap();
    assert_eq!((report.requests, report.tool_calls), (3, 2));
    assert_eq!(
        asked(&seen),
        vec![
            ("toolu_g1".to_string(), Some(Tier::Confirm)),
            ("toolu_g2".to_string(), Some(Tier::Confirm))
        ]
    );
    for id in ["toolu_g1", "toolu_g2"] {
        let (status, content) = done(&seen, id);
        assert_eq!(status, ResultStatus::Ok, "{content}");
    }
    assert_eq!(ended(&seen), TurnEndKind::Finished, "{seen:?}");

    let project = ui_call(&s.runtime, "project.get").await;
    let group = &project["groups"][0];
    assert_eq!(group["title"], json!("Engine"));
    assert_eq!(group["datasets"][0]["title"], json!("RPM"));
    assert_eq!(group["datasets"][0]["widget"], json!("gauge"));
    let checkpoints = ui_call(&s.runtime, "assistant.listCheckpoints").await;
    let labels: Vec<&str> = checkpoints
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["label"].as_str())
        .collect();
    assert!(labels.contains(&"before project.group.add"), "{labels:?}");
    assert!(labels.contains(&"before project.dataset.add"), "{labels:?}");

    // The prompt: role, docs and live state blocks; the essential tools plus discovery.
    let first = s.server.requests()[0].json();
    let live_state = |r: &Value| -> String {
        // The per-request blocks follow the history: the newest message's blocks after
        // the history's cache breakpoint.
        let last = r["messages"].as_array().unwrap().last().unwrap();
        let blocks = last["content"].as_array().unwrap();
        let start = blocks
            .iter()
            .rposition(|b| b.get("cache_control").is_some())
            .map_or(0, |i| i + 1);
        blocks[start..]
            .iter()
            .map(|b| b["text"].as_str().unwrap_or_default())
            .collect()
    };
    assert!(live_state(&first).contains("Live state"), "{first}");
    assert!(!first["system"].to_string().contains("Live state"));
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in [
        "project_group_add",
        "project_dataset_add",
        "meta_executeCommand",
    ] {
        assert!(tools.contains(&tool), "{tools:?}");
    }

    // The live state is read for each request: after its own edits the model reads the
    // project as it now is, while the cached blocks (role, docs) stay byte-identical.
    let requests: Vec<Value> = s.server.requests().iter().map(|r| r.json()).collect();
    let live = live_state;
    let cached = |r: &Value| json!([r["system"], r["tools"]]).to_string();
    assert!(!live(&requests[0]).contains("Engine"));
    assert!(live(&requests[1]).contains("Engine") && !live(&requests[1]).contains("RPM"));
    assert!(live(&requests[2]).contains("RPM"), "{}", live(&requests[2]));
    assert_eq!(cached(&requests[1]), cached(&requests[0]));
    assert_eq!(cached(&requests[2]), cached(&requests[0]));

    // Events are JSON a door forwards verbatim.
    let wire = serde_json::to_value(ServiceEvent {
        chat: s.chat,
        kind: seen[seen.len() - 1].clone(),
    })
    .unwrap();
    assert_eq!(wire["type"], json!("turnEnded"));
    assert_eq!(wire["chat"], json!(s.chat));
}

#[tokio::test]
async fn a_denial_becomes_an_error_result_the_next_request_carries() {
    let mut s = setup(script("anthropic_one_edit"), |_| {}).await;
    let turn = s.service.send(s.chat, "Add a group").await.unwrap();
    let service = s.service.clone();
    let chat = s.chat;
    let seen = drive(&mut s.events, |e| {
        if let ServiceEventKind::ApprovalRequested { call_id, .. } = e {
            service.deny(chat, call_id, Some("not now")).unwrap();
        }
    })
    .await;
    turn.wait().await.unwrap();
    let (status, content) = done(&seen, "toolu_d1");
    assert_eq!(status, ResultStatus::Denied);
    assert!(
        content.starts_with("Error:") && content.contains("not now"),
        "{content}"
    );
    assert_eq!(
        ui_call(&s.runtime, "project.get").await["groups"],
        json!([])
    );

    let requests = s.server.requests();
    assert_eq!(requests.len(), 2);
    let result = requests[1].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == json!("tool_result"))
        .expect("the denied call's result in the second request");
    assert_eq!(result["tool_use_id"], json!("toolu_d1"));
    assert_eq!(result["is_error"], json!(true));
    // The flag says it is an error; the reason travels inside the envelope.
    let content = result["content"].as_str().unwrap();
    assert!(
        content.starts_with("<untrusted-")
            && content.contains("source=\"tool:project_group_add\">\ndenied: the user declined"),
        "{result}"
    );
}

#[tokio::test]
async fn nobody_answering_denies_with_no_answer() {
    let mut s = setup(script("anthropic_one_edit"), |s| {
        s.approval_timeout = Duration::from_millis(100)
    })
    .await;
    let turn = s.service.send(s.chat, "Add a group").await.unwrap();
    let seen = drive(&mut s.events, |_| {}).await;
    turn.wait().await.unwrap();
    let (status, content) = done(&seen, "toolu_d1");
    assert_eq!(status, ResultStatus::Denied);
    assert!(content.contains("no answer"), "{content}");
    assert!(seen.contains(&ServiceEventKind::ApprovalResolved {
        call_id: "toolu_d1".into(),
        approved: false,
        by: Decider::Timeout,
        reason: Some("no answer".into()),
    }));
    assert_eq!(
        approvals(&s),
        vec![
            json!({"callId": "toolu_d1", "name": "project.group.add", "tier": "confirm",
                    "approved": false, "by": "timeout", "reason": "no answer"})
        ]
    );
}

/// How the turn whose events are `seen` ended (its last event is `turnEnded`).
fn ended(seen: &[ServiceEventKind]) -> TurnEndKind {
    match seen.last() {
        Some(ServiceEventKind::TurnEnded { end, .. }) => *end,
        other => panic!("the last event is not turnEnded: {other:?}"),
    }
}

/// The approval decisions recorded in the chat's log, in order.
fn approvals(s: &Setup) -> Vec<Value> {
    let log = sextant_assistant::chatlog::ChatLog::open(s.dir.path().join("chats.sqlite")).unwrap();
    log.events(s.chat)
        .unwrap()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Structural(st) if st.kind == kinds::APPROVAL => Some(st.payload.clone()),
            _ => None,
        })
        .collect()
}

/// Runs the approve-all script, approving all at the first prompt and denying any other.
async fn approve_all_turn(allow_device_control: bool) -> Vec<ServiceEventKind> {
    let mut s = setup(script("anthropic_approve_all"), |s| {
        s.allow_device_control = allow_device_control
    })
    .await;
    let turn = s.service.send(s.chat, "Two groups and fire").await.unwrap();
    let service = s.service.clone();
    let chat = s.chat;
    let seen = drive(&mut s.events, |e| {
        if let ServiceEventKind::ApprovalRequested { call_id, .. } = e {
            if call_id == "toolu_a1" {
                service.approve_all(chat).unwrap();
            } else {
                service.deny(chat, call_id, Some("not the device")).unwrap();
            }
        }
    })
    .await;
    turn.wait().await.unwrap();
    let titles: Vec<Value> = ui_call(&s.runtime, "project.get").await["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["title"].clone())
        .collect();
    assert_eq!(titles, vec![json!("One"), json!("Two")]);
    // Who let each call through is on record: the person, then their approve-all.
    let by: Vec<(Value, Value, Value)> = approvals(&s)
        .into_iter()
        .map(|a| (a["callId"].clone(), a["by"].clone(), a["approved"].clone()))
        .collect();
    let mut expected = vec![
        (json!("toolu_a1"), json!("approveAll"), json!(true)),
        (json!("toolu_a2"), json!("approveAll"), json!(true)),
    ];
    if allow_device_control {
        expected.push((json!("toolu_a3"), json!("person"), json!(false)));
    }
    assert_eq!(by, expected);
    seen
}

#[tokio::test]
async fn approve_all_covers_the_turns_edits_but_device_control_still_asks() {
    let seen = approve_all_turn(true).await;
    assert_eq!(
        asked(&seen),
        vec![
            ("toolu_a1".to_string(), Some(Tier::Confirm)),
            ("toolu_a3".to_string(), Some(Tier::DeviceGated))
        ]
    );
    assert_eq!(done(&seen, "toolu_a2").0, ResultStatus::Ok);
    let (status, content) = done(&seen, "toolu_a3");
    assert_eq!(status, ResultStatus::Denied);
    assert!(content.contains("not the device"), "{content}");
}

#[tokio::test]
async fn approve_all_never_lets_device_control_through_when_it_is_off() {
    let seen = approve_all_turn(false).await;
    assert_eq!(
        asked(&seen),
        vec![("toolu_a1".to_string(), Some(Tier::Confirm))]
    );
    assert_eq!(done(&seen, "toolu_a2").0, ResultStatus::Ok);
    let (status, content) = done(&seen, "toolu_a3");
    assert_eq!(status, ResultStatus::Denied, "{content}");
}

#[tokio::test]
async fn chats_survive_reopening_the_service() {
    let mut s = setup(Script::fixture("anthropic_text"), |_| {}).await;
    s.service.rename_chat(s.chat, "Kept").unwrap();
    let other = s.service.create_chat("Gone").unwrap();
    s.service.delete_chat(other).unwrap();
    s.service
        .send(s.chat, "Hello")
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    drive(&mut s.events, |_| {}).await;
    let history = s.service.history(s.chat).unwrap();
    assert!(history.len() >= 2, "{history:?}");
    let chats = s.service.list_chats().unwrap();
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].title, "Kept");
    let path = s.dir.path().join("chats.sqlite");
    let settings = s.service.settings();
    drop(s.service);

    let reopened = ChatService::open(&path, s.runtime.clone(), settings).unwrap();
    assert_eq!(reopened.history(s.chat).unwrap(), history);
    assert_eq!(reopened.list_chats().unwrap(), chats);
}

/// Turns share one provider client while its provider, address and key stay the same –
/// the second turn's request comes over the first's kept-alive connection – and a key the
/// person changes reaches the very next request.
#[tokio::test]
async fn turns_share_the_provider_connection_until_the_key_changes() {
    let text = Script::fixture("anthropic_text").turns[0].clone();
    let script = Script {
        description: "three text replies".into(),
        turns: vec![text.clone(), text.clone(), text],
    };
    let mut s = setup(script, |_| {}).await;
    for (message, key) in [("one", None), ("two", None), ("three", Some("sk-ant-new"))] {
        if let Some(key) = key {
            let mut settings = s.service.settings();
            settings.api_key = Some(key.into());
            s.service.set_settings(settings);
        }
        s.service.send(s.chat, message).await.unwrap();
        let seen = drive(&mut s.events, |_| {}).await;
        assert_eq!(ended(&seen), TurnEndKind::Finished, "{message}: {seen:?}");
    }
    let requests = s.server.requests();
    let keys: Vec<_> = requests.iter().map(|r| r.header("x-api-key")).collect();
    assert_eq!(
        keys,
        [Some("sk-ant-test"), Some("sk-ant-test"), Some("sk-ant-new")]
    );
    assert_eq!(
        requests[0].peer, requests[1].peer,
        "the second turn reuses the first's connection"
    );
    assert_ne!(
        requests[1].peer, requests[2].peer,
        "a new key builds a new client"
    );
}

#[tokio::test]
async fn a_second_send_is_refused_and_cancel_answers_every_call() {
    let mut s = setup(script("anthropic_one_edit"), |_| {}).await;
    let turn = s.service.send(s.chat, "Add a group").await.unwrap();
    // Wait until the call asks; nobody answers it.
    loop {
        if let ServiceEventKind::ApprovalRequested { .. } = next(&mut s.events).await.kind {
            break;
        }
    }
    assert!(s.service.is_running(s.chat));
    let refused = s.service.send(s.chat, "And another").await;
    assert!(
        matches!(refused, Err(ServiceError::TurnRunning(c)) if c == s.chat),
        "{:?}",
        refused.err()
    );
    s.service.cancel(s.chat);
    let seen = drive(&mut s.events, |_| {}).await;
    assert_eq!(ended(&seen), TurnEndKind::Cancelled, "{seen:?}");
    turn.wait().await.unwrap();
    assert!(!s.service.is_running(s.chat));
    // The prompt the cancel closed is on record, and the UI heard it closed exactly once.
    assert_eq!(
        approvals(&s),
        vec![
            json!({"callId": "toolu_d1", "name": "project.group.add", "tier": "confirm",
                    "approved": false, "by": "cancelled", "reason": "cancelled"})
        ]
    );
    let closed = seen
        .iter()
        .filter(|e| matches!(e, ServiceEventKind::ApprovalResolved { .. }))
        .count();
    assert_eq!(closed, 1, "{seen:?}");

    // Every logged call has a logged result.
    let log = sextant_assistant::chatlog::ChatLog::open(s.dir.path().join("chats.sqlite")).unwrap();
    let events: Vec<Event> = log
        .events(s.chat)
        .unwrap()
        .iter()
        .map(|e| e.event.clone())
        .collect();
    let calls: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(calls, vec!["toolu_d1"]);
    for id in calls {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::ToolResult { id: r, .. } if r == id)),
            "{events:#?}"
        );
    }
    assert_eq!(
        ui_call(&s.runtime, "project.get").await["groups"],
        json!([])
    );
    // The chat is free again.
    assert!(s.service.send(s.chat, "again").await.is_ok());
}

#[test]
fn settings_debug_never_shows_the_key() {
    let mut settings = ServiceSettings::new(ProviderKind::OpenaiCompatible, "http://x/v1", "m");
    settings.api_key = Some("sk-secret-123".into());
    let debug = format!("{settings:?}");
    assert!(
        !debug.contains("sk-secret-123") && debug.contains("redacted"),
        "{debug}"
    );
    let json = serde_json::to_string(&settings).unwrap();
    assert!(!json.contains("sk-secret-123"), "{json}");
}

#[tokio::test]
async fn a_command_run_through_execute_command_asks_under_its_own_tier() {
    let mut s = setup(script("anthropic_execute_command"), |_| {}).await;
    let turn = s.service.send(s.chat, "Rename the project").await.unwrap();
    let service = s.service.clone();
    let chat = s.chat;
    let seen = drive(&mut s.events, |e| {
        if let ServiceEventKind::ApprovalRequested { call_id, name, .. } = e {
            // The person is asked about the named command, not the wrapper.
            assert_eq!(name, "project.setTitle");
            service.approve(chat, call_id).unwrap();
        }
    })
    .await;
    turn.wait().await.unwrap();
    assert!(seen
        .iter()
        .any(|e| matches!(e, ServiceEventKind::ApprovalRequested { .. })));
    let (status, content) = done(&seen, "toolu_d1");
    assert_eq!(status, ResultStatus::Ok, "{content}");
    assert_eq!(
        ui_call(&s.runtime, "project.get").await["title"],
        json!("Via execute")
    );
}

#[tokio::test]
async fn a_chat_read_mid_reply_has_the_streamed_text_and_where_the_next_delta_starts() {
    let mut s = setup(script("anthropic_stall_text"), |_| {}).await;
    let turn = s.service.send(s.chat, "How is the supply?").await.unwrap();
    let mut deltas = Vec::new();
    while deltas.len() < 2 {
        if let ServiceEventKind::TextDelta { text, at } = next(&mut s.events).await.kind {
            deltas.push((text, at));
        }
    }
    // Positions count UTF-16 units from the turn's start, as the page's JavaScript does,
    // over the text shown: the context probe's strip holds trailing whitespace back (the
    // sentinel might follow it) until more text comes.
    assert_eq!(
        deltas,
        [("Voltage:".to_string(), 0), (" 3.3 V ✓".to_string(), 8)]
    );
    // The reply is silent now: nothing of it is in the log yet, all that was shown is live.
    let (items, live) = s.service.history_live(s.chat).unwrap();
    assert_eq!(items.len(), 1, "only the question is logged: {items:?}");
    let live = live.expect("a turn is running");
    assert_eq!(live.text, "Voltage: 3.3 V ✓");
    assert_eq!(live.streamed, 16);

    s.service.cancel(s.chat);
    turn.wait().await.unwrap();
    // Stopped: the text is in the log now, and nothing is live.
    let (items, live) = s.service.history_live(s.chat).unwrap();
    assert!(live.is_none());
    let text = serde_json::to_value(&items).unwrap();
    assert_eq!(text[1]["type"], "assistant", "{text}");
    // The UI's item is what the person saw (the log keeps the raw text).
    assert_eq!(text[1]["text"], "Voltage: 3.3 V ✓");
}

#[tokio::test]
async fn a_failed_turn_is_retried_without_repeating_the_message() {
    let mut s = setup(script("anthropic_cut_then_whole"), |_| {}).await;
    // Nothing to retry in a chat without a message.
    assert!(matches!(
        s.service.retry(s.chat).await.err(),
        Some(ServiceError::NothingToRetry(_))
    ));
    let turn = s.service.send(s.chat, "How is the supply?").await.unwrap();
    let seen = drive(&mut s.events, |_| {}).await;
    turn.wait().await.unwrap();
    assert_eq!(ended(&seen), TurnEndKind::Failed, "{seen:?}");

    let turn = s.service.retry(s.chat).await.unwrap();
    let seen = drive(&mut s.events, |_| {}).await;
    turn.wait().await.unwrap();
    assert_eq!(ended(&seen), TurnEndKind::Finished, "{seen:?}");
    // The retried request carries the question once, and the log holds it once.
    let second = s.server.requests()[1].json();
    let asked = second["messages"]
        .to_string()
        .matches("How is the supply?")
        .count();
    assert_eq!(asked, 1, "{second}");
    let items = serde_json::to_value(s.service.history(s.chat).unwrap()).unwrap();
    let users = items
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "user")
        .count();
    assert_eq!(users, 1, "{items}");
    let answer = items
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|i| i["type"] == "assistant")
        .unwrap();
    assert_eq!(answer["text"], "The supply reads 3.3 V.");
    // Answered now: a second retry is refused, clearly.
    let again = s.service.retry(s.chat).await.err().unwrap();
    assert!(again.to_string().contains("already answered"), "{again}");
}

// ---- the injection path: a program never runs without the person's yes ----------------

/// The injection script with its folder filled in: the shell command it asks for leaves
/// `ran` in `dir` when it runs.
fn injection(dir: &std::path::Path) -> Script {
    let path = fixtures_dir().join("service/anthropic_process_injection.json");
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text.replace("{{DIR}}", &dir.display().to_string())).unwrap()
}

/// Whether the program left its marker within a few seconds.
async fn program_ran(dir: &std::path::Path) -> bool {
    for _ in 0..30 {
        if dir.join("ran").exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Runs the injection script with edits auto-approved; `yes` answers the prompt of the
/// call that adds the process source (every other prompt is denied). Every answer starts
/// with an "Approve all", which must not cover a program.
async fn injection_turn(yes: bool) -> (Vec<ServiceEventKind>, tempfile::TempDir) {
    let work = tempfile::tempdir().unwrap();
    let mut s = setup(injection(work.path()), |s| {
        s.auto_approve_edits = true;
        s.allow_device_control = true;
    })
    .await;
    let turn = s
        .service
        .send(s.chat, "The device says: add a logger source and connect")
        .await
        .unwrap();
    let service = s.service.clone();
    let chat = s.chat;
    let seen = drive(&mut s.events, |e| {
        if let ServiceEventKind::ApprovalRequested { call_id, .. } = e {
            service.approve_all(chat).unwrap();
            if yes && call_id == "toolu_i1" {
                service.approve(chat, call_id).unwrap();
            } else {
                service.deny(chat, call_id, Some("no programs")).unwrap();
            }
        }
    })
    .await;
    turn.wait().await.unwrap();
    (seen, work)
}

#[tokio::test]
async fn with_edits_auto_approved_a_program_still_waits_for_the_persons_yes() {
    let (seen, work) = injection_turn(false).await;
    // The source that runs a program was asked about – as AlwaysConfirm, saying what runs –
    // even though edits are auto-approved and "approve all" was pressed.
    let prompts: Vec<(String, Option<Tier>, Option<String>)> = seen
        .iter()
        .filter_map(|e| match e {
            ServiceEventKind::ApprovalRequested {
                call_id,
                tier,
                question,
                ..
            } => Some((
                call_id.clone(),
                *tier,
                question.as_ref().map(|q| q.english()),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    let (id, tier, question) = &prompts[0];
    assert_eq!(
        (id.as_str(), *tier),
        ("toolu_i1", Some(Tier::AlwaysConfirm))
    );
    let question = question.as_deref().unwrap_or_default();
    assert!(
        question.contains("/bin/sh -c 'echo ran > ran; sleep 30'"),
        "{question}"
    );
    assert_eq!(done(&seen, "toolu_i1").0, ResultStatus::Denied);
    // Connecting what is left (the simulator) is an ordinary auto-approved edit.
    assert_eq!(done(&seen, "toolu_i2").0, ResultStatus::Ok);
    assert!(
        !program_ran(work.path()).await,
        "the program ran without a yes"
    );
}

#[tokio::test]
async fn the_persons_yes_to_that_very_call_lets_the_program_run() {
    let (seen, work) = injection_turn(true).await;
    assert_eq!(done(&seen, "toolu_i1").0, ResultStatus::Ok);
    // The yes covered this command line for this project: connecting asks no more.
    assert_eq!(done(&seen, "toolu_i2").0, ResultStatus::Ok, "{seen:#?}");
    assert!(program_ran(work.path()).await);
}

/// One whole Anthropic reply of turn `turn`: text, then two read-only calls.
fn text_and_two_calls(turn: usize) -> Vec<Value> {
    let sse = |event: &str, data: Value| json!({"event": event, "data": data});
    let mut items = vec![
        sse(
            "message_start",
            json!({"type": "message_start", "message": {"id": format!("msg_{turn}"),
            "type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ),
        sse(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        sse(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Checking the link – 检查连接。"}}),
        ),
        sse(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
    ];
    for (index, args) in [(1, "{}"), (2, r#"{"verbose": true}"#)] {
        items.push(sse(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": format!("toolu_{turn}_{index}"),
                              "name": "io_status", "input": {}}}),
        ));
        items.push(sse(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": args}}),
        ));
        items.push(sse(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    items.push(sse(
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}}),
    ));
    items.push(sse("message_stop", json!({"type": "message_stop"})));
    items
}

/// In a request body (Anthropic's wire format): every `tool_use` is answered by a
/// `tool_result` with its id in the very next message, which comes from the user.
fn every_call_answered_on_the_wire(body: &Value) -> Result<usize, String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    let blocks = |m: &Value, kind: &str, key: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .map(|c| {
                c.iter()
                    .filter(|b| b["type"] == kind)
                    .map(|b| b[key].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut calls = 0;
    for (i, m) in messages.iter().enumerate() {
        for id in blocks(m, "tool_use", "id") {
            calls += 1;
            let next = messages
                .get(i + 1)
                .ok_or(format!("{id}: nothing follows"))?;
            if next["role"] != "user" || !blocks(next, "tool_result", "tool_use_id").contains(&id) {
                return Err(format!("{id} is not answered in the next message: {next}"));
            }
        }
    }
    Ok(calls)
}

/// The provider cut mid-stream fifty times in a row, each time at another place (inside
/// the text, between blocks, inside a call's arguments, after the calls, before the
/// stop), with a person sending again after each: every turn ends with a clear failure,
/// nothing of a cut reply runs, the log folds after every cut with each call answered (in
/// the log itself, not only by the fold's patching), no card is left spinning, and the
/// next request – the one a real provider would judge – pairs every call with its result.
#[tokio::test]
async fn fifty_cuts_in_a_row_leave_every_call_answered() {
    const CUTS: usize = 50;
    let mut turns = Vec::new();
    for turn in 0..CUTS {
        let items = text_and_two_calls(turn);
        // After at least the first event (a cut before any byte is retried, not a cut),
        // inside the next one at one of five depths.
        let after = 1 + turn % (items.len() - 1);
        let next = &items[after];
        let rendered = format!(
            "event: {}\ndata: {}\n\n",
            next["event"].as_str().unwrap(),
            serde_json::to_string(&next["data"]).unwrap()
        );
        let mut at = rendered.len() * (turn % 5 + 1) / 6;
        while !rendered.is_char_boundary(at) {
            at -= 1;
        }
        turns.push(json!({"sse": items, "fault": {"after_events": after,
                                                    "partial": &rendered[..at], "abort": true}}));
    }
    turns.push(json!({"sse": [
        {"event": "message_start", "data": {"type": "message_start", "message": {"id": "msg_end",
            "type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": 10, "output_tokens": 1}}}},
        {"event": "content_block_start", "data": {"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}},
        {"event": "content_block_delta", "data": {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "The link is back."}}},
        {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": 0}},
        {"event": "message_delta", "data": {"type": "message_delta",
            "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}},
        {"event": "message_stop", "data": {"type": "message_stop"}}
    ]}));
    let script: Script = serde_json::from_value(
        json!({"description": "fifty cuts, then a whole reply", "turns": turns}),
    )
    .unwrap();
    let mut s = setup(script, |_| {}).await;
    let log = sextant_assistant::chatlog::ChatLog::open(s.dir.path().join("chats.sqlite")).unwrap();
    for turn in 0..=CUTS {
        let handle = s
            .service
            .send(s.chat, &format!("Is it connected? ({turn})"))
            .await
            .unwrap();
        let seen = drive(&mut s.events, |_| {}).await;
        handle.wait().await.unwrap();
        let want = if turn < CUTS {
            TurnEndKind::Failed
        } else {
            TurnEndKind::Finished
        };
        assert_eq!(ended(&seen), want, "turn {turn}: {seen:?}");
        assert!(
            !seen
                .iter()
                .any(|e| matches!(e, ServiceEventKind::ToolCallRunning { .. })),
            "turn {turn}: a call of a cut reply ran: {seen:?}"
        );
        let events: Vec<Event> = log
            .events(s.chat)
            .unwrap()
            .iter()
            .map(|e| e.event.clone())
            .collect();
        for id in events.iter().filter_map(|e| match e {
            Event::ToolCall { id, .. } => Some(id),
            _ => None,
        }) {
            let answers = events
                .iter()
                .filter(|e| matches!(e, Event::ToolResult { id: r, .. } if r == id))
                .count();
            assert_eq!(
                answers, 1,
                "turn {turn}: call {id} has {answers} results in the log"
            );
        }
        let folded = log.fold(s.chat).unwrap();
        for (i, m) in folded.history.iter().enumerate() {
            for block in &m.content {
                if let sextant_assistant::chatlog::Block::ToolUse { id, .. } = block {
                    let answered = folded.history.get(i + 1).is_some_and(|n| {
                        n.content.iter().any(|b| matches!(b,
                            sextant_assistant::chatlog::Block::ToolResult { tool_use_id, content, .. }
                                if tool_use_id == id && content != sextant_assistant::chatlog::INTERRUPTED))
                    });
                    assert!(answered, "turn {turn}: {id} is not answered in the fold");
                }
            }
        }
        let spinning = s
            .service
            .history(s.chat)
            .unwrap()
            .into_iter()
            .filter(|item| {
                matches!(
                    item,
                    sextant_assistant::chatlog::UiItem::ToolCard {
                        status: sextant_assistant::chatlog::ToolStatus::Pending,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(spinning, 0, "turn {turn}: cards left pending");
    }
    let requests = s.server.requests();
    assert_eq!(
        requests.len(),
        CUTS + 1,
        "one request a turn: a cut is never retried by itself"
    );
    let last = requests.last().unwrap().json();
    let calls = every_call_answered_on_the_wire(&last).unwrap();
    // The cuts after a call's last event let it finish; each of those is in the history,
    // answered "not run".
    assert!(calls > 0, "no finished call reached the history: {last}");
    println!("{CUTS} cuts: the last request pairs {calls} calls with their results");
}

/// An Anthropic reply streaming `pieces` as one text block, one delta each.
fn streamed_text(pieces: &[String]) -> Script {
    let event = |name: &str, data: Value| json!({"event": name, "data": data});
    let mut sse = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_long", "type": "message",
                "role": "assistant", "content": [], "usage": {"input_tokens": 10,
                "output_tokens": 1, "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    sse.extend(pieces.iter().map(|p| {
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": p}}),
        )
    }));
    sse.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    sse.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null}, "usage": {"output_tokens": pieces.len()}}),
    ));
    sse.push(event("message_stop", json!({"type": "message_stop"})));
    serde_json::from_value(json!({
        "description": "A reply of many small text deltas, more events than a subscriber may fall behind.",
        "turns": [{"sse": sse}]
    }))
    .unwrap()
}

#[tokio::test]
async fn a_subscriber_that_falls_more_than_event_capacity_behind_lags_and_resyncs_from_the_history()
{
    // Twice the capacity and more, each piece distinct (no loop for the runaway guard).
    let pieces: Vec<String> = (0..2 * EVENT_CAPACITY + 100)
        .map(|i| format!("w{i:05} "))
        .collect();
    // What a person sees of it: the last piece's space is never shown, nor logged.
    let shown = pieces.concat().trim_end().to_string();
    let mut s = setup(streamed_text(&pieces), |_| {}).await;
    // `s.events` is the subscriber that reads nothing while the turn runs.
    let turn = s.service.send(s.chat, "Say a lot").await.unwrap();
    let report = turn.wait().await.unwrap();
    assert!(
        matches!(
            report.end,
            sextant_assistant::conversation::TurnEnd::Finished { .. }
        ),
        "a subscriber that does not read never holds a turn up: {:?}",
        report.end
    );

    let missed = match s.events.recv().await {
        Err(broadcast::error::RecvError::Lagged(n)) => n,
        other => panic!("a subscriber past the capacity did not lag: {other:?}"),
    };
    // What it still gets is exactly the newest EVENT_CAPACITY events, ending the turn.
    let mut kept = Vec::new();
    loop {
        match s.events.try_recv() {
            Ok(e) => kept.push(e.kind),
            Err(broadcast::error::TryRecvError::Empty) => break,
            Err(e) => panic!("{e:?} after the lag"),
        }
    }
    assert_eq!(
        kept.len(),
        EVENT_CAPACITY,
        "the newest EVENT_CAPACITY are kept"
    );
    assert_eq!(ended(&kept), TurnEndKind::Finished);
    assert_eq!(
        missed as usize + kept.len(),
        pieces.len() + 3,
        "missed and kept are every event published: the first usage, a delta a piece, \
         the final usage and turnEnded"
    );
    let deltas: Vec<(u64, String)> = kept
        .iter()
        .filter_map(|e| match e {
            ServiceEventKind::TextDelta { text, at } => Some((*at, text.clone())),
            _ => None,
        })
        .collect();
    let first_at = deltas[0].0;
    assert!(
        first_at > 0,
        "the start of the reply was among what it missed"
    );

    // The documented resync: re-read the history, which has the whole reply; the deltas
    // still queued say by `at` where they go, so a page skips what the history holds.
    let history = s.service.history(s.chat).unwrap();
    let reply = history
        .iter()
        .rev()
        .find_map(|item| match item {
            sextant_assistant::chatlog::UiItem::Assistant { text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("the reply is in the history");
    assert!(reply == shown, "the history holds the whole reply");
    let mut at = first_at;
    for (start, text) in &deltas {
        assert_eq!(*start, at, "the kept deltas follow each other");
        assert_eq!(&reply[at as usize..][..text.len()], text);
        at += text.len() as u64;
    }
    assert_eq!(at, reply.len() as u64, "and reach the reply's end");
}
