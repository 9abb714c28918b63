//! The admission plugins of a default kube-apiserver that shape what the
//! kubelet sees: NamespaceLifecycle, ServiceAccount, Priority,
//! DefaultTolerationSeconds and NodeRestriction.

use serde_json::{Value, json};

use super::auth::UserInfo;
use super::errors::ApiError;
use super::meta;
use super::resources::{self, ResourceDef};
use super::server::Shared;
use super::store::{Inner, ObjKey};

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const SA_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn forbidden(res: &ResourceDef, name: &str, why: &str) -> ApiError {
    ApiError::forbidden(format!("{} \"{}\" is forbidden: {}", res.id, name, why))
}

/// New objects need an existing namespace that is not terminating.
pub fn namespace_lifecycle(tx: &Inner, res: &ResourceDef, ns: &str) -> Result<(), ApiError> {
    if !res.namespaced {
        return Ok(());
    }
    let nsres = resources::core("namespaces");
    match tx.get(nsres, &ObjKey::new("", ns)) {
        None => Err(ApiError::not_found(nsres, ns)),
        Some(n) if meta::is_deleting(n) => Err(ApiError::forbidden(format!(
            "unable to create new content in namespace {ns} because it is being terminated"
        ))),
        Some(_) => Ok(()),
    }
}

fn volumes(pod: &Value) -> Vec<&Value> {
    meta::get_path(pod, &["spec", "volumes"])
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default()
}

fn mirror_pod_checks(res: &ResourceDef, pod: &Value) -> Result<(), ApiError> {
    let name = meta::name(pod);
    if meta::str_at(pod, &["spec", "serviceAccountName"]).is_some_and(|s| !s.is_empty()) {
        return Err(forbidden(
            res,
            name,
            "a mirror pod may not reference service accounts",
        ));
    }
    for v in volumes(pod) {
        if v.get("secret").is_some() {
            return Err(forbidden(
                res,
                name,
                "a mirror pod may not reference secrets",
            ));
        }
        if v.get("configMap").is_some() {
            return Err(forbidden(
                res,
                name,
                "a mirror pod may not reference configmaps",
            ));
        }
        if let Some(Value::Array(sources)) = meta::get_path(v, &["projected", "sources"]) {
            for s in sources {
                if s.get("secret").is_some() {
                    return Err(forbidden(
                        res,
                        name,
                        "a mirror pod may not reference secrets",
                    ));
                }
                if s.get("configMap").is_some() {
                    return Err(forbidden(
                        res,
                        name,
                        "a mirror pod may not reference configmaps",
                    ));
                }
                if s.get("serviceAccountToken").is_some() {
                    return Err(forbidden(
                        res,
                        name,
                        "a mirror pod may not use ServiceAccountToken volume projections",
                    ));
                }
            }
        }
    }
    Ok(())
}

fn mounts_sa_path(pod: &Value) -> bool {
    ["containers", "initContainers"].iter().any(|list| {
        meta::get_path(pod, &["spec", list])
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("volumeMounts")
                        .and_then(Value::as_array)
                        .is_some_and(|ms| {
                            ms.iter()
                                .any(|m| meta::str_at(m, &["mountPath"]) == Some(SA_MOUNT_PATH))
                        })
                })
            })
    })
}

/// ServiceAccount: default the account, require it, inject the token volume.
fn service_account(tx: &Inner, res: &ResourceDef, pod: &mut Value) -> Result<(), ApiError> {
    let ns = meta::namespace(pod).to_string();
    let spec = meta::obj_at(pod, &["spec"]);
    let sa_name = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "default".to_string(),
    };
    spec.insert("serviceAccountName".into(), json!(sa_name));
    spec.insert("serviceAccount".into(), json!(sa_name));
    let sa = tx
        .get(resources::core("serviceaccounts"), &ObjKey::new(&ns, &sa_name))
        .cloned()
        .ok_or_else(|| {
            forbidden(
                res,
                meta::name(pod),
                &format!(
                    "error looking up service account {ns}/{sa_name}: serviceaccount \"{sa_name}\" not found"
                ),
            )
        })?;
    let pod_says =
        meta::get_path(pod, &["spec", "automountServiceAccountToken"]).and_then(Value::as_bool);
    let sa_says = sa
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool);
    if pod_says.or(sa_says) == Some(false) || mounts_sa_path(pod) {
        return Ok(());
    }
    let vol_name = format!("kube-api-access-{}", meta::random_suffix(5));
    let volume = json!({
        "name": vol_name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    });
    let spec = meta::obj_at(pod, &["spec"]);
    let vols = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Value::Array(v) = vols {
        v.push(volume);
    }
    for list in ["initContainers", "containers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs {
                let mounts = meta::obj_at(c, &[])
                    .entry("volumeMounts")
                    .or_insert_with(|| json!([]));
                if let Value::Array(m) = mounts {
                    m.push(json!({"name": vol_name, "readOnly": true, "mountPath": SA_MOUNT_PATH}));
                }
            }
        }
    }
    Ok(())
}

/// Priority: the built-in classes, priority 0 without a class.
fn priority(res: &ResourceDef, pod: &mut Value) -> Result<(), ApiError> {
    let name = meta::name(pod).to_string();
    let spec = meta::obj_at(pod, &["spec"]);
    let class = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let computed: i64 = match class.as_str() {
        "" => 0,
        "system-node-critical" => 2_000_001_000,
        "system-cluster-critical" => 2_000_000_000,
        other => {
            return Err(forbidden(
                res,
                &name,
                &format!("no PriorityClass with name {other} was found"),
            ));
        }
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != computed
    {
        return Err(forbidden(
            res,
            &name,
            &format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name"
            ),
        ));
    }
    spec.insert("priority".into(), json!(computed));
    if spec.get("preemptionPolicy").is_none_or(Value::is_null) {
        spec.insert("preemptionPolicy".into(), json!("PreemptLowerPriority"));
    }
    Ok(())
}

/// DefaultTolerationSeconds: tolerate not-ready and unreachable for 300s.
fn default_tolerations(pod: &mut Value) {
    let spec = meta::obj_at(pod, &["spec"]);
    let tols = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Value::Array(list) = tols else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let covered = list.iter().any(|t| {
            let effect = meta::str_at(t, &["effect"]).unwrap_or("");
            let k = meta::str_at(t, &["key"]).unwrap_or("");
            let exists = meta::str_at(t, &["operator"]) == Some("Exists");
            (effect.is_empty() || effect == "NoExecute") && (k == key || (k.is_empty() && exists))
        });
        if !covered {
            list.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }));
        }
    }
}

/// The mutating plugins, on pod create.
pub fn admit_pod(
    shared: &Shared,
    tx: &Inner,
    res: &ResourceDef,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let mirror = meta::annotation(pod, MIRROR_ANNOTATION).is_some();
    if mirror {
        mirror_pod_checks(res, pod)?;
    } else if shared.opts.service_account_admission {
        service_account(tx, res, pod)?;
    }
    priority(res, pod)?;
    default_tolerations(pod);
    Ok(())
}

/// NodeRestriction: what a node's own credentials may do to pods, nodes and
/// leases.
pub fn node_restriction(
    user: &UserInfo,
    verb: &str,
    res: &ResourceDef,
    sub: Option<&str>,
    obj: Option<&Value>,
    name: &str,
) -> Result<(), ApiError> {
    let Some(node) = user.node_name() else {
        return Ok(());
    };
    let fail = |why: String| Err(forbidden(res, name, &why));
    match (res.plural, sub) {
        ("pods", None) if verb == "create" => {
            let Some(pod) = obj else { return Ok(()) };
            if meta::annotation(pod, MIRROR_ANNOTATION).is_none() {
                return fail(format!(
                    "pod does not have \"{MIRROR_ANNOTATION}\" annotation, node \"{node}\" can only create mirror pods"
                ));
            }
            if meta::str_at(pod, &["spec", "nodeName"]) != Some(node) {
                return fail(format!(
                    "node \"{node}\" can only create pods with spec.nodeName set to itself"
                ));
            }
            if let Some(Value::Array(refs)) = meta::get_path(pod, &["metadata", "ownerReferences"])
            {
                let ok = refs.len() == 1 && {
                    let r = &refs[0];
                    meta::str_at(r, &["apiVersion"]) == Some("v1")
                        && meta::str_at(r, &["kind"]) == Some("Node")
                        && meta::str_at(r, &["name"]) == Some(node)
                        && r.get("controller").and_then(Value::as_bool) == Some(true)
                };
                if !ok && !refs.is_empty() {
                    return fail(format!(
                        "node \"{node}\" can only create pods with a controller owner reference set to itself"
                    ));
                }
            }
            for v in volumes(pod) {
                if v.get("persistentVolumeClaim").is_some() {
                    return fail(format!(
                        "node \"{node}\" can not create pods that reference persistentvolumeclaims"
                    ));
                }
            }
            Ok(())
        }
        ("pods", _) if verb != "get" && verb != "list" && verb != "watch" => match obj {
            None => Ok(()),
            Some(p) if meta::str_at(p, &["spec", "nodeName"]) == Some(node) => Ok(()),
            Some(_) => fail(format!(
                "node \"{node}\" can only {verb} pods with spec.nodeName set to itself"
            )),
        },
        ("nodes", _) if verb != "get" && verb != "list" && verb != "watch" => {
            if name != node {
                return fail(format!(
                    "node \"{node}\" is not allowed to modify node \"{name}\""
                ));
            }
            Ok(())
        }
        ("leases", _) if verb != "list" && verb != "watch" => {
            if name != node {
                return fail(
                    "can only access node lease with the same name as the requesting node"
                        .to_string(),
                );
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
