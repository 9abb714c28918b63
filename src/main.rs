//! The `kubelet` binary. The pipeline lives in the library (`kubelet::app`).

use std::process::ExitCode;

/// jemalloc: less fragmentation than glibc's arenas under many threads, and
/// heap profiles for /debug/pprof/heap.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before the first allocation: heap profiling on
/// from the start, one sample per 512 KiB allocated on average (Go's
/// MemProfileRate); the kubelet turns it off when enableProfilingHandler
/// (or the debugging handlers) say no (`kubelet::server::pprof::heap`).
/// Two arenas instead of four per CPU: the kubelet allocates little and
/// from few threads at once, and each arena keeps its own partly used
/// pages (1.3 MiB less with 100 pods on 2 CPUs, bench/density.sh).
#[allow(non_upper_case_globals)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8] = b"prof:true,prof_active:true,lg_prof_sample:19,narenas:2\0";

fn main() -> anyhow::Result<ExitCode> {
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("another rustls crypto provider is already installed"))?;
    Ok(ExitCode::from(kubelet::app::command::execute(
        std::env::args_os(),
    )))
}
