//! The process allocator: its settings, applied by each binary first thing in `main`
//! ([`settle_allocator`]), and giving back the memory a backlog held once a writer has
//! drained it ([`Backlog`]).
//!
//! Why the settings: glibc's malloc serves a block of 128 KiB or more with a mapping of its
//! own, but each time such a mapped block is freed it raises that threshold to the freed
//! block's size (up to 32 MiB). After the first display frame of a few MiB is freed, every
//! later one comes from the allocating thread's arena heap instead, and an arena gives
//! memory back only from its top. The big transient buffers of a busy session (display
//! frames for each subscriber, session blocks, queues that fill while a disk or a browser
//! falls behind) then leave each arena a little larger every time one of them peaks, in
//! whichever arena the thread doing it had: the backend of an hour-long soak at 100 000
//! frames/s rose in steps, spread over several arenas, and never came back down
//! (`docs/benchmarks.md`, "Soak"). A fixed threshold keeps big buffers in mappings that are
//! returned whole when freed; a cap on arenas keeps the small ones from spreading over one
//! arena per thread that ever ran.
//!
//! Why [`Backlog`]: what a queue holds while its writer is behind (a disk that stalls for a
//! second) is many small blocks. Once written they are free, but they sit below blocks
//! still in use, and an arena returns only its top: the soak's backend kept 15 MiB of a
//! recording's drained backlog for as long as that recording ran. `malloc_trim` returns
//! every free page of every arena, but holds each arena's lock while it walks it, so it is
//! run once after a large backlog drains, not on a timer (a 10 s trimmer was tried and
//! dropped for that lock).

use std::time::{Duration, Instant};

/// Blocks this large or larger are mapped on their own and unmapped when freed.
pub const MMAP_THRESHOLD: usize = 256 * 1024;

/// A queue that held at least this many bytes, then emptied, has its memory given back.
pub const BACKLOG_BYTES: usize = 8 << 20;

/// At most one give-back per queue in this long: a writer that keeps falling behind and
/// catching up would otherwise take the arenas' locks every time.
pub const BACKLOG_EVERY: Duration = Duration::from_secs(5);

/// Applies [`MMAP_THRESHOLD`] and caps the arenas at the cores available (at least 2);
/// whether the allocator took them (only glibc's does; elsewhere nothing is changed).
pub fn settle_allocator() -> bool {
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

/// Returns the free pages of every arena to the system; whether any were returned. Only
/// glibc's allocator can; elsewhere this does nothing.
pub fn give_back_freed() -> bool {
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
