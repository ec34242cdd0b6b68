//! Skills and auto-verify against the real registry and the chat door, the scripted
//! provider server as the model: every command a skill names exists, the routing fixture
//! routes as written, a trigger phrase puts exactly one synthetic pair in the next request
//! (once per chat, none with routing off), the verifier table holds only Safe checks, and a
//! broken parser's check fails in the very result the model receives.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::{ok, open, open_auto_approving, runtime, serve, turn};
use serde::Deserialize;
use serde_json::{json, Value};
use sextant_assistant::door::ChatDoor;
use sextant_assistant::skills::{self, Triggers, LOAD_SKILL, MAX_SKILL_BYTES, SKILLS};
use sextant_assistant::verify::{check_table, VERIFIERS};
use sextant_commands::{CommandDoor, Tier};
use sextant_providers::script::{fixtures_dir, ScriptServer};
use sextant_secrets::SecretStore;

const NAMESPACES: [&str; 11] = [
    "project.",
    "io.",
    "meta.",
    "assistant.",
    "console.",
    "csvExport.",
    "csvPlayer.",
    "dashboard.",
    "mqtt.",
    "replay.",
    "sessions.",
];

/// Every backticked token of `body` that reads as a command name.
fn commands_named(body: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, piece) in body.split('`').enumerate() {
        // Odd pieces are inside backticks (fences are three empty pieces, harmlessly).
        if i % 2 == 0 {
            continue;
        }
        for word in piece.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.')) {
            let word = word.trim_end_matches('.');
            if NAMESPACES.iter().any(|n| word.starts_with(n)) && word.split('.').count() >= 2 {
                out.insert(word.to_string());
            }
        }
    }
    out
}

#[tokio::test]
async fn every_skill_is_small_titled_and_names_only_commands_that_exist() {
    let rt = runtime();
    let known: BTreeSet<&str> = rt.specs().iter().map(|s| s.name.as_str()).collect();
    assert!(SKILLS.len() >= 12, "{} skills", SKILLS.len());
    let mut named_total = 0;
    for (id, body) in SKILLS {
        assert!(body.len() <= MAX_SKILL_BYTES, "{id}: {} bytes", body.len());
        assert!(body.starts_with("# "), "{id}: starts with its title");
        assert!(!skills::summary(id).is_empty(), "{id}: has a summary line");
        let named = commands_named(body);
        named_total += named.len();
        for command in &named {
            assert!(
                known.contains(command.as_str()) || command == LOAD_SKILL,
                "skill `{id}` names `{command}`, which the registry lacks"
            );
        }
    }
    assert!(named_total > 50, "the skills name commands ({named_total})");
    // The checker itself catches a rotten name.
    assert!(commands_named("use `project.frameParser.setCodez` now")
        .contains("project.frameParser.setCodez"));
}

#[derive(Deserialize)]
struct RoutingFixture {
    schema: u32,
    cases: Vec<RoutingCase>,
}

#[derive(Deserialize)]
struct RoutingCase {
    message: String,
    skill: Option<String>,
}

#[test]
fn the_routing_fixture_routes_as_written() {
    let path = fixtures_dir().join("../assistant/skill-routing.json");
    let f: RoutingFixture = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(f.schema, 1);
    let triggers = Triggers::shipped();
    let (mut hits, mut misses) = (0, 0);
    for case in &f.cases {
        let got = triggers.route(&case.message).map(|r| r.skill);
        assert_eq!(got, case.skill, "{:?}", case.message);
        if case.skill.is_some() {
            hits += 1
        } else {
            misses += 1
        }
    }
    assert!(hits >= 24 && misses >= 12, "{hits} routed, {misses} not");
    // Every skill is reachable, in English and in Chinese.
    let table: Value = serde_json::from_str(skills::TRIGGERS).unwrap();
    for (id, _) in SKILLS {
        let phrases = table["skills"][id]
            .as_array()
            .unwrap_or_else(|| panic!("{id} has triggers"));
        let cjk = |s: &str| s.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
        assert!(
            phrases.iter().any(|p| cjk(p.as_str().unwrap())),
            "{id}: a Chinese phrase"
        );
        assert!(
            phrases.iter().any(|p| !cjk(p.as_str().unwrap())),
            "{id}: an English phrase"
        );
    }
}

#[test]
fn a_bad_trigger_table_is_refused_with_a_reason() {
    assert!(Triggers::parse(r#"{"schema": 2, "skills": {}}"#)
        .unwrap_err()
        .contains("schema 2"));
    assert!(
        Triggers::parse(r#"{"schema": 1, "skills": {"nope": ["x y"]}}"#)
            .unwrap_err()
            .contains("`nope`")
    );
}

#[tokio::test]
async fn the_verifier_table_holds_only_safe_checks_of_real_commands() {
    let rt = runtime();
    check_table(rt.specs()).unwrap();
    for (apply, check) in VERIFIERS {
        let tier = |n: &str| rt.specs().iter().find(|s| s.name == n).unwrap().tier;
        assert_ne!(tier(apply), Tier::Safe, "`{apply}` is an edit");
        assert_eq!(tier(check.command()), Tier::Safe);
    }
    // A check that would need a person is refused when the table is loaded.
    let mut specs = rt.specs().to_vec();
    specs
        .iter_mut()
        .find(|s| s.name == "project.validate")
        .unwrap()
        .tier = Tier::Confirm;
    let e = check_table(&specs).unwrap_err();
    assert!(
        e.contains("project.validate") && e.contains("not Safe"),
        "{e}"
    );
    specs.retain(|s| s.name != "project.frameParser.dryCompile");
    assert!(check_table(&specs).is_err());
}

async fn setup(dir: &Path, server: &ScriptServer) -> ChatDoor {
    open_auto_approving(dir, server, "claude-skills").await
}

/// The `meta_loadSkill` calls in a request's messages, with the body their result carries.
fn skill_pairs(body: &Value) -> Vec<(String, String)> {
    let messages = body["messages"].as_array().unwrap();
    let mut out = Vec::new();
    for m in messages {
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use" && block["name"] == "meta_loadSkill" {
                let id = block["id"].as_str().unwrap().to_string();
                let result = messages
                    .iter()
                    .flat_map(|m| m["content"].as_array().into_iter().flatten())
                    .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id.as_str())
                    .map(|b| b["content"].to_string())
                    .unwrap_or_default();
                out.push((block["input"]["name"].as_str().unwrap().to_string(), result));
            }
        }
    }
    out
}

#[tokio::test]
async fn a_trigger_phrase_loads_its_skill_once_per_chat_and_routing_off_loads_none() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_never_compliant").await;
    let door = setup(dir.path(), &server).await;
    let route = Triggers::shipped()
        .route("help me write a frame parser for my CSV lines")
        .expect("the phrase routes");
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(
        &door,
        &chat,
        "help me write a frame parser for my CSV lines",
    )
    .await;
    let first = server.requests()[0].json();
    let pairs = skill_pairs(&first);
    assert_eq!(pairs.len(), 1, "{pairs:?}");
    assert_eq!(pairs[0].0, route.skill);
    let skill_body = skills::body(&route.skill).unwrap();
    let first_line = skill_body.lines().next().unwrap();
    assert!(
        pairs[0].1.contains(&first_line.replace('"', "\\\"")),
        "the body: {}",
        pairs[0].1
    );
    // The pair comes after the person's message, like a model's own call would.
    let messages = first["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    // The panel shows it on the message, as a chip, from the log.
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    let loaded: Vec<&Value> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "skill_loaded")
        .collect();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0]["payload"]["synthetic"], true);

    // The same skill asked for again in this chat: not loaded a second time.
    turn(&door, &chat, "and another frame parser for the GPS").await;
    assert_eq!(
        skill_pairs(&server.requests()[1].json()).len(),
        1,
        "still the one pair"
    );

    // Routing off: no pair, not a byte of any skill.
    ok(&door, json!({"op": "setSettings", "skillRouting": false})).await;
    let other = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(
        &door,
        &other,
        "help me write a frame parser for my CSV lines",
    )
    .await;
    let off = serde_json::to_string(&server.requests()[2].json()).unwrap();
    assert!(
        !off.contains("sxt_skill_") && !off.contains(&first_line.replace('"', "\\\"")),
        "{off}"
    );
    // meta.loadSkill is still a discovery tool the model may call itself.
    assert!(off.contains("\"meta_loadSkill\""));
}

#[tokio::test]
async fn meta_load_skill_returns_a_body_and_list_commands_names_the_skills() {
    let door = open(tempfile::tempdir().unwrap().path());
    let commands = sextant_assistant::skills::SkillDoor::new(std::sync::Arc::new(runtime()));
    let policy = sextant_commands::Policy::default();
    let caller = sextant_commands::Caller::Assistant;
    let v = commands
        .call(caller, LOAD_SKILL, json!({"name": "frame-parsers"}), policy)
        .await
        .unwrap();
    assert!(v["body"].as_str().unwrap().starts_with("# "));
    let e = commands
        .call(caller, LOAD_SKILL, json!({"name": "nope"}), policy)
        .await
        .unwrap_err();
    assert!(e.message.contains("frame-parsers"), "{}", e.message);
    let list = commands
        .call(caller, "meta.listCommands", json!({}), policy)
        .await
        .unwrap();
    let entry = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == LOAD_SKILL)
        .expect("listed");
    assert!(entry["summary"].as_str().unwrap().contains("frame-parsers"));
    let described = commands
        .call(
            caller,
            "meta.describeCommand",
            json!({"name": LOAD_SKILL}),
            policy,
        )
        .await
        .unwrap();
    assert_eq!(described["tier"], "safe");
    drop(door);
}

/// The content of the tool result with `id` in a request's messages.
fn result_of(body: &Value, id: &str) -> Value {
    let text = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("a result for {id}"))["content"]
        .clone();
    let text = match text {
        Value::String(s) => s,
        Value::Array(parts) => parts
            .iter()
            .map(|p| p["text"].as_str().unwrap_or(""))
            .collect(),
        other => other.to_string(),
    };
    // The result may travel in an envelope; the JSON is its last `{…}` line.
    let start = text.find('{').expect("a JSON result");
    let end = text.rfind('}').unwrap();
    serde_json::from_str(&text[start..=end]).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn a_broken_parser_fails_its_check_in_the_same_result_and_a_good_one_passes() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_verify").await;
    let door = setup(dir.path(), &server).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &chat, "set the parser").await;
    // The request right after the call carries its result, with the check folded in.
    let second = server.requests()[1].json();
    let verification = &result_of(&second, "toolu_v1")["verification"];
    assert_eq!(verification["ok"], false, "{verification}");
    assert_eq!(verification["method"], "project.frameParser.dryCompile");
    assert!(
        verification["detail"].as_str().unwrap().contains("line 3"),
        "{verification}"
    );
    // The card has the checkpoint taken before the edit.
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    assert!(history["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["kind"] == "checkpoint_created" && i["payload"]["callId"] == "toolu_v1"));

    turn(&door, &chat, "fix it").await;
    let fourth = server.requests()[3].json();
    let verification = &result_of(&fourth, "toolu_v2")["verification"];
    assert_eq!(verification["ok"], true, "{verification}");
}

#[tokio::test]
async fn auto_verify_off_runs_no_check_and_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_verify").await;
    let door = setup(dir.path(), &server).await;
    ok(&door, json!({"op": "setSettings", "autoVerify": false})).await;
    assert_eq!(
        ok(&door, json!({"op": "getSettings"})).await["autoVerify"],
        false
    );
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &chat, "set the parser").await;
    let second = server.requests()[1].json();
    let result = result_of(&second, "toolu_v1");
    assert!(result.get("verification").is_none(), "{result}");
}

#[tokio::test]
async fn a_built_in_parser_is_checked_on_the_bytes_the_source_sent_last() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_verify_config").await;
    let rt = runtime();
    let policy = sextant_commands::Policy {
        auto_approve_edits: true,
        ..sextant_commands::Policy::default()
    };
    // A simulator sending two channels as CSV lines; wait until some have arrived.
    let source = json!({"type": "simulator", "frameRateHz": 200.0, "channels": [
        {"name": "T", "waveform": "sine", "frequencyHz": 0.5, "amplitude": 1.0, "offset": 20.0, "noise": 0.0},
        {"name": "V", "waveform": "sine", "frequencyHz": 1.0, "amplitude": 0.5, "offset": 3.3, "noise": 0.0}]});
    rt.call(
        sextant_commands::Caller::Ui,
        "project.source.update",
        json!({"id": "src-1", "changes": {"connection": source}}),
        policy,
    )
    .await
    .unwrap();
    rt.call(
        sextant_commands::Caller::Ui,
        "io.connect",
        json!({}),
        policy,
    )
    .await
    .unwrap();
    let mut waited = 0;
    loop {
        let recent = rt
            .call(
                sextant_commands::Caller::Ui,
                "io.recentBytes",
                json!({}),
                policy,
            )
            .await
            .unwrap();
        if recent["bytes"].as_u64().unwrap() > 200 {
            assert_eq!(recent["hex"], false, "CSV is text: {recent}");
            break;
        }
        waited += 1;
        assert!(waited < 200, "no bytes from the simulator");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secrets = SecretStore::encrypted_file(dir.path()).unwrap();
    let door = ChatDoor::open_with(dir.path(), rt.clone(), secrets).unwrap();
    ok(
        &door,
        json!({"op": "setSettings", "provider": "anthropic", "baseUrl": server.url(),
               "model": "claude-skills", "apiKey": "sk-ant-test", "autoApproveEdits": true}),
    )
    .await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    turn(&door, &chat, "use a JSON parser").await;
    let v = &result_of(&server.requests()[1].json(), "toolu_c1")["verification"];
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["method"], "project.dryRun.endToEnd");
    assert!(
        v["detail"].as_str().unwrap().contains("parse errors"),
        "{v}"
    );
    turn(&door, &chat, "no, CSV").await;
    let v = &result_of(&server.requests()[3].json(), "toolu_c2")["verification"];
    assert_eq!(v["ok"], true, "{v}");
    assert!(
        v["detail"].as_str().unwrap().contains(" 0 parse errors")
            || v["detail"].as_str().unwrap().contains(" 1 parse errors"),
        "{v}"
    );
    rt.call(
        sextant_commands::Caller::Ui,
        "io.disconnect",
        json!({}),
        policy,
    )
    .await
    .unwrap();
}
