//! The assistant's per-request overhead: the time and bytes it takes to turn a long chat
//! into one model request with every mechanism on, for a chat of 1 000 and of 10 000
//! events. Every model request is rebuilt from the log (fold, compaction, the history
//! transforms, the budget), with the system array read afresh (live state, memory index,
//! handoff digest) and the tool surface narrowed, so this is what a person waits for before
//! the provider sees a byte – once per request, several times per turn.
//!
//! The whole path is the product's: a `ChatDoor` over a data folder, the real runtime with a
//! saved project (Serial Studio's `multi-source` fixture, imported), MiniLM for the memory
//! when its files are found (as the app finds them: `SEXTANT_EMBEDDING_MODEL_DIR`, set here
//! from `$CARGO_TARGET_DIR/models/all-minilm-l6-v2` or `<workspace>/target/models/…` when
//! unset; otherwise the lexicon embedder – the output says which), and the scripted
//! Anthropic server over real HTTP on 127.0.0.1. The chat is built through the `ChatLog`
//! API: a handoff-seeded chat (its source chat in the same project), then turns of a
//! question, a read call, its ~400-byte result and an answer, a citation of the source chat
//! near the end, memory facts (install-wide and the project's), and the question left
//! unanswered. One real turn first lets the product compact the chat if it is over its
//! budget (the scripted server writes the summary), as a chat of that length would have been.
//!
//! - `request/first_request/N`: `ChatService::retry` until the scripted server has received
//!   the request body (its recorded arrival time): building the turn (the mechanism table,
//!   tools, system array with the live state and the memory index), the compaction check
//!   and the request itself, the provider client, serializing and posting the body over
//!   loopback. A retry answers the chat's last message without adding one; the server then
//!   refuses the request, so each turn ends at once and the visible history never grows
//!   (each adds one log-only `turn_failed` event). A retry reads the log twice more than a
//!   send (to see that a reply is owed, and for the message it answers).
//! - The pieces, each the product's own code on the same chat: `events/N` (reading the log),
//!   `fold/N` (`ChatLog::fold`: reading and folding), `history/N` (`Conversation::request`:
//!   the fold, the tool-result compression transforms, the budget and the narrowed tools,
//!   as every request runs them), `body/N` (`anthropic::request_body` of that request),
//!   `memory_block` (the per-request memory index: the project's path, the hybrid search of
//!   both scopes – the question is embedded once, then remembered – and the facts' touch),
//!   `query_embedding` (one embedding of a question not asked before), `live_state` (the
//!   live-state block), `client` (the provider client each turn builds).
//!
//! The request body's bytes (and where they are: system, per-request blocks, tools,
//! messages) are printed before the figures, and so is the first request on a freshly
//! opened door (nothing of the log kept yet, the question not embedded before): once per
//! chat after the app starts.
//!
//! `cargo bench -p sextant-assistant-runtime-tests --bench request`

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::{json, Value};
use sextant_assistant::chatlog::{
    ChatId, ChatLog, CitedBy, Event, HitRef, SearchFilter, SearchRequest, Visibility,
};
use sextant_assistant::compaction::COMPACTION_PROMPT;
use sextant_assistant::compress::{CompressToolResults, ReferenceReads, SupersededReads};
use sextant_assistant::context::Envelope;
use sextant_assistant::conversation::{Conversation, Prompt, Settings};
use sextant_assistant::door::{ChatDoor, CHATS_FILE, MEMORY_FILE};
use sextant_assistant::intent::Intents;
use sextant_assistant::memory::{Memory, MemoryBlock};
use sextant_assistant::pipeline::{CallerInfo, Pipeline, RuntimeExecutor};
use sextant_assistant::retrieval::Retrieval;
use sextant_assistant::seams::{HistoryTransform, LiveStateBlock, PromptContributor, Seams};
use sextant_assistant::tools::{ToolSet, DISCOVERY, ESSENTIAL};
use sextant_assistant::Commands;
use sextant_commands::{CommandDoor, Policy, Tier};
use sextant_providers::anthropic::request_body;
use sextant_providers::script::{Script, ScriptServer};
use sextant_providers::{AnthropicClient, AnthropicConfig, ApiKey, Client};
use sextant_runtime::{Runtime, RuntimeHandle, Workspace};

const MODEL: &str = "claude-sonnet-4-5";

/// The message every measured request answers (the chat's last).
const QUESTION: &str = "The temperature plot on the dashboard jumps every few seconds. Is the \
    frame parser splitting the CSV line wrong, or is the serial baud rate off?";

/// The model's summary when the product compacts the chat.
const SUMMARY: &str = "1. The person is bringing up the telemetry of a rover on the bench: a \
    logger on a serial port and a second source for the IMU, plotted on the dashboard. They \
    asked why the temperature and voltage plots show spikes, and whether the frame parser \
    reads the right slots.\n2. The assistant read the datasets, the frame parser, the I/O \
    status and the latest frames many times; no edit was made. The parser splits on commas \
    and the frame ends with a newline. Open question: readings that jump every few seconds.\n\
    3. Datasets: temperature (slot 3, °C), battery voltage (slot 1, V), motor current (slot \
    2, A). The logger runs at 115200 baud.\nTopics and keywords to preserve: temperature, \
    spikes, frame parser, baud rate, serial, dataset, slot, dashboard, IMU, voltage";

/// Install-wide facts, then the project's (`memoryAdd` as the person's Remember does).
const FACTS: &[(&str, &str)] = &[
    ("preference", "I prefer hexadecimal in the terminal view."),
    ("preference", "Use SI units with a space before the unit."),
    (
        "preference",
        "Keep answers short and say which commands you ran.",
    ),
    (
        "preference",
        "Plot temperatures in Celsius, never Fahrenheit.",
    ),
    (
        "preference",
        "Name new datasets in lower case with underscores.",
    ),
    (
        "correction",
        "The IMU is on the second serial port, not the first.",
    ),
    (
        "correction",
        "Do not reset the dashboard layout when adding a plot.",
    ),
    (
        "correction",
        "A checksum error is not a baud rate problem by itself.",
    ),
    (
        "reference",
        "The BME280 datasheet is in the team wiki under Sensors.",
    ),
    (
        "reference",
        "The rover's wiring diagram is in docs/wiring.pdf.",
    ),
    (
        "reference",
        "The firmware's frame format is described in fw/FRAMES.md.",
    ),
    (
        "reference",
        "The motor driver is a DRV8871; its current sense is 0.1 V per A.",
    ),
    ("project", "The logger runs at 115200 baud, 8N1."),
    ("project", "Slot 3 is the motor temperature in °C."),
    (
        "project",
        "The frame ends with a newline and has no checksum.",
    ),
    (
        "project",
        "The voltage dataset needs a scale of 0.01 to read volts.",
    ),
    (
        "project",
        "Spikes in the temperature plot came from a loose thermistor once.",
    ),
    ("project", "The IMU source sends 50 frames a second."),
];

/// The read calls of the generated turns (real Safe commands), in rotation.
const READS: &[&str] = &[
    "project.dataset.get",
    "io.status",
    "dashboard.latestFrame",
    "project.frameParser.get",
    "project.get",
    "io.recentBytes",
];

const WORDS: &[&str] = &[
    "the",
    "a",
    "to",
    "of",
    "and",
    "in",
    "is",
    "for",
    "on",
    "with",
    "it",
    "that",
    "this",
    "temperature",
    "voltage",
    "current",
    "sensor",
    "dataset",
    "plot",
    "gauge",
    "frame",
    "parser",
    "baud",
    "serial",
    "port",
    "device",
    "value",
    "reading",
    "channel",
    "group",
    "widget",
    "dashboard",
    "project",
    "field",
    "line",
    "byte",
    "packet",
    "checksum",
    "header",
    "delimiter",
    "timeout",
    "rate",
    "sample",
    "buffer",
    "error",
    "warning",
    "threshold",
    "average",
    "filter",
    "offset",
    "scale",
    "unit",
    "pressure",
    "humidity",
    "imu",
    "motor",
    "battery",
    "noise",
    "spike",
    "drift",
    "calibration",
    "firmware",
    "register",
    "uart",
    "mqtt",
    "csv",
    "hex",
    "newline",
    "column",
    "axis",
    "window",
    "replay",
    "export",
    "slot",
];

/// splitmix64: seeded, so every run builds the same chat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Words up to about `bytes` bytes.
    fn text(&mut self, bytes: usize) -> String {
        let mut out = String::new();
        while out.len() < bytes {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(WORDS[(self.next() % WORDS.len() as u64) as usize]);
        }
        out
    }
}

/// `turns` turns of a question, a read call, its ~400-byte result and an answer.
fn append_turns(log: &mut ChatLog, chat: ChatId, turns: usize, rng: &mut Rng, tag: &str) {
    for t in 0..turns {
        let name = READS[t % READS.len()];
        let args = match name {
            "project.dataset.get" => json!({"id": format!("ds-{}", rng.next() % 12)}),
            "io.recentBytes" => json!({"bytes": 256}),
            _ => json!({}),
        };
        let id = format!("toolu_{tag}{t}");
        let question = format!("{}?", rng.text(120));
        let result = json!({"command": name, "turn": t, "text": rng.text(340)}).to_string();
        let answer = format!("{}.", rng.text(300));
        log.append(chat, &Event::user(question)).unwrap();
        log.append(chat, &Event::tool_call(&id, name, args))
            .unwrap();
        log.append(chat, &Event::tool_result(&id, result, false))
            .unwrap();
        log.append(chat, &Event::assistant(answer)).unwrap();
    }
}

/// An Anthropic error the client does not retry: the turn ends as soon as the body is in.
fn refusal() -> Value {
    json!({"status": 400, "json": {"type": "error", "error": {"type": "invalid_request_error",
        "message": "the benchmark's server answers no request"}}})
}

fn refusals(n: usize) -> Script {
    common::script_of((0..n).map(|_| refusal()).collect())
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the app would find MiniLM on this machine (see the module docs); sets
/// `SEXTANT_EMBEDDING_MODEL_DIR` so the door's own search finds it.
fn find_model() {
    if std::env::var_os("SEXTANT_EMBEDDING_MODEL_DIR").is_some() {
        return;
    }
    let found = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace().join("target")])
        .map(|target| target.join("models/all-minilm-l6-v2"))
        .find(|dir| dir.join("model.safetensors").is_file());
    if let Some(dir) = found {
        std::env::set_var("SEXTANT_EMBEDDING_MODEL_DIR", dir);
    }
}

/// One chat, ready to answer its last message.
struct Fixture {
    _dir: tempfile::TempDir,
    data: PathBuf,
    door: ChatDoor,
    runtime: RuntimeHandle,
    chat: ChatId,
    /// The request's system blocks and tools, in bytes.
    prompt_bytes: usize,
}

impl Fixture {
    fn point_at(&self, server: &ScriptServer) {
        let service = self.door.service();
        let mut settings = service.settings();
        settings.base_url = server.url();
        service.set_settings(settings);
    }

    /// Runs one turn that ends at its first request (refused by the server); when it began.
    async fn turn(&self) -> Instant {
        let start = Instant::now();
        let turn = self
            .door
            .service()
            .retry(self.chat)
            .await
            .expect("a reply is owed");
        turn.wait().await.expect("the turn ends");
        start
    }

    /// The first request of the chat on a freshly opened door, as after the app starts and
    /// before the panel has shown the chat: nothing of the log is kept yet, and the
    /// question's embedding is not remembered (the embedder itself has loaded, as the door
    /// does while the person types). The median of `runs`, each on its own door.
    async fn cold_first_request(&self, runs: usize) -> Duration {
        let mut took = Vec::with_capacity(runs);
        for _ in 0..runs {
            let door = common::open_with(&self.data, self.runtime.clone());
            // The door loads the embedder as it opens; a person types for longer than that.
            while !door.retrieval().is_loaded() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let server = ScriptServer::start(refusals(1)).await;
            let service = door.service();
            let mut settings = service.settings();
            settings.base_url = server.url();
            service.set_settings(settings);
            let start = Instant::now();
            let turn = service.retry(self.chat).await.expect("a reply is owed");
            turn.wait().await.expect("the turn ends");
            let requests = server.requests();
            assert_eq!(requests.len(), 1, "one request, no compaction");
            took.push(requests[0].at - start);
        }
        took.sort();
        took[took.len() / 2]
    }

    /// `iters` turns against a fresh server; the sum of the times from each turn's start to
    /// the server having its request's body, and the last body. Checks that each turn made
    /// exactly one request (no compaction).
    async fn first_requests(&self, iters: usize) -> (Duration, Vec<u8>) {
        let server = ScriptServer::start(refusals(iters)).await;
        self.point_at(&server);
        let mut starts = Vec::with_capacity(iters);
        for _ in 0..iters {
            starts.push(self.turn().await);
        }
        let requests = server.requests();
        assert_eq!(requests.len(), iters, "one request per turn, no compaction");
        let total = requests.iter().zip(&starts).map(|(r, s)| r.at - *s).sum();
        (
            total,
            requests.last().map(|r| r.body.clone()).unwrap_or_default(),
        )
    }
}

async fn setup(events: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ssproj =
        std::fs::read_to_string(workspace().join("fixtures/serial-studio/multi-source.ssproj"))
            .unwrap();
    let project = sextant_import::import_serial_studio(&ssproj)
        .expect("the fixture imports")
        .project;
    let file = dir.path().join("rover.json");
    std::fs::write(&file, project.to_json_string()).unwrap();
    let runtime = Runtime::new(Workspace::opened(project, file)).spawn(None);
    let data = dir.path().join("assistant");
    let door = common::open_with(&data, runtime.clone());
    common::ok(
        &door,
        json!({"op": "setSettings", "provider": "anthropic", "baseUrl": "http://127.0.0.1:9",
               "model": MODEL, "apiKey": "sk-ant-bench"}),
    )
    .await;
    let settings = door.service().settings();
    let mechanisms = serde_json::to_value(settings.mechanisms).unwrap();
    assert!(
        settings.docs_block
            && settings.live_state
            && mechanisms
                .as_object()
                .unwrap()
                .values()
                .all(|on| on == true),
        "every mechanism on: {mechanisms}"
    );
    for (category, text) in FACTS {
        common::ok(
            &door,
            json!({"op": "memoryAdd", "category": category, "text": text}),
        )
        .await;
    }
    let project_path = door
        .service()
        .open_project()
        .await
        .expect("a saved project");

    // The chat the big one was handed off from, in the same project.
    let mut rng = Rng(events as u64);
    let mut log = ChatLog::open(data.join(CHATS_FILE)).unwrap();
    let source = log
        .create_chat_in("Serial bring-up", Some(&project_path))
        .unwrap();
    log.append(
        source,
        &Event::user("The logger's baud rate is 115200 and the frame parser splits on commas."),
    )
    .unwrap();
    log.append(
        source,
        &Event::assistant("Noted: 115200 baud, and the frame parser splits each line on commas."),
    )
    .unwrap();
    append_turns(&mut log, source, 10, &mut rng, "src");
    let chat = door
        .service()
        .new_chat_from_handoff(source, Some("Temperature spikes"))
        .unwrap();
    // seed + turns + citation (2 events) + the question = `events`.
    let turns = (events - 4) / 4;
    append_turns(&mut log, chat, turns - 5, &mut rng, "");
    // The source chat is the project's only chat (the handed-off one has none).
    let visibility = Visibility::Project {
        project: Some(project_path.clone()),
    };
    let page = log
        .search_sessions(&SearchRequest {
            query: "baud rate frame parser".into(),
            filter: SearchFilter {
                visibility: visibility.clone(),
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    let hits: Vec<HitRef> = page
        .hits
        .iter()
        .filter(|h| h.chat == source)
        .take(2)
        .map(|h| HitRef {
            chat: h.chat,
            seq: h.seq,
        })
        .collect();
    assert!(!hits.is_empty(), "the source chat is found");
    log.cite(chat, &hits, CitedBy::Person, &visibility).unwrap();
    append_turns(&mut log, chat, 5, &mut rng, "late");
    log.append(chat, &Event::user(QUESTION)).unwrap();
    let logged = log.events(chat).unwrap().len();

    // One real turn: a chat this long is over its budget, and the product compacts it
    // (the scripted model writes the summary) before the turn's request, which is refused.
    let fixture = Fixture {
        _dir: dir,
        data,
        door,
        runtime,
        chat,
        prompt_bytes: 0,
    };
    let server = ScriptServer::start(common::script_of(vec![
        common::anthropic_text(SUMMARY),
        refusal(),
        refusal(),
    ]))
    .await;
    fixture.point_at(&server);
    let turn = fixture.door.service().retry(chat).await.unwrap();
    turn.wait().await.unwrap();
    let compacted = server.requests()[0].json()["system"][0]["text"] == COMPACTION_PROMPT;
    if !compacted {
        // Under budget: the summary was the answer; ask again so a reply is owed.
        let server = ScriptServer::start(refusals(3)).await;
        fixture.point_at(&server);
        let turn = fixture.door.service().send(chat, QUESTION).await.unwrap();
        turn.wait().await.unwrap();
    }

    let (took, body) = fixture.first_requests(1).await;
    let body: Value = serde_json::from_slice(&body).unwrap();
    let bytes = |v: &Value| v.to_string().len();
    let per_request = common::per_request_blocks(&body);
    let messages = body["messages"].as_array().unwrap();
    eprintln!(
        "{events} events: {logged} in the log{}; request body {} B = system {} B, \
         per-request blocks {} B (live state, memory, handoff…), tools {} B ({} tools), \
         messages {} B ({} messages); one request took {took:?}",
        if compacted {
            ", compacted by the product before the first request"
        } else {
            ", not over its budget (no compaction)"
        },
        bytes(&body),
        bytes(&body["system"]),
        per_request.iter().map(bytes).sum::<usize>(),
        bytes(&body["tools"]),
        body["tools"].as_array().map_or(0, Vec::len),
        bytes(&body["messages"]),
        messages.len(),
    );
    // The fixed part as tool-result compression weighs it (its `prompt_bytes`): the system
    // blocks' texts, wherever the body puts them, and the tools.
    let texts: usize = common::prompt_blocks(&body)
        .iter()
        .filter_map(|b| b["text"].as_str())
        .map(str::len)
        .sum();
    let tools: usize = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["name"].as_str().map_or(0, str::len)
                + t["description"].as_str().map_or(0, str::len)
                + t["input_schema"].to_string().len()
        })
        .sum();
    Fixture {
        prompt_bytes: texts + tools,
        ..fixture
    }
}

fn bench(c: &mut Criterion) {
    find_model();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fixtures: Vec<(usize, Fixture)> = [1_000, 10_000]
        .into_iter()
        .map(|n| (n, rt.block_on(setup(n))))
        .collect();

    for (n, fx) in &fixtures {
        let cold = rt.block_on(fx.cold_first_request(5));
        eprintln!(
            "{n} events: the first request on a freshly opened door (the embedder loaded, the \
             whole log read and folded once, the question embedded) took {cold:?} (median of 5)"
        );
    }

    let mut group = c.benchmark_group("request");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (n, fx) in &fixtures {
        group.bench_with_input(BenchmarkId::new("first_request", n), fx, |b, fx| {
            b.iter_custom(|iters| rt.block_on(fx.first_requests(iters as usize)).0)
        });
    }
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    for (n, fx) in &fixtures {
        let log = ChatLog::open(fx.data.join(CHATS_FILE)).unwrap();
        group.bench_with_input(BenchmarkId::new("events", n), &fx.chat, |b, &chat| {
            b.iter(|| log.events(chat).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("fold", n), &fx.chat, |b, &chat| {
            b.iter(|| log.fold(chat).unwrap())
        });
        let (conversation, prompt) = history_request(fx);
        group.bench_function(BenchmarkId::new("history", n), |b| {
            b.iter(|| conversation.request(&prompt).unwrap())
        });
        let request = conversation.request(&prompt).unwrap();
        eprintln!(
            "{n} events: the history request's body (narrowed tools, no system) is {} B",
            request_body(&request).len()
        );
        group.bench_function(BenchmarkId::new("body", n), |b| {
            b.iter(|| request_body(&request))
        });
    }

    // What does not depend on the chat's length, on the first chat's folder.
    let fx = &fixtures[0].1;
    let commands: Commands = Arc::new(fx.runtime.clone());
    let retrieval = Arc::new(Retrieval::open(&fx.data));
    let embedder = retrieval.embedder();
    eprintln!("memory embedder: {}", embedder.profile().id);
    let envelope = Envelope::random();
    let memory = MemoryBlock {
        memory: Arc::new(Memory::new(fx.data.join(MEMORY_FILE), retrieval.clone())),
        commands: commands.clone(),
        message: QUESTION.to_string(),
        chat: fx.chat,
    };
    let facts = rt.block_on(memory.block(&envelope));
    eprintln!("memory block: {} B", facts.as_deref().map_or(0, str::len));
    group.bench_function("memory_block", |b| {
        b.iter(|| rt.block_on(memory.block(&envelope)))
    });
    // A question not asked before each time: the embedder remembers recent ones (the
    // memory asks once per scope, and again each request of a turn), which cost nothing.
    let mut asked = 0u64;
    group.bench_function("query_embedding", |b| {
        b.iter(|| {
            asked += 1;
            embedder.embed(&[&format!("{QUESTION} ({asked})")]).unwrap()
        })
    });
    let live = LiveStateBlock {
        commands: commands.clone(),
        chat: fx.chat,
    };
    group.bench_function("live_state", |b| {
        b.iter(|| rt.block_on(live.block(&envelope)))
    });
    group.bench_function("client", |b| b.iter(client));
    group.finish();
}

/// The provider client a turn builds (`ServiceSettings::client`).
fn client() -> Client {
    let mut config = AnthropicConfig::new(ApiKey::new("sk-ant-bench"));
    config.base_url = "http://127.0.0.1:9".into();
    Client::Anthropic(AnthropicClient::new(config).unwrap())
}

/// A conversation over the chat with the history seams every mechanism adds (tool-result
/// compression's three transforms, intent narrowing's tool filter), and a prompt of the
/// offered tools: `Conversation::request` then does what every request does to the log.
fn history_request(fx: &Fixture) -> (Conversation<Client>, Prompt) {
    let commands: Commands = Arc::new(fx.runtime.clone());
    let offered: Vec<&str> = ESSENTIAL.iter().chain(DISCOVERY).copied().collect();
    let tools = ToolSet::with_commands(commands.specs(), &offered).unwrap();
    let prompt = Prompt::new(Vec::new(), tools.definitions().to_vec());
    let history: Vec<Arc<dyn HistoryTransform>> = vec![
        Arc::new(ReferenceReads),
        Arc::new(SupersededReads {
            reads: commands
                .specs()
                .iter()
                .filter(|spec| spec.tier == Tier::Safe)
                .map(|spec| spec.name.clone())
                .collect(),
        }),
        Arc::new(CompressToolResults {
            prompt_bytes: fx.prompt_bytes,
        }),
    ];
    let seams = Seams {
        tools: vec![Arc::new(Intents::shipped().narrowing(QUESTION))],
        history,
        ..Seams::default()
    };
    let log = Arc::new(Mutex::new(ChatLog::open(fx.data.join(CHATS_FILE)).unwrap()));
    let conversation = Conversation::new(
        client(),
        log,
        fx.chat,
        Arc::new(Pipeline::new(RuntimeExecutor::new(fx.runtime.clone()))),
        CallerInfo::assistant(Policy::default()),
        Settings::new(MODEL),
    )
    .with_seams(seams);
    (conversation, prompt)
}

criterion_group!(benches, bench);
criterion_main!(benches);
