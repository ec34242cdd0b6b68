//! A small model on a local OpenAI-compatible server, through the chat door, the real
//! registry and the scripted provider server speaking llama-server's wire format: calls
//! constrained to a JSON schema and read back into the same pipeline, a server that drops
//! tools, a runaway reply, a reply at the length cap, a silent server – each ending the turn
//! with a state the panel shows, nothing the model said lost.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{ok, open};
use serde_json::{json, Value};
use sextant_assistant::door::ChatDoor;
use sextant_assistant::service::{ServiceEventKind, TurnEndKind};
use sextant_providers::script::{fixtures_dir, Script, ScriptServer};

const SMOL: &str = "SmolLM2-135M-Instruct";

async fn serve(name: &str) -> ScriptServer {
    ScriptServer::start(Script::load(
        &fixtures_dir().join("service").join(format!("{name}.json")),
    ))
    .await
}

/// A door on `server` as a local llama-server (`/v1`), edits approved in advance.
async fn local_door(dir: &std::path::Path, server: &ScriptServer, extra: Value) -> ChatDoor {
    let door = open(dir);
    let mut settings = json!({"op": "setSettings", "provider": "openai-compatible",
        "baseUrl": format!("{}/v1", server.url()), "model": SMOL, "autoApproveEdits": true});
    settings
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    ok(&door, settings).await;
    door
}

/// What one turn showed: the streamed text, the end and its detail, and how many
/// `waiting` events came.
struct Turn {
    text: String,
    end: TurnEndKind,
    detail: Option<String>,
    waiting: Vec<u64>,
}

async fn turn(door: &ChatDoor, chat: &Value, text: &str) -> Turn {
    let mut events = door.service().subscribe();
    ok(door, json!({"op": "send", "chat": chat, "text": text})).await;
    let mut shown = Turn {
        text: String::new(),
        end: TurnEndKind::Failed,
        detail: None,
        waiting: Vec::new(),
    };
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("an event within 30 s: no turn hangs")
            .expect("no lag");
        match event.kind {
            ServiceEventKind::TextDelta { text, .. } => shown.text.push_str(&text),
            ServiceEventKind::Waiting { seconds } => shown.waiting.push(seconds),
            ServiceEventKind::TurnEnded { end, detail } => {
                shown.end = end;
                shown.detail = detail;
                return shown;
            }
            _ => {}
        }
    }
}

async fn items(door: &ChatDoor, chat: &Value) -> Vec<Value> {
    ok(door, json!({"op": "history", "chat": chat})).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn notices<'a>(items: &'a [Value], kind: &str) -> Vec<&'a Value> {
    items
        .iter()
        .filter(|i| i["type"] == "notice" && i["kind"] == kind)
        .map(|i| &i["payload"])
        .collect()
}

#[tokio::test]
async fn constrained_calls_offer_a_schema_of_the_offered_tools_and_run_through_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("openai_constrained").await;
    let door = local_door(dir.path(), &server, json!({})).await;
    let settings = ok(&door, json!({"op": "getSettings"})).await;
    assert_eq!(settings["constrainedCalls"], "auto");
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    let shown = turn(&door, &chat, "What is in the project?").await;
    assert_eq!(shown.end, TurnEndKind::Finished, "{:?}", shown.detail);
    // The reply's text, decoded from inside its JSON string as it streamed.
    assert_eq!(
        shown.text,
        "The project has one source.\nNo groups yet – add one?"
    );

    let requests = server.requests();
    assert_eq!(
        requests.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        ["/props", "/v1/chat/completions", "/v1/chat/completions"],
        "the server is asked once what it runs, then the two replies"
    );
    let body = requests[1].json();
    assert!(
        body.get("tools").is_none(),
        "no native tools when constrained"
    );
    assert_eq!(
        body["max_tokens"], 512,
        "the reply cap sized by the context the server runs (-c 4096)"
    );
    let choices = body["response_format"]["json_schema"]["schema"]["anyOf"]
        .as_array()
        .unwrap();
    assert_eq!(choices[0]["required"], json!(["reply"]));
    let in_schema: BTreeSet<&str> = choices[1..]
        .iter()
        .map(|c| c["properties"]["tool"]["const"].as_str().unwrap())
        .collect();
    let system = body["messages"][0]["content"].as_str().unwrap();
    let menu = &system[system.rfind("Answer with one JSON object.").unwrap()..];
    let in_menu: BTreeSet<&str> = menu
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        in_schema, in_menu,
        "the schema's names are the offered tools"
    );
    assert!(in_schema.contains("project_get"), "{in_schema:?}");
    // Each call's arguments are that tool's own parameter schema.
    let get = choices
        .iter()
        .find(|c| c["properties"]["tool"]["const"] == "project_get")
        .unwrap();
    assert_eq!(get["properties"]["arguments"]["type"], "object");

    // The call ran through the pipeline like a native one; its result went back.
    let history = items(&door, &chat).await;
    let card = history
        .iter()
        .find(|i| i["type"] == "toolCard")
        .expect("a tool card");
    assert_eq!(card["name"], "project_get");
    assert_eq!(card["status"], "ok", "{card}");
    let second = requests[2].json();
    let messages = second["messages"].as_array().unwrap();
    let call = &messages[messages.len() - 2];
    assert_eq!(call["tool_calls"][0]["function"]["name"], "project_get");
    assert_eq!(messages.last().unwrap()["role"], "tool");
    // llama.cpp's timings stand in for the usage chunk it never sent.
    let usage = notices(&history, "usage");
    assert_eq!(usage.len(), 2);
    assert_eq!(usage[1]["cacheReadTokens"], 1790);
    assert_eq!(usage[1]["inputTokens"], 60);
}

/// A constraint that can be violated is not a constraint: a call the server cut at the
/// reply cap is a cut reply (said as such), never a malformed call shown as raw JSON; words
/// that ignore the schema are the model's answer, not lost.
#[tokio::test]
async fn a_call_cut_by_the_reply_cap_is_a_cut_reply_then_plain_words_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("openai_constrained_invalid").await;
    let door = local_door(dir.path(), &server, json!({})).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    let cut = turn(&door, &chat, "What is in the project?").await;
    assert_eq!(cut.end, TurnEndKind::Finished, "{:?}", cut.detail);
    let history = items(&door, &chat).await;
    assert!(
        history.iter().all(|i| i["type"] != "toolCard"),
        "a cut call is not a call: {history:?}"
    );
    let notices = notices(&history, "reply_cut");
    assert_eq!(notices.len(), 1, "{history:?}");
    assert_eq!(notices[0]["reason"], "max_tokens");
    assert!(
        !serde_json::to_string(&history).unwrap().contains(r#"{\"x"#),
        "the raw cut JSON is shown nowhere: {history:?}"
    );

    let words = turn(&door, &chat, "Try again").await;
    assert_eq!(words.end, TurnEndKind::Finished, "{:?}", words.detail);
    assert_eq!(words.text, "I cannot do that in JSON, sorry.");
}

#[tokio::test]
async fn a_server_that_drops_tools_gets_the_notice_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("llama_no_tools").await;
    let door = local_door(dir.path(), &server, json!({"constrainedCalls": "off"})).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    let shown = turn(&door, &chat, "Rename the project to Bench A").await;
    assert_eq!(shown.end, TurnEndKind::Finished);
    let again = turn(&door, &chat, "And again").await;
    assert_eq!(again.text, "Done again.");

    let requests = server.requests();
    assert_eq!(
        requests.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        ["/props", "/v1/chat/completions", "/v1/chat/completions"],
        "asked once per server and model"
    );
    // Constrained calls off: native tools, not a byte of the schema.
    let body = requests[1].json();
    assert!(body["tools"].as_array().is_some_and(|t| !t.is_empty()));
    assert!(body.get("response_format").is_none());
    assert!(!String::from_utf8_lossy(&requests[1].body).contains("Answer with one JSON object"));
    let history = items(&door, &chat).await;
    let told = notices(&history, "tools_unavailable");
    assert_eq!(told.len(), 1, "once per chat: {history:?}");
    assert_eq!(told[0]["model"], SMOL);
    // After the message it is about.
    let user = history.iter().position(|i| i["type"] == "user").unwrap();
    let notice = history
        .iter()
        .position(|i| i["kind"] == "tools_unavailable")
        .unwrap();
    assert!(notice > user);
}

#[tokio::test]
async fn a_looping_reply_is_cut_with_its_text_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("openai_runaway").await;
    let door = local_door(dir.path(), &server, json!({})).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    let shown = turn(&door, &chat, "开始吧").await;
    assert_eq!(shown.end, TurnEndKind::Finished);
    assert_eq!(shown.detail.as_deref(), Some("repetition"));
    assert!(shown.text.starts_with("好的，开始开始"), "{}", shown.text);
    assert!(
        shown.text.chars().count() < 400,
        "cut long before the server's 400 repeats: {} chars",
        shown.text.chars().count()
    );
    let history = items(&door, &chat).await;
    let cut = notices(&history, "reply_cut");
    assert_eq!(cut.len(), 1);
    assert_eq!(cut[0]["reason"], "repetition");
    assert!(
        matches!(cut[0]["unit"].as_str(), Some("开始" | "始开")),
        "{}",
        cut[0]
    );
    let kept = history.iter().find(|i| i["type"] == "assistant").unwrap();
    assert!(kept["text"].as_str().unwrap().starts_with("好的，开始"));
}

#[tokio::test]
async fn a_slow_reply_shows_waiting_and_a_length_stop_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("openai_length_slow").await;
    let door = local_door(dir.path(), &server, json!({"constrainedCalls": "off"})).await;
    let mut settings = door.service().settings();
    settings.stall_notice = Duration::from_millis(500);
    door.service().set_settings(settings);
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    let shown = turn(&door, &chat, "How is the supply?").await;
    assert_eq!(shown.end, TurnEndKind::Finished);
    assert_eq!(shown.detail.as_deref(), Some("max_tokens"));
    // Trailing whitespace is held back while the probe strips its line; the text is kept.
    assert_eq!(shown.text.trim_end(), "The voltage is 3.3 V and the");
    assert!(!shown.waiting.is_empty(), "the panel heard it waits");
    let history = items(&door, &chat).await;
    assert!(
        notices(&history, "tools_unavailable").is_empty(),
        "the server has tools"
    );
    let cut = notices(&history, "reply_cut");
    assert_eq!(cut, [&json!({"reason": "max_tokens", "limit": 512})]);
}
