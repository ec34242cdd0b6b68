//! The context probe and the handoff through the chat door, as the panel uses them, with
//! the scripted provider server (real HTTP, Anthropic's wire format) as the model: what the
//! person sees never carries the sentinel, the banner comes from the log, a never-compliant
//! model stays silent across a restart, a fresh chat carries the old one's digest after the
//! cache breakpoint, and each setting off removes its bytes from the request.

mod common;

use common::{cached_prefix, ok, open, prompt_blocks, serve, turn, use_provider};
use serde_json::{json, Value};
use sextant_assistant::context::ROLE_TEXT;
use sextant_assistant::focus::FOCUS_EN;
use sextant_assistant::probe::{COMPLIANCE_FILE, INSTRUCTION, SENTINEL};

fn assistant_texts(history: &Value) -> Vec<String> {
    history["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "assistant")
        .map(|i| i["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_drifted_anchor_raises_the_banner_and_a_fresh_chat_carries_the_digest() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_probe").await;
    let door = open(dir.path());
    use_provider(&door, &server, "claude-probe").await;
    // The prefixes compared below are the probe's and the seed's concern; narrowing would
    // change the tools between messages of different jobs (tests/focus.rs covers that).
    ok(
        &door,
        json!({"op": "setSettings", "intentNarrowing": false}),
    )
    .await;
    let settings = ok(&door, json!({"op": "getSettings"})).await;
    assert_eq!(
        (
            settings["contextProbe"].clone(),
            settings["handoffSeeding"].clone()
        ),
        (json!(true), json!(true))
    );
    let chat = ok(&door, json!({"op": "create", "title": "IMU bench"})).await["id"].clone();

    // Healthy: the sentinel was split across four deltas; none of what streamed shows it.
    let streamed = turn(&door, &chat, "add a gauge for the IMU temperature").await;
    assert_eq!(streamed.concat(), "The gauge is ready.");
    let mut so_far = String::new();
    for delta in &streamed {
        so_far.push_str(delta);
        assert!(!so_far.contains('['), "shown mid-stream: {so_far:?}");
    }
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    assert_eq!(assistant_texts(&history), ["The gauge is ready."]);
    assert_eq!(history["degraded"], Value::Null);
    // The instruction is in the role block, before the breakpoint.
    let first = server.requests()[0].json();
    let role = first["system"][0]["text"].as_str().unwrap();
    // (after the focus section, which is on by default)
    assert_eq!(role, format!("{ROLE_TEXT}\n\n{FOCUS_EN}\n\n{INSTRUCTION}"));
    // The model's own history keeps the raw reply.

    // Mutated after known compliance: degraded at once, naming the anchor.
    turn(&door, &chat, "rename the project to Bench A").await;
    let second = server.requests()[1].json();
    assert!(
        serde_json::to_string(&second["messages"])
            .unwrap()
            .contains(SENTINEL),
        "the history sent back keeps the sentinel"
    );
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    assert_eq!(history["degraded"]["verdict"], "mutated");
    assert_eq!(history["degraded"]["drift"], "idsfresh");
    assert_eq!(assistant_texts(&history)[1], "Renamed it.");

    // Reopened (a restart): the banner is folded from the log again.
    drop(door);
    let door = open(dir.path());
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    assert_eq!(history["degraded"]["drift"], "idsfresh");

    // Start fresh chat: seeded with the digest, after the breakpoint, same cached prefix.
    let fresh = ok(
        &door,
        json!({"op": "newChatFromHandoff", "chat": chat, "title": "IMU bench (continued)"}),
    )
    .await["id"]
        .clone();
    assert_ne!(fresh, chat);
    let history = ok(&door, json!({"op": "history", "chat": fresh})).await;
    assert_eq!(
        history["degraded"],
        Value::Null,
        "a new chat starts healthy"
    );
    turn(&door, &fresh, "where were we?").await;
    let third = server.requests()[2].json();
    let system = prompt_blocks(&third);
    let breakpoint = system
        .iter()
        .position(|b| b.get("cache_control").is_some())
        .unwrap();
    let seed = system
        .iter()
        .position(|b| {
            b["text"]
                .as_str()
                .unwrap()
                .contains("source=\"previous_chat\"")
        })
        .expect("the handoff block");
    assert!(seed > breakpoint, "after the cache breakpoint");
    assert_eq!(seed, system.len() - 1, "the last block");
    let block = system[seed]["text"].as_str().unwrap();
    assert!(block.contains("Chat: IMU bench\n"), "{block}");
    assert!(
        block.contains("- add a gauge for the IMU temperature"),
        "{block}"
    );
    assert!(block.contains("- rename the project to Bench A"), "{block}");
    assert_eq!(cached_prefix(&first), cached_prefix(&third));
    // The seed is log-only: the new chat's messages are its own.
    assert_eq!(third["messages"].as_array().unwrap().len(), 1);

    // The same model, already known compliant, leaves the line out in the fresh chat:
    // degraded at once, "missing".
    turn(&door, &fresh, "thanks").await;
    let history = ok(&door, json!({"op": "history", "chat": fresh})).await;
    assert_eq!(history["degraded"]["verdict"], "missing");
    assert_eq!(history["degraded"]["drift"], Value::Null);
}

#[tokio::test]
async fn a_never_compliant_model_stays_silent_and_stays_muted_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_never_compliant").await;
    {
        let door = open(dir.path());
        use_provider(&door, &server, "tiny/local\\model").await;
        let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
        for i in 0..10 {
            turn(&door, &chat, &format!("question {i}")).await;
            let history = ok(&door, json!({"op": "history", "chat": chat})).await;
            assert_eq!(
                history["degraded"],
                Value::Null,
                "silent after reply {}",
                i + 1
            );
        }
        let kept: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(COMPLIANCE_FILE)).unwrap(),
        )
        .unwrap();
        assert_eq!(
            kept["models"]["anthropic_tiny_local_model"]["compliant"], false,
            "{kept}"
        );
    }
    // Restarted: a new chat with the same model is silent from its first reply.
    let door = open(dir.path());
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    for i in 0..2 {
        turn(&door, &chat, &format!("again {i}")).await;
    }
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    assert_eq!(history["degraded"], Value::Null);
    let verdicts: Vec<Value> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "notice" && i["kind"] == "probe_verdict")
        .map(|i| i["payload"]["verdict"].clone())
        .collect();
    assert_eq!(verdicts, [json!("muted"), json!("muted")]);
}

#[tokio::test]
async fn probe_off_and_handoff_off_remove_their_bytes_from_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_probe").await;
    let door = open(dir.path());
    use_provider(&door, &server, "claude-probe").await;
    let chat = ok(&door, json!({"op": "create", "title": "bench"})).await["id"].clone();
    turn(&door, &chat, "first").await;
    ok(
        &door,
        json!({"op": "setSettings", "contextProbe": false, "handoffSeeding": false}),
    )
    .await;
    assert_eq!(
        ok(&door, json!({"op": "getSettings"})).await["contextProbe"],
        false
    );
    // A fresh chat with seeding off is a plain one; and its requests carry no instruction.
    let fresh = ok(&door, json!({"op": "newChatFromHandoff", "chat": chat})).await["id"].clone();
    let items = ok(&door, json!({"op": "history", "chat": fresh})).await["items"].clone();
    assert_eq!(items, json!([]), "no seed event with seeding off");
    turn(&door, &fresh, "second").await;
    let on = server.requests()[0].json();
    let off = server.requests()[1].json();
    let body = serde_json::to_string(&off).unwrap();
    assert!(
        !body.contains("SXT-PROBE") && !body.contains("Context check"),
        "{body}"
    );
    assert!(!body.contains("previous_chat"), "{body}");
    assert_eq!(
        off["system"][0]["text"],
        format!("{ROLE_TEXT}\n\n{FOCUS_EN}"),
        "the role block without the instruction"
    );
    let instruction_bytes = serde_json::to_string(&on["system"][0]["text"])
        .unwrap()
        .len()
        - serde_json::to_string(&off["system"][0]["text"])
            .unwrap()
            .len();
    assert_eq!(
        instruction_bytes,
        serde_json::to_string(&format!("\n\n{INSTRUCTION}"))
            .unwrap()
            .len()
            - 2
    );
    // No verdict is logged with the probe off, even for a reply without the line.
    let history = ok(&door, json!({"op": "history", "chat": fresh})).await;
    assert!(
        !history["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["kind"] == "probe_verdict"),
        "{history}"
    );

    // Handoff on again with the probe still off: the seed block is there, and nothing else
    // of the probe.
    ok(&door, json!({"op": "setSettings", "handoffSeeding": true})).await;
    let seeded = ok(&door, json!({"op": "newChatFromHandoff", "chat": chat})).await["id"].clone();
    turn(&door, &seeded, "third").await;
    let third = server.requests()[2].json();
    let body = serde_json::to_string(&third).unwrap();
    assert!(
        body.contains("previous_chat") && !body.contains("SXT-PROBE"),
        "{body}"
    );
    assert_eq!(prompt_blocks(&third).len(), prompt_blocks(&off).len() + 1);
}

#[tokio::test]
async fn the_digest_is_byte_identical_for_the_same_log() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve("anthropic_probe").await;
    let door = open(dir.path());
    use_provider(&door, &server, "claude-probe").await;
    let chat = ok(&door, json!({"op": "create", "title": "bench"})).await["id"].clone();
    turn(&door, &chat, "add a gauge").await;
    let seed = |v: Value| -> String {
        v["items"][0]["payload"]["digest"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let a = ok(&door, json!({"op": "newChatFromHandoff", "chat": chat})).await["id"].clone();
    let b = ok(&door, json!({"op": "newChatFromHandoff", "chat": chat})).await["id"].clone();
    let da = seed(ok(&door, json!({"op": "history", "chat": a})).await);
    let db = seed(ok(&door, json!({"op": "history", "chat": b})).await);
    assert_eq!(da, db);
    assert!(da.len() <= 600);
    assert_eq!(da, "Chat: bench\nLast questions:\n- add a gauge");
    // A chat that does not exist gets a clear error and no new chat.
    let before = ok(&door, json!({"op": "list"}))
        .await
        .as_array()
        .unwrap()
        .len();
    let e = door
        .handle(json!({"op": "newChatFromHandoff", "chat": 999}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no chat 999"), "{e}");
    assert_eq!(
        ok(&door, json!({"op": "list"}))
            .await
            .as_array()
            .unwrap()
            .len(),
        before
    );
}
