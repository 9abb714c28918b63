//! Client-side throttling as client-go does it: a token bucket (`qps`
//! tokens a second, `burst` at most, full at start) in front of every
//! request of a client. A request that finds the bucket empty reserves the
//! next token and waits for it, so waiters are served in arrival order.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;
use tower::{Layer, Service};

/// client-go's defaults when a QPS or burst of 0 is configured.
pub const DEFAULT_QPS: f32 = 5.0;
pub const DEFAULT_BURST: i32 = 10;

/// A token bucket in the manner of golang.org/x/time/rate: tokens refill at
/// `qps` a second up to `burst`; a reservation may take the bucket below
/// zero, the debt being the reserver's wait.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f32, burst: i32, now: Instant) -> Self {
        let burst = f64::from(burst.max(0));
        TokenBucket {
            qps: f64::from(qps),
            burst,
            state: Mutex::new(BucketState {
                tokens: burst,
                last: now,
            }),
        }
    }

    fn advance(&self, s: &mut BucketState, now: Instant) {
        if now > s.last {
            let elapsed = (now - s.last).as_secs_f64();
            s.tokens = (s.tokens + elapsed * self.qps).min(self.burst);
            s.last = now;
        }
    }

    /// Takes a token if one is there now (a passive limiter's TryAccept).
    pub fn try_accept(&self, now: Instant) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.advance(&mut s, now);
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// How long until a token is there, taking none (zero: one is there
    /// now, or there is no limit).
    pub fn ready_in(&self, now: Instant) -> Duration {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.advance(&mut s, now);
        if s.tokens >= 1.0 || self.qps <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - s.tokens) / self.qps)
    }

    /// Reserves a token and returns how long to wait before using it.
    pub fn reserve(&self, now: Instant) -> Duration {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.advance(&mut s, now);
        s.tokens -= 1.0;
        if s.tokens >= 0.0 || self.qps <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(-s.tokens / self.qps)
    }
}

/// The limiter a client is built with, from its QPS and burst settings as
/// client-go reads them: 0 means the default (5 QPS, burst 10), a negative
/// QPS means no throttling.
pub fn limiter_for(qps: f32, burst: i32) -> Option<Arc<TokenBucket>> {
    let qps = if qps == 0.0 { DEFAULT_QPS } else { qps };
    let burst = if burst == 0 { DEFAULT_BURST } else { burst };
    (qps > 0.0).then(|| Arc::new(TokenBucket::new(qps, burst, Instant::now())))
}

/// Throttles every request through a shared [`TokenBucket`].
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl RateLimitLayer {
    pub fn new(bucket: Arc<TokenBucket>) -> Self {
        RateLimitLayer { bucket }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
        }
    }
}

/// The service of [`RateLimitLayer`].
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is checked on the clone that sends, after the wait.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: R) -> Self::Future {
        let wait = self.bucket.reserve(Instant::now());
        let mut inner = self.inner.clone();
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            futures::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
            inner.call(req).await
        })
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    #[test]
    fn bucket_starts_full_and_refills_at_qps() {
        let t0 = Instant::now();
        let b = TokenBucket::new(2.0, 3, t0);
        assert!(b.try_accept(t0));
        assert!(b.try_accept(t0));
        assert!(b.try_accept(t0));
        assert!(!b.try_accept(t0));
        // Half a second later one token (2/s) is back.
        let t1 = t0 + Duration::from_millis(500);
        assert!(b.try_accept(t1));
        assert!(!b.try_accept(t1));
        // Long idle refills only up to the burst.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(b.try_accept(t2));
        }
        assert!(!b.try_accept(t2));
    }

    #[test]
    fn ready_in_waits_for_a_whole_token_and_takes_none() {
        let t0 = Instant::now();
        let b = TokenBucket::new(2.0, 1, t0);
        assert_eq!(b.ready_in(t0), Duration::ZERO);
        assert_eq!(b.ready_in(t0), Duration::ZERO, "nothing taken");
        let _ = b.reserve(t0);
        let _ = b.reserve(t0);
        // Two tokens owed at 2/s: one whole token in a second.
        assert_eq!(b.ready_in(t0).as_millis(), 1000);
        assert_eq!(b.ready_in(t0 + Duration::from_millis(400)).as_millis(), 600);
        assert_eq!(b.ready_in(t0 + Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn reservations_queue_up() {
        let t0 = Instant::now();
        let b = TokenBucket::new(10.0, 1, t0);
        let waits: Vec<Duration> = (0..4).map(|_| b.reserve(t0)).collect();
        let ms: Vec<u128> = waits.iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, vec![0, 100, 200, 300]);
    }

    #[test]
    fn limiter_defaults_table() {
        // (qps, burst) → Some((qps, burst)) of the bucket, None = unthrottled
        let cases: &[(f32, i32, Option<(f64, f64)>)] = &[
            (0.0, 0, Some((5.0, 10.0))),
            (50.0, 100, Some((50.0, 100.0))),
            (5.0, 0, Some((5.0, 10.0))),
            (-1.0, 10, None),
        ];
        for (qps, burst, want) in cases {
            let got = limiter_for(*qps, *burst).map(|b| (b.qps, b.burst));
            assert_eq!(got, *want, "qps={qps} burst={burst}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn layer_delays_requests_beyond_the_burst() {
        let bucket = Arc::new(TokenBucket::new(1.0, 2, Instant::now()));
        let svc = tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(()) });
        let mut svc = RateLimitLayer::new(bucket).layer(svc);
        let start = Instant::now();
        for _ in 0..4 {
            svc.call(()).await.unwrap();
        }
        // Two from the burst, then one a second.
        assert_eq!(start.elapsed().as_secs(), 2);
    }
}
