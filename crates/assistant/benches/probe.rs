//! The probe's strip on the streaming path: every delta a person sees goes through it, over
//! the reply accumulated so far. A long reply (16 KiB, ending with the sentinel) streamed in
//! small deltas is the worst case.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sextant_assistant::probe::{StripFilter, SENTINEL};
use sextant_assistant::seams::DisplayFilter;

fn reply(bytes: usize) -> String {
    let line = "The temperature dataset reads slot 3 [°C]; the plot shows the last 10 s.\n";
    let mut text = line.repeat(bytes / line.len());
    text.push_str(SENTINEL);
    text
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("strip_stream");
    for (bytes, delta) in [(2_048, 8), (16_384, 8), (16_384, 64)] {
        let text = reply(bytes);
        let pieces: Vec<&str> = {
            let mut out = Vec::new();
            let mut at = 0;
            while at < text.len() {
                let mut end = (at + delta).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                out.push(&text[at..end]);
                at = end;
            }
            out
        };
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{bytes}B/{delta}B-deltas")),
            &pieces,
            |b, pieces| {
                b.iter(|| {
                    let mut f = StripFilter::default();
                    let mut shown = 0;
                    for p in pieces {
                        shown += f.push(p).len();
                    }
                    shown + f.finish().len()
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
