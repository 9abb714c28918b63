//! A container's environment as the kubelet computes it before creating the
//! container: envFrom sources, then env entries (literal values with `$(VAR)`
//! expansion, field refs, resource field refs, ConfigMap and Secret keys),
//! then the service variables nothing else set.
//!
//! Order: the Go kubelet collects envFrom and env into a map and emits it in
//! Go's random map order, then the service variables in random order too. We
//! emit a stable order that is one of Go's possible ones: envFrom keys (per
//! source, sorted by key), then env entries in declaration order (a name
//! defined twice keeps its first position and its last value), then the
//! service variables.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Container, ObjectFieldSelector, Pod, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::error::EnvError;
use super::fieldpath::{convert_downward_api_field_label, extract_field_path_as_string};
use super::getters::{ConfigMapGetter, ObjectKind, SecretGetter};
use super::resource::{container_resource_runtime_value, default_pod_limits_for_downward_api};
use super::services::service_env_vars;
use crate::kubelet::container::EnvVar;
use crate::kubelet::container::helpers::{is_ipv4_string, is_ipv6_string};
use crate::kubelet::container::validation::is_env_var_name;
use crate::kubelet::expansion;
use crate::kubelet::types::is_static_pod;

/// Event reason for envFrom keys skipped as invalid variable names.
pub const REASON_INVALID_ENV_VAR_NAMES: &str = "InvalidEnvironmentVariableNames";

/// What the environment of a pod's containers depends on besides the spec.
pub struct EnvContext<'a> {
    /// The pod's primary IP ("" before the sandbox has one).
    pub pod_ip: &'a str,
    /// All pod IPs.
    pub pod_ips: &'a [String],
    /// The kubelet's node IPs (`--node-ip`), which set the preferred family.
    pub node_ips: &'a [IpAddr],
    /// The node's host IPs as its Node object reports them, primary first.
    pub host_ips: &'a [String],
    /// The node's allocatable resources (defaults for unset limits).
    pub node_allocatable: &'a BTreeMap<String, ApiQuantity>,
    /// All services the kubelet knows.
    pub services: &'a [Service],
    /// Whether the service list has been read at least once.
    pub services_synced: bool,
    /// `--master-service-namespace` (default `default`).
    pub master_service_namespace: &'a str,
    /// ConfigMap access; `None` without an API server.
    pub config_maps: Option<&'a dyn ConfigMapGetter>,
    /// Secret access; `None` without an API server.
    pub secrets: Option<&'a dyn SecretGetter>,
}

/// A warning event the caller records on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvEvent {
    pub reason: &'static str,
    pub message: String,
}

/// The resolved environment and the events to record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedEnv {
    pub envs: Vec<EnvVar>,
    pub events: Vec<EnvEvent>,
}

/// An insertion-ordered string map: first position kept, last value wins.
#[derive(Default)]
struct OrderedEnv {
    entries: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl OrderedEnv {
    fn set(&mut self, k: String, v: String) {
        match self.index.get(&k) {
            Some(i) => self.entries[*i].1 = v,
            None => {
                self.index.insert(k.clone(), self.entries.len());
                self.entries.push((k, v));
            }
        }
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.index.get(k).map(|i| self.entries[*i].1.as_str())
    }

    fn contains(&self, k: &str) -> bool {
        self.index.contains_key(k)
    }
}

/// Per-call cache of fetched objects, as Go keeps one per container.
#[derive(Default)]
struct Fetched {
    config_maps: HashMap<String, ObjectData>,
    secrets: HashMap<String, ObjectData>,
}

type ObjectData = BTreeMap<String, String>;

/// Outcome of looking up an object: its data, or "skip" for a missing
/// optional one.
enum Lookup<'a> {
    Found(&'a BTreeMap<String, String>),
    SkipOptional,
}

impl Fetched {
    async fn config_map<'s>(
        &'s mut self,
        ctx: &EnvContext<'_>,
        namespace: &str,
        name: &str,
        optional: bool,
    ) -> Result<Lookup<'s>, EnvError> {
        let fetch = async {
            let getter = ctx
                .config_maps
                .ok_or_else(|| no_client(ObjectKind::ConfigMap, namespace, name))?;
            let cm = getter.get_config_map(namespace, name).await?;
            Ok(cm.data.unwrap_or_default())
        };
        lookup(&mut self.config_maps, name, optional, fetch).await
    }

    async fn secret<'s>(
        &'s mut self,
        ctx: &EnvContext<'_>,
        namespace: &str,
        name: &str,
        optional: bool,
    ) -> Result<Lookup<'s>, EnvError> {
        let fetch = async {
            let getter = ctx
                .secrets
                .ok_or_else(|| no_client(ObjectKind::Secret, namespace, name))?;
            let s = getter.get_secret(namespace, name).await?;
            Ok(s.data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                .collect())
        };
        lookup(&mut self.secrets, name, optional, fetch).await
    }
}

fn no_client(kind: ObjectKind, namespace: &str, name: &str) -> EnvError {
    EnvError::NoClient {
        kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// The object's data from `cache`, else from `fetch` (run only then); a
/// missing optional object is skipped.
async fn lookup<'s>(
    cache: &'s mut HashMap<String, ObjectData>,
    name: &str,
    optional: bool,
    fetch: impl std::future::Future<Output = Result<ObjectData, EnvError>>,
) -> Result<Lookup<'s>, EnvError> {
    let slot = match cache.entry(name.to_string()) {
        Entry::Occupied(o) => return Ok(Lookup::Found(o.into_mut())),
        Entry::Vacant(v) => v,
    };
    match fetch.await {
        Ok(data) => Ok(Lookup::Found(slot.insert(data))),
        Err(EnvError::Get(e)) if e.is_not_found() && optional => Ok(Lookup::SkipOptional),
        Err(e) => Err(e),
    }
}

type IpPredicate = fn(&str) -> bool;

/// Orders pod IPs so the family of the node's primary IP comes first, one
/// IP per family.
pub fn sort_pod_ips(pod_ips: &[String], node_ips: &[IpAddr]) -> Vec<String> {
    let prefer_v6 = node_ips.first().is_some_and(|ip| match ip {
        IpAddr::V4(_) => false,
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_none(),
    });
    let (primary, secondary): (IpPredicate, IpPredicate) = if prefer_v6 {
        (is_ipv6_string, is_ipv4_string)
    } else {
        (is_ipv4_string, is_ipv6_string)
    };
    let mut out = Vec::with_capacity(2);
    if let Some(ip) = pod_ips.iter().find(|ip| primary(ip)) {
        out.push(ip.clone());
    }
    if let Some(ip) = pod_ips.iter().find(|ip| secondary(ip)) {
        out.push(ip.clone());
    }
    out
}

/// The value of a pod field selector.
pub fn pod_field_selector_runtime_value(
    fs: &ObjectFieldSelector,
    pod: &Pod,
    ctx: &EnvContext<'_>,
) -> Result<String, EnvError> {
    let path =
        convert_downward_api_field_label(fs.api_version.as_deref().unwrap_or(""), &fs.field_path)?;
    let pod_ips = sort_pod_ips(ctx.pod_ips, ctx.node_ips);
    let pod_ip = pod_ips.first().map(String::as_str).unwrap_or(ctx.pod_ip);
    let spec = pod.spec.as_ref();
    match path.as_str() {
        "spec.nodeName" => Ok(spec.and_then(|s| s.node_name.clone()).unwrap_or_default()),
        "spec.serviceAccountName" => Ok(spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default()),
        "status.hostIP" => ctx.host_ips.first().cloned().ok_or(EnvError::HostIpUnknown),
        "status.podIP" => Ok(pod_ip.to_string()),
        "status.podIPs" => Ok(pod_ips.join(",")),
        other => Ok(extract_field_path_as_string(pod, other)?),
    }
}

/// Computes the environment of `container` in `pod`.
pub async fn make_environment_variables(
    pod: &Pod,
    container: &Container,
    ctx: &EnvContext<'_>,
) -> Result<ResolvedEnv, EnvError> {
    let spec = pod.spec.as_ref();
    let enable_service_links = spec
        .and_then(|s| s.enable_service_links)
        .ok_or(EnvError::NilEnableServiceLinks)?;
    if !is_static_pod(pod) && !ctx.services_synced {
        return Err(EnvError::ServicesNotSynced);
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let service_list = service_env_vars(
        ctx.services,
        namespace,
        enable_service_links,
        ctx.master_service_namespace,
    );
    let service_env: HashMap<String, String> = service_list
        .iter()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();

    let mut events = Vec::new();
    let mut fetched = Fetched::default();
    let mut env = OrderedEnv::default();

    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        let (kind, name, data) = if let Some(cm) = &from.config_map_ref {
            let optional = cm.optional.unwrap_or(false);
            match fetched
                .config_map(ctx, namespace, &cm.name, optional)
                .await?
            {
                Lookup::SkipOptional => continue,
                Lookup::Found(d) => (ObjectKind::ConfigMap, cm.name.as_str(), d.clone()),
            }
        } else if let Some(s) = &from.secret_ref {
            let optional = s.optional.unwrap_or(false);
            match fetched.secret(ctx, namespace, &s.name, optional).await? {
                Lookup::SkipOptional => continue,
                Lookup::Found(d) => (ObjectKind::Secret, s.name.as_str(), d.clone()),
            }
        } else {
            continue;
        };
        let mut invalid = Vec::new();
        for (k, v) in data {
            let key = format!("{prefix}{k}");
            if !is_env_var_name(&key).is_empty() {
                invalid.push(key);
                continue;
            }
            env.set(key, v);
        }
        if !invalid.is_empty() {
            invalid.sort();
            events.push(EnvEvent {
                reason: REASON_INVALID_ENV_VAR_NAMES,
                message: format!(
                    "Keys [{}] from the EnvFrom {} {namespace}/{name} were skipped since they are considered invalid environment variable names.",
                    invalid.join(", "),
                    match kind {
                        ObjectKind::ConfigMap => "configMap",
                        ObjectKind::Secret => "secret",
                    }
                ),
            });
        }
    }

    for var in container.env.iter().flatten() {
        let literal = var.value.as_deref().unwrap_or("");
        let value = if !literal.is_empty() {
            expansion::expand(literal, |name| {
                if let Some(v) = env.get(name) {
                    v.to_string()
                } else if let Some(v) = service_env.get(name) {
                    v.clone()
                } else {
                    expansion::syntax_wrap(name)
                }
            })
        } else if let Some(src) = &var.value_from {
            if let Some(fr) = &src.field_ref {
                pod_field_selector_runtime_value(fr, pod, ctx)?
            } else if let Some(rf) = &src.resource_field_ref {
                let (dpod, dcontainer) =
                    default_pod_limits_for_downward_api(pod, container, ctx.node_allocatable);
                container_resource_runtime_value(rf, &dpod, &dcontainer)?
            } else if let Some(cm) = &src.config_map_key_ref {
                let optional = cm.optional.unwrap_or(false);
                match fetched
                    .config_map(ctx, namespace, &cm.name, optional)
                    .await?
                {
                    Lookup::SkipOptional => continue,
                    Lookup::Found(d) => match d.get(&cm.key) {
                        Some(v) => v.clone(),
                        None if optional => continue,
                        None => {
                            return Err(EnvError::MissingKey {
                                kind: ObjectKind::ConfigMap,
                                key: cm.key.clone(),
                                namespace: namespace.to_string(),
                                name: cm.name.clone(),
                            });
                        }
                    },
                }
            } else if let Some(sk) = &src.secret_key_ref {
                let optional = sk.optional.unwrap_or(false);
                match fetched.secret(ctx, namespace, &sk.name, optional).await? {
                    Lookup::SkipOptional => continue,
                    Lookup::Found(d) => match d.get(&sk.key) {
                        Some(v) => v.clone(),
                        None if optional => continue,
                        None => {
                            return Err(EnvError::MissingKey {
                                kind: ObjectKind::Secret,
                                key: sk.key.clone(),
                                namespace: namespace.to_string(),
                                name: sk.name.clone(),
                            });
                        }
                    },
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        env.set(var.name.clone(), value);
    }

    let mut envs: Vec<EnvVar> = env
        .entries
        .iter()
        .map(|(k, v)| EnvVar::new(k.clone(), v.clone()))
        .collect();
    envs.extend(service_list.into_iter().filter(|e| !env.contains(&e.name)));
    Ok(ResolvedEnv { envs, events })
}
