//! The one tokio runtime a kubelet process runs on (the kubelet and the
//! hollow nodes alike): worker threads one per CPU, the blocking pool
//! (file and mount work, `tokio::fs`) at tokio's defaults, so that no
//! blocked system call waits for another, as none does under Go's runtime.
//! (Bounding the pool to 16 threads lowered the RSS peak of a 100-pod
//! batch by 1–7 MiB and changed little once its idle threads had exited;
//! its effect on start latency was within the runs' noise.)

/// The multi-threaded runtime with IO and time enabled.
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}
