//! A kubeconfig (--kubeconfig, --bootstrap-kubeconfig): loaded as the
//! clients load it.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

struct Env {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| Env {
        rt: tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime"),
        dir: tempfile::tempdir().expect("temp dir"),
    })
}

fuzz_target!(|data: &[u8]| {
    let env = env();
    let path = env.dir.path().join("kubeconfig");
    if std::fs::write(&path, data).is_ok() {
        let _ = env
            .rt
            .block_on(kubelet::kubelet::client::kubeconfig::load(&path));
    }
});
