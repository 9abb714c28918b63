//! Small helpers for API tests: decoding literals, API errors, skip notes,
//! object builders and kube watcher event helpers.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::testapi::Unsupported;

/// How long the helpers wait for an event.
pub const WAIT: Duration = Duration::from_secs(10);

/// A typed object from a JSON literal.
pub fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("test object does not decode: {e}"))
}

/// The Status of a failed API call (panics when the call did not fail
/// with an API error).
pub fn api_error(r: Result<impl std::fmt::Debug, kube::Error>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Prints why a double-only step is skipped on a real server.
pub fn skip(what: Unsupported) {
    eprintln!("note: skipping a double-only step: {what}");
}

/// A ConfigMap with one data key.
pub fn configmap(name: &str, labels: Value) -> ConfigMap {
    obj(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}))
}

/// A one-container busybox pod, bound to `node` when given.
pub fn pod(name: &str, node: Option<&str>, labels: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"]}]},
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    obj(p)
}

/// The next watcher event, logging the errors the watcher recovers from.
pub async fn next_event<S, K>(s: &mut S) -> Event<K>
where
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>> + Unpin,
{
    loop {
        match tokio::time::timeout(WAIT, s.next()).await {
            Ok(Some(Ok(e))) => return e,
            Ok(Some(Err(e))) => eprintln!("watcher error (it recovers): {e}"),
            Ok(None) => panic!("watcher stream ended"),
            Err(_) => panic!("no watcher event within {WAIT:?}"),
        }
    }
}

/// Names applied by a (re)list, up to its InitDone.
pub async fn until_init_done<S, K>(s: &mut S) -> Vec<String>
where
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>> + Unpin,
    K: kube::Resource,
{
    let mut names = Vec::new();
    loop {
        match next_event(s).await {
            Event::Init => names.clear(),
            Event::InitApply(k) => names.push(k.meta().name.clone().unwrap_or_default()),
            Event::InitDone => return names,
            Event::Apply(k) | Event::Delete(k) => {
                panic!("unexpected event for {:?} before InitDone", k.meta().name)
            }
        }
    }
}
