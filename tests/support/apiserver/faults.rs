//! Fault injection: make the next N matching requests fail or stall.

use std::sync::Mutex;
use std::time::Duration;

/// A request verb, as the server's authorizer names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Answer with this HTTP code and a Status body (500 InternalError,
    /// 503 ServiceUnavailable, 504 Timeout, any other code as given).
    Status(u16),
    /// 429 TooManyRequests with a Retry-After header.
    TooManyRequests { retry_after_secs: u32 },
    /// Hold the request this long, then serve it normally.
    Delay(Duration),
    /// Close the connection without an answer.
    Drop,
}

/// One fault: which requests it hits, what it does, how many times.
#[derive(Debug, Clone)]
pub struct Fault {
    pub action: FaultAction,
    pub verb: Option<Verb>,
    /// Plural resource name ("pods", "leases").
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub name: Option<String>,
    /// Only requests authenticated as this user.
    pub user: Option<String>,
    /// Remaining hits.
    pub times: usize,
}

impl Fault {
    pub fn new(action: FaultAction) -> Self {
        Fault {
            action,
            verb: None,
            resource: None,
            subresource: None,
            name: None,
            user: None,
            times: 1,
        }
    }

    /// Answer with `code` (and a Status body).
    pub fn status(code: u16) -> Self {
        Self::new(FaultAction::Status(code))
    }

    pub fn too_many_requests(retry_after_secs: u32) -> Self {
        Self::new(FaultAction::TooManyRequests { retry_after_secs })
    }

    pub fn delay(d: Duration) -> Self {
        Self::new(FaultAction::Delay(d))
    }

    pub fn drop_connection() -> Self {
        Self::new(FaultAction::Drop)
    }

    pub fn on(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    pub fn resource(mut self, plural: &str) -> Self {
        self.resource = Some(plural.to_string());
        self
    }

    pub fn subresource(mut self, sub: &str) -> Self {
        self.subresource = Some(sub.to_string());
        self
    }

    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    pub fn for_user(mut self, user: &str) -> Self {
        self.user = Some(user.to_string());
        self
    }

    pub fn times(mut self, n: usize) -> Self {
        self.times = n;
        self
    }
}

/// What a request looks like to the fault matcher.
pub struct FaultTarget<'a> {
    pub verb: Option<Verb>,
    pub resource: Option<&'a str>,
    pub subresource: Option<&'a str>,
    pub name: Option<&'a str>,
    pub user: &'a str,
}

fn hits(f: &Fault, t: &FaultTarget<'_>) -> bool {
    f.times > 0
        && f.verb.is_none_or(|v| Some(v) == t.verb)
        && f.resource.as_deref().is_none_or(|r| Some(r) == t.resource)
        && f.subresource
            .as_deref()
            .is_none_or(|s| Some(s) == t.subresource)
        && f.name.as_deref().is_none_or(|n| Some(n) == t.name)
        && f.user.as_deref().is_none_or(|u| u == t.user)
}

/// The armed faults, first match wins.
#[derive(Default)]
pub struct Faults(Mutex<Vec<Fault>>);

impl Faults {
    pub fn add(&self, f: Fault) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(f);
    }

    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Takes one hit of the first fault matching `t`.
    pub fn take(&self, t: &FaultTarget<'_>) -> Option<FaultAction> {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let f = g.iter_mut().find(|f| hits(f, t))?;
        f.times -= 1;
        let action = f.action.clone();
        g.retain(|f| f.times > 0);
        Some(action)
    }
}
