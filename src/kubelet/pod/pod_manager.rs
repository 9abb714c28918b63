//! The pod manager (Go's basicManager): the pods the kubelet should run,
//! indexed by UID and by full name, and the mirror pods the API server holds
//! for static pods, with the mapping between the two.
//!
//! A static pod and its mirror pod share their full name (`name_namespace`)
//! but not their UID; the manager translates mirror UIDs to the static pod's
//! so that everything inside the kubelet sees one UID per pod. All state sits
//! behind one RwLock; the manager holds no reference to anything else but
//! the registrars told about every pod (for secrets and configmaps).

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::types::{
    CONFIG_HASH_ANNOTATION_KEY, CONFIG_MIRROR_ANNOTATION_KEY, MirrorPodUid, ResolvedPodUid,
    build_pod_full_name, get_pod_full_name, is_mirror_pod, is_static_pod,
};

/// Told about every pod the manager stores, so objects a pod refers to
/// (secrets, configmaps) can be watched while it needs them.
pub trait PodObjectRegistrar: Send + Sync {
    /// The pod (new or changed) may need its objects.
    fn register_pod(&self, pod: &Pod);
    /// The pod no longer needs its objects.
    fn unregister_pod(&self, pod: &Pod);
}

#[derive(Default)]
struct Indexes {
    pod_by_uid: HashMap<ResolvedPodUid, Arc<Pod>>,
    mirror_pod_by_uid: HashMap<MirrorPodUid, Arc<Pod>>,
    pod_by_full_name: HashMap<String, Arc<Pod>>,
    mirror_pod_by_full_name: HashMap<String, Arc<Pod>>,
    translation_by_uid: HashMap<MirrorPodUid, ResolvedPodUid>,
}

/// Desired pods and mirror pods.
#[derive(Default)]
pub struct PodManager {
    indexes: RwLock<Indexes>,
    registrars: Vec<Arc<dyn PodObjectRegistrar>>,
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// Terminal pods need none of their objects any more.
fn is_terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed") | Some("Succeeded")
    )
}

/// The static pod hash a mirror pod was created for.
pub fn get_hash_from_mirror_pod(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(CONFIG_MIRROR_ANNOTATION_KEY)
        .map(String::as_str)
}

/// A static pod's hash (its `config.hash` annotation; empty if missing).
pub fn get_pod_hash(pod: &Pod) -> &str {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION_KEY))
        .map_or("", String::as_str)
}

impl PodManager {
    /// An empty manager.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty manager that keeps `registrars` informed.
    pub fn with_registrars(registrars: Vec<Arc<dyn PodObjectRegistrar>>) -> Self {
        PodManager {
            indexes: RwLock::default(),
            registrars,
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Indexes> {
        self.indexes.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Indexes> {
        self.indexes.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces everything with `pods` (pods and mirror pods mixed).
    pub fn set_pods(&self, pods: Vec<Arc<Pod>>) {
        let mut idx = self.write();
        *idx = Indexes::default();
        for pod in pods {
            self.update_internal(&mut idx, pod);
        }
        record_ephemeral_containers(&idx);
    }

    /// Adds a pod or mirror pod.
    pub fn add_pod(&self, pod: Arc<Pod>) {
        self.update_pod(pod);
    }

    /// Adds or replaces a pod or mirror pod.
    pub fn update_pod(&self, pod: Arc<Pod>) {
        let mut idx = self.write();
        self.update_internal(&mut idx, pod);
        record_ephemeral_containers(&idx);
    }

    fn update_internal(&self, idx: &mut Indexes, pod: Arc<Pod>) {
        for r in &self.registrars {
            if is_terminated(&pod) {
                r.unregister_pod(&pod);
            } else {
                r.register_pod(&pod);
            }
        }
        let full_name = get_pod_full_name(&pod);
        // A static pod and its mirror pod share their full name.
        if is_mirror_pod(&pod) {
            let mirror_uid = MirrorPodUid(uid_of(&pod));
            if let Some(p) = idx.pod_by_full_name.get(&full_name) {
                idx.translation_by_uid
                    .insert(mirror_uid.clone(), ResolvedPodUid(uid_of(p)));
            }
            idx.mirror_pod_by_uid.insert(mirror_uid, pod.clone());
            idx.mirror_pod_by_full_name.insert(full_name, pod);
        } else {
            let uid = ResolvedPodUid(uid_of(&pod));
            if let Some(mirror) = idx.mirror_pod_by_full_name.get(&full_name) {
                idx.translation_by_uid
                    .insert(MirrorPodUid(uid_of(mirror)), uid.clone());
            }
            idx.pod_by_uid.insert(uid, pod.clone());
            idx.pod_by_full_name.insert(full_name, pod);
        }
    }

    /// Forgets a pod; for a mirror pod, forgets the mirror and its mapping.
    pub fn delete_pod(&self, pod: &Pod) {
        let mut idx = self.write();
        for r in &self.registrars {
            r.unregister_pod(pod);
        }
        let full_name = get_pod_full_name(pod);
        if is_mirror_pod(pod) {
            let mirror_uid = MirrorPodUid(uid_of(pod));
            idx.mirror_pod_by_uid.remove(&mirror_uid);
            idx.mirror_pod_by_full_name.remove(&full_name);
            idx.translation_by_uid.remove(&mirror_uid);
        } else {
            idx.pod_by_uid.remove(&ResolvedPodUid(uid_of(pod)));
            idx.pod_by_full_name.remove(&full_name);
        }
        record_ephemeral_containers(&idx);
    }

    /// The regular (non-mirror) pods.
    pub fn get_pods(&self) -> Vec<Arc<Pod>> {
        self.read().pod_by_uid.values().cloned().collect()
    }

    /// The regular pods and the mirror pods.
    pub fn get_pods_and_mirror_pods(&self) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
        let idx = self.read();
        (
            idx.pod_by_uid.values().cloned().collect(),
            idx.mirror_pod_by_uid.values().cloned().collect(),
        )
    }

    /// The regular pod with this UID.
    pub fn get_pod_by_uid(&self, uid: &str) -> Option<Arc<Pod>> {
        self.read()
            .pod_by_uid
            .get(&ResolvedPodUid(uid.to_string()))
            .cloned()
    }

    /// The regular pod with this full name (`name_namespace`).
    pub fn get_pod_by_full_name(&self, full_name: &str) -> Option<Arc<Pod>> {
        self.read().pod_by_full_name.get(full_name).cloned()
    }

    /// The regular pod with this namespace and name.
    pub fn get_pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.get_pod_by_full_name(&build_pod_full_name(name, namespace))
    }

    /// The static pod a mirror pod stands for.
    pub fn get_pod_by_mirror_pod(&self, mirror: &Pod) -> Option<Arc<Pod>> {
        self.read()
            .pod_by_full_name
            .get(&get_pod_full_name(mirror))
            .cloned()
    }

    /// The mirror pod of a static pod.
    pub fn get_mirror_pod_by_pod(&self, pod: &Pod) -> Option<Arc<Pod>> {
        self.read()
            .mirror_pod_by_full_name
            .get(&get_pod_full_name(pod))
            .cloned()
    }

    /// Full names of mirror pods whose static pod is gone.
    pub fn get_orphaned_mirror_pod_names(&self) -> Vec<String> {
        let idx = self.read();
        let mut names: Vec<String> = idx
            .mirror_pod_by_full_name
            .keys()
            .filter(|name| !idx.pod_by_full_name.contains_key(*name))
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// The UID the kubelet uses for `uid`: a mirror pod's UID becomes its
    /// static pod's, any other UID stays.
    pub fn translate_pod_uid(&self, uid: &str) -> ResolvedPodUid {
        if uid.is_empty() {
            return ResolvedPodUid(String::new());
        }
        self.read()
            .translation_by_uid
            .get(&MirrorPodUid(uid.to_string()))
            .cloned()
            .unwrap_or_else(|| ResolvedPodUid(uid.to_string()))
    }

    /// Static pod → mirror pod UIDs (empty when a static pod has no mirror
    /// yet) and mirror pod → static pod UIDs.
    pub fn get_uid_translations(
        &self,
    ) -> (
        HashMap<ResolvedPodUid, MirrorPodUid>,
        HashMap<MirrorPodUid, ResolvedPodUid>,
    ) {
        let idx = self.read();
        let mut pod_to_mirror: HashMap<ResolvedPodUid, MirrorPodUid> = idx
            .pod_by_uid
            .iter()
            .filter(|(_, pod)| is_static_pod(pod))
            .map(|(uid, _)| (uid.clone(), MirrorPodUid::default()))
            .collect();
        let mut mirror_to_pod = HashMap::with_capacity(idx.translation_by_uid.len());
        for (mirror, pod) in &idx.translation_by_uid {
            mirror_to_pod.insert(mirror.clone(), pod.clone());
            pod_to_mirror.insert(pod.clone(), mirror.clone());
        }
        (pod_to_mirror, mirror_to_pod)
    }

    /// Whether `mirror` is the up-to-date mirror of `pod`: same name and
    /// namespace, and it carries the static pod's current hash.
    pub fn is_mirror_pod_of(mirror: &Pod, pod: &Pod) -> bool {
        if pod.metadata.name != mirror.metadata.name
            || pod.metadata.namespace != mirror.metadata.namespace
        {
            return false;
        }
        get_hash_from_mirror_pod(mirror).is_some_and(|hash| hash == get_pod_hash(pod))
    }
}

/// `kubelet_managed_ephemeral_containers`: the ephemeral containers of the
/// regular pods now managed.
fn record_ephemeral_containers(idx: &Indexes) {
    let n = ephemeral_container_count(idx);
    crate::metrics::library_families::managed_ephemeral_containers().set(&[], n as f64);
}

fn ephemeral_container_count(idx: &Indexes) -> usize {
    idx.pod_by_uid
        .values()
        .filter_map(|p| p.spec.as_ref()?.ephemeral_containers.as_ref())
        .map(Vec::len)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::types::CONFIG_SOURCE_ANNOTATION_KEY;
    use std::sync::Mutex;

    fn pod(uid: &str, name: &str, annotations: &[(&str, &str)]) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("kube-system".into());
        p.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        Arc::new(p)
    }

    fn static_pod(uid: &str, name: &str) -> Arc<Pod> {
        pod(
            uid,
            name,
            &[
                (CONFIG_SOURCE_ANNOTATION_KEY, "file"),
                (CONFIG_HASH_ANNOTATION_KEY, uid),
            ],
        )
    }

    fn mirror_pod(uid: &str, name: &str, hash: &str) -> Arc<Pod> {
        pod(
            uid,
            name,
            &[
                (CONFIG_SOURCE_ANNOTATION_KEY, "api"),
                (CONFIG_MIRROR_ANNOTATION_KEY, hash),
            ],
        )
    }

    #[test]
    fn ephemeral_containers_of_regular_pods_are_counted() {
        let pm = PodManager::new();
        let with = |uid: &str, n: usize| {
            let mut p = (*pod(uid, uid, &[])).clone();
            let ecs = (0..n)
                .map(|i| k8s_openapi::api::core::v1::EphemeralContainer {
                    name: format!("debug-{i}"),
                    ..Default::default()
                })
                .collect();
            p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
                ephemeral_containers: Some(ecs),
                ..Default::default()
            });
            Arc::new(p)
        };
        pm.add_pod(with("a", 2));
        pm.add_pod(with("b", 1));
        assert_eq!(ephemeral_container_count(&pm.read()), 3);
        pm.update_pod(with("a", 1));
        assert_eq!(ephemeral_container_count(&pm.read()), 2);
        pm.delete_pod(&with("b", 1));
        assert_eq!(ephemeral_container_count(&pm.read()), 1);
        pm.set_pods(vec![with("c", 4)]);
        assert_eq!(ephemeral_container_count(&pm.read()), 4);
    }

    #[test]
    fn static_and_mirror_pods_map_to_each_other() {
        let pm = PodManager::new();
        let etcd = static_pod("static-1", "etcd-n");
        let mirror = mirror_pod("mirror-1", "etcd-n", "static-1");
        let api_pod = pod("api-1", "web", &[(CONFIG_SOURCE_ANNOTATION_KEY, "api")]);
        // The mirror arrives before its static pod: the mapping still forms.
        pm.add_pod(mirror.clone());
        pm.add_pod(etcd.clone());
        pm.add_pod(api_pod.clone());

        let mut uids: Vec<_> = pm.get_pods().iter().map(|p| uid_of(p)).collect();
        uids.sort();
        assert_eq!(uids, ["api-1", "static-1"]);
        let (pods, mirrors) = pm.get_pods_and_mirror_pods();
        assert_eq!((pods.len(), mirrors.len()), (2, 1));
        assert_eq!(pm.get_pod_by_uid("static-1").as_deref(), Some(&*etcd));
        assert!(pm.get_pod_by_uid("mirror-1").is_none());
        assert_eq!(
            pm.get_pod_by_name("kube-system", "web").as_deref(),
            Some(&*api_pod)
        );
        assert_eq!(
            pm.get_pod_by_full_name("etcd-n_kube-system").as_deref(),
            Some(&*etcd)
        );
        assert_eq!(pm.get_mirror_pod_by_pod(&etcd).as_deref(), Some(&*mirror));
        assert_eq!(pm.get_pod_by_mirror_pod(&mirror).as_deref(), Some(&*etcd));
        assert_eq!(
            pm.translate_pod_uid("mirror-1"),
            ResolvedPodUid("static-1".into())
        );
        assert_eq!(
            pm.translate_pod_uid("api-1"),
            ResolvedPodUid("api-1".into())
        );
        assert_eq!(pm.translate_pod_uid(""), ResolvedPodUid(String::new()));
        assert!(PodManager::is_mirror_pod_of(&mirror, &etcd));
        assert!(pm.get_orphaned_mirror_pod_names().is_empty());

        let (to_mirror, to_pod) = pm.get_uid_translations();
        assert_eq!(to_mirror.len(), 1, "only static pods are listed");
        assert_eq!(
            to_mirror[&ResolvedPodUid("static-1".into())],
            MirrorPodUid("mirror-1".into())
        );
        assert_eq!(
            to_pod[&MirrorPodUid("mirror-1".into())],
            ResolvedPodUid("static-1".into())
        );

        pm.delete_pod(&etcd);
        assert_eq!(pm.get_orphaned_mirror_pod_names(), ["etcd-n_kube-system"]);
        pm.delete_pod(&mirror);
        assert!(pm.get_orphaned_mirror_pod_names().is_empty());
        assert_eq!(
            pm.translate_pod_uid("mirror-1"),
            ResolvedPodUid("mirror-1".into())
        );
    }

    #[test]
    fn a_static_pod_without_mirror_translates_to_empty_and_stale_mirrors_are_not_its_own() {
        let pm = PodManager::new();
        let etcd = static_pod("static-2", "etcd-n");
        pm.set_pods(vec![etcd.clone()]);
        let (to_mirror, to_pod) = pm.get_uid_translations();
        assert_eq!(
            to_mirror[&ResolvedPodUid("static-2".into())],
            MirrorPodUid::default()
        );
        assert!(to_pod.is_empty());
        let stale = mirror_pod("mirror-2", "etcd-n", "static-old");
        assert!(!PodManager::is_mirror_pod_of(&stale, &etcd));
        let elsewhere = mirror_pod("mirror-3", "etcd-m", "static-2");
        assert!(!PodManager::is_mirror_pod_of(&elsewhere, &etcd));
    }

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl PodObjectRegistrar for Recorder {
        fn register_pod(&self, pod: &Pod) {
            self.0.lock().unwrap().push(format!("+{}", uid_of(pod)));
        }
        fn unregister_pod(&self, pod: &Pod) {
            self.0.lock().unwrap().push(format!("-{}", uid_of(pod)));
        }
    }

    #[test]
    fn registrars_follow_pod_lifecycle() {
        let recorder = Arc::new(Recorder::default());
        let pm = PodManager::with_registrars(vec![recorder.clone()]);
        let running = pod("a", "a", &[]);
        pm.add_pod(running.clone());
        let mut done = (*running).clone();
        done.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        pm.update_pod(Arc::new(done));
        pm.delete_pod(&running);
        assert_eq!(*recorder.0.lock().unwrap(), ["+a", "-a", "-a"]);
    }

    #[test]
    fn concurrent_readers_and_writers() {
        let pm = Arc::new(PodManager::new());
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let pm = pm.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let p = static_pod(&format!("{t}-{i}"), &format!("p{t}-{i}"));
                        pm.add_pod(p.clone());
                        let _ = pm.get_pods();
                        if i % 2 == 0 {
                            pm.delete_pod(&p);
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(pm.get_pods().len(), 4 * 100);
    }
}
