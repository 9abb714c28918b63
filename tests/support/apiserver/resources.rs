//! The resources the double serves: group, version, names, scope,
//! subresources and the field labels a field selector may use.

/// One REST resource.
#[derive(Debug)]
pub struct ResourceDef {
    /// Unique id, the qualified resource as the server names it in messages
    /// ("pods", "leases.coordination.k8s.io").
    pub id: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub subresources: &'static [&'static str],
    pub short_names: &'static [&'static str],
    /// Field labels usable in a fieldSelector besides metadata.name and
    /// metadata.namespace.
    pub field_labels: &'static [&'static str],
    /// Create-only review resources: POST answers, nothing is stored.
    pub virtual_create: bool,
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }

    pub fn verbs(&self) -> &'static [&'static str] {
        if self.virtual_create {
            &["create"]
        } else {
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

macro_rules! res {
    ($id:expr, $group:expr, $version:expr, $plural:expr, $singular:expr, $kind:expr,
     $namespaced:expr, $subs:expr, $short:expr, $fields:expr) => {
        ResourceDef {
            id: $id,
            group: $group,
            version: $version,
            plural: $plural,
            singular: $singular,
            kind: $kind,
            namespaced: $namespaced,
            subresources: $subs,
            short_names: $short,
            field_labels: $fields,
            virtual_create: false,
        }
    };
}

/// Everything served, in discovery order.
pub static RESOURCES: &[ResourceDef] = &[
    res!(
        "namespaces",
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["status", "finalize"],
        &["ns"],
        &["status.phase"]
    ),
    res!(
        "nodes",
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        false,
        &["status"],
        &["no"],
        &["spec.unschedulable"]
    ),
    res!(
        "pods",
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        true,
        &["status"],
        &["po"],
        POD_FIELDS
    ),
    res!(
        "events",
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &[],
        &["ev"],
        EVENT_FIELDS
    ),
    res!(
        "configmaps",
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &[],
        &["cm"],
        &[]
    ),
    res!(
        "secrets",
        "",
        "v1",
        "secrets",
        "secret",
        "Secret",
        true,
        &[],
        &[],
        &["type"]
    ),
    res!(
        "serviceaccounts",
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["token"],
        &["sa"],
        &[]
    ),
    res!(
        "services",
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["status"],
        &["svc"],
        &[]
    ),
    res!(
        "endpoints",
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        &[],
        &["ep"],
        &[]
    ),
    res!(
        "persistentvolumes",
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        false,
        &["status"],
        &["pv"],
        &[]
    ),
    res!(
        "persistentvolumeclaims",
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        &["status"],
        &["pvc"],
        &[]
    ),
    res!(
        "leases.coordination.k8s.io",
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        &[],
        &[],
        &[]
    ),
    res!(
        "certificatesigningrequests.certificates.k8s.io",
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "certificatesigningrequest",
        "CertificateSigningRequest",
        false,
        &["status", "approval"],
        &["csr"],
        &["spec.signerName"]
    ),
    res!(
        "runtimeclasses.node.k8s.io",
        "node.k8s.io",
        "v1",
        "runtimeclasses",
        "runtimeclass",
        "RuntimeClass",
        false,
        &[],
        &[],
        &[]
    ),
    res!(
        "csidrivers.storage.k8s.io",
        "storage.k8s.io",
        "v1",
        "csidrivers",
        "csidriver",
        "CSIDriver",
        false,
        &[],
        &[],
        &[]
    ),
    res!(
        "csinodes.storage.k8s.io",
        "storage.k8s.io",
        "v1",
        "csinodes",
        "csinode",
        "CSINode",
        false,
        &[],
        &[],
        &[]
    ),
    res!(
        "volumeattachments.storage.k8s.io",
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "volumeattachment",
        "VolumeAttachment",
        false,
        &["status"],
        &[],
        &[]
    ),
    res!(
        "clusterroles.rbac.authorization.k8s.io",
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        &[],
        &[],
        &[]
    ),
    res!(
        "clusterrolebindings.rbac.authorization.k8s.io",
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        &[],
        &[],
        &[]
    ),
    ResourceDef {
        virtual_create: true,
        ..res!(
            "tokenreviews.authentication.k8s.io",
            "authentication.k8s.io",
            "v1",
            "tokenreviews",
            "tokenreview",
            "TokenReview",
            false,
            &[],
            &[],
            &[]
        )
    },
    ResourceDef {
        virtual_create: true,
        ..res!(
            "subjectaccessreviews.authorization.k8s.io",
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "subjectaccessreview",
            "SubjectAccessReview",
            false,
            &[],
            &[],
            &[]
        )
    },
];

/// The resource at /api(s)/<group>/<version>/.../<plural>.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource holding objects of `apiVersion` / `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

/// The resource with this id.
pub fn by_id(id: &str) -> Option<&'static ResourceDef> {
    RESOURCES.iter().find(|r| r.id == id)
}

/// Served (group, version) pairs, core first, in first-seen order.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The well-known core resources, for code that needs one by name.
pub fn core(plural: &str) -> &'static ResourceDef {
    lookup("", "v1", plural).unwrap_or_else(|| panic!("core resource {plural} is in the table"))
}
