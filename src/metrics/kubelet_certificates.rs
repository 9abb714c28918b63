//! The certificate managers' families, registered when the kubelet rotates
//! its certificates (`rotateCertificates` for the client pair,
//! `serverTLSBootstrap` for the serving one), as the Go kubelet does:
//! renewal errors, the serving certificate's rotations, and each
//! certificate's time to live, read at scrape time.

use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use super::Collector;
use super::kubelet::{counter, histogram};
use super::text::format_float;
use super::vec::{CounterVec, Desc, HistogramVec, Stability};

/// `kubelet_certificate_manager_client_expiration_renew_errors`.
pub fn client_renew_errors() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    let c = counter(
        &CELL,
        Desc::new(
            "kubelet_certificate_manager_client_expiration_renew_errors",
            "Failed renewals of the kubelet's client certificate.",
            &[],
            Stability::Alpha,
        ),
    );
    c.add(&[], 0.0);
    c
}

/// `kubelet_server_expiration_renew_errors`.
pub fn server_renew_errors() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    let c = counter(
        &CELL,
        Desc::new(
            "kubelet_server_expiration_renew_errors",
            "Failed renewals of the kubelet's serving certificate.",
            &[],
            Stability::Alpha,
        ),
    );
    c.add(&[], 0.0);
    c
}

/// The buckets of the rotation histogram: a minute up to four years.
pub fn rotation_buckets() -> Vec<f64> {
    vec![
        60.0,          // a minute
        3_600.0,       // an hour
        14_400.0,      // four hours
        86_400.0,      // a day
        604_800.0,     // a week
        2_592_000.0,   // thirty days
        7_776_000.0,   // ninety days
        15_552_000.0,  // 180 days
        31_104_000.0,  // 360 days
        124_416_000.0, // four such years
    ]
}

/// `kubelet_certificate_manager_server_rotation_seconds` (histogram).
pub fn server_rotation() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    histogram(
        &CELL,
        Desc::new(
            "kubelet_certificate_manager_server_rotation_seconds",
            "Seconds a serving certificate had been valid for when a new one replaced it.",
            &[],
            Stability::Alpha,
        ),
        rotation_buckets(),
    )
}

/// A certificate's expiry as the manager holding it sees it now.
pub type Expiry = Arc<dyn Fn() -> Option<SystemTime> + Send + Sync>;

/// A gauge read at scrape time: seconds until the certificate expires
/// (negative once it has), `+Inf` while there is none.
pub struct TtlGauge {
    desc: Desc,
    expiry: Expiry,
    now: Arc<dyn Fn() -> SystemTime + Send + Sync>,
}

impl TtlGauge {
    fn value(&self) -> f64 {
        let Some(not_after) = (self.expiry)() else {
            return f64::INFINITY;
        };
        let now = (self.now)();
        let secs = match not_after.duration_since(now) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        };
        secs.trunc()
    }
}

impl Collector for TtlGauge {
    fn name(&self) -> &str {
        &self.desc.name
    }

    fn encode(&self, out: &mut String) {
        self.desc.write_header(out, "gauge");
        let _ = writeln!(out, "{} {}", self.desc.name, format_float(self.value()));
    }
}

fn ttl(
    name: &str,
    help: &str,
    expiry: Expiry,
    now: Arc<dyn Fn() -> SystemTime + Send + Sync>,
) -> Arc<TtlGauge> {
    Arc::new(TtlGauge {
        desc: Desc::new(name, help, &[], Stability::Alpha),
        expiry,
        now,
    })
}

/// Registers `kubelet_certificate_manager_client_ttl_seconds` over
/// `expiry` (the first registration in a process wins).
pub fn register_client_ttl(expiry: Expiry, now: Arc<dyn Fn() -> SystemTime + Send + Sync>) {
    super::global().register(ttl(
        "kubelet_certificate_manager_client_ttl_seconds",
        "Seconds until the kubelet's client certificate expires (negative once it has; +Inf while there is no valid one).",
        expiry,
        now,
    ));
}

/// Registers `kubelet_certificate_manager_server_ttl_seconds` over
/// `expiry`.
pub fn register_server_ttl(expiry: Expiry, now: Arc<dyn Fn() -> SystemTime + Send + Sync>) {
    super::global().register(ttl(
        "kubelet_certificate_manager_server_ttl_seconds",
        "Seconds until the kubelet's serving certificate expires (negative once it has; +Inf while there is no valid one).",
        expiry,
        now,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ttl_table() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        // (expiry, rendered value)
        let cases = [
            (None, "+Inf"),
            (Some(t0 + Duration::from_millis(3_600_900)), "3600"),
            (Some(t0 - Duration::from_secs(10)), "-10"),
        ];
        for (expiry, want) in cases {
            let g = ttl(
                "kubelet_certificate_manager_client_ttl_seconds",
                "h",
                Arc::new(move || expiry),
                Arc::new(move || t0),
            );
            let mut out = String::new();
            g.encode(&mut out);
            assert!(
                out.ends_with(&format!(
                    "kubelet_certificate_manager_client_ttl_seconds {want}\n"
                )),
                "{expiry:?}: {out}"
            );
            assert!(out.contains("# TYPE kubelet_certificate_manager_client_ttl_seconds gauge"));
        }
    }
}
