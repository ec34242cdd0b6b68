//! What the live run's tail costs the pipeline thread per chunk: it keeps each source's
//! newest raw bytes (for `io.recentBytes`) under the same lock the frame tail uses.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sextant_runtime::tail::Tail;
use sextant_telemetry::{Chunk, FrameSink, Timestamp};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("tail_chunk");
    for size in [64usize, 1024, 16 * 1024] {
        let chunk = Chunk {
            data: bytes::Bytes::from(vec![b'7'; size]),
            timestamp: Timestamp::default(),
        };
        let tail = Tail::default();
        let mut sink = tail.sink();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &chunk, |b, chunk| {
            b.iter(|| sink.chunk(0, chunk))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
