use super::*;
use k8s_openapi::api::authentication::v1::{
    BoundObjectReference, TokenRequestSpec, TokenRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A wall clock the test moves by hand.
struct DrivenClock(Mutex<SystemTime>);

impl DrivenClock {
    fn advance(&self, d: Duration) {
        *self.0.lock().expect("lock") += d;
    }
}

impl Clock for DrivenClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().expect("lock")
    }
    fn monotonic(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

/// Issues `token-<n>` valid for the requested seconds from the clock's now.
struct Issuer {
    clock: Arc<DrivenClock>,
    calls: AtomicUsize,
    fail: AtomicBool,
}

#[async_trait]
impl ServiceAccountTokenGetter for Issuer {
    async fn create_token(
        &self,
        _namespace: &str,
        _sa: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, TokenError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(TokenError("apiserver down".into()));
        }
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let secs = request.spec.expiration_seconds.unwrap_or(3600);
        let exp = self.clock.now() + Duration::from_secs(secs as u64);
        let mut out = request.clone();
        out.status = Some(TokenRequestStatus {
            token: format!("token-{n}"),
            expiration_timestamp: Time(jiff::Timestamp::try_from(exp).expect("ts")),
        });
        Ok(out)
    }
}

fn request(pod_uid: &str, secs: i64) -> TokenRequest {
    TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec!["api".into()],
            expiration_seconds: Some(secs),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some("p".into()),
                uid: Some(pod_uid.into()),
            }),
        },
        ..Default::default()
    }
}

fn setup(jitter_secs: u64) -> (Arc<DrivenClock>, Arc<Issuer>, TokenManager) {
    let clock = Arc::new(DrivenClock(Mutex::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    )));
    let issuer = Arc::new(Issuer {
        clock: clock.clone(),
        calls: AtomicUsize::new(0),
        fail: AtomicBool::new(false),
    });
    let m = TokenManager::with_jitter(
        issuer.clone(),
        clock.clone(),
        Box::new(move || Duration::from_secs(jitter_secs)),
    );
    (clock, issuer, m)
}

async fn token(m: &TokenManager, tr: &TokenRequest) -> Result<String, String> {
    m.get_service_account_token("ns", "default", tr)
        .await
        .map(|t| t.status.expect("status").token)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn rotation_at_80_percent_of_ttl() {
    // (lifetime, jitter, elapsed, token after that much time)
    let cases = [
        (3600, 0, 0, "token-1"),
        (3600, 0, 2879, "token-1"), // 79.97%: cached
        (3600, 0, 2881, "token-2"), // past 80%: refreshed
        (3600, 9, 2870, "token-1"), // jitter moves the point earlier...
        (3600, 9, 2872, "token-2"), // ...by up to 10 s
        (3607, 0, 2885, "token-1"), // 20% of 3607 s is 721 s (integer)
        (3607, 0, 2887, "token-2"),
        (200_000, 0, 86_399, "token-1"), // long tokens: 24 h cap
        (200_000, 0, 86_401, "token-2"),
    ];
    for (ttl, jitter, elapsed, want) in cases {
        let (clock, _issuer, m) = setup(jitter);
        let tr = request("u1", ttl);
        assert_eq!(token(&m, &tr).await.as_deref(), Ok("token-1"));
        clock.advance(Duration::from_secs(elapsed));
        assert_eq!(
            token(&m, &tr).await.as_deref(),
            Ok(want),
            "ttl {ttl} jitter {jitter} after {elapsed}s"
        );
    }
}

#[tokio::test]
async fn failed_refresh_serves_the_old_token_until_it_expires() {
    let (clock, issuer, m) = setup(0);
    let tr = request("u1", 600);
    assert_eq!(token(&m, &tr).await.as_deref(), Ok("token-1"));
    issuer.fail.store(true, Ordering::SeqCst);
    clock.advance(Duration::from_secs(590));
    assert_eq!(
        token(&m, &tr).await.as_deref(),
        Ok("token-1"),
        "stale but valid"
    );
    clock.advance(Duration::from_secs(11));
    let err = token(&m, &tr).await.expect_err("expired");
    assert!(err.starts_with("token \"default\"/\"ns\"/"), "{err}");
    assert!(
        err.ends_with("expired and refresh failed: apiserver down"),
        "{err}"
    );
    let other = request("u2", 600);
    assert_eq!(
        token(&m, &other).await,
        Err("failed to fetch token: apiserver down".to_string())
    );
    issuer.fail.store(false, Ordering::SeqCst);
    assert_eq!(token(&m, &tr).await.as_deref(), Ok("token-2"));
}

#[tokio::test]
async fn keys_separate_pods_and_cleanup_drops_expired() {
    let (clock, issuer, m) = setup(0);
    let a = request("u1", 600);
    let b = request("u2", 1200);
    assert_eq!(token(&m, &a).await.as_deref(), Ok("token-1"));
    assert_eq!(token(&m, &b).await.as_deref(), Ok("token-2"));
    assert_eq!(token(&m, &a).await.as_deref(), Ok("token-1"));
    assert_eq!(issuer.calls.load(Ordering::SeqCst), 2);
    assert_eq!(m.len(), 2);
    m.delete_service_account_token("u2");
    assert_eq!(m.len(), 1);
    clock.advance(Duration::from_secs(601));
    m.cleanup();
    assert!(m.is_empty());
}
