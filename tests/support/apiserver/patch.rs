//! The three patch types the server accepts for built-in kinds.

use serde_json::Value;

use super::errors::ApiError;
use super::resources::ResourceDef;
use super::strategic::{self, SmpError};

/// The media type of a PATCH body, parameters stripped.
pub fn media_type(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}

fn patch_error(res: &ResourceDef, name: &str, patch: &[u8], err: &str) -> ApiError {
    let shown = String::from_utf8_lossy(patch);
    ApiError::invalid(
        res.kind,
        res.group,
        name,
        &[(
            "patch".to_string(),
            format!("Invalid value: {shown:?}: {err}"),
        )],
    )
}

/// kube-apiserver's answer to a strategic merge patch that does not apply
/// (its patch handler's reading of apimachinery's errors): format errors
/// are 400 BadRequest, lists of lists and retainKeys mismatches a bare 422,
/// anything else a 500 carrying the message as is.
fn smp_error(e: SmpError) -> ApiError {
    match e {
        SmpError::BadRequest(msg) => ApiError::bad_request(msg),
        SmpError::Unprocessable(_) => ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        ),
        SmpError::Internal(msg) => ApiError::new(500, "", msg),
    }
}

/// `current` with the patch applied.
pub fn apply(
    res: &ResourceDef,
    name: &str,
    content_type: &str,
    current: &Value,
    body: &[u8],
) -> Result<Value, ApiError> {
    let mt = media_type(content_type);
    let parsed: Value = match mt {
        "application/json-patch+json"
        | "application/merge-patch+json"
        | "application/strategic-merge-patch+json" => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
        _ => return Err(ApiError::unsupported_media(content_type)),
    };
    match mt {
        "application/json-patch+json" => {
            let ops: json_patch::Patch = serde_json::from_value(parsed)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            let mut doc = current.clone();
            json_patch::patch(&mut doc, &ops)
                .map_err(|e| patch_error(res, name, body, &e.to_string()))?;
            Ok(doc)
        }
        "application/merge-patch+json" => {
            if !parsed.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: a merge patch must be a JSON object",
                ));
            }
            let mut doc = current.clone();
            json_patch::merge(&mut doc, &parsed);
            Ok(doc)
        }
        _ => strategic::apply(res.kind, current, &parsed).map_err(smp_error),
    }
}
