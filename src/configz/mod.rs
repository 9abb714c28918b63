//! /configz: named configuration sections served as one JSON object,
//! `{"<name>": <section>, ...}` with names sorted. The kubelet registers its
//! merged configuration as `kubeletconfig`.
//!
//! Unlike Go's package-global registry, a [`Configz`] is a value the stages
//! share; the HTTP handler renders whatever is registered at request time.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use http::{HeaderValue, Request, StatusCode, header};
use serde::Serialize;

use crate::util::router::{Handler, HandlerFuture, RequestBody, Router, RouterError, respond};

/// The section name the kubelet uses for its configuration.
pub const KUBELET_CONFIG: &str = "kubeletconfig";
/// Where the handler is mounted.
pub const CONFIGZ_PATH: &str = "/configz";

/// Errors of the registry.
#[derive(Debug, thiserror::Error)]
pub enum ConfigzError {
    #[error("register config {0:?} twice")]
    Duplicate(String),
    #[error("error marshaling json for {name:?}: {source}")]
    Marshal {
        name: String,
        source: serde_json::Error,
    },
    #[error("config {0:?} is not registered")]
    NotRegistered(String),
}

/// The registry. Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct Configz {
    sections: Arc<RwLock<BTreeMap<String, serde_json::Value>>>,
}

/// A registered section, whose value can be (re)set.
#[derive(Clone, Debug)]
pub struct ConfigzSection {
    name: String,
    registry: Configz,
}

impl Configz {
    pub fn new() -> Self {
        Self::default()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, serde_json::Value>> {
        match self.sections.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, serde_json::Value>> {
        match self.sections.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Registers a section (`null` until set); a name registers once.
    pub fn register(&self, name: &str) -> Result<ConfigzSection, ConfigzError> {
        let mut sections = self.write();
        if sections.contains_key(name) {
            return Err(ConfigzError::Duplicate(name.to_string()));
        }
        sections.insert(name.to_string(), serde_json::Value::Null);
        Ok(ConfigzSection {
            name: name.to_string(),
            registry: self.clone(),
        })
    }

    /// Removes a section.
    pub fn delete(&self, name: &str) {
        self.write().remove(name);
    }

    /// The JSON document /configz serves.
    pub fn render(&self) -> Vec<u8> {
        let sections = self.read();
        let mut out = serde_json::Map::new();
        for (k, v) in sections.iter() {
            out.insert(k.clone(), v.clone());
        }
        serde_json::Value::Object(out).to_string().into_bytes()
    }

    /// Registers the `/configz` handler on a router.
    pub fn install(&self, router: &mut Router) -> Result<(), RouterError> {
        router.handle(CONFIGZ_PATH, Arc::new(ConfigzHandler(self.clone())))
    }
}

impl ConfigzSection {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the section's value (serialized now).
    pub fn set<T: Serialize + ?Sized>(&self, value: &T) -> Result<(), ConfigzError> {
        let json = serde_json::to_value(value).map_err(|source| ConfigzError::Marshal {
            name: self.name.clone(),
            source,
        })?;
        let mut sections = self.registry.write();
        match sections.get_mut(&self.name) {
            Some(slot) => {
                *slot = json;
                Ok(())
            }
            None => Err(ConfigzError::NotRegistered(self.name.clone())),
        }
    }
}

struct ConfigzHandler(Configz);

impl Handler for ConfigzHandler {
    fn call(&self, _req: Request<RequestBody>) -> HandlerFuture {
        let body = self.0.render();
        Box::pin(async move {
            let mut resp = respond(StatusCode::OK, "application/json", body);
            resp.headers_mut().insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            resp
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        kind: &'static str,
        read_only_port: u16,
        eviction_hard: BTreeMap<&'static str, &'static str>,
    }

    #[tokio::test]
    async fn sections_render_sorted_with_field_order_kept() {
        let cz = Configz::new();
        assert_eq!(cz.render(), b"{}");
        let kubelet = cz.register(KUBELET_CONFIG).unwrap();
        let other = cz.register("aaa").unwrap();
        assert_eq!(
            String::from_utf8(cz.render()).unwrap(),
            r#"{"aaa":null,"kubeletconfig":null}"#
        );
        kubelet
            .set(&Sample {
                kind: "KubeletConfiguration",
                read_only_port: 0,
                eviction_hard: [("memory.available", "100Mi"), ("imagefs.available", "15%")].into(),
            })
            .unwrap();
        other.set(&vec![1, 2]).unwrap();
        assert_eq!(
            String::from_utf8(cz.render()).unwrap(),
            r#"{"aaa":[1,2],"kubeletconfig":{"kind":"KubeletConfiguration","readOnlyPort":0,"evictionHard":{"imagefs.available":"15%","memory.available":"100Mi"}}}"#
        );

        assert!(matches!(
            cz.register("aaa"),
            Err(ConfigzError::Duplicate(_))
        ));
        assert_eq!(
            cz.register("aaa").unwrap_err().to_string(),
            "register config \"aaa\" twice"
        );
        cz.delete("aaa");
        assert!(matches!(other.set(&1), Err(ConfigzError::NotRegistered(_))));

        let mut router = Router::new();
        cz.install(&mut router).unwrap();
        let crate::util::router::Route::Handler { handler, .. } = router.route("/configz", None)
        else {
            panic!("configz not routed");
        };
        let resp = handler
            .call(
                Request::get("/configz")
                    .body(crate::util::router::request_body(""))
                    .unwrap(),
            )
            .await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(resp.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["kubeletconfig"]["kind"], "KubeletConfiguration");
        assert!(v.get("aaa").is_none());
    }
}
