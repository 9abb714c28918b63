//! The request log tests assert on.

use std::sync::Mutex;
use std::time::SystemTime;

use super::auth::UserInfo;

/// One request as the double saw it.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub at: SystemTime,
    pub method: String,
    pub path: String,
    /// The raw query string ("" when none).
    pub query: String,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    pub user: UserInfo,
    /// Authorizer verb ("get", "list", "watch", ...), "" for non-resource paths.
    pub verb: String,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// HTTP status of the answer (200 for a watch that started).
    pub status: u16,
    /// The request body as sent.
    pub body: bytes::Bytes,
}

impl RequestRecord {
    /// The value of query parameter `key`, decoded.
    pub fn query_param(&self, key: &str) -> Option<String> {
        url::form_urlencoded::parse(self.query.as_bytes())
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    }
}

#[derive(Default)]
pub struct RequestLog(Mutex<Vec<RequestRecord>>);

impl RequestLog {
    pub fn push(&self, r: RequestRecord) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(r);
    }

    pub fn all(&self) -> Vec<RequestRecord> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}
