//! Authenticator combinators and the kubelet's authenticator chain:
//! x509 client certificates and (issue 6) webhook bearer tokens, tried in
//! turn; an identity found gets `system:authenticated`; with anonymous
//! access on, a request with no credentials becomes `system:anonymous`,
//! while bad credentials still fail.

use std::sync::Arc;

use http::request::Parts;

use super::x509::{ClientCaBundle, X509Authenticator};
use super::{
    ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS_USER, AuthError, Authenticator, UserInfo,
};

/// Every request is `system:anonymous` in `system:unauthenticated`.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnonymousAuthenticator;

#[async_trait::async_trait]
impl Authenticator for AnonymousAuthenticator {
    async fn authenticate(&self, _req: &Parts) -> Result<Option<UserInfo>, AuthError> {
        Ok(Some(UserInfo {
            name: ANONYMOUS_USER.to_string(),
            groups: vec![ALL_UNAUTHENTICATED.to_string()],
            ..Default::default()
        }))
    }
}

/// Tries each authenticator in order; the first identity wins. Without
/// `fail_on_error`, errors are collected and reported only when nobody
/// identified the request; with it, the first error ends the search.
pub struct UnionAuthenticator {
    authenticators: Vec<Arc<dyn Authenticator>>,
    fail_on_error: bool,
}

impl UnionAuthenticator {
    /// Collects errors, failing only when nobody identifies the request.
    pub fn combine(authenticators: Vec<Arc<dyn Authenticator>>) -> Arc<dyn Authenticator> {
        Self::build(authenticators, false)
    }

    /// Stops at the first error.
    pub fn combine_fail_on_error(
        authenticators: Vec<Arc<dyn Authenticator>>,
    ) -> Arc<dyn Authenticator> {
        Self::build(authenticators, true)
    }

    fn build(
        mut authenticators: Vec<Arc<dyn Authenticator>>,
        fail_on_error: bool,
    ) -> Arc<dyn Authenticator> {
        if authenticators.len() == 1
            && let Some(only) = authenticators.pop()
        {
            return only;
        }
        Arc::new(Self {
            authenticators,
            fail_on_error,
        })
    }
}

#[async_trait::async_trait]
impl Authenticator for UnionAuthenticator {
    async fn authenticate(&self, req: &Parts) -> Result<Option<UserInfo>, AuthError> {
        let mut errs = Vec::new();
        for a in &self.authenticators {
            match a.authenticate(req).await {
                Ok(Some(user)) => return Ok(Some(user)),
                Ok(None) => {}
                Err(err) if self.fail_on_error => return Err(err),
                Err(err) => errs.push(err.to_string()),
            }
        }
        if errs.is_empty() {
            Ok(None)
        } else {
            Err(AuthError::Aggregate(errs))
        }
    }
}

/// Adds `system:authenticated` to identified users (not to the anonymous
/// user, nor when either well-known group is already there).
pub struct AuthenticatedGroupAdder {
    inner: Arc<dyn Authenticator>,
}

impl AuthenticatedGroupAdder {
    pub fn wrap(inner: Arc<dyn Authenticator>) -> Arc<dyn Authenticator> {
        Arc::new(Self { inner })
    }
}

#[async_trait::async_trait]
impl Authenticator for AuthenticatedGroupAdder {
    async fn authenticate(&self, req: &Parts) -> Result<Option<UserInfo>, AuthError> {
        let Some(mut user) = self.inner.authenticate(req).await? else {
            return Ok(None);
        };
        let has_marker = user
            .groups
            .iter()
            .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED);
        if user.name != ANONYMOUS_USER && !has_marker {
            user.groups.push(ALL_AUTHENTICATED.to_string());
        }
        Ok(Some(user))
    }
}

/// The `authentication` block of the configuration, as far as the server
/// needs it.
#[derive(Clone, Default)]
pub struct AuthnParams {
    /// `authentication.anonymous.enabled`.
    pub anonymous: bool,
    /// The bundle loaded from `authentication.x509.clientCAFile`, if set.
    pub client_ca: Option<Arc<ClientCaBundle>>,
    /// `authentication.webhook.enabled`.
    pub webhook_enabled: bool,
}

/// Identifies no one: every request is unauthenticated.
struct NoOneAuthenticator;

#[async_trait::async_trait]
impl Authenticator for NoOneAuthenticator {
    async fn authenticate(&self, _req: &Parts) -> Result<Option<UserInfo>, AuthError> {
        Ok(None)
    }
}

/// Builds the chain. `token` is the webhook token authenticator (issue 6);
/// it is required when the webhook is enabled, as the Go kubelet requires an
/// API client for it.
pub fn build_authenticator(
    params: &AuthnParams,
    token: Option<Arc<dyn Authenticator>>,
) -> Result<Arc<dyn Authenticator>, AuthError> {
    let mut chain: Vec<Arc<dyn Authenticator>> = Vec::new();
    if let Some(ca) = &params.client_ca {
        chain.push(Arc::new(X509Authenticator::new(ca.clone())));
    }
    if params.webhook_enabled {
        chain.push(token.ok_or(AuthError::NoClientForWebhookAuthn)?);
    }
    if chain.is_empty() {
        if params.anonymous {
            return Ok(Arc::new(AnonymousAuthenticator));
        }
        // The Go kubelet starts this way too (its empty client-CA provider
        // still counts as a method) and answers 401 to every request.
        tracing::warn!(
            "No authentication method configured (anonymous and webhook authentication off, no clientCAFile): every request to the kubelet's main port is refused with 401"
        );
        return Ok(Arc::new(NoOneAuthenticator));
    }
    let identified = AuthenticatedGroupAdder::wrap(UnionAuthenticator::combine(chain));
    if params.anonymous {
        Ok(UnionAuthenticator::combine_fail_on_error(vec![
            identified,
            Arc::new(AnonymousAuthenticator),
        ]))
    } else {
        Ok(identified)
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;
    use crate::kubelet::server::auth::webhook_authn::ReviewFailure;

    enum Out {
        User(&'static str, &'static [&'static str]),
        NoOpinion,
        Fail(&'static str),
    }

    struct Fixed(Out);

    #[async_trait::async_trait]
    impl Authenticator for Fixed {
        async fn authenticate(&self, _req: &Parts) -> Result<Option<UserInfo>, AuthError> {
            match &self.0 {
                Out::User(name, groups) => Ok(Some(UserInfo {
                    name: name.to_string(),
                    groups: groups.iter().map(|g| g.to_string()).collect(),
                    ..Default::default()
                })),
                Out::NoOpinion => Ok(None),
                Out::Fail(msg) => Err(AuthError::TokenReview(ReviewFailure::Refused(
                    msg.to_string(),
                ))),
            }
        }
    }

    fn fixed(o: Out) -> Arc<dyn Authenticator> {
        Arc::new(Fixed(o))
    }

    fn parts() -> Parts {
        http::Request::get("/").body(()).unwrap().into_parts().0
    }

    #[tokio::test]
    async fn union_table() {
        let cases: Vec<(&str, Vec<Out>, bool, Result<Option<&str>, &str>)> = vec![
            (
                "first wins",
                vec![Out::User("a", &[]), Out::User("b", &[])],
                false,
                Ok(Some("a")),
            ),
            (
                "skips no opinion",
                vec![Out::NoOpinion, Out::User("b", &[])],
                false,
                Ok(Some("b")),
            ),
            (
                "error then user",
                vec![Out::Fail("x"), Out::User("b", &[])],
                false,
                Ok(Some("b")),
            ),
            (
                "errors aggregated",
                vec![Out::Fail("x"), Out::Fail("y")],
                false,
                Err("[x, y]"),
            ),
            (
                "nobody",
                vec![Out::NoOpinion, Out::NoOpinion],
                false,
                Ok(None),
            ),
            (
                "fail on error",
                vec![Out::Fail("x"), Out::User("b", &[])],
                true,
                Err("x"),
            ),
            (
                "fail on error, no error",
                vec![Out::NoOpinion, Out::User("b", &[])],
                true,
                Ok(Some("b")),
            ),
        ];
        for (name, outs, foe, want) in cases {
            let list = outs.into_iter().map(fixed).collect();
            let u = if foe {
                UnionAuthenticator::combine_fail_on_error(list)
            } else {
                UnionAuthenticator::combine(list)
            };
            match (u.authenticate(&parts()).await, want) {
                (Ok(got), Ok(w)) => assert_eq!(got.map(|u| u.name).as_deref(), w, "{name}"),
                (Err(e), Err(w)) => assert_eq!(e.to_string(), w, "{name}"),
                (got, w) => panic!("{name}: got {got:?}, want {w:?}"),
            }
        }
    }

    #[tokio::test]
    async fn group_adder_table() {
        let cases: Vec<(Out, Vec<&str>)> = vec![
            (Out::User("u", &["g"]), vec!["g", ALL_AUTHENTICATED]),
            (Out::User("u", &[]), vec![ALL_AUTHENTICATED]),
            (
                Out::User("u", &[ALL_AUTHENTICATED]),
                vec![ALL_AUTHENTICATED],
            ),
            (
                Out::User("u", &[ALL_UNAUTHENTICATED]),
                vec![ALL_UNAUTHENTICATED],
            ),
            (Out::User(ANONYMOUS_USER, &["g"]), vec!["g"]),
        ];
        for (out, want) in cases {
            let a = AuthenticatedGroupAdder::wrap(fixed(out));
            let user = a.authenticate(&parts()).await.unwrap().unwrap();
            assert_eq!(user.groups, want);
        }
        let a = AuthenticatedGroupAdder::wrap(fixed(Out::NoOpinion));
        assert!(a.authenticate(&parts()).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn build_table() {
        // (anonymous, webhook enabled, token given, token outcome, want)
        let cases: Vec<(
            bool,
            bool,
            bool,
            Out,
            Result<Option<(&str, Vec<&str>)>, &str>,
        )> = vec![
            (
                true,
                false,
                false,
                Out::NoOpinion,
                Ok(Some((ANONYMOUS_USER, vec![ALL_UNAUTHENTICATED]))),
            ),
            (false, false, false, Out::NoOpinion, Ok(None)),
            (
                false,
                true,
                false,
                Out::NoOpinion,
                Err("no client provided, cannot use webhook authentication"),
            ),
            (
                false,
                true,
                true,
                Out::User("bob", &["dev"]),
                Ok(Some(("bob", vec!["dev", ALL_AUTHENTICATED]))),
            ),
            (false, true, true, Out::NoOpinion, Ok(None)),
            (
                true,
                true,
                true,
                Out::NoOpinion,
                Ok(Some((ANONYMOUS_USER, vec![ALL_UNAUTHENTICATED]))),
            ),
            (true, true, true, Out::Fail("bad token"), Err("bad token")),
        ];
        for (i, (anonymous, webhook_enabled, given, out, want)) in cases.into_iter().enumerate() {
            let params = AuthnParams {
                anonymous,
                client_ca: None,
                webhook_enabled,
            };
            let token = given.then(|| fixed(out));
            let res = match build_authenticator(&params, token) {
                Ok(a) => a.authenticate(&parts()).await,
                Err(e) => Err(e),
            };
            match (res, want) {
                (Ok(got), Ok(w)) => {
                    let got = got.map(|u| (u.name, u.groups));
                    let w =
                        w.map(|(n, g)| (n.to_string(), g.iter().map(|s| s.to_string()).collect()));
                    assert_eq!(got, w, "case {i}");
                }
                (Err(e), Err(w)) => assert_eq!(e.to_string(), w, "case {i}"),
                (got, w) => panic!("case {i}: got {got:?}, want {w:?}"),
            }
        }
    }
}
