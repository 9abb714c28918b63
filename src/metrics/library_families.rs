//! Families the Go kubelet exports because the Kubernetes libraries it links
//! register them (audit, envelope encryption, admission webhooks, the exec
//! credential plugin of client-go) although a kubelet never feeds most of
//! them; and `kubelet_managed_ephemeral_containers`. They are served with
//! the values the Go kubelet shows, so scrapes and recording rules that
//! name them keep working.

use std::sync::{Arc, OnceLock};

use super::{CounterVec, Desc, GaugeVec, HistogramVec, Registry, Stability, exponential_buckets};

/// `kubelet_managed_ephemeral_containers`: ephemeral containers in the pods
/// this kubelet manages.
pub fn managed_ephemeral_containers() -> &'static Arc<GaugeVec> {
    static CELL: OnceLock<Arc<GaugeVec>> = OnceLock::new();
    CELL.get_or_init(|| {
        Arc::new(GaugeVec::new(Desc::new(
            "kubelet_managed_ephemeral_containers",
            "How many ephemeral containers the pods this kubelet manages have.",
            &[],
            Stability::Alpha,
        )))
    })
}

fn counter(registry: &Registry, name: &str, help: &str) {
    let c = Arc::new(CounterVec::new(Desc::new(
        name,
        help,
        &[],
        Stability::Alpha,
    )));
    c.add(&[], 0.0);
    registry.register(c);
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: Vec<f64>) {
    let h = Arc::new(HistogramVec::new(
        Desc::new(name, help, &[], Stability::Alpha),
        buckets,
    ));
    h.touch(&[]);
    registry.register(h);
}

fn gauge(registry: &Registry, name: &str, help: &str, value: f64) {
    let g = Arc::new(GaugeVec::new(Desc::new(name, help, &[], Stability::Alpha)));
    g.set(&[], value);
    registry.register(g);
}

/// Registers the library families and the ephemeral container gauge.
pub fn register(registry: &Registry) {
    for (name, help) in [
        (
            "apiserver_audit_event_total",
            "Audit events produced (a kubelet has no audit backend: always 0).",
        ),
        (
            "apiserver_audit_requests_rejected_total",
            "Requests refused for audit logging errors (always 0 in a kubelet).",
        ),
        (
            "apiserver_storage_data_key_generation_failures_total",
            "Failed data encryption key generations (always 0 in a kubelet).",
        ),
        (
            "apiserver_storage_envelope_transformation_cache_misses_total",
            "Key decryption cache misses (always 0 in a kubelet).",
        ),
        (
            "apiserver_webhooks_x509_missing_san_total",
            "Webhook certificates without a subject alternative name (always 0 in a kubelet).",
        ),
    ] {
        counter(registry, name, help);
    }
    gauge(
        registry,
        "apiserver_envelope_encryption_dek_cache_fill_percent",
        "Share of the key cache in use (always 0 in a kubelet).",
        0.0,
    );
    // client-go reports +Inf while no exec plugin certificate is in use.
    gauge(
        registry,
        "rest_client_exec_plugin_ttl_seconds",
        "Shortest time to live of the exec credential plugin's client certificates (+Inf with none).",
        f64::INFINITY,
    );
    histogram(
        registry,
        "apiserver_client_certificate_expiration_seconds",
        "Remaining validity of the client certificates presented to the API (no observations in a kubelet).",
        vec![
            0.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0, 172800.0, 345600.0, 604800.0,
            2592000.0, 7776000.0, 15552000.0, 31104000.0,
        ],
    );
    histogram(
        registry,
        "apiserver_storage_data_key_generation_duration_seconds",
        "How long data encryption key generation took (no observations in a kubelet).",
        exponential_buckets(5e-6, 2.0, 14),
    );
    histogram(
        registry,
        "rest_client_exec_plugin_certificate_rotation_age",
        "Age of the exec credential plugin's client certificates when rotated (no observations without a plugin).",
        exponential_buckets(600.0, 2.0, 14),
    );
    let ephemeral = managed_ephemeral_containers();
    ephemeral.set(&[], 0.0);
    registry.register(ephemeral.clone());
}

#[cfg(test)]
mod tests {
    #[test]
    fn library_families_render_with_go_values() {
        let text = crate::metrics::render_text();
        for line in [
            "# TYPE apiserver_audit_event_total counter",
            "apiserver_audit_event_total 0",
            "apiserver_envelope_encryption_dek_cache_fill_percent 0",
            "rest_client_exec_plugin_ttl_seconds +Inf",
            "apiserver_client_certificate_expiration_seconds_bucket{le=\"1800\"} 0",
            "rest_client_exec_plugin_certificate_rotation_age_count 0",
            "# TYPE kubelet_managed_ephemeral_containers gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
