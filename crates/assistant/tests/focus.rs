//! Staying on topic (spec 40): the intent table against its fixture in both languages, the
//! triple fallback, the compression bounds, the topic-shift note and the focus section –
//! including the spec's adversarial cases.

use serde::Deserialize;
use serde_json::json;
use sextant_assistant::chatlog::{Event, LoggedEvent};
use sextant_assistant::compress::{
    extract_key_info, should_compress, CompressToolResults, COMPRESS_OVER_BYTES, KEEP_LINES,
    MAX_ERROR_LINES, MAX_LINE_BYTES, REPEAT_MIN_BYTES,
};
use sextant_assistant::compress::{
    reference_pointer, repeated, superseded, ReferenceReads, SupersededReads,
};
use sextant_assistant::focus::{focus_section, topic_shift, Language, TopicNote, FOCUS_EN};
use sextant_assistant::intent::{
    Intent, Intents, INTENT_CONF_THRESHOLD, MIN_NARROWED_TOOLS, TABLE,
};
use sextant_assistant::seams::{HistoryTransform, ToolFilter};
use sextant_assistant::tools::tool_name;
use sextant_providers::{Message, ToolCall, ToolDefinition};

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    message: String,
    /// The intent the table gives; `*` where a mixed message may go to any of them.
    intent: String,
    band: String,
}

fn fixture() -> Fixture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/assistant/intents.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The model's call `id` of `tool`, without arguments.
fn call(id: &str, tool: &str) -> Message {
    Message::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: tool.into(),
            arguments: json!({}),
        }],
    }
}

/// The result of call `id`.
fn result_of(id: &str, content: &str) -> Message {
    Message::ToolResult {
        call_id: id.into(),
        content: content.into(),
        is_error: false,
    }
}

fn is_cjk(text: &str) -> bool {
    text.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
}

#[test]
fn every_fixture_message_gets_its_intent_and_confidence_band_in_both_languages() {
    let intents = Intents::shipped();
    let cases = fixture().cases;
    let mut failures = Vec::new();
    for case in &cases {
        let got = intents.classify(&case.message);
        let band = if got.intent != Intent::Unknown && got.confidence >= INTENT_CONF_THRESHOLD {
            "sure"
        } else {
            "unsure"
        };
        let intent_ok = case.intent == "*" || got.intent.name() == case.intent;
        if !intent_ok || band != case.band {
            failures.push(format!(
                "{:?}: got {} ({:.2}, {band}), the fixture says {} ({})",
                case.message,
                got.intent.name(),
                got.confidence,
                case.intent,
                case.band
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The fixture covers both languages, every intent, and both bands.
    for lang_is_cjk in [false, true] {
        let sure: Vec<&str> = cases
            .iter()
            .filter(|c| is_cjk(&c.message) == lang_is_cjk && c.band == "sure")
            .map(|c| c.intent.as_str())
            .collect();
        assert!(sure.len() >= 8, "too few sure cases (cjk: {lang_is_cjk})");
        assert!(cases
            .iter()
            .any(|c| is_cjk(&c.message) == lang_is_cjk && c.band == "unsure"));
    }
    for intent in Intent::ALL {
        assert!(
            cases
                .iter()
                .any(|c| c.intent == intent.name() && c.band == "sure"),
            "no sure case for {}",
            intent.name()
        );
    }
}

#[test]
fn the_shipped_table_is_valid_and_a_broken_table_is_refused_with_its_reason() {
    let intents = Intents::shipped();
    for intent in Intent::ALL {
        assert!(
            intents.tools(intent).len() >= MIN_NARROWED_TOOLS,
            "{} narrows to fewer tools than the fallback allows",
            intent.name()
        );
        assert!(!intents.label(intent, Language::En).is_empty());
        assert!(is_cjk(intents.label(intent, Language::Zh)) || intent == Intent::Mqtt);
    }
    let mut table: serde_json::Value = serde_json::from_str(TABLE).unwrap();
    table["intents"]["parser"]["phrases"]["parser"] = json!(1.5);
    let err = Intents::parse(&table.to_string()).err().unwrap();
    assert!(err.contains("parser") && err.contains("(0, 1]"), "{err}");
    let mut table: serde_json::Value = serde_json::from_str(TABLE).unwrap();
    table["intents"]["weather"] = table["intents"]["parser"].clone();
    let err = Intents::parse(&table.to_string()).err().unwrap();
    assert!(err.contains("weather"), "{err}");
    let err = Intents::parse("{\"schema\": 2, \"intents\": {}}")
        .err()
        .unwrap();
    assert!(err.contains("schema 2"), "{err}");
}

/// Every tool the table names, plus two it never names: the set a turn offers.
fn offered() -> Vec<ToolDefinition> {
    let mut names: Vec<String> = Intents::shipped().all_tools().into_iter().collect();
    names.extend(["io.connect".to_string(), "chat.archive.search".to_string()]);
    names
        .iter()
        .map(|command| ToolDefinition {
            name: tool_name(command).unwrap(),
            description: format!("runs {command}"),
            parameters: json!({"type": "object"}),
        })
        .collect()
}

fn shown(filter: &dyn ToolFilter) -> Vec<String> {
    filter
        .filter(offered())
        .into_iter()
        .map(|t| t.name)
        .collect()
}

#[test]
fn an_all_drift_message_is_unknown_and_keeps_every_tool() {
    let intents = Intents::shipped();
    let all: Vec<String> = offered().into_iter().map(|t| t.name).collect();
    for message in [
        "",
        "   ",
        "hmm",
        "tell me a joke about penguins and the weather in Lisbon",
        "今天天气怎么样",
        "🙂🙂🙂",
        &"lorem ipsum ".repeat(5_000),
    ] {
        let narrowing = intents.narrowing(message);
        assert_eq!(narrowing.classified.intent, Intent::Unknown, "{message:?}");
        assert_eq!(shown(&narrowing), all, "{message:?}");
    }
    // A message naming many domains is unsure: every tool.
    let mixed = intents.narrowing("plot the mqtt broker recording of the modbus parser");
    assert!(mixed.classified.confidence < INTENT_CONF_THRESHOLD);
    assert_eq!(shown(&mixed), all);
}

#[test]
fn a_sure_message_narrows_to_its_intents_subset_and_the_threshold_of_one_disables_it() {
    let intents = Intents::shipped();
    let message = "Add a gauge for the battery voltage to the dashboard";
    let narrowing = intents.narrowing(message);
    let kept = shown(&narrowing);
    let expected: Vec<String> = offered()
        .into_iter()
        .map(|t| t.name)
        .filter(|n| {
            intents
                .tools(Intent::DashboardLayout)
                .contains(&n.replace('_', "."))
        })
        .collect();
    assert_eq!(kept, expected);
    assert!(kept.len() < offered().len() / 2 + 1);
    assert!(!kept.iter().any(|n| n == "io_connect"));
    // 1.0 disables narrowing, however sure the message (this one's confidence is 1).
    let message = "subscribe on the MQTT broker via mosquitto";
    assert_eq!(intents.classify(message).confidence, 1.0);
    let all: Vec<String> = offered().into_iter().map(|t| t.name).collect();
    assert_ne!(shown(&intents.narrowing(message)), all);
    let off = Intents::shipped().with_threshold(1.0);
    assert_eq!(shown(&off.narrowing(message)), all);
}

#[test]
fn fewer_than_three_remaining_tools_or_none_fall_back_to_every_tool() {
    let intents = Intents::shipped();
    let narrowing = intents.narrowing("Add a gauge for the battery voltage to the dashboard");
    let subset: Vec<String> = intents.tools(Intent::DashboardLayout).into_iter().collect();
    let def = |command: &str| ToolDefinition {
        name: tool_name(command).unwrap(),
        description: String::new(),
        parameters: json!({}),
    };
    // Offered: two of the intent's tools and three others ⇒ two would remain ⇒ all five.
    let offered: Vec<ToolDefinition> = subset[..2]
        .iter()
        .map(|c| def(c))
        .chain(["a.b", "c.d", "e.f"].map(def))
        .collect();
    assert_eq!(narrowing.narrowed(offered.clone()).len(), 5);
    // Exactly three remain ⇒ those three.
    let offered: Vec<ToolDefinition> = subset[..3]
        .iter()
        .map(|c| def(c))
        .chain(["a.b"].map(def))
        .collect();
    assert_eq!(narrowing.narrowed(offered).len(), 3);
    // None of the intent's tools offered (a tools-off turn) ⇒ everything offered.
    let offered: Vec<ToolDefinition> = ["a.b", "c.d", "e.f", "g.h"].map(def).to_vec();
    assert_eq!(narrowing.narrowed(offered).len(), 4);
    assert!(narrowing.narrowed(Vec::new()).is_empty());
}

#[test]
fn exactly_two_thousand_bytes_pass_and_two_thousand_and_one_are_compressed() {
    // Multi-line text, so compression really shortens it.
    let line = "value,1,2,3,4,5,6,7,8\n"; // 22 bytes
    let mut at_limit = line.repeat(COMPRESS_OVER_BYTES / line.len());
    while at_limit.len() < COMPRESS_OVER_BYTES {
        at_limit.push('x');
    }
    assert_eq!(at_limit.len(), 2_000);
    let over = format!("{at_limit}y");
    assert_eq!(over.len(), 2_001);
    assert!(!should_compress(2_000, 1_000_000));
    assert!(should_compress(2_001, 1_000_000));

    // Through the history transform, as an earlier turn's result.
    let history = |result: &str| {
        let filler = "f".repeat(20_000); // keeps the 40 % share out of play
        vec![
            Message::user(filler.clone()),
            call("c1", "project_get"),
            result_of("c1", result),
            Message::assistant("done"),
            Message::user("and now?"),
        ]
    };
    let content = |messages: Vec<Message>| match &messages[2] {
        Message::ToolResult { content, .. } => content.clone(),
        _ => unreachable!(),
    };
    assert_eq!(
        content(CompressToolResults { prompt_bytes: 0 }.transform(history(&at_limit))),
        at_limit
    );
    let compressed = content(CompressToolResults { prompt_bytes: 0 }.transform(history(&over)));
    assert!(compressed.len() < 600, "{}", compressed.len());
    assert!(compressed.contains("lines elided by Sextant"));
    assert!(compressed.starts_with("value,1,2"));
    assert!(compressed.ends_with("xxy"));
    // The other messages are untouched.
    let out = CompressToolResults { prompt_bytes: 0 }.transform(history(&over));
    assert_eq!(out[0], history(&over)[0]);
    assert_eq!(out[4], Message::user("and now?"));
}

#[test]
fn empty_and_short_results_are_unchanged_and_error_lines_survive_the_middle() {
    assert_eq!(extract_key_info(""), "");
    assert_eq!(extract_key_info("ok"), "ok");
    let ten: String = (0..2 * KEEP_LINES).map(|i| format!("line {i}\n")).collect();
    assert_eq!(extract_key_info(&ten), ten);

    let mut lines: Vec<String> = (0..200).map(|i| format!("row {i}: fine")).collect();
    lines[50] = "row 50: ERROR checksum mismatch".into();
    lines[120] = "第 120 行：解析失败".into();
    lines[150] = "thread panicked at src/parse.rs".into();
    let text = lines.join("\n");
    let out = extract_key_info(&text);
    let kept: Vec<&str> = out.lines().collect();
    assert_eq!(&kept[..KEEP_LINES], &lines[..KEEP_LINES]);
    assert_eq!(
        &kept[kept.len() - KEEP_LINES..],
        &lines[lines.len() - KEEP_LINES..]
    );
    for error in [&lines[50], &lines[120], &lines[150]] {
        assert!(kept.contains(&error.as_str()), "{error} was dropped");
    }
    // Each gap is marked with how much it hides: 45 + 69 + 29 + 44 = 187 = 200 − 10 − 3.
    let hidden: usize = kept
        .iter()
        .filter_map(|l| l.strip_prefix("[… "))
        .map(|l| l.split(' ').next().unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(hidden, 187);
}

#[test]
fn all_error_lines_give_bounded_output() {
    for (lines, width) in [(10_000, 30), (100, 5_000), (11, 100_000)] {
        let text: String = (0..lines)
            .map(|i| format!("error {i}: {}\n", "失败".repeat(width / 6)))
            .collect();
        let out = extract_key_info(&text);
        let kept = out.lines().count();
        assert!(
            kept <= 2 * KEEP_LINES + MAX_ERROR_LINES + 1,
            "{kept} lines kept of {lines}"
        );
        // Every kept line is capped (plus its elision marker).
        assert!(out.lines().all(|l| l.len() <= MAX_LINE_BYTES + 60));
        assert!(out.len() <= (2 * KEEP_LINES + MAX_ERROR_LINES + 1) * (MAX_LINE_BYTES + 61));
        assert!(out.len() < text.len());
    }
    // One giant line with no newline at all.
    let out = extract_key_info(&"错".repeat(1_000_000));
    assert!(out.len() < MAX_LINE_BYTES + 60, "{}", out.len());
}

#[test]
fn a_fresh_result_of_the_turn_in_progress_is_kept_unless_it_dominates() {
    let big = (0..400).map(|i| format!("id {i}\n")).collect::<String>();
    assert!(big.len() > COMPRESS_OVER_BYTES);
    let turn = |filler: usize| {
        vec![
            Message::user("f".repeat(filler)),
            Message::assistant("ok"),
            Message::user("show me the project"),
            call("c1", "project_get"),
            result_of("c1", &big),
        ]
    };
    let result = |m: &[Message]| match &m[4] {
        Message::ToolResult { content, .. } => content.len(),
        _ => unreachable!(),
    };
    // Over 2,000 bytes but a small share of a long history: shown whole.
    assert_eq!(
        result(&CompressToolResults { prompt_bytes: 0 }.transform(turn(100_000))),
        big.len()
    );
    // Over 40 % of the request: compressed even now.
    assert!(result(&CompressToolResults { prompt_bytes: 0 }.transform(turn(10))) < big.len() / 2);
    // The system blocks and tools count: the same result is not 40 % of a big request.
    let with_prompt = CompressToolResults {
        prompt_bytes: 20_000,
    };
    assert_eq!(result(&with_prompt.transform(turn(10))), big.len());
    // Once the model has answered it (a later call in the same turn), it is an old result.
    let mut later = turn(100_000);
    later.push(call("c2", "project_validate"));
    later.push(result_of("c2", &big));
    let out = CompressToolResults { prompt_bytes: 0 }.transform(later);
    assert!(
        result(&out) < big.len() / 2,
        "the answered result is compressed"
    );
    match &out[6] {
        Message::ToolResult { content, .. } => assert_eq!(content, &big, "the latest stays"),
        other => panic!("{other:?}"),
    }
}

fn user(seq: u64, text: &str) -> LoggedEvent {
    LoggedEvent {
        seq,
        unix_ms: 0,
        event: Event::User { text: text.into() },
    }
}

fn answer(seq: u64) -> LoggedEvent {
    LoggedEvent {
        seq,
        unix_ms: 0,
        event: Event::Assistant { text: "ok".into() },
    }
}

#[test]
fn two_consecutive_switches_mark_only_the_last_two_topics() {
    let intents = Intents::shipped();
    let log = [
        user(1, "Add a gauge for the battery voltage to the dashboard"),
        answer(2),
        user(3, "Subscribe to the sensors topic on the MQTT broker"),
        answer(4),
        user(5, "It will not connect to the serial port at 115200 baud"),
    ];
    assert_eq!(
        topic_shift(&intents, &log, None),
        Some((Intent::Mqtt, Intent::DeviceConnection))
    );
    let note = TopicNote::for_turn(&intents, &log, None, Language::En)
        .unwrap()
        .0;
    assert!(
        note.contains("from MQTT to the device connection"),
        "{note}"
    );
    assert!(!note.contains("dashboard"), "{note}");
    let zh = TopicNote::for_turn(&intents, &log, None, Language::Zh)
        .unwrap()
        .0;
    assert!(zh.contains("MQTT") && zh.contains("设备连接"), "{zh}");

    // The same topic twice: no note. Either message unknown or unsure: no note.
    let same = [
        user(1, "Subscribe to the sensors topic on the MQTT broker"),
        answer(2),
        user(3, "mosquitto 上订阅 sensors/# 主题"),
    ];
    assert_eq!(topic_shift(&intents, &same, None), None);
    for unsure in [
        "thanks!",
        "the port",
        "plot the mqtt recording of the parser",
    ] {
        let log = [
            user(1, "Subscribe to the sensors topic on the MQTT broker"),
            answer(2),
            user(3, unsure),
        ];
        assert_eq!(topic_shift(&intents, &log, None), None, "{unsure}");
        let log = [user(1, unsure), answer(2), user(3, "回放上次的录制")];
        assert_eq!(topic_shift(&intents, &log, None), None, "{unsure}");
    }
    // One message only: no note.
    assert_eq!(topic_shift(&intents, &log[..1], None), None);
    // The turn's message before it is logged counts as the latest.
    assert_eq!(
        topic_shift(&intents, &log[..3], Some("回放上次的录制")),
        Some((Intent::Mqtt, Intent::Recording))
    );
}

#[test]
fn the_focus_section_has_its_heading_in_each_language_and_never_changes() {
    assert!(focus_section(Language::En).starts_with("## Focus\n"));
    assert!(focus_section(Language::Zh).starts_with("## 聚焦准则\n"));
    assert_eq!(focus_section(Language::En), FOCUS_EN);
    assert_eq!(Language::default(), Language::En);
    // The UI's language arrives as `en` / `zh`.
    let zh: Language = serde_json::from_value(json!("zh")).unwrap();
    assert_eq!(zh, Language::Zh);
    assert!(serde_json::from_value::<Language>(json!("klingon")).is_err());
}

#[test]
fn a_result_repeated_word_for_word_is_shown_once_at_its_newest() {
    let status = format!("connected: no\n{}", "counters: 0\n".repeat(20));
    assert!(status.len() >= REPEAT_MIN_BYTES);
    let call = |id: &str| call(id, "io_status");
    let result = result_of;
    let messages = vec![
        Message::user("is it connected?"),
        call("a"),
        result("a", &status),
        call("b"),
        result("b", "short and the same"),
        call("c"),
        result("c", &format!("{status}changed")),
        call("d"),
        result("d", &status),
        call("e"),
        result("e", "short and the same"),
        call("f"),
        result("f", &status),
    ];
    let out = CompressToolResults {
        prompt_bytes: 100_000,
    }
    .transform(messages.clone());
    let content = |i: usize| match &out[i] {
        Message::ToolResult { content, .. } => content.clone(),
        _ => unreachable!(),
    };
    assert_eq!(content(2), repeated("f"));
    assert_eq!(content(8), repeated("f"));
    assert_eq!(content(12), status, "the newest copy is whole");
    assert_eq!(
        content(6),
        format!("{status}changed"),
        "a different output stays"
    );
    assert_eq!(
        content(4),
        "short and the same",
        "too short to be worth a pointer"
    );
    assert_eq!(out.len(), messages.len());
}

/// The model's call `id` of `tool` with `arguments`.
fn call_with(id: &str, tool: &str, arguments: serde_json::Value) -> Message {
    Message::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: tool.into(),
            arguments,
        }],
    }
}

#[test]
fn a_read_made_again_shows_its_older_answers_as_pointers_and_edits_stay() {
    let reads = SupersededReads {
        reads: ["project.get", "project.dataset.get", "io.status"]
            .map(String::from)
            .into(),
    };
    let project = |n: usize| {
        format!(
            "{{\"title\":\"Rover\",\"groups\":{}}}",
            "[1,2,3],".repeat(n)
        )
    };
    let big = |n: usize| {
        let p = project(n);
        assert!(p.len() >= REPEAT_MIN_BYTES);
        p
    };
    let messages = vec![
        Message::user("build it"),
        // 1-2: a read, later made again with the same arguments (key order aside).
        call_with("a", "project_get", json!({"depth": 1, "ids": true})),
        result_of("a", &big(30)),
        // 3-4: the same command, other arguments: another read.
        call_with("b", "project_get", json!({"depth": 2})),
        result_of("b", &big(31)),
        // 5-6: an edit, made twice with the same arguments: two actions, both kept.
        call_with("c", "project_group_add", json!({"title": "Power"})),
        result_of("c", &big(32)),
        // 7-8: through meta_executeCommand, the same read as 1.
        call_with(
            "d",
            "meta_executeCommand",
            json!({"name": "project.get", "params": {"ids": true, "depth": 1}}),
        ),
        result_of("d", &big(33)),
        call_with("e", "project_group_add", json!({"title": "Power"})),
        result_of("e", &big(34)),
        // 11-12: a short answer made again stays (the pointer would cost more).
        call_with("f", "io_status", json!({})),
        result_of("f", "connected: no"),
        call_with("g", "io_status", json!({})),
        result_of("g", "connected: yes"),
        // 15-16: the newest of the first read.
        call_with("h", "project_get", json!({"ids": true, "depth": 1})),
        result_of("h", &big(35)),
    ];
    let out = reads.transform(messages.clone());
    let content = |i: usize| match &out[i] {
        Message::ToolResult { content, .. } => content.clone(),
        other => panic!("not a result: {other:?}"),
    };
    let original = |i: usize| match &messages[i] {
        Message::ToolResult { content, .. } => content.clone(),
        other => panic!("not a result: {other:?}"),
    };
    let expected = [
        (2, superseded("h")),
        (4, original(4)),
        (6, original(6)),
        (8, superseded("h")),
        (10, original(10)),
        (12, original(12)),
        (14, original(14)),
        (16, original(16)),
    ];
    for (i, want) in expected {
        assert_eq!(content(i), want, "message {i}");
    }
    // Calls and every other message are untouched.
    assert_eq!(out.len(), messages.len());
    for i in [0, 1, 3, 5, 7, 9, 11, 13, 15] {
        assert_eq!(out[i], messages[i], "message {i}");
    }
    // No reads named: nothing changes.
    let none = SupersededReads {
        reads: Default::default(),
    };
    assert_eq!(none.transform(messages.clone()), messages);
}

#[test]
fn documentation_read_in_an_earlier_turn_is_a_pointer_and_the_turn_in_progress_keeps_its_own() {
    let page = |what: &str| format!("{what}: {}", "params and schema ".repeat(20));
    let messages = vec![
        Message::user("add a gauge"),
        call_with(
            "a",
            "meta_describeCommand",
            json!({"name": "project.group.add"}),
        ),
        result_of("a", &page("group.add")),
        call_with("b", "meta_listCommands", json!({"prefix": "project"})),
        result_of("b", &page("list")),
        // Through meta_executeCommand, the same kind of read.
        call_with(
            "c",
            "meta_executeCommand",
            json!({"name": "meta.describeCommand", "params": {"name": "io.connect"}}),
        ),
        result_of("c", &page("io.connect")),
        // Other reads and short pages stay.
        call_with("d", "project_get", json!({})),
        result_of("d", &page("project")),
        call_with("e", "meta_describeCommand", json!({"name": "x"})),
        result_of("e", "unknown command"),
        Message::Assistant {
            text: "Added.".into(),
            tool_calls: Vec::new(),
        },
        Message::user("now a plot"),
        call_with(
            "f",
            "meta_describeCommand",
            json!({"name": "project.group.add"}),
        ),
        result_of("f", &page("group.add again")),
    ];
    let out = ReferenceReads.transform(messages.clone());
    let content = |m: &Message| match m {
        Message::ToolResult { content, .. } => content.clone(),
        other => panic!("not a result: {other:?}"),
    };
    assert_eq!(content(&out[2]), reference_pointer("meta.describeCommand"));
    assert_eq!(content(&out[4]), reference_pointer("meta.listCommands"));
    assert_eq!(content(&out[6]), reference_pointer("meta.describeCommand"));
    assert!(reference_pointer("meta.describeCommand").contains("meta_describeCommand"));
    for i in [8, 10, 14] {
        assert_eq!(out[i], messages[i], "message {i} stays");
    }
    assert_eq!(out.len(), messages.len());
    // No person's message yet (nothing earlier than the turn): nothing changes.
    assert_eq!(
        ReferenceReads.transform(messages[1..3].to_vec()),
        messages[1..3].to_vec()
    );
}
