//! The process allocator: which one the binaries use ([`Allocator`]), its settings, applied
//! by each binary first thing in `main` ([`settle_allocator`]), and giving back the memory
//! a backlog held once a writer has drained it ([`Backlog`]).
//!
//! Why mimalloc: glibc's malloc returns memory only from the top of each arena, so blocks
//! freed below one still in use stay resident for as long as the process runs. The settings
//! and the give-back below kept that in check, but over an hour's soak at 100 000 frames/s
//! the backend still wandered by ±7 % (±15 % with one give-back), its main heap mostly
//! free pages (`docs/benchmarks.md`, "Soak"). mimalloc keeps blocks of one size together in
//! small pages and returns a page to the system once its last block is freed, wherever it
//! lies. Its purge delay is set to 0: with its default second, whatever the busy threads
//! freed in the last second (display frames for each subscriber, session blocks) stayed
//! resident, and the backend sampled once a minute moved by ±6 %. It is built without
//! transparent huge pages, which kept a 2 MiB page resident whole for one live block.
//! Only Rust's allocations: the C libraries (SQLite, QuickJS), and in the desktop app the
//! webview's, keep the system's malloc.
//!
//! Why the glibc settings still: glibc's malloc serves a block of 128 KiB or more with a
//! mapping of its own, but each time such a mapped block is freed it raises that threshold
//! to the freed block's size (up to 32 MiB), after which every later one comes from an arena
//! heap, which gives memory back only from its top. A fixed threshold keeps big buffers of
//! the C libraries and of any binary without [`Allocator`] (tests, benches) in mappings that
//! are returned whole when freed; a cap on arenas keeps the small ones from spreading over
//! one arena per thread that ever ran.
//!
//! Why [`Backlog`]: what a queue holds while its writer is behind (a disk that stalls for a
//! second) is many small blocks. Once written they are free, but a page with one block
//! still in use stays. A drained backlog of 8 MiB or more has the draining thread's pages
//! collected (`mi_collect`) and glibc's arenas trimmed (`malloc_trim`, which holds each
//! arena's lock while it walks it, so it is run once after a large backlog drains, not on
//! a timer: a 10 s trimmer was tried and dropped for that lock).

use std::time::{Duration, Instant};

/// Blocks this large or larger are mapped on their own and unmapped when freed.
pub const MMAP_THRESHOLD: usize = 256 * 1024;

/// A queue that held at least this many bytes, then emptied, has its memory given back.
pub const BACKLOG_BYTES: usize = 8 << 20;

/// At most one give-back per queue in this long: a writer that keeps falling behind and
/// catching up would otherwise take the arenas' locks every time.
pub const BACKLOG_EVERY: Duration = Duration::from_secs(5);

/// The allocator each binary declares as Rust's global one:
/// `#[global_allocator] static ALLOCATOR: sextant_heap::Allocator = sextant_heap::Allocator;`
pub use mimalloc::MiMalloc as Allocator;

/// `mi_option_purge_delay` in mimalloc's `mi_option_e`; `libmimalloc-sys` names no constant
/// for it. A wrong index would fail `tests/allocator.rs`: freed pages would stay resident.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc returns a page to the system as soon as its last block is freed: the purge
/// delay in milliseconds.
pub const PURGE_DELAY_MS: i64 = 0;

/// Sets [`Allocator`]'s purge delay to [`PURGE_DELAY_MS`]; for glibc's malloc, applies
/// [`MMAP_THRESHOLD`] and caps the arenas at the cores available (at least 2). Whether
/// glibc took its settings (only glibc's malloc does; elsewhere it is left as it is).
pub fn settle_allocator() -> bool {
    // SAFETY: options are plain integers mimalloc reads as it works; this one is in the
    // range it documents (0: purge at once).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS as _) };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        // SAFETY: mallopt only changes the allocator's parameters; both values are in
        // the ranges glibc documents.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1
                && libc::mallopt(libc::M_ARENA_MAX, cores.max(2) as libc::c_int) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Returns free memory to the system: this thread's free pages in [`Allocator`], whatever
/// mimalloc had yet to purge, and every glibc arena's free pages. Whether glibc returned
/// any (mimalloc does not say).
pub fn give_back_freed() -> bool {
    // SAFETY: collects only what the calling thread's heap holds free.
    unsafe { libmimalloc_sys::mi_collect(true) };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only releases memory the allocator holds free.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// What a queue's consumer has seen it hold since the memory was last given back.
///
/// The consumer reports the bytes still queued each time it takes an item
/// ([`Backlog::observe`]); when the queue is empty again after holding
/// [`BACKLOG_BYTES`] or more, the freed memory is given back ([`give_back_freed`]), at
/// most once per [`BACKLOG_EVERY`].
#[derive(Debug, Default)]
pub struct Backlog {
    peak: usize,
    last: Option<Instant>,
}

impl Backlog {
    pub const fn new() -> Self {
        Backlog {
            peak: 0,
            last: None,
        }
    }

    /// `held`: the bytes still queued as an item is taken. Whether the memory was given
    /// back now.
    pub fn observe(&mut self, held: usize) -> bool {
        // Cheap for the common case: most items are taken from a queue that keeps up.
        if held < BACKLOG_BYTES && (held != 0 || self.peak < BACKLOG_BYTES) {
            self.peak = self.peak.max(held);
            return false;
        }
        self.observe_at(held, Instant::now())
    }

    /// [`Backlog::observe`] at `now`; whether the give-back is due (and was asked for).
    fn observe_at(&mut self, held: usize, now: Instant) -> bool {
        self.peak = self.peak.max(held);
        if held != 0 || self.peak < BACKLOG_BYTES {
            return false;
        }
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < BACKLOG_EVERY)
        {
            // Too soon: the next time the queue empties after the pause, it is done.
            return false;
        }
        self.peak = 0;
        self.last = Some(now);
        give_back_freed();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows: (what the consumer sees queued as it takes each item, seconds after the
    /// start, and whether the memory is given back then).
    #[test]
    fn a_drained_backlog_is_given_back_once_and_a_small_one_never() {
        const MIB: usize = 1 << 20;
        type Seen = (usize, u64, bool);
        let rows: &[(&str, &[Seen])] = &[
            (
                "a queue that keeps up",
                &[
                    (MIB, 0, false),
                    (0, 0, false),
                    (2 * MIB, 1, false),
                    (0, 1, false),
                ],
            ),
            (
                "a backlog drains",
                &[
                    (9 * MIB, 0, false),
                    (4 * MIB, 0, false),
                    (0, 1, true),
                    (0, 1, false),
                ],
            ),
            (
                "a backlog not yet drained",
                &[(20 * MIB, 0, false), (MIB, 1, false)],
            ),
            (
                "exactly the threshold",
                &[(BACKLOG_BYTES, 0, false), (0, 0, true)],
            ),
            (
                "a second backlog too soon waits for the pause",
                &[
                    (9 * MIB, 0, false),
                    (0, 0, true),
                    (9 * MIB, 1, false),
                    (0, 1, false),
                    (0, 4, false),
                    (0, 5, true),
                    (0, 6, false),
                ],
            ),
            (
                "peaks add up across items, not across give-backs",
                &[
                    (9 * MIB, 0, false),
                    (0, 0, true),
                    (MIB, 10, false),
                    (0, 10, false),
                ],
            ),
        ];
        for (name, seen) in rows {
            let start = Instant::now();
            let mut backlog = Backlog::new();
            for (i, &(held, at, expected)) in seen.iter().enumerate() {
                let now = start + Duration::from_secs(at);
                assert_eq!(
                    backlog.observe_at(held, now),
                    expected,
                    "{name}: item {i} ({held} bytes held at {at} s)"
                );
            }
        }
    }

    /// The fast path of `observe` agrees with the full check whenever it decides alone.
    #[test]
    fn observe_skips_the_clock_only_where_nothing_could_be_due() {
        let mut fast = Backlog::new();
        let mut full = Backlog::new();
        let start = Instant::now();
        for held in [0, 1, BACKLOG_BYTES - 1, 5, 0, 3] {
            assert!(!fast.observe(held));
            assert!(!full.observe_at(held, start));
            assert_eq!(fast.peak, full.peak);
        }
    }
}
