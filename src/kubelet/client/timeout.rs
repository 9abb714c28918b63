//! A whole-request deadline, as Go's `http.Client.Timeout`: the response
//! headers and the body must both arrive within it. Used by the heartbeat
//! client, whose requests are small; the body is read into memory inside the
//! deadline so a server that stalls mid-body cannot hold a heartbeat.

use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use tower::{BoxError, Layer, Service};

/// The request did not complete within the client's timeout.
#[derive(Debug, thiserror::Error)]
#[error("request did not complete within {0:?} (client timeout exceeded)")]
pub struct RequestTimedOut(pub Duration);

/// Applies a whole-request timeout.
#[derive(Clone, Copy, Debug)]
pub struct RequestTimeoutLayer {
    timeout: Duration,
}

impl RequestTimeoutLayer {
    pub fn new(timeout: Duration) -> Self {
        RequestTimeoutLayer { timeout }
    }
}

impl<S> Layer<S> for RequestTimeoutLayer {
    type Service = RequestTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestTimeout {
            inner,
            timeout: self.timeout,
        }
    }
}

/// The service of [`RequestTimeoutLayer`].
#[derive(Clone, Debug)]
pub struct RequestTimeout<S> {
    inner: S,
    timeout: Duration,
}

impl<S, R, B> Service<R> for RequestTimeout<S>
where
    S: Service<R, Response = http::Response<B>> + Send,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<Full<Bytes>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let fut = self.inner.call(req);
        let timeout = self.timeout;
        Box::pin(async move {
            let whole = async move {
                let resp = fut.await.map_err(Into::into)?;
                let (parts, body) = resp.into_parts();
                let bytes = body.collect().await.map_err(Into::into)?.to_bytes();
                Ok::<_, BoxError>(http::Response::from_parts(parts, Full::new(bytes)))
            };
            match tokio::time::timeout(timeout, whole).await {
                Ok(r) => r,
                Err(_) => Err(Box::new(RequestTimedOut(timeout)) as BoxError),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn slow_responses_time_out_and_fast_ones_pass() {
        let svc = tower::service_fn(|delay: u64| async move {
            tokio::time::sleep(Duration::from_secs(delay)).await;
            Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from("ok"))))
        });
        let mut svc = RequestTimeoutLayer::new(Duration::from_secs(10)).layer(svc);
        let ok = svc.call(1).await.expect("fast request");
        let body = ok.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, Bytes::from("ok"));
        let err = svc.call(11).await.expect_err("slow request");
        assert!(err.downcast_ref::<RequestTimedOut>().is_some(), "{err}");
    }
}
