//! The one tokio runtime a kubelet process runs on (the kubelet and the
//! hollow nodes alike): worker threads one per CPU, the blocking pool
//! (file and mount work, `tokio::fs`) at tokio's defaults, so that no
//! blocked system call waits for another, as none does under Go's runtime.
//! (Bounding the pool to 16 threads lowered the RSS peak of a 100-pod
//! batch by 1–7 MiB; its effect on start latency was within the runs'
//! noise.)
//!
//! The blocking pool's threads allocate without jemalloc's per-thread
//! cache. A pool that grew during a batch of pod starts does not shrink
//! while blocking work keeps arriving (each call wakes the longest idle
//! thread, so none stays idle for the keep-alive), and each idle thread's
//! cache kept its freed memory: with 100 pods, 14 such threads held about
//! 6 MiB (bench/density.sh, steady RSS 51.3 → 45 MiB without them). The
//! worker threads, where nearly all allocations happen, keep theirs: a
//! thread turns its cache on the first time it parks as a worker.

use std::cell::Cell;

thread_local! {
    static CACHE_ON: Cell<bool> = const { Cell::new(true) };
}

/// Turns the calling thread's jemalloc cache on or off (off flushes it).
/// Where the process allocates with another allocator, this only touches
/// jemalloc's own unused state.
fn set_thread_cache(on: bool) {
    CACHE_ON.with(|c| {
        if c.get() == on {
            return;
        }
        // SAFETY: "thread.tcache.enabled" is a documented read-write bool
        // key of jemalloc 5, and the value written is a bool.
        let written = unsafe { tikv_jemalloc_ctl::raw::write(b"thread.tcache.enabled\0", on) };
        if written.is_ok() {
            c.set(on);
        }
    });
}

/// The multi-threaded runtime with IO and time enabled.
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Every pool thread starts without a cache; only workers park.
        .on_thread_start(|| set_thread_cache(false))
        .on_thread_park(|| set_thread_cache(true))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_enabled() -> bool {
        // SAFETY: as in set_thread_cache, a bool key read as a bool.
        unsafe { tikv_jemalloc_ctl::raw::read::<bool>(b"thread.tcache.enabled\0") }.unwrap_or(true)
    }

    #[test]
    fn blocking_threads_run_without_a_cache_and_workers_with_one() {
        let rt = build().expect("runtime");
        let (blocking, worker) = rt.block_on(async {
            let blocking = tokio::task::spawn_blocking(cache_enabled)
                .await
                .expect("blocking");
            // A spawned task runs on a worker, which has parked by now.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let worker = tokio::spawn(async { cache_enabled() })
                .await
                .expect("worker");
            (blocking, worker)
        });
        assert!(!blocking, "a blocking-pool thread keeps no cache");
        assert!(worker, "a worker thread keeps its cache");
    }
}
