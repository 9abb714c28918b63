//! A request line's path and query on 10250/10255: decoded and routed
//! over the server's path groups.
#![no_main]

use std::sync::OnceLock;

use kubelet::util::router::{Router, decode_path, handler_fn, text};
use libfuzzer_sys::fuzz_target;

fn router() -> &'static Router {
    static ROUTER: OnceLock<Router> = OnceLock::new();
    ROUTER.get_or_init(|| {
        let mut router = Router::new();
        let h = handler_fn(|_req| async move { text(http::StatusCode::OK, "ok") });
        for p in [
            "/healthz",
            "/pods",
            "/stats/",
            "/metrics",
            "/metrics/cadvisor",
            "/containerLogs/",
            "/exec/",
            "/attach/",
            "/portForward/",
            "/run/",
            "/logs/",
            "/configz",
            "/debug/pprof/",
        ] {
            router.handle(p, h.clone()).expect("pattern");
        }
        router
    })
}

fuzz_target!(|data: &[u8]| {
    let raw = String::from_utf8_lossy(data);
    let (path, query) = match raw.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (&*raw, None),
    };
    if let Some(path) = decode_path(path) {
        let _ = router().route(&path, query);
    }
});
