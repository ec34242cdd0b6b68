//! The seams of a turn against the scripted provider: each plugs in without the loop
//! knowing it, changes exactly what it owns, and an empty set of seams changes nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use sextant_assistant::chatlog::{ChatLog, Event};
use sextant_assistant::context::{Envelope, LiveState, SystemContext, DOCS_TEXT};
use sextant_assistant::conversation::{Conversation, Prompt, Settings, TurnEvent};
use sextant_assistant::pipeline::{BoxFuture, CallerInfo, CancelToken, Pipeline, ToolBox};
use sextant_assistant::seams::{
    Contributors, DisplayFilter, DisplayFilters, DocsBlock, EnvelopedBlock, InboundRouter,
    Placement, PromptContributor, ReplyEvaluator, RoleBlock, Seams, ToolFilter,
};
use sextant_commands::Policy;
use sextant_providers::script::{Script, ScriptServer};
use sextant_providers::{
    AnthropicClient, AnthropicConfig, ApiKey, Client, HttpConfig, RetryPolicy, SystemBlock,
    ToolDefinition,
};
use tokio::sync::mpsc;

fn anthropic(server: &ScriptServer) -> Client {
    let mut config = AnthropicConfig::new(ApiKey::new("sk-ant-test"));
    config.base_url = server.url();
    config.http = HttpConfig {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            max_retries: 1,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(2),
        },
        max_reply_bytes: 1024 * 1024,
    };
    Client::Anthropic(AnthropicClient::new(config).unwrap())
}

fn prompt() -> Prompt {
    let tool = |name: &str| ToolDefinition {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: json!({"type": "object", "properties": {}}),
    };
    Prompt::new(
        vec![SystemBlock::cached("You are Sextant's assistant.")],
        vec![tool("project_get"), tool("echo")],
    )
}

/// Runs one turn of `anthropic_text` with `seams`; the log, the UI's text and the body sent.
async fn turn(seams: Option<Seams>) -> (Vec<Event>, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = ChatLog::open(dir.path().join("chats.sqlite")).unwrap();
    let id = log.create_chat("test").unwrap();
    let log = Arc::new(Mutex::new(log));
    let server = ScriptServer::start(Script::fixture("anthropic_text")).await;
    let mut conversation = Conversation::new(
        anthropic(&server),
        log.clone(),
        id,
        Arc::new(Pipeline::new(ToolBox::new())),
        CallerInfo::assistant(Policy::default()),
        Settings::new("claude-test"),
    );
    if let Some(seams) = seams {
        conversation = conversation.with_seams(seams);
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    conversation
        .send("How is the supply?", &prompt(), &tx, &CancelToken::new())
        .await
        .unwrap();
    drop(tx);
    let mut shown = String::new();
    while let Some(e) = rx.recv().await {
        if let TurnEvent::TextDelta(t) = e {
            shown.push_str(&t);
        }
    }
    let events = log
        .lock()
        .unwrap()
        .events(id)
        .unwrap()
        .iter()
        .map(|e| e.event.clone())
        .collect();
    let body = server.requests()[0].json();
    (events, shown, body)
}

struct Shout;
impl DisplayFilter for Shout {
    fn push(&mut self, delta: &str) -> String {
        delta.to_uppercase()
    }
}
impl DisplayFilters for Shout {
    fn start(&self) -> Box<dyn DisplayFilter> {
        Box::new(Shout)
    }
}

/// Holds everything back until the reply ends.
struct Hold(String);
impl DisplayFilter for Hold {
    fn push(&mut self, delta: &str) -> String {
        self.0.push_str(delta);
        String::new()
    }
    fn finish(&mut self) -> String {
        std::mem::take(&mut self.0)
    }
}
struct HoldAll;
impl DisplayFilters for HoldAll {
    fn start(&self) -> Box<dyn DisplayFilter> {
        Box::new(Hold(String::new()))
    }
}

struct OnlyRead;
impl ToolFilter for OnlyRead {
    fn filter(&self, tools: Vec<ToolDefinition>) -> Vec<ToolDefinition> {
        tools
            .into_iter()
            .filter(|t| t.name.ends_with("_get"))
            .collect()
    }
}

struct Note(&'static str);
impl InboundRouter for Note {
    fn route(&self, text: &str) -> Vec<Event> {
        vec![Event::structural(self.0, json!({ "saw": text }))]
    }
}
impl ReplyEvaluator for Note {
    fn evaluate(&self, reply: &str, _: &sextant_providers::StopReason) -> Vec<Event> {
        vec![Event::structural(self.0, json!({ "reply": reply }))]
    }
}

#[tokio::test]
async fn empty_seams_change_nothing_and_each_seam_changes_only_what_it_owns() {
    let (plain_log, plain_shown, plain_body) = turn(None).await;
    let (empty_log, empty_shown, empty_body) = turn(Some(Seams::default())).await;
    assert_eq!(empty_body, plain_body, "no seams: the same request body");
    assert_eq!(
        (empty_log.len(), &empty_shown),
        (plain_log.len(), &plain_shown)
    );

    let seams = Seams {
        inbound: vec![Arc::new(Note("inbound_seen"))],
        tools: vec![Arc::new(OnlyRead)],
        display: vec![Arc::new(Shout)],
        verdict: vec![Arc::new(Note("reply_verdict"))],
        ..Seams::default()
    };
    let (log, shown, body) = turn(Some(seams)).await;
    // Display: the person sees the filtered text, the log keeps what the model said.
    assert_eq!(shown, plain_shown.to_uppercase());
    assert!(
        log.iter()
            .any(|e| matches!(e, Event::Assistant { text } if *text == plain_shown)),
        "{log:?}"
    );
    // Tools: the request offers only what the filter let through.
    let names: Vec<_> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, [json!("project_get")]);
    assert_eq!(
        body["messages"], plain_body["messages"],
        "the history is not the tool filter's"
    );
    // Inbound right after the message; the verdict after the reply, reading all of it.
    let kinds: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            Event::Structural(s) if s.kind != "usage" => Some((s.kind.clone(), s.payload.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "inbound_seen".to_string(),
                json!({"saw": "How is the supply?"})
            ),
            ("reply_verdict".to_string(), json!({"reply": plain_shown})),
        ]
    );
    assert!(
        matches!(log[1], Event::Structural(ref s) if s.kind == "inbound_seen"),
        "{log:?}"
    );

    // A filter that holds text back releases it when the reply ends.
    let (_, held, _) = turn(Some(Seams {
        display: vec![Arc::new(HoldAll)],
        ..Seams::default()
    }))
    .await;
    assert_eq!(held, plain_shown);
}

/// A block from a contributor that has it at hand.
struct Fixed(Placement, String);
impl PromptContributor for Fixed {
    fn placement(&self) -> Placement {
        self.0
    }
    fn block<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move { Some(self.1.clone()) })
    }
}

/// The contributors build, byte for byte, the system array the context builder does:
/// cached blocks first with the breakpoint on the last, then the per-request blocks.
#[tokio::test]
async fn contributors_build_the_system_array_the_context_builder_does() {
    let nonce = "0123456789abcdef";
    let live = LiveState {
        project: json!({"title": "Rover", "groups": [], "sources": []}),
        io: json!({"connected": false, "sources": []}),
    };
    let context = SystemContext {
        probe_instruction: Some("End every reply with the probe line.".into()),
        docs: Some(DOCS_TEXT.into()),
        live: Some(live.clone()),
        memory_index: Some("- the rover's UART runs at 57600 baud".into()),
        handoff: Some(String::new()),
    };
    let expected = context.blocks(&Envelope::with_nonce(nonce).unwrap());
    let rendered = live.render(&Envelope::with_nonce(nonce).unwrap());
    let contributors: Vec<Arc<dyn PromptContributor>> = vec![
        Arc::new(RoleBlock {
            focus: None,
            probe_instruction: Some("End every reply with the probe line.".into()),
        }),
        Arc::new(DocsBlock(DOCS_TEXT.into())),
        Arc::new(Fixed(Placement::PerRequest, rendered)),
        Arc::new(EnvelopedBlock {
            heading: sextant_assistant::context::MEMORY_HEADING,
            source: "memory",
            text: "- the rover's UART runs at 57600 baud".into(),
        }),
        // Empty: zero bytes, no block.
        Arc::new(EnvelopedBlock {
            heading: sextant_assistant::context::HANDOFF_HEADING,
            source: "handoff",
            text: String::new(),
        }),
    ];
    let built = Contributors::new(contributors, Envelope::with_nonce(nonce).unwrap())
        .blocks()
        .await;
    assert_eq!(built, expected);
    assert_eq!(built.iter().filter(|b| b.cache).count(), 1);
    assert!(
        built[1].cache,
        "the breakpoint is on the last cached block (docs)"
    );
}
