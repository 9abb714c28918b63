//! API errors and the metav1.Status bodies the server answers them with.

use serde_json::{Value, json};

use super::resources::ResourceDef;

/// A failed request: HTTP code, Status reason, message and details.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<Value>>,
    pub retry_after: Option<u32>,
}

fn details(res: &ResourceDef, name: &str) -> Value {
    let mut d = json!({ "name": name });
    if !res.group.is_empty() {
        d["group"] = json!(res.group);
    }
    d["kind"] = json!(res.plural);
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn not_found(res: &ResourceDef, name: &str) -> Self {
        ApiError {
            details: Some(Box::new(details(res, name))),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{}\" not found", res.id, name),
            )
        }
    }

    pub fn already_exists(res: &ResourceDef, name: &str) -> Self {
        ApiError {
            details: Some(Box::new(details(res, name))),
            ..Self::new(
                409,
                "AlreadyExists",
                format!("{} \"{}\" already exists", res.id, name),
            )
        }
    }

    /// 409 Conflict, "Operation cannot be fulfilled on ...".
    pub fn conflict(res: &ResourceDef, name: &str, why: &str) -> Self {
        ApiError {
            details: Some(Box::new(details(res, name))),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{}\": {}",
                    res.id, name, why
                ),
            )
        }
    }

    /// The optimistic-concurrency conflict of a stale resourceVersion.
    pub fn stale(res: &ResourceDef, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 410 Gone, reason Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 422 Invalid with one cause per (field, message).
    pub fn invalid(kind: &str, group: &str, name: &str, causes: &[(String, String)]) -> Self {
        let summary: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let message = if summary.len() == 1 {
            format!("{kind} \"{name}\" is invalid: {}", summary[0])
        } else {
            format!("{kind} \"{name}\" is invalid: [{}]", summary.join(", "))
        };
        let causes: Vec<Value> = causes
            .iter()
            .map(|(f, m)| json!({"reason": "FieldValueInvalid", "message": m, "field": f}))
            .collect();
        let mut d = json!({ "name": name });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        d["kind"] = json!(kind);
        d["causes"] = json!(causes);
        ApiError {
            details: Some(Box::new(d)),
            ..Self::new(422, "Invalid", message)
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn unsupported_media(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    pub fn too_many_requests(retry_after: u32) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            details: Some(Box::new(json!({ "retryAfterSeconds": retry_after }))),
            ..Self::new(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
            )
        }
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// The metav1.Status body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        });
        // metav1.Status omits an empty (Unknown) reason.
        if !self.reason.is_empty() {
            s["reason"] = json!(self.reason);
        }
        if let Some(d) = &self.details {
            s["details"] = (**d).clone();
        }
        s["code"] = json!(self.code);
        s
    }
}

/// The Status a successful delete of a non-pod object answers with.
pub fn success_status(res: &ResourceDef, name: &str, uid: &str) -> Value {
    let mut d = details(res, name);
    d["uid"] = json!(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": d,
    })
}
