//! The assistant against a real llama-server (SmolLM2-135M) run with a small and a large
//! context (`-c 2048`, `-c 16384`): the server is asked what it runs, every request fits
//! it – the request sizes follow the context – and no turn fails for context, including a
//! turn that loads a skill. A person's setting above what the server takes is a request the
//! server refuses: that turn is asked again once, fitted to what the server named, and the
//! chat says so.
//!
//! Needs `SEXTANT_LLAMA_SERVER` and `SEXTANT_LLM_MODEL` (`./dev test` builds and sets
//! them); under CI a missing one fails the test, elsewhere it is a loud skip.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{ok, open};
use serde_json::{json, Value};
use sextant_assistant::door::ChatDoor;
use sextant_assistant::service::{ServiceEventKind, TurnEndKind};

const MODEL: &str = "SmolLM2-135M-Instruct";

/// One llama-server at a time: two would share two cores and each take twice as long.
static ONE_SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The path in `var`, or `None` after saying it is missing (a panic under CI).
fn component(var: &str) -> Option<PathBuf> {
    match std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.exists())
    {
        Some(p) => Some(p),
        None if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) => {
            panic!("required test component `{var}` is missing: run `./dev test`, which builds it")
        }
        None => {
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED: `{var}` is not set (run `./dev test`); this test did not run ***\n"
            );
            None
        }
    }
}

/// A llama-server on a free port of 127.0.0.1; stopped when dropped.
struct Llama {
    child: Child,
    url: String,
}

impl Llama {
    async fn start(server: &Path, model: &Path, context: u32) -> Llama {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut child = Command::new(server)
            .args(["-m", &model.display().to_string(), "--host", "127.0.0.1"])
            .args(["--port", &port.to_string(), "-c", &context.to_string()])
            .args(["-t", "2", "--cache-ram", "0", "--alias", MODEL])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("llama-server starts");
        let url = format!("http://127.0.0.1:{port}");
        for _ in 0..600 {
            if healthy(port) {
                return Llama { child, url };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("llama-server did not become healthy within 60 s");
    }
}

impl Llama {
    /// The context the server reports it runs (`/props`).
    fn n_ctx(&self) -> u32 {
        let port: u16 = self.url.rsplit(':').next().unwrap().parse().unwrap();
        let body = get(port, "/props");
        let props: Value = serde_json::from_str(&body).expect("/props is JSON");
        props["default_generation_settings"]["n_ctx"]
            .as_u64()
            .or(props["n_ctx"].as_u64())
            .expect("/props says n_ctx") as u32
    }
}

/// The JSON body of `GET path` (HTTP/1.1, closed after the answer; a chunked body's JSON
/// is what lies between its first `{` and its last `}`).
fn get(port: u16, path: &str) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if a <= b => body[a..=b].to_string(),
        _ => body.to_string(),
    }
}

/// Whether `GET /health` answers 200 (the model is loaded).
fn healthy(port: u16) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one turn showed: how it ended, and the prompt tokens of each of its requests as
/// the server counted them.
#[derive(Debug)]
struct Shown {
    end: TurnEndKind,
    detail: Option<String>,
    input_tokens: Vec<u64>,
}

async fn turn(door: &ChatDoor, chat: &Value, text: &str) -> Shown {
    let mut events = door.service().subscribe();
    ok(door, json!({"op": "send", "chat": chat, "text": text})).await;
    let mut input_tokens = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(300), events.recv())
            .await
            .expect("an event within 300 s")
            .expect("no lag");
        match event.kind {
            ServiceEventKind::Usage {
                input_tokens: fresh,
                cache_read_tokens: cached,
                ..
            } => input_tokens.push(fresh + cached),
            // A turn asked again after the server refused it ends once, at its very end.
            ServiceEventKind::TurnEnded { end, detail } => {
                return Shown {
                    end,
                    detail,
                    input_tokens,
                };
            }
            _ => {}
        }
    }
}

/// A new user's first messages, one of which loads a skill (the MQTT one).
const MESSAGES: &[&str] = &[
    "What is in the project?",
    "How do I connect to an MQTT broker that needs a username and password?",
    "Add a group called Power.",
    "Which datasets are in the project now?",
];

async fn chat_at(llama: &Llama, dir: &std::path::Path, extra: Value) -> (Vec<Shown>, Value) {
    let door = open(dir);
    // A short reply cap: what is measured is the prompt, and a 135M model's long answers
    // only cost minutes.
    let mut settings = json!({"op": "setSettings", "provider": "openai-compatible",
        "baseUrl": format!("{}/v1", llama.url), "model": MODEL, "autoApproveEdits": true,
        "maxOutputTokens": 128});
    settings
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    ok(&door, settings).await;
    let chat = ok(&door, json!({"op": "create"})).await["id"].clone();
    let mut shown = Vec::new();
    for text in MESSAGES {
        shown.push(turn(&door, &chat, text).await);
    }
    let view = ok(&door, json!({"op": "getSettings"})).await;
    let history = ok(&door, json!({"op": "history", "chat": chat})).await;
    (shown, json!({"settings": view, "history": history}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_fit_the_context_the_server_runs_and_no_turn_fails_for_it() {
    let _one_at_a_time = ONE_SERVER.lock().await;
    let (Some(server), Some(model)) = (
        component("SEXTANT_LLAMA_SERVER"),
        component("SEXTANT_LLM_MODEL"),
    ) else {
        return;
    };
    let mut largest = Vec::new();
    for context in [2048u32, 16_384] {
        let llama = Llama::start(&server, &model, context).await;
        let dir = tempfile::tempdir().unwrap();
        let (shown, seen) = chat_at(&llama, dir.path(), json!({})).await;
        eprintln!("-c {context}: {shown:?}");
        // The context the server reports running: a server may run less than `-c` (one
        // slot's share, or the model's own training length).
        let runs = llama.n_ctx();
        assert!(runs <= context, "{runs}");
        for (text, s) in MESSAGES.iter().zip(&shown) {
            assert_ne!(
                s.end,
                TurnEndKind::Failed,
                "-c {context}: `{text}` failed: {:?}",
                s.detail
            );
            for tokens in &s.input_tokens {
                assert!(
                    *tokens <= runs as u64,
                    "-c {context} (runs {runs}): a {tokens}-token prompt"
                );
            }
        }
        // The limits came from the server, and the settings say so.
        let limits = &seen["settings"]["effectiveLimits"];
        assert_eq!(
            limits["contextWindow"],
            json!({"value": runs, "from": "llamaCpp"})
        );
        largest.push(
            shown
                .iter()
                .flat_map(|s| s.input_tokens.clone())
                .max()
                .unwrap_or(0),
        );
    }
    eprintln!(
        "largest prompt: -c 2048 → {} tokens, -c 16384 → {} tokens",
        largest[0], largest[1]
    );
    assert!(
        largest[1] > largest[0],
        "the larger context carries more of the chat: {largest:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_above_what_the_server_takes_is_recovered_from_once_and_said() {
    let _one_at_a_time = ONE_SERVER.lock().await;
    let (Some(server), Some(model)) = (
        component("SEXTANT_LLAMA_SERVER"),
        component("SEXTANT_LLM_MODEL"),
    ) else {
        return;
    };
    let llama = Llama::start(&server, &model, 2048).await;
    let dir = tempfile::tempdir().unwrap();
    // The person says 16 k; the server runs 2 k and refuses what does not fit.
    let (shown, seen) = chat_at(&llama, dir.path(), json!({"contextWindow": 16_384})).await;
    eprintln!("{shown:?}");
    for (text, s) in MESSAGES.iter().zip(&shown) {
        assert_ne!(
            s.end,
            TurnEndKind::Failed,
            "`{text}` failed: {:?}",
            s.detail
        );
    }
    let items = seen["history"]["items"].as_array().unwrap();
    let reduced: Vec<&Value> = items
        .iter()
        .filter(|i| i["type"] == "notice" && i["kind"] == "context_reduced")
        .collect();
    assert!(
        !reduced.is_empty(),
        "the chat says what happened: {items:?}"
    );
    assert!(reduced[0]["payload"]["limit"].as_u64().unwrap() <= 2048);
    // From then on the server's figure wins over the setting, and the settings say why.
    let limits = &seen["settings"]["effectiveLimits"];
    assert_eq!(limits["contextWindow"]["from"], "serverRefused");
}
