//! The containers /metrics/cadvisor reports, named and labelled as the
//! kubelet labels cadvisor's: the machine (`/`), every cgroup under the
//! pods' root and the kubelet's, runtime's and system's cgroups; runtime
//! containers and sandboxes carry their pod, namespace, container name,
//! image and id, pod cgroups their pod and namespace. Gathered at most once
//! per housekeeping interval; scrapes in between get the same snapshot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use crate::cadvisor::MachineInfoProvider;
use crate::cadvisor::container::{ContainerInfo, ContainerKind, ContainerReader};
use crate::cadvisor::prometheus::CadvisorSnapshot;
use crate::cri::{ImageService, RuntimeService};
use crate::kubelet::kuberuntime::labels::{
    KUBERNETES_CONTAINER_NAME_LABEL, KUBERNETES_POD_NAME_LABEL, KUBERNETES_POD_NAMESPACE_LABEL,
};
use crate::kubelet::pod::PodManager;
use crate::util::clock::Clock;

/// How often containers are sampled at most (cadvisor samples between 1 s
/// and the kubelet's 15 s housekeeping bound; scrapes are usually ≥ 10 s).
pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(10);

/// What a runtime container or sandbox contributes to its labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RuntimeLabels {
    pod: String,
    namespace: String,
    container: String,
    image: String,
    created: Option<SystemTime>,
}

/// The runtime id a cgroup leaf stands for (`<id>` with the cgroupfs
/// driver, `cri-containerd-<id>.scope` with systemd's).
pub fn runtime_id_of_leaf(leaf: &str) -> &str {
    let leaf = leaf.strip_suffix(".scope").unwrap_or(leaf);
    ["cri-containerd-", "crio-", "docker-"]
        .iter()
        .find_map(|p| leaf.strip_prefix(p))
        .unwrap_or(leaf)
}

/// The pod UID a pod cgroup's leaf names (`pod<uid>`, or systemd's
/// `kubepods-burstable-pod<uid_with_underscores>.slice`).
pub fn pod_uid_of_leaf(leaf: &str) -> Option<String> {
    if let Some(slice) = leaf.strip_suffix(".slice") {
        let (_, uid) = slice.rsplit_once("-pod")?;
        return Some(uid.replace('_', "-"));
    }
    leaf.strip_prefix("pod").map(str::to_string)
}

fn from_nanos(ns: i64) -> Option<SystemTime> {
    (ns > 0).then(|| UNIX_EPOCH + Duration::from_nanos(ns as u64))
}

/// Where the containers' numbers and names come from.
pub struct CadvisorContainers {
    reader: ContainerReader,
    /// Subtrees reported besides `/` (the pods' root, kubelet, runtime and
    /// system cgroups).
    roots: Vec<String>,
    runtime: Arc<dyn RuntimeService>,
    images: Arc<dyn ImageService>,
    pods: Arc<PodManager>,
    machine: Arc<dyn MachineInfoProvider>,
    clock: Arc<dyn Clock>,
    cache: tokio::sync::Mutex<Option<(tokio::time::Instant, Arc<CadvisorSnapshot>)>>,
    sandbox_images: Mutex<HashMap<String, String>>,
}

impl CadvisorContainers {
    /// Pure construction.
    pub fn new(
        reader: ContainerReader,
        roots: Vec<String>,
        runtime: Arc<dyn RuntimeService>,
        images: Arc<dyn ImageService>,
        pods: Arc<PodManager>,
        machine: Arc<dyn MachineInfoProvider>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        CadvisorContainers {
            reader,
            roots,
            runtime,
            images,
            pods,
            machine,
            clock,
            cache: tokio::sync::Mutex::new(None),
            sandbox_images: Mutex::new(HashMap::new()),
        }
    }

    /// The image a sandbox runs (the runtime's verbose info), remembered
    /// per sandbox.
    async fn sandbox_image(&self, id: &str) -> String {
        if let Some(i) = self
            .sandbox_images
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
        {
            return i.clone();
        }
        let image = match self.runtime.pod_sandbox_status(id, true).await {
            Ok(r) => r
                .info
                .get("info")
                .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
                .and_then(|v| v.get("image").and_then(|i| i.as_str()).map(String::from))
                .unwrap_or_default(),
            Err(_) => return String::new(),
        };
        self.sandbox_images
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_string(), image.clone());
        image
    }

    /// Runtime containers and sandboxes by id.
    async fn runtime_labels(&self) -> Option<HashMap<String, RuntimeLabels>> {
        let containers = self.runtime.list_containers(None).await.ok()?;
        let sandboxes = self.runtime.list_pod_sandbox(None).await.ok()?;
        let label = |m: &HashMap<String, String>, k: &str| m.get(k).cloned().unwrap_or_default();
        // Containers are created from an image id; the runtime reports the
        // image by its first tag (or digest), as its status does.
        let names: HashMap<String, String> = self
            .images
            .list_images(None)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter_map(|i| {
                let name = i.repo_tags.first().or(i.repo_digests.first())?.clone();
                Some((i.id, name))
            })
            .collect();
        let mut out = HashMap::new();
        for c in containers {
            let image = c
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default();
            out.insert(
                c.id.clone(),
                RuntimeLabels {
                    pod: label(&c.labels, KUBERNETES_POD_NAME_LABEL),
                    namespace: label(&c.labels, KUBERNETES_POD_NAMESPACE_LABEL),
                    container: label(&c.labels, KUBERNETES_CONTAINER_NAME_LABEL),
                    image: names.get(&image).cloned().unwrap_or(image),
                    created: from_nanos(c.created_at),
                },
            );
        }
        let live: Vec<String> = sandboxes.iter().map(|s| s.id.clone()).collect();
        for s in sandboxes {
            let image = self.sandbox_image(&s.id).await;
            out.insert(
                s.id.clone(),
                RuntimeLabels {
                    pod: label(&s.labels, KUBERNETES_POD_NAME_LABEL),
                    namespace: label(&s.labels, KUBERNETES_POD_NAMESPACE_LABEL),
                    container: String::new(),
                    image,
                    created: from_nanos(s.created_at),
                },
            );
        }
        self.sandbox_images
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|id, _| live.contains(id));
        Some(out)
    }

    async fn gather(&self) -> CadvisorSnapshot {
        let runtime = self.runtime_labels().await;
        let pods: HashMap<String, (String, String)> = self
            .pods
            .get_pods()
            .iter()
            .filter_map(|p| {
                let m = &p.metadata;
                Some((
                    m.uid.clone()?,
                    (m.name.clone()?, m.namespace.clone().unwrap_or_default()),
                ))
            })
            .collect();
        let (reader, roots, machine) = (
            self.reader.clone(),
            self.roots.clone(),
            self.machine.clone(),
        );
        let now = self.clock.now();
        let gathered = tokio::task::spawn_blocking(move || {
            let containers = runtime.map(|r| read_all(&reader, &roots, &r, &pods, now));
            CadvisorSnapshot {
                containers,
                machine: machine.machine_info().ok().map(|m| (m, now)),
                version: machine.version_info().ok(),
            }
        })
        .await;
        gathered.unwrap_or_default()
    }
}

/// Reads `/` and every cgroup of `roots`' subtrees, naming each.
fn read_all(
    reader: &ContainerReader,
    roots: &[String],
    runtime: &HashMap<String, RuntimeLabels>,
    pods: &HashMap<String, (String, String)>,
    now: SystemTime,
) -> Vec<ContainerInfo> {
    let mut names = vec!["/".to_string()];
    for root in roots {
        for name in reader.layout().subtree(root) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let leaf = name.rsplit('/').next().unwrap_or_default();
        let rt = (name != "/")
            .then(|| runtime.get(runtime_id_of_leaf(leaf)))
            .flatten();
        let kind = match rt {
            _ if name == "/" => ContainerKind::Root,
            Some(r) => ContainerKind::Runtime(r.created.unwrap_or(UNIX_EPOCH)),
            None => ContainerKind::Raw,
        };
        let Ok((spec, stats)) = reader.read(&name, kind, now) else {
            continue;
        };
        let mut info = ContainerInfo {
            name: name.clone(),
            alias: String::new(),
            image: String::new(),
            pod: String::new(),
            namespace: String::new(),
            container: String::new(),
            spec,
            stats,
        };
        if let Some(r) = rt {
            info.alias = runtime_id_of_leaf(leaf).to_string();
            info.image = r.image.clone();
            info.pod = r.pod.clone();
            info.namespace = r.namespace.clone();
            info.container = r.container.clone();
        } else if let Some((pod, ns)) = pod_uid_of_leaf(leaf).and_then(|uid| pods.get(&uid)) {
            info.pod = pod.clone();
            info.namespace = ns.clone();
        }
        out.push(info);
    }
    out
}

/// What the /metrics/cadvisor handler renders.
#[async_trait]
pub trait CadvisorSource: Send + Sync + 'static {
    /// The latest snapshot, gathered anew when older than the
    /// housekeeping interval.
    async fn snapshot(&self) -> Arc<CadvisorSnapshot>;
}

#[async_trait]
impl CadvisorSource for CadvisorContainers {
    async fn snapshot(&self) -> Arc<CadvisorSnapshot> {
        let mut cache = self.cache.lock().await;
        let now = self.clock.monotonic();
        if let Some((at, snap)) = cache.as_ref()
            && now.duration_since(*at) < HOUSEKEEPING_INTERVAL
        {
            return snap.clone();
        }
        let snap = Arc::new(self.gather().await);
        *cache = Some((now, snap.clone()));
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_name_runtime_ids_and_pod_uids() {
        let ids = [
            ("0123abcd", "0123abcd"),
            ("cri-containerd-0123abcd.scope", "0123abcd"),
            ("crio-77.scope", "77"),
        ];
        for (leaf, want) in ids {
            assert_eq!(runtime_id_of_leaf(leaf), want, "{leaf}");
        }
        let pods = [
            ("pod1b2c-3d", Some("1b2c-3d")),
            ("kubepods-burstable-pod1b2c_3d.slice", Some("1b2c-3d")),
            ("kubepods-pod9_9.slice", Some("9-9")),
            ("burstable", None),
            ("kubepods-burstable.slice", None),
        ];
        for (leaf, want) in pods {
            assert_eq!(pod_uid_of_leaf(leaf).as_deref(), want, "{leaf}");
        }
    }
}
