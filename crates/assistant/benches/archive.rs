//! The archive's costs (spec 30, A2): search latency over 10 k and 100 k events spread over
//! 500 chats: with every chat's surface labels kept, and with one chat grown before each
//! search (so the search folds it again); the first search that labels all 500; how much the
//! index grows the database per 1 000 events; and what the index adds to one append.
//!
//! Percentiles are the point (a person types and waits for the list), so this is a plain
//! timing harness rather than criterion: each query set runs once per mode and the p50,
//! p95 and max are printed. Figures, never thresholds.
//!
//! The corpus is generated, seeded: English technical prose with Zipf-distributed words,
//! command names, paths, hex values and Chinese sentences, in the shapes a chat holds
//! (questions, replies, tool calls and their JSON results, an occasional compaction).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use sextant_assistant::chatlog::{ChatLog, Event, SearchFilter, SearchRequest, Surface};

const CHATS: usize = 500;

/// splitmix64: small, seeded, good enough to spread words.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const WORDS: &str = "the a to of and in is for on with it that this at by from as be are \
    was not or can temperature voltage current sensor dataset plot gauge frame parser baud \
    serial port device value values reading readings channel channels group groups widget \
    dashboard project field fields line lines byte bytes packet packets checksum header \
    delimiter timeout rate sample samples buffer overflow underflow error errors warning \
    alarm threshold limit minimum maximum average filter smoothing offset scale unit units \
    pressure humidity altitude accelerometer gyroscope magnetometer imu gps latitude longitude \
    motor speed rpm torque battery charge discharge cell cells regulator supply ground noise \
    spike drift calibration firmware bootloader flash eeprom register registers address bus \
    i2c spi uart can modbus mqtt broker topic payload json csv hex binary ascii utf8 newline \
    carriage return escape quote comma semicolon tab space column row table chart axis range \
    window history replay record recording export import file folder path name title label \
    color theme layout workspace tile tiles resize drag drop button action actions command \
    commands script lua javascript function return number string array object nil null true \
    false index count length size width height time timestamp clock tick interval period \
    frequency hertz kilohertz millisecond microsecond second minute hour day test tests bench \
    fixture oscilloscope multimeter probe thermocouple thermistor adc dac pwm duty cycle pin \
    pins gpio interrupt handler loop task queue mutex stack heap memory leak crash reset \
    watchdog power sleep wake low high level edge rising falling trigger capture compare \
    encoder decoder quadrature step stepper servo pid gain integral derivative setpoint error \
    feedback control controller loop tuning overshoot settling response steady state";

const COMMANDS: &[&str] = &[
    "tableGet",
    "projectDatasetAdd",
    "project.group.add",
    "dashboard.widget.set",
    "io.serial.open",
    "parserSetCode",
    "mqttSubscribe",
    "csvExport",
];

const CJK: &[&str] = &[
    "压缩架构把旧的对话换成摘要",
    "温度传感器的读数一直不变",
    "串口波特率设置为九六零零",
    "仪表盘上的曲线显示最近十秒",
    "解析器把每一行拆成八个字段",
    "电池电压低于阈值时报警",
];

/// Word ranks weighted 1/rank (Zipf), as cumulative weights for sampling.
struct Vocabulary {
    words: Vec<&'static str>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    fn new() -> Vocabulary {
        let words: Vec<&str> = WORDS.split_whitespace().collect();
        let mut total = 0.0;
        let cumulative = (1..=words.len())
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Vocabulary { words, cumulative }
    }
    fn word(&self, rng: &mut Rng) -> &'static str {
        let total = *self.cumulative.last().expect("words");
        let x = (rng.next() as f64 / u64::MAX as f64) * total;
        let at = self.cumulative.partition_point(|c| *c < x);
        self.words[at.min(self.words.len() - 1)]
    }
    fn prose(&self, rng: &mut Rng, words: usize) -> String {
        let mut out = String::new();
        for i in 0..words {
            if i > 0 {
                out.push(' ');
            }
            match rng.below(60) {
                0 => out.push_str(COMMANDS[rng.below(COMMANDS.len())]),
                1 => out.push_str(&format!(
                    "crates/{}/src/{}.rs",
                    self.word(rng),
                    self.word(rng)
                )),
                2 => out.push_str(&format!("0x{:04X}", rng.below(0x10000))),
                3 => out.push_str(CJK[rng.below(CJK.len())]),
                4 => out.push_str(&format!("{}", rng.below(100_000))),
                _ => out.push_str(self.word(rng)),
            }
        }
        out
    }
}

fn chats(log: &mut ChatLog) -> Vec<i64> {
    (0..CHATS)
        .map(|i| log.create_chat(&format!("bench chat {i}")).unwrap())
        .collect()
}

/// Appends `events` events over the chats, round-robin in bursts (as chats grow side
/// by side); a chat gets a compaction of its first half once it passes 40 events.
fn fill(log: &mut ChatLog, chats: &[i64], vocab: &Vocabulary, rng: &mut Rng, events: usize) {
    let mut lengths = vec![0u64; CHATS];
    let mut compacted = vec![false; CHATS];
    let mut written = 0;
    let mut call = 0u64;
    while written < events {
        let c = rng.below(CHATS);
        let chat = chats[c];
        // A turn: a question, maybe a call and its result, a reply.
        let words = 12 + rng.below(30);
        let mut turn = vec![Event::user(vocab.prose(rng, words))];
        if rng.chance(50) {
            call += 1;
            let id = format!("toolu_{call}");
            turn.push(Event::tool_call(
                &id,
                COMMANDS[rng.below(COMMANDS.len())],
                json!({ "id": vocab.word(rng), "value": rng.below(1000) }),
            ));
            let result = json!({
                "title": vocab.prose(rng, 4),
                "datasets": (0..4).map(|_| json!({"title": vocab.word(rng), "units": vocab.word(rng), "value": rng.below(4096)})).collect::<Vec<_>>(),
                "note": vocab.prose(rng, 20),
            });
            turn.push(Event::tool_result(&id, result.to_string(), false));
        }
        let words = 20 + rng.below(60);
        turn.push(Event::assistant(vocab.prose(rng, words)));
        for event in turn {
            if written == events {
                break;
            }
            log.append(chat, &event).unwrap();
            lengths[c] += 1;
            written += 1;
        }
        if lengths[c] > 40 && !compacted[c] && written < events {
            compacted[c] = true;
            log.append(
                chat,
                &Event::Compaction {
                    through: lengths[c] / 2,
                    summary: vocab.prose(rng, 40),
                },
            )
            .unwrap();
            lengths[c] += 1;
            written += 1;
        }
    }
}

/// The queries a person types: a common word, a rarer one, two words, a command name, a
/// path, a hex value, a Chinese phrase.
fn queries(vocab: &Vocabulary, rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i % 7 {
            0 => vocab.words[20 + rng.below(20)].to_string(),
            1 => vocab.words[200 + rng.below(vocab.words.len() - 200)].to_string(),
            2 => format!("{} {}", vocab.word(rng), vocab.word(rng)),
            3 => COMMANDS[rng.below(COMMANDS.len())].to_string(),
            4 => format!("crates/{}/src", vocab.words[40 + rng.below(100)]),
            5 => format!("0x{:04X}", rng.below(0x10000)),
            _ => {
                let s: Vec<char> = CJK[rng.below(CJK.len())].chars().collect();
                let at = rng.below(s.len() - 4);
                s[at..at + 4].iter().collect()
            }
        })
        .collect()
}

fn request(query: &str, surfaces: Option<&[Surface]>) -> SearchRequest {
    SearchRequest {
        query: query.to_string(),
        filter: SearchFilter {
            surfaces: surfaces.map(|s| s.iter().copied().collect()),
            ..SearchFilter::default()
        },
        cursor: None,
        limit: Some(20),
    }
}

struct Figures {
    p50: Duration,
    p95: Duration,
    max: Duration,
    hits: usize,
}

fn percentiles(mut times: Vec<Duration>, hits: usize) -> Figures {
    times.sort();
    let at = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
    Figures {
        p50: at(0.50),
        p95: at(0.95),
        max: *times.last().expect("timed"),
        hits,
    }
}

/// Each query timed alone; with `grown`, one chat (a different one each time) gets an
/// event first, untimed, so the search folds that chat again (live use: a person searches
/// while a chat runs).
fn run(
    log: &mut ChatLog,
    chats: &[i64],
    queries: &[String],
    surfaces: Option<&[Surface]>,
    grown: bool,
) -> Figures {
    let mut times = Vec::with_capacity(queries.len());
    let mut hits = 0;
    for (i, q) in queries.iter().enumerate() {
        if grown {
            let chat = chats[(i * 7919) % chats.len()];
            log.append(chat, &Event::assistant("one more reply while searching"))
                .unwrap();
        }
        let req = request(q, surfaces);
        let start = Instant::now();
        let page = log.search_sessions(&req).unwrap();
        times.push(start.elapsed());
        hits += page.hits.len();
    }
    percentiles(times, hits)
}

fn size(path: &Path) -> u64 {
    let mut total = 0;
    for suffix in ["", "-wal"] {
        let p = format!("{}{suffix}", path.display());
        total += std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    }
    total
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it once with no flag:
    // then only a small corpus, so the harness is exercised without the long build.
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if full { &[10_000, 100_000] } else { &[2_000] };
    let dir = tempfile::tempdir().unwrap();
    let vocab = Vocabulary::new();

    println!("archive search, {CHATS} chats, 20 hits a page");
    println!("| events | mode | p50 | p95 | max | hits/query |");
    println!("|---|---|---|---|---|---|");
    for &events in sizes {
        let path = dir.path().join(format!("archive-{events}.sqlite"));
        let mut log = ChatLog::open(&path).unwrap();
        let mut rng = Rng(events as u64);
        let ids = chats(&mut log);
        let built = Instant::now();
        fill(&mut log, &ids, &vocab, &mut rng, events);
        let built = built.elapsed();
        let queries = queries(&vocab, &mut Rng(7), 210);
        // The first search after a build that labels differently folds every chat.
        log.bench_forget_surfaces();
        let start = Instant::now();
        log.search_sessions(&request(&queries[0], None)).unwrap();
        println!(
            "| {events} | first search, all {CHATS} chats labelled | {} | | | |",
            ms(start.elapsed())
        );
        let current = [Surface::Current];
        for (mode, surfaces, grown) in [
            ("all surfaces, labels kept", None, false),
            ("all surfaces, one chat grew", None, true),
            ("surface current, labels kept", Some(&current[..]), false),
            ("surface current, one chat grew", Some(&current[..]), true),
        ] {
            let f = run(&mut log, &ids, &queries, surfaces, grown);
            println!(
                "| {events} | {mode} | {} | {} | {} | {:.1} |",
                ms(f.p50),
                ms(f.p95),
                ms(f.max),
                f.hits as f64 / queries.len() as f64
            );
        }
        println!(
            "(built {events} events in {:.1} s: {:.0} µs an append)",
            built.as_secs_f64(),
            built.as_secs_f64() * 1e6 / events as f64
        );
    }

    // Growth and append cost: the same 5 000 events with the index and without.
    let events = if full { 5_000 } else { 500 };
    println!();
    println!("| index | database after {events} events | per 1 000 events | append (mean) |");
    println!("|---|---|---|---|");
    let mut sizes_seen = Vec::new();
    for indexed in [true, false] {
        let path = dir.path().join(format!("growth-{indexed}.sqlite"));
        let ids = chats(&mut ChatLog::open(&path).unwrap());
        // Closed: the WAL is checkpointed into the file, so sizes compare files alone.
        let empty = size(&path);
        let mut log = ChatLog::open(&path).unwrap();
        if !indexed {
            log.bench_skip_archive_index();
        }
        let start = Instant::now();
        fill(&mut log, &ids, &vocab, &mut Rng(99), events);
        let took = start.elapsed();
        drop(log);
        // Closing checkpoints the WAL into the file.
        let grown = size(&path) - empty;
        sizes_seen.push(grown);
        println!(
            "| {} | {:.1} MiB | {:.0} KiB | {:.0} µs |",
            if indexed { "on" } else { "off" },
            grown as f64 / (1024.0 * 1024.0),
            grown as f64 / 1024.0 / (events as f64 / 1000.0),
            took.as_secs_f64() * 1e6 / events as f64
        );
    }
    println!(
        "(the index adds {:.0} KiB per 1 000 events)",
        (sizes_seen[0] as f64 - sizes_seen[1] as f64) / 1024.0 / (events as f64 / 1000.0)
    );
}
