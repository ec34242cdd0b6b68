//! The chat log's costs on the request path: every model request is rebuilt from a fresh
//! fold of the whole log (nothing derived is stored), so the fold of a long chat is what a
//! turn pays per request; and one append, which each streamed call and result pays.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::json;
use sextant_assistant::chatlog::{ChatLog, Event};

/// A chat of `turns` turns, each: a question, a reply with a call, its result, an answer
/// (4 events per turn, ~400 bytes of text each like a real tool result).
fn chat(log: &mut ChatLog, turns: usize) -> i64 {
    let chat = log.create_chat("bench").unwrap();
    let text = "x".repeat(400);
    for t in 0..turns {
        let id = format!("toolu_{t}");
        log.append(chat, &Event::user(format!("question {t}: {text}")))
            .unwrap();
        log.append(
            chat,
            &Event::tool_call(&id, "project.dataset.get", json!({"id": format!("ds-{t}")})),
        )
        .unwrap();
        log.append(chat, &Event::tool_result(&id, text.clone(), false))
            .unwrap();
        log.append(chat, &Event::assistant(format!("answer {t}: {text}")))
            .unwrap();
    }
    chat
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("fold");
    for turns in [250, 2500] {
        let mut log = ChatLog::open(dir.path().join(format!("fold-{turns}.sqlite"))).unwrap();
        let id = chat(&mut log, turns);
        group.throughput(Throughput::Elements(turns as u64 * 4));
        group.bench_with_input(BenchmarkId::from_parameter(turns * 4), &id, |b, &id| {
            b.iter(|| log.fold(id).unwrap())
        });
    }
    group.finish();

    let mut log = ChatLog::open(dir.path().join("append.sqlite")).unwrap();
    let id = log.create_chat("append").unwrap();
    let text = "x".repeat(400);
    c.bench_function("append/tool-result-400B", |b| {
        b.iter(|| {
            log.append(id, &Event::tool_result("toolu_1", text.clone(), false))
                .unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
