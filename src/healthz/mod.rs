//! healthz: named health checks and the `/healthz` endpoint that reports
//! them the way Kubernetes components do.
//!
//! `/healthz` answers `ok` when every check passes and 500 with a per-check
//! listing (reasons withheld, `healthz check failed`) when one fails;
//! `?verbose` lists the checks on success too, `?exclude=<name>` skips a
//! check, `/healthz/<name>` runs one. Later subsystems register their checks
//! (sync loop liveness, PLEG health) into a shared [`Healthz`]. The standalone server on
//! healthzBindAddress:healthzPort is `kubelet::server::healthz_server`.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use http::{HeaderValue, Request, StatusCode, header};

use crate::util::router::{
    Handler, HandlerFuture, RequestBody, ResponseBody, Router, RouterError, http_error, not_found,
    text,
};

/// Why a check failed.
pub type CheckError = Box<dyn std::error::Error + Send + Sync>;

/// A named health check. Checks must be cheap: they run on every request.
pub trait HealthCheck: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn check(&self) -> Result<(), CheckError>;
}

/// The check that always passes.
#[derive(Clone, Copy, Debug, Default)]
pub struct PingCheck;

impl HealthCheck for PingCheck {
    fn name(&self) -> &str {
        "ping"
    }

    fn check(&self) -> Result<(), CheckError> {
        Ok(())
    }
}

/// A check from a name and a closure.
pub struct NamedCheck<F> {
    name: String,
    check: F,
}

impl<F> NamedCheck<F>
where
    F: Fn() -> Result<(), CheckError> + Send + Sync + 'static,
{
    pub fn new(name: impl Into<String>, check: F) -> Self {
        Self {
            name: name.into(),
            check,
        }
    }
}

/// A shareable check from a name and a closure.
pub fn named_check<F>(name: impl Into<String>, check: F) -> Arc<dyn HealthCheck>
where
    F: Fn() -> Result<(), CheckError> + Send + Sync + 'static,
{
    Arc::new(NamedCheck::new(name, check))
}

impl<F> HealthCheck for NamedCheck<F>
where
    F: Fn() -> Result<(), CheckError> + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&self) -> Result<(), CheckError> {
        (self.check)()
    }
}

/// Errors from registering checks.
#[derive(Debug, thiserror::Error)]
pub enum HealthzError {
    #[error("health check {0:?} is already registered")]
    Duplicate(String),
    #[error("invalid health check name {0:?}")]
    InvalidName(String),
    #[error(transparent)]
    Router(#[from] RouterError),
}

/// A registry of checks served under one path (`/healthz`).
pub struct Healthz {
    name: String,
    checks: RwLock<Vec<Arc<dyn HealthCheck>>>,
}

impl std::fmt::Debug for Healthz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Healthz")
            .field("name", &self.name)
            .field("checks", &self.check_names())
            .finish()
    }
}

/// The result of running the checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub healthy: bool,
    /// `[+]name ok` / `[-]name failed: reason withheld` lines, each ending in `\n`.
    pub listing: String,
    /// Names of the failed checks.
    pub failed: Vec<String>,
}

impl Healthz {
    /// A registry with the `ping` check.
    pub fn new() -> Arc<Self> {
        Self::with_checks(vec![Arc::new(PingCheck)])
    }

    /// A registry with exactly these checks (empty: `ping`).
    pub fn with_checks(checks: Vec<Arc<dyn HealthCheck>>) -> Arc<Self> {
        let checks = if checks.is_empty() {
            vec![Arc::new(PingCheck) as Arc<dyn HealthCheck>]
        } else {
            checks
        };
        Arc::new(Self {
            name: "healthz".to_string(),
            checks: RwLock::new(checks),
        })
    }

    fn snapshot(&self) -> Vec<Arc<dyn HealthCheck>> {
        match self.checks.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The registered check names, in order.
    pub fn check_names(&self) -> Vec<String> {
        self.snapshot()
            .iter()
            .map(|c| c.name().to_string())
            .collect()
    }

    /// Adds a check; names are unique and contain no `/`.
    pub fn register(&self, check: Arc<dyn HealthCheck>) -> Result<(), HealthzError> {
        let name = check.name().to_string();
        if name.is_empty() || name.contains('/') {
            return Err(HealthzError::InvalidName(name));
        }
        let mut checks = match self.checks.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if checks.iter().any(|c| c.name() == name) {
            return Err(HealthzError::Duplicate(name));
        }
        checks.push(check);
        Ok(())
    }

    /// Runs every check not in `excluded`.
    pub fn run(&self, excluded: &BTreeSet<String>) -> Report {
        let mut listing = String::new();
        let mut failed = Vec::new();
        let mut verbose_failures = String::new();
        for check in self.snapshot() {
            let name = check.name();
            if excluded.contains(name) {
                listing.push_str(&format!("[+]{name} excluded: ok\n"));
                continue;
            }
            match check.check() {
                Ok(()) => listing.push_str(&format!("[+]{name} ok\n")),
                Err(err) => {
                    listing.push_str(&format!("[-]{name} failed: reason withheld\n"));
                    verbose_failures.push_str(&format!("[-]{name} failed: {err}\n"));
                    failed.push(name.to_string());
                }
            }
        }
        let names = self.check_names();
        let unknown: Vec<String> = excluded
            .iter()
            .filter(|e| !names.contains(e))
            .map(|e| format!("{e:?}"))
            .collect();
        if !unknown.is_empty() {
            let list = unknown.join(",");
            listing.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {list}\n"
            ));
            tracing::warn!(checks = %list, "cannot exclude some health checks, no health checks are installed matching");
        }
        if !failed.is_empty() {
            crate::vlog!(
                2,
                failed = %failed.join(","),
                endpoint = %self.name,
                details = %verbose_failures,
                "Health check failed"
            );
        }
        Report {
            healthy: failed.is_empty(),
            listing,
            failed,
        }
    }

    /// Answers the root endpoint for a request with query string `query`.
    pub fn respond_root(&self, query: Option<&str>) -> http::Response<ResponseBody> {
        let pairs: Vec<(String, String)> = query
            .map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .into_owned()
                    .collect()
            })
            .unwrap_or_default();
        let excluded: BTreeSet<String> = pairs
            .iter()
            .filter(|(k, _)| k == "exclude")
            .map(|(_, v)| v.clone())
            .collect();
        let verbose = pairs.iter().any(|(k, _)| k == "verbose");
        let report = self.run(&excluded);
        if !report.healthy {
            return http_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{}{} check failed", report.listing, self.name),
            );
        }
        let body = if verbose {
            format!("{}{} check passed\n", report.listing, self.name)
        } else {
            "ok".to_string()
        };
        let mut resp = text(StatusCode::OK, body);
        resp.headers_mut().insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        resp
    }

    /// Answers `/<endpoint>/<check>`; `None` when no such check exists.
    pub fn respond_check(&self, check: &str) -> Option<http::Response<ResponseBody>> {
        let found = self.snapshot().into_iter().find(|c| c.name() == check)?;
        Some(match found.check() {
            Ok(()) => text(StatusCode::OK, "ok"),
            Err(err) => http_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("internal server error: {err}"),
            ),
        })
    }

    /// Registers `/healthz` and `/healthz/<check>` on a router.
    pub fn install(self: &Arc<Self>, router: &mut Router) -> Result<(), HealthzError> {
        let root = format!("/{}", self.name);
        router.handle(&root, Arc::new(HealthzHandler(self.clone())))?;
        router.handle(&format!("{root}/"), Arc::new(HealthzHandler(self.clone())))?;
        Ok(())
    }
}

struct HealthzHandler(Arc<Healthz>);

impl Handler for HealthzHandler {
    fn call(&self, req: Request<RequestBody>) -> HandlerFuture {
        let healthz = self.0.clone();
        Box::pin(async move {
            let root = format!("/{}", healthz.name);
            let path = req.uri().path();
            if path == root {
                return healthz.respond_root(req.uri().query());
            }
            let sub = path.strip_prefix(&format!("{root}/")).unwrap_or_default();
            match (sub.contains('/'), healthz.respond_check(sub)) {
                (false, Some(resp)) => resp,
                _ => not_found(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn flag_check(name: &str, ok: Arc<AtomicBool>) -> Arc<dyn HealthCheck> {
        named_check(name, move || {
            if ok.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("sync Loop took longer than expected".into())
            }
        })
    }

    async fn body(resp: http::Response<ResponseBody>) -> (u16, String) {
        let status = resp.status().as_u16();
        let b = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(b.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn root_table() {
        let healthy = Arc::new(AtomicBool::new(true));
        let hz = Healthz::new();
        hz.register(flag_check("syncloop", healthy.clone()))
            .unwrap();
        let cases: Vec<(bool, Option<&str>, u16, &str)> = vec![
            (true, None, 200, "ok"),
            (
                true,
                Some("verbose"),
                200,
                "[+]ping ok\n[+]syncloop ok\nhealthz check passed\n",
            ),
            (
                true,
                Some("verbose=1&exclude=ping"),
                200,
                "[+]ping excluded: ok\n[+]syncloop ok\nhealthz check passed\n",
            ),
            (
                true,
                Some("verbose&exclude=nope"),
                200,
                "[+]ping ok\n[+]syncloop ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n",
            ),
            (
                false,
                None,
                500,
                "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n",
            ),
            (
                false,
                Some("verbose"),
                500,
                "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n",
            ),
            (false, Some("exclude=syncloop"), 200, "ok"),
        ];
        for (ok, query, status, want) in cases {
            healthy.store(ok, Ordering::SeqCst);
            let (s, b) = body(hz.respond_root(query)).await;
            assert_eq!((s, b.as_str()), (status, want), "ok={ok} query={query:?}");
        }
    }

    #[tokio::test]
    async fn per_check_and_routing() {
        let healthy = Arc::new(AtomicBool::new(false));
        let hz = Healthz::new();
        hz.register(flag_check("syncloop", healthy.clone()))
            .unwrap();
        let mut router = Router::new();
        hz.install(&mut router).unwrap();
        let cases: Vec<(&str, u16, &str)> = vec![
            ("/healthz/ping", 200, "ok"),
            (
                "/healthz/syncloop",
                500,
                "internal server error: sync Loop took longer than expected\n",
            ),
            ("/healthz/nope", 404, "404 page not found\n"),
            ("/healthz/ping/x", 404, "404 page not found\n"),
            (
                "/healthz",
                500,
                "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n",
            ),
        ];
        for (path, status, want) in cases {
            let req = Request::get(path)
                .body(crate::util::router::request_body(""))
                .unwrap();
            let resp = match router.route(path, None) {
                crate::util::router::Route::Handler { handler, .. } => handler.call(req).await,
                _ => not_found(),
            };
            let (s, b) = body(resp).await;
            assert_eq!((s, b.as_str()), (status, want), "{path}");
        }
    }

    #[test]
    fn registration_rules() {
        let hz = Healthz::new();
        assert_eq!(hz.check_names(), vec!["ping"]);
        assert!(matches!(
            hz.register(Arc::new(PingCheck)),
            Err(HealthzError::Duplicate(_))
        ));
        assert!(matches!(
            hz.register(named_check("a/b", || Ok(()))),
            Err(HealthzError::InvalidName(_))
        ));
        hz.register(named_check("pleg", || Ok(()))).unwrap();
        assert_eq!(hz.check_names(), vec!["ping", "pleg"]);
        assert_eq!(Healthz::with_checks(vec![]).check_names(), vec!["ping"]);
    }
}
