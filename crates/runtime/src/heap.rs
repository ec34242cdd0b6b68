//! Giving freed heap memory back to the system in a long run.
//!
//! At 100 k frames/s the ingest, display, recording and export threads each allocate and
//! free from their own glibc arena. glibc returns memory to the system only from the top of
//! an arena, so free blocks in the middle stay resident: the process's RSS creeps up over an
//! hour and then levels off, with no live data behind it (docs/benchmarks.md, the soak).
//! `malloc_trim(0)` releases the free pages inside every arena; [`spawn_trimmer`] calls it
//! on a thread of its own every few seconds, where it costs a few milliseconds and never
//! touches the hot path. Elsewhere (another libc, another OS) it does nothing.

use std::time::Duration;

/// Starts a thread that gives freed heap pages back every `every`; for a process that runs
/// for hours (the app, `sextant serve`). Does nothing where the C library has no trim.
pub fn spawn_trimmer(every: Duration) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let spawned = std::thread::Builder::new()
            .name("heap-trim".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                // SAFETY: malloc_trim only walks glibc's own arenas under their locks.
                unsafe {
                    libc::malloc_trim(0);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("could not start the heap trimmer: {e}");
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = every;
}
