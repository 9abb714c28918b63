//! API-server mode, the pod half (issue 6): the "api" pod source, admission
//! results in the API, the status sync and graceful deletion, mirror pods,
//! the ConfigMap/Secret/token managers, and the API server going away.
//!
//! Each test runs against the API server double, or against the real
//! kube-apiserver named by KUBELET_RS_TEST_KUBECONFIG (double-only steps are
//! skipped with a note).

mod support;

#[path = "api_pods/common.rs"]
mod common;
#[path = "api_pods/mirror.rs"]
mod mirror;
#[path = "api_pods/objects.rs"]
mod objects;
#[path = "api_pods/outage.rs"]
mod outage;
#[path = "api_pods/source.rs"]
mod source;
#[path = "api_pods/status.rs"]
mod status;
#[path = "api_pods/wiring.rs"]
mod wiring;
