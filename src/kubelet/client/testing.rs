//! An in-process API server for unit tests: a kube client whose every
//! request a test's `Answer` answers from the method, path and body.

use std::convert::Infallible;

use http::{Request, Response};
use serde_json::Value;

/// A test's API server: the status code and JSON body for each request.
pub(crate) trait Answer: Clone + Send + Sync + 'static {
    fn answer(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value);
}

/// The service behind [`fake_client`], for tests that wrap it in layers
/// (a rate limiter) before making the client.
pub(crate) fn fake_service<A: Answer>(
    api: A,
) -> impl tower::Service<
    Request<kube::client::Body>,
    Response = Response<kube::client::Body>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |req: Request<kube::client::Body>| {
        let api = api.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let body = http_body_util::BodyExt::collect(req.into_body())
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let (code, out) = api.answer(&method, &path, &body);
            let resp = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&out).expect("JSON"),
                ))
                .expect("response");
            Ok::<_, Infallible>(resp)
        }
    })
}

/// A client whose requests `api` answers, with no network in between.
pub(crate) fn fake_client<A: Answer>(api: A) -> kube::Client {
    kube::Client::new(fake_service(api), "default")
}
