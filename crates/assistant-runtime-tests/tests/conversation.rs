//! The conversation loop end to end, against the providers crate's scripted server
//! (transcripts in fixtures/providers/conversation and fixtures/providers).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use sextant_assistant::chatlog::{Block, ChatId, ChatLog, Event, Folded, Role};
use sextant_assistant::conversation::{
    kinds, ChatModel, Conversation, Prompt, Settings, TurnEnd, TurnEvent, TurnReport,
};
use sextant_assistant::pipeline::{
    Approval, Approver, AskRequest, BoxFuture, CallContext, CallerInfo, CancelToken, Pipeline,
    PreDecision, ResultStatus, RuntimeExecutor, ToolBox, ToolResultValue,
};
use sextant_commands::{Policy, Tier};
use sextant_providers::script::{fixtures_dir, RecordedRequest, Script, ScriptServer};
use sextant_providers::{
    AnthropicClient, AnthropicConfig, ApiKey, Client, HttpConfig, OpenAiClient, OpenAiConfig,
    RetryPolicy, StopReason, SystemBlock, ToolDefinition,
};
use tokio::sync::mpsc;

// ---- harness ----------------------------------------------------------------------------

/// A scenario of fixtures/providers/conversation.
fn script(name: &str) -> Script {
    Script::load(
        &fixtures_dir()
            .join("conversation")
            .join(format!("{name}.json")),
    )
}

/// One retry with short backoffs, so failure tests are quick.
fn fast_http() -> HttpConfig {
    HttpConfig {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            max_retries: 1,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(2),
        },
        max_reply_bytes: 1024 * 1024,
    }
}

fn anthropic(server: &ScriptServer) -> Client {
    let mut config = AnthropicConfig::new(ApiKey::new("sk-ant-test"));
    config.base_url = server.url();
    config.http = fast_http();
    Client::Anthropic(AnthropicClient::new(config).unwrap())
}

fn open_ai(server: &ScriptServer) -> Client {
    let mut config = OpenAiConfig::new(format!("{}/v1", server.url()), None);
    config.http = fast_http();
    Client::OpenAi(OpenAiClient::new(config).unwrap())
}

/// What the context builder would hand in: a cached system block, a volatile one, tools.
fn prompt() -> Prompt {
    let tool = |name: &str, description: &str| ToolDefinition {
        name: name.into(),
        description: description.into(),
        parameters: json!({"type": "object", "properties": {}, "additionalProperties": true}),
    };
    Prompt::new(
        vec![
            SystemBlock::cached("You are Sextant's assistant. Use the tools to act."),
            SystemBlock::new("Project: demo.ssproj"),
        ],
        vec![
            tool("project_setTitle", "Rename the project."),
            tool("project_get", "Read the project."),
            tool("echo", "Return the arguments."),
        ],
    )
}

struct Chat {
    _dir: tempfile::TempDir,
    path: PathBuf,
    log: Arc<Mutex<ChatLog>>,
    id: ChatId,
    server: ScriptServer,
    conversation: Arc<Conversation<Client>>,
}

impl Chat {
    async fn start(script: Script, pipeline: Pipeline) -> Chat {
        Chat::start_with(script, pipeline, anthropic).await
    }

    async fn start_with(
        script: Script,
        pipeline: Pipeline,
        client: fn(&ScriptServer) -> Client,
    ) -> Chat {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chats.sqlite");
        let mut log = ChatLog::open(&path).unwrap();
        let id = log.create_chat("test").unwrap();
        let log = Arc::new(Mutex::new(log));
        let server = ScriptServer::start(script).await;
        let conversation = Arc::new(Conversation::new(
            client(&server),
            log.clone(),
            id,
            Arc::new(pipeline),
            CallerInfo::assistant(Policy::default()),
            Settings::new("claude-test"),
        ));
        Chat {
            _dir: dir,
            path,
            log,
            id,
            server,
            conversation,
        }
    }

    async fn send(&self, text: &str) -> (TurnReport, Vec<TurnEvent>) {
        send(&self.conversation, text).await
    }

    /// The log without the usage record every reply adds (tested on its own).
    fn events(&self) -> Vec<Event> {
        self.all_events()
            .into_iter()
            .filter(|e| !matches!(e, Event::Structural(s) if s.kind == kinds::USAGE))
            .collect()
    }

    fn all_events(&self) -> Vec<Event> {
        let log = self.log.lock().unwrap();
        log.events(self.id)
            .unwrap()
            .iter()
            .map(|e| e.event.clone())
            .collect()
    }

    fn fold(&self) -> Folded {
        self.log.lock().unwrap().fold(self.id).unwrap()
    }

    /// A logged result as the model reads it: inside the chat's envelope (an error's
    /// `Error: ` left to the provider client).
    fn wrapped(&self, tool: &str, content: &str) -> String {
        let body = content.strip_prefix("Error: ").unwrap_or(content);
        let envelope = self.log.lock().unwrap().envelope(self.id).unwrap();
        envelope.wrap(&format!("tool:{tool}"), body)
    }

    fn requests(&self) -> Vec<RecordedRequest> {
        self.server.requests()
    }
}

async fn send<M: ChatModel>(
    conversation: &Conversation<M>,
    text: &str,
) -> (TurnReport, Vec<TurnEvent>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let report = conversation
        .send(text, &prompt(), &tx, &CancelToken::new())
        .await
        .unwrap();
    drop(tx);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    assert_eq!(
        events.last(),
        Some(&TurnEvent::Ended(report.end.clone())),
        "a turn's last UI event says how it ended"
    );
    (report, events)
}

/// A tool box whose tools count their calls; `echo` returns its arguments.
#[derive(Clone, Default)]
struct Counters(Arc<Mutex<Vec<(String, Value)>>>);

impl Counters {
    fn tool(&self, name: &'static str) -> impl Fn(&Value) -> ToolResultValue + Send + Sync {
        let calls = self.0.clone();
        move |args: &Value| {
            calls.lock().unwrap().push((name.to_string(), args.clone()));
            Ok(match name {
                "project_dataset_get" => json!({"id": "ds-7", "title": "Voltage"}),
                "io_status" => json!("connected"),
                _ => args.clone(),
            })
        }
    }

    fn toolbox(&self, names: &[&'static str]) -> ToolBox {
        names.iter().fold(ToolBox::new(), |b, &name| {
            b.with(name, Tier::Confirm, self.tool(name))
        })
    }

    fn calls(&self) -> Vec<(String, Value)> {
        self.0.lock().unwrap().clone()
    }
}

/// A pipeline that lets every call through.
fn allow_all(toolbox: ToolBox) -> Pipeline {
    Pipeline::new(toolbox).when_undecided(PreDecision::Allow)
}

/// The person at the approval prompt.
struct Person(Approval, Arc<AtomicUsize>);
impl Approver for Person {
    fn ask<'a>(&'a self, _ctx: &'a CallContext, _req: &'a AskRequest) -> BoxFuture<'a, Approval> {
        self.1.fetch_add(1, Ordering::SeqCst);
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

/// The `tool_result` blocks (Anthropic) or `tool` messages (OpenAI) of a request body:
/// (call id, content, is_error).
/// Every tool result of a request body, as logged: each must have reached the model inside
/// an envelope, which is taken off here (with the `Error: ` the log keeps and the envelope
/// leaves outside).
/// The per-request block `prompt()` puts after the cache breakpoint; both clients send it
/// after the history.
const PER_REQUEST: &str = "Project: demo.ssproj";

/// The history of a request body as logged: the per-request block that follows it and the
/// history's cache marker taken out (both checked here: the marker sits on the newest
/// history block, the block comes right after it).
fn history(body: &Value) -> Value {
    let mut messages = body["messages"].as_array().unwrap().clone();
    let last = messages.last_mut().unwrap();
    match last["content"].as_array_mut() {
        // Anthropic: text blocks after the marked one.
        Some(blocks) => {
            let tail = blocks.pop().unwrap();
            assert_eq!(tail, json!({"type": "text", "text": PER_REQUEST}));
            let newest = blocks.last_mut().unwrap().as_object_mut().unwrap();
            assert!(newest.remove("cache_control").is_some(), "{body}");
        }
        // OpenAI-compatible: the last message's text ends with it.
        None => {
            let text = last["content"].as_str().unwrap();
            let text = text
                .strip_suffix(&format!("\n\n{PER_REQUEST}"))
                .unwrap_or_else(|| panic!("ends with the per-request block: {text}"));
            last["content"] = json!(text);
        }
    }
    assert!(!Value::Array(messages.clone())
        .to_string()
        .contains("cache_control"));
    Value::Array(messages)
}

fn tool_results(body: &Value) -> Vec<(String, String, bool)> {
    fn unwrapped(content: &str, is_error: bool) -> String {
        let (prefix, wrapped) = match content.strip_prefix("Error: ") {
            Some(rest) => ("Error: ", rest),
            None => ("", content),
        };
        if wrapped == "no result (interrupted)" {
            return content.to_string();
        }
        assert!(
            wrapped.starts_with("<untrusted-"),
            "not enveloped: {content}"
        );
        let inner = wrapped.split_once('\n').unwrap().1;
        let inner = inner.rsplit_once('\n').unwrap().0;
        let text = format!("{prefix}{inner}");
        if is_error && !text.starts_with("Error: ") {
            format!("Error: {text}")
        } else {
            text
        }
    }
    let mut out = Vec::new();
    for message in history(body).as_array().unwrap() {
        if message["role"] == "tool" {
            let content = message["content"].as_str().unwrap();
            out.push((
                message["tool_call_id"].as_str().unwrap().to_string(),
                unwrapped(content, false),
                false,
            ));
        }
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let is_error = block["is_error"] == json!(true);
                out.push((
                    block["tool_use_id"].as_str().unwrap().to_string(),
                    unwrapped(block["content"].as_str().unwrap(), is_error),
                    is_error,
                ));
            }
        }
    }
    out
}

/// Every call in the model's history has exactly one result, right after its message.
fn assert_reconciled(folded: &Folded) {
    let history = &folded.history;
    for (i, message) in history.iter().enumerate() {
        let calls: Vec<&str> = message
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        if calls.is_empty() {
            continue;
        }
        let next = history
            .get(i + 1)
            .unwrap_or_else(|| panic!("calls {calls:?} without results"));
        assert_eq!(next.role, Role::User);
        let mut results: Vec<&str> = next
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        let mut calls = calls;
        calls.sort();
        results.sort();
        assert_eq!(calls, results, "history: {history:#?}");
    }
}

fn structural(events: &[Event], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Structural(s) if s.kind == kind => Some(s.payload.clone()),
            _ => None,
        })
        .collect()
}

fn result_of<'a>(events: &'a [Event], call: &str) -> (&'a str, bool, bool) {
    let found: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                id,
                content,
                is_error,
                denied,
                ..
            } if id == call => Some((content.as_str(), *is_error, *denied)),
            _ => None,
        })
        .collect();
    assert_eq!(found.len(), 1, "exactly one result for {call}: {events:#?}");
    found[0]
}

// ---- a whole turn -----------------------------------------------------------------------

#[tokio::test]
async fn a_registry_tool_call_runs_and_its_result_goes_into_the_next_request() {
    use sextant_runtime::{Caller, Runtime, Workspace};
    use sextant_telemetry::project::Project;
    let handle = Runtime::new(Workspace::new(Project::default())).spawn(None);
    let asked = Arc::new(AtomicUsize::new(0));
    let pipeline = Pipeline::new(RuntimeExecutor::new(handle.clone()))
        .approver(Person(Approval::AllowedOnce, asked.clone()))
        .with_safety_tiers(handle.clone());
    let chat = Chat::start(script("anthropic_tool_turn"), pipeline).await;

    let (report, ui) = chat.send("Call the project Rover").await;
    assert_eq!(
        report.end,
        TurnEnd::Finished {
            stop: StopReason::EndTurn
        }
    );
    assert_eq!((report.requests, report.tool_calls), (2, 1));
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "setTitle is Confirm: asked"
    );
    let project = handle
        .call(Caller::Ui, "project.get", json!({}), Policy::default())
        .await
        .unwrap();
    assert_eq!(project["title"], json!("Rover"));

    // The log: user, assistant text, the call, the checkpoint taken before it, its result,
    // the answer.
    let events = chat.events();
    let (content, is_error, denied) = result_of(&events, "toolu_c1");
    assert!(!is_error && !denied, "{content}");
    assert_eq!(
        events,
        vec![
            Event::user("Call the project Rover"),
            Event::assistant("Renaming the project."),
            Event::tool_call("toolu_c1", "project_setTitle", json!({"title": "Rover"})),
            Event::structural(
                "checkpoint_created",
                json!({"id": 1, "callId": "toolu_c1", "command": "project_setTitle"})
            ),
            Event::tool_result("toolu_c1", content, false),
            Event::assistant("Done."),
        ]
    );

    // The second request carries the call and its result, exactly as logged.
    let requests = chat.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        history(&requests[1].json()),
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Call the project Rover"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Renaming the project."},
                {"type": "tool_use", "id": "toolu_c1", "name": "project_setTitle",
                 "input": {"title": "Rover"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_c1",
                 "content": chat.wrapped("project_setTitle", content)}
            ]}
        ])
    );

    // The UI heard the tool card's whole life, in order, and the text as it streamed.
    let card: Vec<&TurnEvent> = ui
        .iter()
        .filter(|e| {
            matches!(
                e,
                TurnEvent::ToolCallStarted { .. }
                    | TurnEvent::ToolCallPending { .. }
                    | TurnEvent::ToolCallRunning { .. }
                    | TurnEvent::ToolCallDone { .. }
            )
        })
        .collect();
    assert!(matches!(card[0], TurnEvent::ToolCallStarted { id, .. } if id == "toolu_c1"));
    assert!(
        matches!(card[1], TurnEvent::ToolCallPending { args, .. } if *args == json!({"title": "Rover"}))
    );
    assert!(matches!(card[2], TurnEvent::ToolCallRunning { .. }));
    assert!(
        matches!(card[3], TurnEvent::ToolCallDone { status: ResultStatus::Ok, content: c, .. } if c == content)
    );
    let text: String = ui
        .iter()
        .filter_map(|e| match e {
            TurnEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Renaming the project.Done.");
}

#[tokio::test]
async fn a_denied_call_becomes_an_error_result_the_next_request_carries() {
    let tools = Counters::default();
    let asked = Arc::new(AtomicUsize::new(0));
    // No rule decides, so the pipeline asks; the person says no.
    let pipeline = Pipeline::new(tools.toolbox(&["project_setTitle"])).approver(Person(
        Approval::Denied(Some("not now".into())),
        asked.clone(),
    ));
    let chat = Chat::start(script("anthropic_tool_turn"), pipeline).await;

    let (report, ui) = chat.send("Call the project Rover").await;
    assert!(matches!(report.end, TurnEnd::Finished { .. }));
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert!(tools.calls().is_empty(), "a denied tool never runs");

    let events = chat.events();
    let (content, is_error, denied) = result_of(&events, "toolu_c1");
    assert!(is_error && denied);
    assert!(
        content.starts_with("Error: denied: the user declined: not now"),
        "{content}"
    );
    assert!(ui.contains(&TurnEvent::ToolCallDone {
        id: "toolu_c1".into(),
        status: ResultStatus::Denied,
        content: content.to_string(),
    }));
    assert_eq!(
        tool_results(&chat.requests()[1].json()),
        vec![("toolu_c1".to_string(), content.to_string(), true)]
    );
}

async fn parallel_calls(fixture: &str, client: fn(&ScriptServer) -> Client) {
    let tools = Counters::default();
    let pipeline = allow_all(tools.toolbox(&["project_dataset_get", "io_status"]));
    let chat = Chat::start_with(Script::fixture(fixture), pipeline, client).await;

    let (report, _) = chat.send("What is ds-7, and is the source up?").await;
    assert!(matches!(report.end, TurnEnd::Finished { .. }), "{report:?}");
    let mut ran: Vec<String> = tools.calls().into_iter().map(|(n, _)| n).collect();
    ran.sort();
    assert_eq!(ran, ["io_status", "project_dataset_get"]);

    let requests = chat.requests();
    assert_eq!(requests.len(), 2);
    let mut results = tool_results(&requests[1].json());
    results.sort();
    let ids: Vec<&str> = results.iter().map(|(id, _, _)| id.as_str()).collect();
    assert!(
        ids == ["toolu_01A", "toolu_01B"] || ids == ["call_A", "call_B"],
        "{results:?}"
    );
    let contents: Vec<&str> = results.iter().map(|(_, c, _)| c.as_str()).collect();
    assert_eq!(
        contents,
        [r#"{"id":"ds-7","title":"Voltage"}"#, "connected"]
    );
    assert_reconciled(&chat.fold());
}

#[tokio::test]
async fn two_parallel_calls_both_run_and_both_results_go_back_anthropic() {
    parallel_calls("anthropic_parallel_tools", anthropic).await;
}

#[tokio::test]
async fn two_parallel_calls_both_run_and_both_results_go_back_open_ai() {
    parallel_calls("openai_parallel_tools", open_ai).await;
}

// ---- the prompt cache -------------------------------------------------------------------

/// The end of the last `cache_control` marker in the system blocks.
fn system_breakpoint(body: &[u8]) -> usize {
    let text = std::str::from_utf8(body).unwrap();
    let messages = text.find(r#""messages":"#).unwrap();
    let marker = r#""cache_control":{"type":"ephemeral"}}"#;
    text[..messages].rfind(marker).expect("a system breakpoint") + marker.len()
}

#[tokio::test]
async fn the_cached_prefix_is_byte_identical_across_the_requests_of_a_chat() {
    let tools = Counters::default();
    let chat = Chat::start(
        script("anthropic_tool_turn"),
        allow_all(tools.toolbox(&["project_setTitle"])),
    )
    .await;
    chat.send("Call the project Rover").await;
    chat.send("Thanks").await;

    let requests = chat.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0].body;
    let prefix = &first[..system_breakpoint(first)];
    let tools_at = |b: &[u8]| {
        std::str::from_utf8(b)
            .unwrap()
            .find(r#","tools":["#)
            .unwrap()
    };
    let tools_part = &first[tools_at(first)..];
    assert!(
        std::str::from_utf8(tools_part)
            .unwrap()
            .contains(r#""name":"echo","description":"Return the arguments.","input_schema":{"type":"object","properties":{},"additionalProperties":true},"cache_control":{"type":"ephemeral"}}]"#),
        "the last tool is a breakpoint"
    );
    for (i, request) in requests.iter().enumerate() {
        let body = &request.body;
        assert_eq!(
            &body[..system_breakpoint(body)],
            prefix,
            "system prefix of request {i}"
        );
        assert_eq!(&body[tools_at(body)..], tools_part, "tools of request {i}");
    }
    // And the history only ever grows at its end: each request's messages start with the
    // previous request's.
    for pair in requests.windows(2) {
        let before = history(&pair[0].json()).as_array().unwrap().clone();
        let after = history(&pair[1].json()).as_array().unwrap().clone();
        assert!(after.len() > before.len());
        assert_eq!(after[..before.len()], before[..]);
    }
}

// ---- limits and faults ------------------------------------------------------------------

#[tokio::test]
async fn a_turn_stops_after_25_tool_calls() {
    let tools = Counters::default();
    let chat = Chat::start(
        script("anthropic_cap"),
        allow_all(tools.toolbox(&["count"])),
    )
    .await;

    let (report, _) = chat.send("Count forever").await;
    assert_eq!(report.end, TurnEnd::ToolCallLimit { limit: 25 });
    assert_eq!(report.tool_calls, 26);
    assert_eq!(tools.calls().len(), 25, "the 26th call never runs");
    assert_eq!(tools.calls()[24].1, json!({"n": 25}));
    assert_eq!(chat.requests().len(), 26, "no request after the cap");

    let events = chat.events();
    let (content, is_error, _) = result_of(&events, "toolu_cap26");
    assert!(is_error);
    assert!(
        content.starts_with("Error: not run – this turn reached its limit of 25 tool calls"),
        "{content}"
    );
    assert_eq!(
        structural(&events, kinds::TOOL_CALL_LIMIT),
        vec![json!({"limit": 25, "refused": ["toolu_cap26"]})]
    );
    assert!(matches!(
        events.last(),
        Some(Event::Structural(s)) if s.kind == kinds::TOOL_CALL_LIMIT
    ));
    assert_reconciled(&chat.fold());
}

#[tokio::test]
async fn cancelling_mid_stream_keeps_what_arrived_and_answers_every_logged_call() {
    let tools = Counters::default();
    let chat = Chat::start(
        script("anthropic_stall"),
        allow_all(tools.toolbox(&["echo"])),
    )
    .await;
    let cancel = CancelToken::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let turn = {
        let conversation = chat.conversation.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            conversation
                .send("Look around", &prompt(), &tx, &cancel)
                .await
                .unwrap()
        })
    };
    // Wait until the second call has begun: the reply is now stalled mid-arguments.
    while let Some(event) = rx.recv().await {
        if matches!(&event, TurnEvent::ToolCallStarted { id, .. } if id == "toolu_s2") {
            break;
        }
    }
    cancel.cancel();
    let report = turn.await.unwrap();
    // Without the cancel the stall ends in a cut stream, i.e. `Failed`.
    assert_eq!(report.end, TurnEnd::Cancelled);
    let mut rest = Vec::new();
    while let Some(e) = rx.recv().await {
        rest.push(e);
    }
    assert_eq!(rest.last(), Some(&TurnEvent::Ended(TurnEnd::Cancelled)));
    assert!(
        tools.calls().is_empty(),
        "nothing of a cancelled reply runs"
    );

    // The reply was paid for up to the stop: its usage is logged, the output estimated
    // from what streamed, since the provider's final count never came.
    let usage = rest.iter().rev().find_map(|e| match e {
        TurnEvent::Usage(u) => Some(*u),
        _ => None,
    });
    assert!(
        usage.is_some_and(|u| u.estimated && u.output_tokens > 0),
        "{rest:?}"
    );

    let events = chat.events();
    let logged = structural(&chat.all_events(), kinds::USAGE);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["estimated"], true);
    let (content, is_error, _) = result_of(&events, "toolu_s1");
    assert!(
        is_error && content.starts_with("Error: cancelled"),
        "{content}"
    );
    assert_eq!(events[1], Event::assistant("Let me look."));
    assert_eq!(
        events[2],
        Event::tool_call("toolu_s1", "echo", json!({"n": 1}))
    );
    // The half-streamed call is not a call in the log, but its text is kept.
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::ToolCall { id, .. } if id == "toolu_s2")));
    assert_eq!(
        structural(&events, kinds::TURN_CANCELLED),
        vec![json!({"partialToolCalls": [
            {"id": "toolu_s2", "name": "echo", "rawArguments": "{\"n\": "}
        ]})]
    );
    assert_reconciled(&chat.fold());
}

#[tokio::test]
async fn a_stream_cut_mid_tool_call_runs_nothing_records_the_error_and_the_chat_goes_on() {
    let tools = Counters::default();
    let chat = Chat::start(script("anthropic_cut"), allow_all(tools.toolbox(&["echo"]))).await;

    let (report, _) = chat.send("Check it").await;
    let TurnEnd::Failed { message } = &report.end else {
        panic!("{report:?}");
    };
    assert!(message.contains("cut off"), "{message}");
    assert!(tools.calls().is_empty(), "no call of a cut reply runs");

    let events = chat.events();
    let (content, is_error, _) = result_of(&events, "toolu_x1");
    assert!(
        is_error && content.starts_with("Error: not run"),
        "{content}"
    );
    let failed = structural(&events, kinds::TURN_FAILED);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error"], json!(message));
    assert_eq!(
        failed[0]["partialToolCalls"],
        json!([{"id": "toolu_x2", "name": "echo", "rawArguments": "{\"n\": 2"}])
    );
    assert_reconciled(&chat.fold());

    // The chat stays usable, and the next request carries the whole story.
    let (report, _) = chat.send("Are you there?").await;
    assert!(matches!(report.end, TurnEnd::Finished { .. }), "{report:?}");
    assert_eq!(
        history(&chat.requests()[1].json()),
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Check it"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_x1", "name": "echo", "input": {"n": 1}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_x1",
                 "content": chat.wrapped("echo", content), "is_error": true},
                {"type": "text", "text": "Are you there?"}
            ]}
        ])
    );
}

#[tokio::test]
async fn malformed_tool_json_becomes_an_error_result_and_the_model_corrects_itself() {
    let tools = Counters::default();
    let chat = Chat::start(
        script("anthropic_malformed"),
        allow_all(tools.toolbox(&["echo"])),
    )
    .await;

    let (report, _) = chat.send("Add it").await;
    assert_eq!(
        report.end,
        TurnEnd::Finished {
            stop: StopReason::EndTurn
        }
    );
    assert_eq!(
        tools.calls(),
        vec![("echo".to_string(), json!({"n": 1}))],
        "only the corrected call runs"
    );
    let requests = chat.requests();
    assert_eq!(requests.len(), 3);
    let results = tool_results(&requests[1].json());
    assert_eq!(results.len(), 1);
    let (id, content, is_error) = &results[0];
    assert_eq!(id, "toolu_m1");
    assert!(*is_error);
    assert!(content.starts_with("Error: invalid arguments"), "{content}");
    assert!(
        content.contains(r#"{"n": 1,}"#),
        "the raw text goes back: {content}"
    );
    assert_eq!(
        requests[1].json()["messages"][1]["content"],
        json!([
            {"type": "text", "text": "Adding it."},
            {"type": "tool_use", "id": "toolu_m1", "name": "echo", "input": {}}
        ])
    );
    assert_eq!(chat.events().last(), Some(&Event::assistant("Added.")));
    assert_reconciled(&chat.fold());
}

#[tokio::test]
async fn a_provider_failure_is_recorded_and_the_next_turn_works() {
    let chat = Chat::start(
        script("anthropic_provider_failure"),
        allow_all(ToolBox::new()),
    )
    .await;

    let (report, _) = chat.send("Hello").await;
    let TurnEnd::Failed { message } = &report.end else {
        panic!("{report:?}");
    };
    assert!(message.contains("503"), "{message}");
    assert_eq!(chat.requests().len(), 2, "one try and one retry");
    let events = chat.events();
    assert_eq!(events[0], Event::user("Hello"));
    let failed = structural(&events, kinds::TURN_FAILED);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["transient"], json!(true));

    let (report, _) = chat.send("Hello again").await;
    assert!(matches!(report.end, TurnEnd::Finished { .. }), "{report:?}");
    assert_eq!(chat.events().last(), Some(&Event::assistant("Back again.")));
    // The failure is log-only: the model sees both user messages and nothing else.
    assert_eq!(
        history(&chat.requests()[2].json()),
        json!([{"role": "user", "content": [
            {"type": "text", "text": "Hello"},
            {"type": "text", "text": "Hello again"}
        ]}])
    );
}

// ---- restart ----------------------------------------------------------------------------

#[tokio::test]
async fn after_reopening_the_log_the_history_and_the_next_request_are_the_same() {
    let tools = Counters::default();
    let chat = Chat::start(
        script("anthropic_tool_turn"),
        allow_all(tools.toolbox(&["project_setTitle"])),
    )
    .await;
    chat.send("Call the project Rover").await;
    let before = chat.fold();
    let request_before = chat.conversation.request(&prompt()).unwrap();
    assert_eq!(before.history.len(), 4, "{:#?}", before.history);

    // "Restart": a new connection to the same file and a new conversation over it.
    let reopened = Arc::new(Mutex::new(ChatLog::open(&chat.path).unwrap()));
    let after = reopened.lock().unwrap().fold(chat.id).unwrap();
    assert_eq!(after.history, before.history);
    let conversation = Conversation::new(
        anthropic(&chat.server),
        reopened.clone(),
        chat.id,
        Arc::new(allow_all(tools.toolbox(&["project_setTitle"]))),
        CallerInfo::assistant(Policy::default()),
        Settings::new("claude-test"),
    );
    assert_eq!(conversation.request(&prompt()).unwrap(), request_before);

    // And the chat continues from there.
    let (report, _) = send(&conversation, "Thanks").await;
    assert!(matches!(report.end, TurnEnd::Finished { .. }));
    let history = reopened.lock().unwrap().fold(chat.id).unwrap().history;
    assert_eq!(history[..before.history.len()], before.history[..]);
}

/// A tool that never finishes and ignores its cancel signal.
struct Hangs;
impl sextant_assistant::pipeline::Tool for Hangs {
    fn call<'a>(
        &'a self,
        _ctx: &'a CallContext,
        _cancel: CancelToken,
    ) -> BoxFuture<'a, ToolResultValue> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn cancelling_while_a_tool_runs_ends_the_turn_with_an_error_result() {
    let pipeline = allow_all(ToolBox::new().with("project_setTitle", Tier::Confirm, Hangs));
    let chat = Chat::start(script("anthropic_tool_turn"), pipeline).await;
    let cancel = CancelToken::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let turn = {
        let conversation = chat.conversation.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            conversation
                .send("Call the project Rover", &prompt(), &tx, &cancel)
                .await
                .unwrap()
        })
    };
    while let Some(event) = rx.recv().await {
        if matches!(event, TurnEvent::ToolCallRunning { .. }) {
            break;
        }
    }
    cancel.cancel();
    // Without the cancel the turn would wait for the tool forever.
    let report = turn.await.unwrap();
    assert_eq!(report.end, TurnEnd::Cancelled);
    assert_eq!(chat.requests().len(), 1);
    let events = chat.events();
    let (content, is_error, _) = result_of(&events, "toolu_c1");
    assert!(
        is_error && content.starts_with("Error: cancelled"),
        "{content}"
    );
    assert_eq!(
        structural(&events, kinds::TURN_CANCELLED),
        vec![json!({"partialToolCalls": []})]
    );
    assert_reconciled(&chat.fold());
}

#[tokio::test]
async fn repeated_call_ids_are_renamed_so_each_result_pairs_with_its_own_call() {
    let tools = Counters::default();
    let pipeline = allow_all(tools.toolbox(&["project_dataset_get"]));
    let chat = Chat::start_with(script("openai_repeated_ids"), pipeline, open_ai).await;
    let (report, events) = chat.send("Read ds-1, then ds-2").await;
    assert!(matches!(report.end, TurnEnd::Finished { .. }), "{report:?}");
    assert_eq!(tools.calls().len(), 2);

    // Both replies said `call_0`; the second call is logged, shown and sent back as another.
    let logged: Vec<String> = chat
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolCall { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(logged, ["call_0", "call_0_2"]);
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolCallStarted { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["call_0", "call_0_2"]);
    let last = chat.requests()[2].json();
    let calls: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["call_0", "call_0_2"]);
    let results: Vec<(String, String)> = tool_results(&last)
        .into_iter()
        .map(|(id, content, _)| (id, content))
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].0, "call_0");
    assert_eq!(results[1].0, "call_0_2");
    assert_reconciled(&chat.fold());
}

#[tokio::test]
async fn each_replys_token_use_is_recorded_in_the_log() {
    let chat = Chat::start(Script::fixture("anthropic_text"), allow_all(ToolBox::new())).await;
    let (report, _) = chat.send("How is the supply?").await;
    assert!(matches!(report.end, TurnEnd::Finished { .. }), "{report:?}");
    let usage = structural(&chat.all_events(), kinds::USAGE);
    assert_eq!(
        usage,
        [
            json!({"model": "claude-test", "inputTokens": 25, "outputTokens": 12,
                "cacheReadTokens": 3400, "cacheCreationTokens": 1200})
        ]
    );
    // Log-only: the model never sees it, the UI projection does.
    assert_reconciled(&chat.fold());
    assert!(!serde_json::to_string(&chat.fold().history)
        .unwrap()
        .contains("cacheReadTokens"));
}
