//! The binaries' allocator after `settle_allocator`: memory freed is no longer resident,
//! at once, whether it was a few big blocks or many small ones. In a process of its own
//! with the allocator declared as the binaries declare it: the settings are the whole
//! process's, and the resident size is the process's.

#[global_allocator]
static ALLOCATOR: sextant_heap::Allocator = sextant_heap::Allocator;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn freed_memory_leaves_the_resident_set_at_once() {
    use sextant_heap::{give_back_freed, settle_allocator};

    const MIB: usize = 1 << 20;
    const TOTAL: usize = 96 * MIB;

    /// The process's resident bytes (`/proc/self/statm`, in pages).
    fn resident() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: usize = statm.split(' ').nth(1).unwrap().parse().unwrap();
        // SAFETY: sysconf only reads a constant of the system.
        pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
    }

    /// Fills `TOTAL` bytes in blocks of `size`, each touched, and frees them; the resident
    /// bytes before, while held and after.
    fn hold_and_free(size: usize) -> (usize, usize, usize) {
        let before = resident();
        let blocks: Vec<Vec<u8>> = (0..TOTAL / size).map(|i| vec![i as u8 | 1; size]).collect();
        std::hint::black_box(&blocks);
        let held = resident();
        drop(blocks);
        (before, held, resident())
    }

    settle_allocator();
    // Rows: block size, whether the draining thread collects as a drained backlog does.
    let rows: &[(usize, bool)] = &[(4 * MIB, false), (64 * 1024, false), (1024, true)];
    for &(size, collect) in rows {
        let (before, held, mut after) = hold_and_free(size);
        if collect {
            give_back_freed();
            after = resident();
        }
        assert!(
            held >= before + TOTAL * 9 / 10,
            "{size}-byte blocks: {} MiB held, {} MiB before: the blocks were not resident",
            held / MIB,
            before / MIB
        );
        // Some pages stay for reuse: the allocator's own bookkeeping and a few pages per
        // size class. Nearly all of the 96 MiB must go.
        assert!(
            after <= before + 8 * MIB,
            "{size}-byte blocks: {} MiB still resident after freeing, {} MiB before",
            after / MIB,
            before / MIB
        );
    }
}
