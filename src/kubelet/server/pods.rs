//! `/pods` (the desired pods with their statuses, on the main and read-only
//! servers) and `/runningpods/` (what the runtime runs, a debugging handler)
//! as the Go kubelet serves them: a v1 PodList in JSON.
//!
//! The JSON follows Go's encoding where clients see a difference: list
//! items carry no apiVersion/kind, unset object timestamps are `null`
//! (`creationTimestamp`, a condition's `lastProbeTime`), a container's
//! `resources` is always an object, and an empty list has `"items": null`.

use std::sync::Arc;

use async_trait::async_trait;
use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value};

use super::router::{Handler, RequestBody, handler_fn, http_error, respond};

/// The content type of JSON answers.
pub const APPLICATION_JSON: &str = "application/json";

/// Where the handlers get their pods.
#[async_trait]
pub trait PodsProvider: Send + Sync + 'static {
    /// The pods bound to the kubelet, static pods with the kubelet's own
    /// status (GetPods).
    fn get_pods(&self) -> Vec<Pod>;
    /// The pods the runtime runs, as API pods (GetRunningPods).
    async fn get_running_pods(&self) -> Result<Vec<Pod>, String>;
}

fn set_null_if_absent(obj: &mut Map<String, Value>, key: &str) {
    obj.entry(key.to_string()).or_insert(Value::Null);
}

fn go_style_pod(pod: &Pod) -> Value {
    let mut v = serde_json::to_value(pod).unwrap_or(Value::Null);
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    obj.shift_remove("apiVersion");
    obj.shift_remove("kind");
    if let Some(meta) = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
    {
        set_null_if_absent(meta, "creationTimestamp");
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        for list in ["initContainers", "containers"] {
            for c in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(c) = c.as_object_mut() {
                    c.entry("resources")
                        .or_insert_with(|| Value::Object(Map::new()));
                }
            }
        }
    }
    let status = obj
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(status) = status.as_object_mut() {
        for c in status
            .get_mut("conditions")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(c) = c.as_object_mut() {
                set_null_if_absent(c, "lastProbeTime");
                set_null_if_absent(c, "lastTransitionTime");
            }
        }
    }
    v
}

/// The PodList document for `pods`.
pub fn encode_pod_list(pods: &[Pod]) -> Vec<u8> {
    let items: Value = if pods.is_empty() {
        Value::Null
    } else {
        Value::Array(pods.iter().map(go_style_pod).collect())
    };
    let list = serde_json::json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {},
        "items": items,
    });
    let mut out = serde_json::to_vec(&list).unwrap_or_default();
    out.push(b'\n');
    out
}

fn method_allowed(req: &http::Request<RequestBody>) -> bool {
    req.method() == Method::GET || req.method() == Method::HEAD
}

/// `/pods`.
pub fn pods_handler(provider: Arc<dyn PodsProvider>) -> Arc<dyn Handler> {
    handler_fn(move |req| {
        let provider = provider.clone();
        async move {
            if !method_allowed(&req) {
                return http_error(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
            }
            respond(
                StatusCode::OK,
                APPLICATION_JSON,
                encode_pod_list(&provider.get_pods()),
            )
        }
    })
}

/// `/runningpods/`.
pub fn running_pods_handler(provider: Arc<dyn PodsProvider>) -> Arc<dyn Handler> {
    handler_fn(move |req| {
        let provider = provider.clone();
        async move {
            if !method_allowed(&req) {
                return http_error(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
            }
            match provider.get_running_pods().await {
                Ok(pods) => respond(StatusCode::OK, APPLICATION_JSON, encode_pod_list(&pods)),
                Err(e) => http_error(StatusCode::INTERNAL_SERVER_ERROR, &e),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::server::router::request_body;
    use http_body_util::BodyExt;
    use k8s_openapi::api::core::v1::{Container, PodCondition, PodSpec, PodStatus};

    struct Fixed(Vec<Pod>);

    #[async_trait]
    impl PodsProvider for Fixed {
        fn get_pods(&self) -> Vec<Pod> {
            self.0.clone()
        }
        async fn get_running_pods(&self) -> Result<Vec<Pod>, String> {
            Err("runtime down".into())
        }
    }

    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web-node".into());
        p.metadata.namespace = Some("default".into());
        p.spec = Some(PodSpec {
            containers: vec![Container {
                name: "web".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    async fn get(h: &Arc<dyn Handler>, method: Method) -> (u16, String) {
        let req = http::Request::builder()
            .method(method)
            .uri("/pods")
            .body(request_body(""))
            .unwrap();
        let resp = h.call(req).await;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn pod_list_in_go_shape() {
        let h = pods_handler(Arc::new(Fixed(vec![pod()])));
        let (status, body) = get(&h, Method::GET).await;
        assert_eq!(status, 200);
        assert!(body.ends_with('\n'));
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["kind"], "PodList");
        assert_eq!(v["apiVersion"], "v1");
        let item = &v["items"][0];
        assert!(item.get("kind").is_none() && item.get("apiVersion").is_none());
        let keys: Vec<&String> = item.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["metadata", "spec", "status"], "Go's field order");
        assert_eq!(item["metadata"]["creationTimestamp"], Value::Null);
        assert!(
            item["metadata"]
                .as_object()
                .unwrap()
                .contains_key("creationTimestamp")
        );
        assert_eq!(
            item["spec"]["containers"][0]["resources"],
            serde_json::json!({})
        );
        assert_eq!(
            item["status"]["conditions"][0]["lastProbeTime"],
            Value::Null
        );
        assert_eq!(item["status"]["phase"], "Running");

        let empty = pods_handler(Arc::new(Fixed(vec![])));
        let (_, body) = get(&empty, Method::GET).await;
        assert_eq!(
            body,
            "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":null}\n"
        );
        assert_eq!(get(&empty, Method::POST).await.0, 405);
    }

    #[tokio::test]
    async fn running_pods_report_runtime_errors() {
        let h = running_pods_handler(Arc::new(Fixed(vec![])));
        let (status, body) = get(&h, Method::GET).await;
        assert_eq!((status, body.as_str()), (500, "runtime down\n"));
    }
}
