//! The process allocator's settings, applied by each binary first thing in `main`, before
//! it starts a thread.
//!
//! Why: glibc's malloc serves a block of 128 KiB or more with a mapping of its own, but each
//! time such a mapped block is freed it raises that threshold to the freed block's size (up
//! to 32 MiB). After the first display frame of a few MiB is freed, every later one comes
//! from the allocating thread's arena heap instead, and an arena gives memory back only
//! from its top. The big transient buffers of a busy session (display frames for each
//! subscriber, session blocks, queues that fill while a disk or a browser falls behind)
//! then leave each arena a little larger every time one of them peaks, in whichever arena
//! the thread doing it had: the backend of an hour-long soak at 100 000 frames/s rose in
//! steps, spread over several arenas, and never came back down (`docs/benchmarks.md`,
//! "Soak"). A fixed threshold keeps big buffers in mappings that are returned whole when
//! freed; a cap on arenas keeps the small ones from spreading over one arena per thread
//! that ever ran.

/// Blocks this large or larger are mapped on their own and unmapped when freed.
pub const MMAP_THRESHOLD: usize = 256 * 1024;

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
