//! The allocator settings each binary applies at start (`settle_allocator`): after
//! them, a big block is still mapped on its own after a bigger one was freed, which is
//! what glibc's own moving threshold stops doing. In a process of its own: the settings
//! are the whole process's.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_big_block_stays_mapped_after_a_bigger_one_was_freed() {
    use sextant_heap::{settle_allocator, MMAP_THRESHOLD};

    fn mapped_blocks() -> usize {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        unsafe { libc::mallinfo2() }.hblks
    }

    assert!(settle_allocator(), "glibc refused the settings");
    // Without the settings, freeing this raises glibc's threshold to 8 MiB.
    let big = vec![1u8; 8 << 20];
    std::hint::black_box(&big);
    drop(big);
    let before = mapped_blocks();
    let block = vec![1u8; 2 * MMAP_THRESHOLD];
    std::hint::black_box(&block);
    assert_eq!(
        mapped_blocks(),
        before + 1,
        "a block of twice the threshold came from a heap, not a mapping of its own"
    );
    drop(block);
    assert_eq!(
        mapped_blocks(),
        before,
        "the block's mapping was not returned"
    );
}
