//! Authentication (client certificate, bootstrap token, service account
//! token, static token) and the double's small authorizer.

use base64::Engine;
use serde_json::Value;

use super::errors::ApiError;
use super::meta;
use super::pki::Subject;
use super::resources::{self, ResourceDef};
use super::server::Shared;
use super::store::ObjKey;

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn new(name: &str, groups: &[&str]) -> Self {
        UserInfo {
            name: name.to_string(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    pub fn anonymous() -> Self {
        Self::new("system:anonymous", &["system:unauthenticated"])
    }

    /// The cluster admin the double's own helpers act as.
    pub fn admin() -> Self {
        Self::new(
            "kubernetes-admin",
            &["system:masters", "system:authenticated"],
        )
    }

    pub fn from_cert(s: &Subject) -> Self {
        let mut u = UserInfo {
            name: s.common_name.clone(),
            uid: String::new(),
            groups: s.organizations.clone(),
        };
        u.groups.push("system:authenticated".into());
        u
    }

    pub fn in_group(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }

    pub fn is_anonymous(&self) -> bool {
        self.name == "system:anonymous"
    }

    /// The node name of a `system:node:<name>` user in group system:nodes.
    pub fn node_name(&self) -> Option<&str> {
        if !self.in_group("system:nodes") {
            return None;
        }
        self.name.strip_prefix("system:node:")
    }
}

fn decode_b64(v: Option<&Value>) -> Option<String> {
    let s = v?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    String::from_utf8(bytes).ok()
}

fn is_bootstrap_token(t: &str) -> Option<(&str, &str)> {
    let (id, secret) = t.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// A bootstrap token, checked against its Secret in kube-system as the
/// bootstrap token authenticator does.
fn bootstrap_user(shared: &Shared, id: &str, secret: &str) -> Option<UserInfo> {
    let res = resources::core("secrets");
    let obj = shared.store.tx(|tx| {
        tx.get(
            res,
            &ObjKey::new("kube-system", &format!("bootstrap-token-{id}")),
        )
        .cloned()
    })?;
    if meta::str_at(&obj, &["type"]) != Some("bootstrap.kubernetes.io/token") {
        return None;
    }
    let data = obj.get("data")?;
    if decode_b64(data.get("token-id"))? != id || decode_b64(data.get("token-secret"))? != secret {
        return None;
    }
    if decode_b64(data.get("usage-bootstrap-authentication")).as_deref() != Some("true") {
        return None;
    }
    if let Some(exp) = decode_b64(data.get("expiration")) {
        let t = meta::parse_time(&exp)?;
        if t < jiff::Timestamp::now() {
            return None;
        }
    }
    let mut groups = vec!["system:bootstrappers".to_string()];
    if let Some(extra) = decode_b64(data.get("auth-extra-groups")) {
        groups.extend(
            extra
                .split(',')
                .map(str::trim)
                .filter(|g| g.starts_with("system:bootstrappers:"))
                .map(str::to_string),
        );
    }
    groups.push("system:authenticated".into());
    Some(UserInfo {
        name: format!("system:bootstrap:{id}"),
        uid: String::new(),
        groups,
    })
}

/// The user a bearer token names, if it is valid.
pub fn token_user(shared: &Shared, token: &str) -> Option<UserInfo> {
    if let Some((id, secret)) = is_bootstrap_token(token) {
        return bootstrap_user(shared, id, secret);
    }
    if let Some(u) = shared.tokens.static_user(token) {
        return Some(u);
    }
    let claims = shared.tokens.verify(token)?;
    super::tokens::service_account_user(shared, &claims)
}

/// Client certificate first, then the bearer token, else anonymous.
pub fn authenticate(
    shared: &Shared,
    authorization: Option<&str>,
    cert_user: Option<&UserInfo>,
) -> Result<UserInfo, ApiError> {
    if let Some(u) = cert_user {
        return Ok(u.clone());
    }
    match authorization {
        Some(h) => {
            let token = h
                .strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
                .map(str::trim)
                .ok_or_else(ApiError::unauthorized)?;
            token_user(shared, token).ok_or_else(ApiError::unauthorized)
        }
        None => Ok(UserInfo::anonymous()),
    }
}

/// What the authorizer decides on.
pub struct Attributes<'a> {
    pub verb: &'a str,
    pub resource: Option<&'a ResourceDef>,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub path: &'a str,
}

const PUBLIC_PATHS: &[&str] = &["/version", "/healthz", "/livez", "/readyz"];

fn allowed(user: &UserInfo, a: &Attributes<'_>) -> bool {
    if user.in_group("system:masters") {
        return true;
    }
    let Some(res) = a.resource else {
        // Health and version are public; discovery needs an authenticated user.
        return PUBLIC_PATHS.contains(&a.path) || !user.is_anonymous();
    };
    if user.is_anonymous() {
        return false;
    }
    if user.in_group("system:bootstrappers") {
        return res.plural == "certificatesigningrequests"
            && a.subresource.is_none()
            && ["create", "get", "list", "watch"].contains(&a.verb);
    }
    true
}

/// Allows the request or answers 403 as RBAC words it.
pub fn authorize(user: &UserInfo, a: &Attributes<'_>) -> Result<(), ApiError> {
    if allowed(user, a) {
        return Ok(());
    }
    let Some(res) = a.resource else {
        return Err(ApiError::forbidden(format!(
            "forbidden: User \"{}\" cannot {} path \"{}\"",
            user.name, a.verb, a.path
        )));
    };
    let what = match a.name {
        Some(n) => format!("{} \"{}\"", res.id, n),
        None => res.id.to_string(),
    };
    let resource = match a.subresource {
        Some(s) => format!("{}/{}", res.plural, s),
        None => res.plural.to_string(),
    };
    let scope = match a.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    let mut e = ApiError::forbidden(format!(
        "{what} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        user.name, a.verb, res.group
    ));
    let mut d = serde_json::json!({ "kind": res.plural });
    if let Some(n) = a.name {
        d["name"] = Value::String(n.to_string());
    }
    if !res.group.is_empty() {
        d["group"] = Value::String(res.group.to_string());
    }
    e.details = Some(Box::new(d));
    Err(e)
}
