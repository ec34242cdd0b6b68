//! Compaction that keeps the topic (spec 40 §3), through the conversation loop and the
//! scripted provider server: a long chat over its budget gets a `compaction` event from the
//! model's summary; a failing or empty summary gets the person's keywords as the anchor;
//! the compaction request has its own prompt (no focus section, no tools, the transcript
//! enveloped); the archive still finds what the compaction shadows. And the keyword
//! tokenizer's adversarial cases.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use sextant_assistant::chatlog::LoggedEvent;
use sextant_assistant::chatlog::{ChatId, ChatLog, Event, SearchRequest, Surface};
use sextant_assistant::compaction::{
    extract_keyword_summary, split_point, top_terms, TopicCompaction, COMPACTION_PROMPT,
    KEYWORD_HEADING, KEYWORD_TOP,
};
use sextant_assistant::conversation::{Conversation, Prompt, Settings};
use sextant_assistant::focus::FOCUS_EN;
use sextant_assistant::pipeline::{CallerInfo, CancelToken, Pipeline, ToolBox};
use sextant_assistant::seams::Seams;
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
            max_retries: 0,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(2),
        },
        max_reply_bytes: 1024 * 1024,
    };
    Client::Anthropic(AnthropicClient::new(config).unwrap())
}

/// The turn's prompt, with the focus section in its role block (as the service builds it).
fn prompt() -> Prompt {
    Prompt::new(
        vec![SystemBlock::cached(format!(
            "You are Sextant's assistant.\n\n{FOCUS_EN}"
        ))],
        vec![ToolDefinition {
            name: "project_get".into(),
            description: "The project.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }],
    )
}

/// A long chat about one topic: forty turns, each a question, a call, a big result and an
/// answer. The first question carries a word nothing later repeats.
fn long_chat(log: &mut ChatLog, chat: ChatId) {
    for i in 0..40 {
        let question = if i == 0 {
            "The quokka board streams zephyrium pressure as CSV; build a gauge".to_string()
        } else {
            format!("zephyrium pressure gauge step {i}: adjust the calibration")
        };
        log.append(chat, &Event::user(question)).unwrap();
        log.append(
            chat,
            &Event::ToolCall {
                id: format!("c{i}"),
                name: "project.get".into(),
                args: json!({}),
            },
        )
        .unwrap();
        let rows: String = (0..60)
            .map(|r| format!("row {r}: p={}\n", 1000 + r))
            .collect();
        log.append(
            chat,
            &Event::ToolResult {
                id: format!("c{i}"),
                content: rows,
                is_error: false,
                denied: false,
                blocked: false,
            },
        )
        .unwrap();
        log.append(
            chat,
            &Event::Assistant {
                text: format!("Step {i} is done."),
            },
        )
        .unwrap();
    }
}

struct Run {
    events: Vec<Event>,
    bodies: Vec<serde_json::Value>,
    log: Arc<Mutex<ChatLog>>,
    _dir: tempfile::TempDir,
}

async fn run(script: &str, compaction: bool, budget_tokens: usize) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut log = ChatLog::open(dir.path().join("chats.sqlite")).unwrap();
    let chat = log.create_chat("zephyrium").unwrap();
    long_chat(&mut log, chat);
    let log = Arc::new(Mutex::new(log));
    let server = ScriptServer::start(Script::fixture(&format!("conversation/{script}"))).await;
    let mut settings = Settings::new("claude-test");
    settings.history_budget_tokens = budget_tokens;
    let mut seams = Seams::default();
    if compaction {
        seams.compaction = Some(Arc::new(TopicCompaction));
    }
    let conversation = Conversation::new(
        anthropic(&server),
        log.clone(),
        chat,
        Arc::new(Pipeline::new(ToolBox::new())),
        CallerInfo::assistant(Policy::default()),
        settings,
    )
    .with_seams(seams);
    let (tx, _rx) = mpsc::unbounded_channel();
    conversation
        .send(
            "what does the zephyrium gauge read now?",
            &prompt(),
            &tx,
            &CancelToken::new(),
        )
        .await
        .unwrap();
    let events = log
        .lock()
        .unwrap()
        .events(chat)
        .unwrap()
        .iter()
        .map(|e| e.event.clone())
        .collect();
    let bodies = server.requests().iter().map(|r| r.json()).collect();
    Run {
        events,
        bodies,
        log,
        _dir: dir,
    }
}

fn compactions(events: &[Event]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Compaction { through, summary } => Some((*through, summary.clone())),
            _ => None,
        })
        .collect()
}

fn body_text(body: &serde_json::Value) -> String {
    serde_json::to_string(body).unwrap()
}

#[tokio::test]
async fn a_long_chat_over_budget_is_summarized_by_the_model_keeping_its_topics() {
    let run = run("anthropic_compaction", true, 6_000).await;
    assert_eq!(
        run.bodies.len(),
        2,
        "the compaction request, then the turn's"
    );

    // The compaction request: its own prompt only – no role block, no focus, no tools.
    let compaction = &run.bodies[0];
    let system = compaction["system"].as_array().unwrap();
    assert_eq!(system.len(), 1);
    assert_eq!(system[0]["text"], COMPACTION_PROMPT);
    assert!(!body_text(compaction).contains("## Focus"));
    assert!(compaction
        .get("tools")
        .is_none_or(|t| t.as_array().unwrap().is_empty()));
    let asked = compaction["messages"][0]["content"].to_string();
    assert!(asked.contains("<untrusted-"), "the transcript is enveloped");
    assert!(
        asked.contains("quokka"),
        "the oldest message is in the transcript"
    );
    assert!(
        !asked.contains("what does the zephyrium gauge read now"),
        "the turn in progress is not summarized"
    );

    // The log: one compaction, before the person's new message, with the model's text.
    let found = compactions(&run.events);
    assert_eq!(found.len(), 1);
    let (through, summary) = &found[0];
    assert!(summary.contains("Topics and keywords to preserve: zephyrium"));
    let current = run
        .events
        .iter()
        .rposition(|e| matches!(e, Event::User { .. }))
        .unwrap();
    assert!((*through as usize) < current + 1);

    // The turn's request: the summary first, the shadowed start gone, under budget.
    let turn = &run.bodies[1];
    let first = turn["messages"][0]["content"].to_string();
    assert!(
        first.contains("[Summary of the earlier conversation]"),
        "{first}"
    );
    assert!(first.contains("zephyrium pressure sensor"));
    // Model-written from untrusted data: it reaches the model in the envelope.
    assert!(
        first.contains("<untrusted-") && first.contains("compaction_summary"),
        "{first}"
    );
    assert!(!body_text(&turn["messages"]).contains("quokka"));
    assert!(body_text(&turn["messages"]).contains("what does the zephyrium gauge read now"));
    assert!(body_text(&turn["messages"]).len() / 4 < 6_000);
    // The turn itself keeps its prompt (focus and tools).
    assert!(body_text(turn).contains("## Focus"));
    assert_eq!(turn["tools"][0]["name"], "project_get");

    // The archive still finds the shadowed event, and says it is shadowed.
    let page = run
        .log
        .lock()
        .unwrap()
        .search_sessions(&SearchRequest {
            query: "quokka".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.hits.len(), 1, "{:?}", page.hits);
    assert_eq!(page.hits[0].surface, Surface::Shadowed);
    assert!(page.hits[0].seq <= *through);
}

#[tokio::test]
async fn a_failing_or_empty_summary_gets_the_persons_keywords_as_the_anchor() {
    for script in ["anthropic_compaction_fails", "anthropic_compaction_empty"] {
        let run = run(script, true, 6_000).await;
        assert_eq!(run.bodies.len(), 2, "{script}");
        let found = compactions(&run.events);
        assert_eq!(found.len(), 1, "{script}");
        let summary = &found[0].1;
        assert!(summary.starts_with(KEYWORD_HEADING), "{summary}");
        // The person's most repeated words lead.
        let terms: Vec<&str> = summary[KEYWORD_HEADING.len()..]
            .split(", ")
            .map(str::trim)
            .collect();
        assert!(terms.len() <= KEYWORD_TOP);
        for word in ["zephyrium", "pressure", "gauge", "calibration"] {
            assert!(terms.contains(&word), "{word} in {terms:?}");
        }
        // The turn still answers, with the anchor first.
        let first = run.bodies[1]["messages"][0]["content"].to_string();
        assert!(first.contains("Topics and keywords to preserve"), "{first}");
        assert!(run
            .events
            .iter()
            .any(|e| matches!(e, Event::Assistant { text } if text.contains("1013 hPa"))));
    }
}

#[tokio::test]
async fn under_budget_or_off_no_compaction_request_is_made() {
    // Under budget: one request, the turn's own, and no compaction.
    let run_under = run("anthropic_compaction", true, 1_000_000).await;
    assert_eq!(run_under.bodies.len(), 1);
    assert!(compactions(&run_under.events).is_empty());
    assert!(body_text(&run_under.bodies[0]).contains("quokka"));
    assert!(!body_text(&run_under.bodies[0]).contains(COMPACTION_PROMPT));

    // Off, over budget: today's behaviour – the oldest messages are dropped, nothing logged.
    let run_off = run("anthropic_compaction", false, 6_000).await;
    assert_eq!(run_off.bodies.len(), 1);
    assert!(compactions(&run_off.events).is_empty());
    let text = body_text(&run_off.bodies[0]);
    assert!(!text.contains("quokka") && !text.contains("Summary of the earlier"));
    assert!(!text.contains(COMPACTION_PROMPT));
}

#[test]
fn all_stop_words_give_an_empty_summary_without_a_panic() {
    for messages in [
        vec![],
        vec![""],
        vec!["the and of to is it"],
        vec!["你 我 的 了 是", "we you they this that"],
        vec!["!!! ??? ... 。。。", "1 2 3 42 1000"],
    ] {
        assert_eq!(extract_keyword_summary(&messages), "", "{messages:?}");
        assert!(top_terms(&messages).is_empty());
    }
}

#[test]
fn cjk_yields_characters_and_two_grams_and_a_non_cjk_character_resets_the_window() {
    let terms = top_terms(&["压缩架构"]);
    for t in ["压缩", "缩架", "架构", "压", "缩", "架", "构"] {
        assert!(terms.contains(&t.to_string()), "{t} in {terms:?}");
    }
    let split = top_terms(&["压缩 架构", "压缩x架构"]);
    assert!(!split.contains(&"缩架".to_string()), "{split:?}");
    assert!(split.contains(&"压缩".to_string()) && split.contains(&"架构".to_string()));
    // Most frequent first, at most ten, English lower-cased.
    let many: Vec<String> = (0..30).map(|i| format!("Alpha beta{i}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let top = top_terms(&refs);
    assert_eq!(top.len(), KEYWORD_TOP);
    assert_eq!(top[0], "alpha");
    assert_eq!(top[1], "beta0", "ties keep the order of first use");
}

#[test]
fn the_recent_part_counts_what_the_model_reads_and_never_splits_the_turn_in_progress() {
    let logged = |seq: u64, event: Event| LoggedEvent {
        seq,
        unix_ms: 0,
        event,
    };
    let turn = |seq: u64, text: &str| {
        vec![
            logged(seq, Event::user(text)),
            logged(seq + 1, Event::Assistant { text: "ok".into() }),
        ]
    };
    let mut events: Vec<LoggedEvent> = [turn(1, "one"), turn(3, "two"), turn(5, "three")].concat();
    // Everything fits the recent part: nothing is left to summarize.
    assert_eq!(split_point(&events, 1_000), None);
    // A budget for the last turn only: the first two are the older part (through index 3).
    assert_eq!(split_point(&events, 12), Some(3));
    // Nothing older than the turn in progress: no compaction.
    assert_eq!(split_point(&events[4..], 1_000), None);
    // A big citation in turn two is counted: turn two no longer fits the recent part.
    events.insert(
        3,
        logged(
            4,
            Event::Citation {
                by: "person".into(),
                call_id: None,
                sources: json!([]),
                snapshots: vec!["x".repeat(40_000)],
            },
        ),
    );
    let end = split_point(&events, 1_000).unwrap();
    assert!(matches!(events[end + 1].event, Event::User { ref text } if text == "three"));
}
