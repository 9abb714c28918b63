//! One HTTP request: authentication, routing, fault injection,
//! authorization, content negotiation, dispatch, and the request log.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::auth::{self, Attributes, UserInfo};
use super::delete::{self, DeleteOptions};
use super::discovery;
use super::errors::ApiError;
use super::faults::{FaultAction, FaultTarget, Verb};
use super::list::{self, ListQuery};
use super::ops::{self, Caller};
use super::reqlog::RequestRecord;
use super::resources::{self, ResourceDef};
use super::selectors::{FieldSelector, LabelSelector, Selectors};
use super::server::Shared;
use super::tokens;
use super::watch::{self, WatchQuery};

pub type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

pub fn full(code: u16, content_type: &str, bytes: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(bytes.into()).boxed());
    *r.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    if let Ok(v) = content_type.parse() {
        h.insert("content-type", v);
    }
    if let Ok(v) = "no-cache, private".parse() {
        h.insert("cache-control", v);
    }
    r
}

pub fn json_response(code: u16, v: &Value) -> Response<Body> {
    full(code, "application/json", v.to_string())
}

pub fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = json_response(e.code, &e.to_status());
    if let Some(s) = e.retry_after
        && let Ok(v) = s.to_string().parse()
    {
        r.headers_mut().insert("retry-after", v);
    }
    r
}

/// What a path addresses.
enum Target {
    NonResource,
    Resource {
        res: &'static ResourceDef,
        namespace: Option<String>,
        name: Option<String>,
        sub: Option<String>,
        verb: Verb,
    },
}

fn not_found_path() -> ApiError {
    let mut e = ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    e.details = Some(Box::new(serde_json::json!({})));
    e
}

fn route(method: &Method, path: &str, q: &HashMap<String, String>) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, mut rest) = match segs.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest.to_vec()),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => {
            (*group, *version, rest.to_vec())
        }
        _ => return Ok(Target::NonResource),
    };
    let mut watch = matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    if rest.first() == Some(&"watch") {
        watch = true;
        rest.remove(0);
    }
    let namespaced_path = rest.len() >= 3
        && rest[0] == "namespaces"
        && resources::lookup(group, version, rest[2]).is_some_and(|r| r.namespaced);
    let (namespace, plural, name, sub) = if namespaced_path {
        if rest.len() > 5 {
            return Err(not_found_path());
        }
        (
            Some(rest[1]),
            rest[2],
            rest.get(3).copied(),
            rest.get(4).copied(),
        )
    } else {
        if rest.len() > 3 {
            return Err(not_found_path());
        }
        (None, rest[0], rest.get(1).copied(), rest.get(2).copied())
    };
    let res = resources::lookup(group, version, plural).ok_or_else(not_found_path)?;
    if namespace.is_some() != res.namespaced && (name.is_some() || *method != Method::GET) {
        return Err(not_found_path());
    }
    if let Some(s) = sub
        && !res.has_subresource(s)
    {
        return Err(not_found_path());
    }
    let verb = match (method.as_str(), name.is_some()) {
        ("GET", _) if watch => Verb::Watch,
        ("GET", true) => Verb::Get,
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("POST", true) if sub == Some("token") => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method} {path})"
            )));
        }
    };
    if res.virtual_create && verb != Verb::Create {
        return Err(not_found_path());
    }
    Ok(Target::Resource {
        res,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
        verb,
    })
}

/// Whether the client wants PartialObjectMetadata; 406 when it accepts
/// nothing the double writes.
fn negotiate(accept: Option<&str>) -> Result<bool, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(false);
    };
    for part in accept.split(',') {
        let mut it = part.split(';');
        let mt = it.next().unwrap_or("").trim();
        let params: HashMap<&str, &str> = it
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        if !matches!(mt, "application/json" | "application/*" | "*/*") {
            continue;
        }
        match params.get("as") {
            None => return Ok(false),
            Some(&"PartialObjectMetadata" | &"PartialObjectMetadataList")
                if params.get("g") == Some(&"meta.k8s.io") =>
            {
                return Ok(true);
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(
        "only the following media types are accepted: application/json, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    ))
}

fn json_body_type(content_type: Option<&str>) -> Result<(), ApiError> {
    match content_type.map(|c| c.split(';').next().unwrap_or("").trim()) {
        None | Some("") | Some("application/json") => Ok(()),
        Some(other) => Err(ApiError::unsupported_media(other)),
    }
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
}

fn selectors(q: &HashMap<String, String>, res: &ResourceDef) -> Result<Selectors, ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map(String::as_str).unwrap_or(""),
        res,
    )
    .map_err(ApiError::bad_request)?;
    Ok(Selectors { labels, fields })
}

fn non_resource(shared: &Shared, path: &str) -> Result<Response<Body>, ApiError> {
    let p = path.trim_end_matches('/');
    let segs: Vec<&str> = p.trim_matches('/').split('/').collect();
    let v = match segs.as_slice() {
        ["version"] => discovery::version(&shared.opts),
        ["healthz"] | ["livez"] | ["readyz"] => {
            return Ok(full(200, "text/plain; charset=utf-8", "ok"));
        }
        ["api"] => discovery::core_versions(&shared.addr.to_string()),
        ["api", v] => discovery::resource_list("", v).ok_or_else(not_found_path)?,
        ["apis"] => discovery::groups(),
        ["apis", g] => discovery::group(g).ok_or_else(not_found_path)?,
        ["apis", g, v] => discovery::resource_list(g, v).ok_or_else(not_found_path)?,
        _ => return Err(not_found_path()),
    };
    Ok(json_response(200, &v))
}

struct Parts {
    method: Method,
    path: String,
    query: HashMap<String, String>,
    content_type: Option<String>,
    accept: Option<String>,
    body: Bytes,
}

#[allow(clippy::too_many_arguments)]
fn resource(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    p: &Parts,
    user: &UserInfo,
    res: &'static ResourceDef,
    namespace: Option<&str>,
    name: Option<&str>,
    sub: Option<&str>,
    verb: Verb,
) -> Result<Response<Body>, ApiError> {
    let partial = negotiate(p.accept.as_deref())?;
    let ns = namespace.unwrap_or("");
    let name_s = name.unwrap_or("");
    let c = Caller {
        user,
        dry_run: p.query.get("dryRun").is_some_and(|d| d == "All"),
    };
    let render = |v: Value| {
        if partial {
            list::as_partial_metadata(&v)
        } else {
            v
        }
    };
    match verb {
        Verb::Get => Ok(json_response(
            200,
            &render(list::get(shared, res, ns, name_s)?),
        )),
        Verb::List => {
            let q = ListQuery {
                selectors: selectors(&p.query, res)?,
                limit: p.query.get("limit").and_then(|l| l.parse().ok()),
                continue_token: p.query.get("continue").filter(|c| !c.is_empty()).cloned(),
                resource_version: p.query.get("resourceVersion").cloned(),
                resource_version_match: p.query.get("resourceVersionMatch").cloned(),
            };
            let l = list::list(shared, res, namespace, &q)?;
            Ok(json_response(
                200,
                &if partial {
                    list::list_as_partial_metadata(&l)
                } else {
                    l
                },
            ))
        }
        Verb::Watch => {
            let mut sel = selectors(&p.query, res)?;
            if let Some(n) = name {
                let s = format!("metadata.name={n}");
                sel.fields = FieldSelector::parse(&s, res).map_err(ApiError::bad_request)?;
            }
            let q = WatchQuery {
                selectors: sel,
                resource_version: p.query.get("resourceVersion").cloned(),
                bookmarks: p
                    .query
                    .get("allowWatchBookmarks")
                    .is_some_and(|b| b == "true" || b == "1"),
                timeout: p
                    .query
                    .get("timeoutSeconds")
                    .and_then(|t| t.parse().ok())
                    .map(Duration::from_secs),
            };
            watch::start(
                shared.clone(),
                cancel.clone(),
                res,
                namespace.map(str::to_string),
                q,
                partial,
            )
        }
        Verb::Create => {
            json_body_type(p.content_type.as_deref())?;
            let mut body = parse_body(&p.body)?;
            if sub == Some("token") {
                return Ok(json_response(
                    201,
                    &tokens::token_request(shared, ns, name_s, body)?,
                ));
            }
            if res.virtual_create {
                ops::check_kind(res, &mut body)?;
                let out = match res.kind {
                    "TokenReview" => tokens::token_review(shared, body),
                    _ => tokens::subject_access_review(shared, body),
                };
                return Ok(json_response(201, &out));
            }
            Ok(json_response(
                201,
                &render(ops::create(shared, res, ns, body, &c)?),
            ))
        }
        Verb::Update => {
            json_body_type(p.content_type.as_deref())?;
            let body = parse_body(&p.body)?;
            let (code, v) = ops::update(shared, res, ns, name_s, sub, body, &c)?;
            Ok(json_response(code, &render(v)))
        }
        Verb::Patch => {
            let ct = p.content_type.as_deref().unwrap_or("");
            let v = ops::patch(shared, res, ns, name_s, sub, ct, &p.body, &c)?;
            Ok(json_response(200, &render(v)))
        }
        Verb::Delete => {
            let opts = DeleteOptions::parse(
                p.query.get("gracePeriodSeconds").map(String::as_str),
                &p.body,
            )?;
            Ok(json_response(
                200,
                &delete::delete(shared, res, ns, name_s, &opts, &c)?,
            ))
        }
        Verb::DeleteCollection => {
            let opts = DeleteOptions::parse(
                p.query.get("gracePeriodSeconds").map(String::as_str),
                &p.body,
            )?;
            let sel = selectors(&p.query, res)?;
            Ok(json_response(
                200,
                &delete::delete_collection(shared, res, namespace, &sel, &opts, &c)?,
            ))
        }
    }
}

/// Serves one request; `Err` closes the connection without an answer.
pub async fn handle(
    shared: Arc<Shared>,
    cert_user: Option<UserInfo>,
    cancel: CancellationToken,
    req: Request<Incoming>,
) -> Result<Response<Body>, std::io::Error> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let authorization = header("authorization");
    let content_type = header("content-type");
    let accept = header("accept");
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or("").to_string();
    let query: HashMap<String, String> = url::form_urlencoded::parse(raw_query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Err(std::io::Error::other(e)),
    };
    let p = Parts {
        method,
        path,
        query,
        content_type,
        accept,
        body,
    };
    let mut record = RequestRecord {
        at: SystemTime::now(),
        method: p.method.to_string(),
        path: p.path.clone(),
        query: raw_query,
        content_type: p.content_type.clone(),
        accept: p.accept.clone(),
        user: UserInfo::default(),
        verb: String::new(),
        resource: None,
        subresource: None,
        namespace: None,
        name: None,
        status: 0,
        body: p.body.clone(),
    };
    let result = serve(
        &shared,
        &cancel,
        &p,
        authorization.as_deref(),
        cert_user.as_ref(),
        &mut record,
    )
    .await;
    match result {
        Ok(Some(resp)) => {
            record.status = resp.status().as_u16();
            shared.log.push(record);
            Ok(resp)
        }
        Ok(None) => {
            shared.log.push(record);
            Err(std::io::Error::other(
                "connection dropped by an injected fault",
            ))
        }
        Err(e) => {
            record.status = e.code;
            shared.log.push(record);
            Ok(error_response(&e))
        }
    }
}

async fn serve(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    p: &Parts,
    authorization: Option<&str>,
    cert_user: Option<&UserInfo>,
    record: &mut RequestRecord,
) -> Result<Option<Response<Body>>, ApiError> {
    let user = auth::authenticate(shared, authorization, cert_user)?;
    record.user = user.clone();
    let target = route(&p.method, &p.path, &p.query)?;
    let (verb, res, namespace, name, sub) = match &target {
        Target::NonResource => (None, None, None, None, None),
        Target::Resource {
            res,
            namespace,
            name,
            sub,
            verb,
        } => (
            Some(*verb),
            Some(*res),
            namespace.as_deref(),
            name.as_deref(),
            sub.as_deref(),
        ),
    };
    record.verb = verb
        .map(Verb::as_str)
        .unwrap_or_else(|| p.method.as_str())
        .to_lowercase();
    record.resource = res.map(|r| r.plural.to_string());
    record.subresource = sub.map(str::to_string);
    record.namespace = namespace.map(str::to_string);
    record.name = name.map(str::to_string);
    let fault = shared.faults.take(&FaultTarget {
        verb,
        resource: res.map(|r| r.plural),
        subresource: sub,
        name,
        user: &user.name,
    });
    match fault {
        Some(FaultAction::Status(code)) => {
            return Err(match code {
                429 => ApiError::too_many_requests(1),
                500 => ApiError::internal("injected fault"),
                503 => ApiError::service_unavailable("injected fault"),
                504 => ApiError::timeout("injected fault"),
                c => ApiError::new(c, "InternalError", "injected fault"),
            });
        }
        Some(FaultAction::TooManyRequests { retry_after_secs }) => {
            return Err(ApiError::too_many_requests(retry_after_secs));
        }
        Some(FaultAction::Delay(d)) => tokio::time::sleep(d).await,
        Some(FaultAction::Drop) => return Ok(None),
        None => {}
    }
    auth::authorize(
        &user,
        &Attributes {
            verb: &record.verb,
            resource: res,
            subresource: sub,
            namespace,
            name,
            path: &p.path,
        },
    )?;
    match target {
        Target::NonResource => non_resource(shared, &p.path).map(Some),
        Target::Resource { res, verb, .. } => {
            resource(shared, cancel, p, &user, res, namespace, name, sub, verb).map(Some)
        }
    }
}
