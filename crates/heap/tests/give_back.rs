//! A drained backlog's memory goes back to the system: many small blocks freed below one
//! still in use stay resident (an arena returns only its top) until the queue's consumer
//! sees its backlog drained. In a process of its own: the allocator is the whole process's.
//! This one is glibc's, which the C libraries still allocate with; the binaries' own
//! allocator is `tests/allocator.rs`'s.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_memory_of_a_drained_backlog_leaves_the_process() {
    use sextant_heap::{settle_allocator, Backlog, BACKLOG_BYTES};

    fn resident_mib() -> f64 {
        let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
        let pages: f64 = statm
            .split_whitespace()
            .nth(1)
            .expect("resident")
            .parse()
            .expect("pages");
        // SAFETY: sysconf only reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as f64;
        pages * page / (1 << 20) as f64
    }

    assert!(settle_allocator(), "glibc refused the settings");
    let base = resident_mib();
    // A writer's backlog: 48 MiB of small rows, then a block still in use above them.
    let rows: Vec<Box<[u8]>> = (0..12_288)
        .map(|i| vec![i as u8 | 1; 4096].into_boxed_slice())
        .collect();
    let pin = std::hint::black_box(vec![7u8; 64].into_boxed_slice());
    let full = resident_mib();
    assert!(
        full - base > 40.0,
        "the backlog was never resident: {base:.1} → {full:.1} MiB"
    );
    drop(rows);
    let freed = resident_mib();
    assert!(
        freed - base > 40.0,
        "the freed rows left by themselves ({full:.1} → {freed:.1} MiB): this test shows nothing here"
    );

    let mut backlog = Backlog::new();
    assert!(
        !backlog.observe(2 * BACKLOG_BYTES),
        "given back while the queue still held rows"
    );
    assert!(backlog.observe(0), "the drained backlog was not given back");
    let after = resident_mib();
    assert!(
        freed - after > 40.0,
        "the drained backlog stayed resident: {freed:.1} → {after:.1} MiB"
    );
    drop(pin);
}
