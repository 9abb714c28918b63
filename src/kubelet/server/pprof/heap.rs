//! Heap profiles from the process's allocator. The binary runs on jemalloc
//! sampling allocations from its first one (`src/main.rs`), as Go's runtime
//! does; `deactivate` stops and forgets the sampling when the kubelet serves
//! no profiles (enableProfilingHandler or enableDebuggingHandlers off), and
//! `heap_profile` dumps what is live now as a gzipped pprof protobuf with
//! `inuse_space` samples by address: `go tool pprof <kubelet binary> heap`
//! names the functions (symbolizing in the process would keep the parsed
//! debug info in memory for good).
//! In a process on another allocator (the library's unit tests) the
//! profiler is unavailable and says so.

use jemalloc_pprof::PROF_CTL;

/// A heap profile that could not be taken or started.
#[derive(Debug, thiserror::Error)]
pub enum HeapError {
    #[error(
        "heap profiles need a profiling allocator (jemalloc with opt.prof), which this process does not run on"
    )]
    Unavailable,
    #[error("heap profiling is off in this kubelet")]
    Inactive,
    #[error("could not stop heap profiling: {0}")]
    Deactivate(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("could not write the heap profile: {0}")]
    Dump(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Stops allocation sampling and drops what was sampled (no cost left
/// behind for profiles nobody can fetch). Nothing to do without a profiler.
pub async fn deactivate() -> Result<(), HeapError> {
    let Some(ctl) = PROF_CTL.as_ref() else {
        return Ok(());
    };
    let mut ctl = ctl.lock().await;
    if !ctl.activated() {
        return Ok(());
    }
    ctl.deactivate()
        .map_err(|e| HeapError::Deactivate(Box::new(e)))
}

/// The live heap as a gzipped pprof protobuf. Blocking (writes and reads a
/// temporary file, symbolizes): call it off the async threads.
pub fn heap_profile() -> Result<Vec<u8>, HeapError> {
    let ctl = PROF_CTL.as_ref().ok_or(HeapError::Unavailable)?;
    let mut ctl = ctl.blocking_lock();
    if !ctl.activated() {
        return Err(HeapError::Inactive);
    }
    ctl.dump_pprof().map_err(|e| HeapError::Dump(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unit tests run on the system allocator: no profiler, a clear
    /// answer rather than a panic.
    #[tokio::test]
    async fn without_a_profiling_allocator_dumps_say_so() {
        assert!(deactivate().await.is_ok());
        let dump = tokio::task::spawn_blocking(heap_profile)
            .await
            .expect("join");
        assert!(matches!(dump, Err(HeapError::Unavailable)));
    }
}
