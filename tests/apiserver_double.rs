//! Self-tests of the API server double, through kube::Client exactly as the
//! kubelet uses it. They run against a real kube-apiserver instead when
//! KUBELET_RS_TEST_KUBECONFIG names one (see tests/support/apiserver/README.md).

mod support;

use support::apiserver::TestApi;

#[tokio::test]
async fn starts() {
    let api = TestApi::start().await;
    let _ = api.admin_client().await;
}
