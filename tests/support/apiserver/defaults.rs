//! Defaulting the real server applies on create and update (the v1 scheme
//! defaulters): what a pod from the API looks like when the kubelet sees it.

use serde_json::{Map, Value, json};

use super::meta;

fn set_if_absent(m: &mut Map<String, Value>, key: &str, v: Value) {
    match m.get(key) {
        None | Some(Value::Null) => {
            m.insert(key.to_string(), v);
        }
        Some(Value::String(s)) if s.is_empty() && v.is_string() => {
            m.insert(key.to_string(), v);
        }
        _ => {}
    }
}

fn each_obj(v: Option<&mut Value>, mut f: impl FnMut(&mut Map<String, Value>)) {
    if let Some(Value::Array(items)) = v {
        for item in items {
            if let Value::Object(m) = item {
                f(m);
            }
        }
    }
}

fn with_obj(v: Option<&mut Value>, f: impl FnOnce(&mut Map<String, Value>)) {
    if let Some(Value::Object(m)) = v {
        f(m);
    }
}

/// The tag an image reference names ("latest" when it names none and
/// carries no digest).
fn image_tag(image: &str) -> Option<&str> {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest.is_none() => Some("latest"),
        None => None,
    }
}

fn http_get(m: &mut Map<String, Value>) {
    with_obj(m.get_mut("httpGet"), |h| {
        set_if_absent(h, "path", json!("/"));
        set_if_absent(h, "scheme", json!("HTTP"));
    });
}

fn probe(p: &mut Map<String, Value>) {
    set_if_absent(p, "timeoutSeconds", json!(1));
    set_if_absent(p, "periodSeconds", json!(10));
    set_if_absent(p, "successThreshold", json!(1));
    set_if_absent(p, "failureThreshold", json!(3));
    for k in [
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        if p.get(k) == Some(&json!(0)) {
            let d = match k {
                "timeoutSeconds" | "successThreshold" => 1,
                "periodSeconds" => 10,
                _ => 3,
            };
            p.insert(k.to_string(), json!(d));
        }
    }
    http_get(p);
}

fn field_ref(m: &mut Map<String, Value>) {
    with_obj(m.get_mut("fieldRef"), |f| {
        set_if_absent(f, "apiVersion", json!("v1"))
    });
}

fn container(c: &mut Map<String, Value>, host_network: bool) {
    set_if_absent(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_if_absent(c, "terminationMessagePolicy", json!("File"));
    if c.get("imagePullPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_tag(image) == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    each_obj(c.get_mut("ports"), |p| {
        set_if_absent(p, "protocol", json!("TCP"));
        if host_network
            && p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
            && let Some(cp) = p.get("containerPort").cloned()
        {
            p.insert("hostPort".into(), cp);
        }
    });
    each_obj(c.get_mut("env"), |e| {
        with_obj(e.get_mut("valueFrom"), field_ref);
    });
    for p in ["livenessProbe", "readinessProbe", "startupProbe"] {
        with_obj(c.get_mut(p), probe);
    }
    with_obj(c.get_mut("lifecycle"), |l| {
        for h in ["postStart", "preStop"] {
            with_obj(l.get_mut(h), http_get);
        }
    });
    // Requests default to the limits that are set.
    with_obj(c.get_mut("resources"), |r| {
        let Some(Value::Object(limits)) = r.get("limits").cloned() else {
            return;
        };
        let requests = r
            .entry("requests")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(req) = requests {
            for (k, v) in limits {
                req.entry(k).or_insert(v);
            }
        }
    });
}

fn downward_items(m: &mut Map<String, Value>) {
    each_obj(m.get_mut("items"), field_ref);
}

const VOLUME_SOURCES_EXCLUDED: &[&str] = &["name"];

fn volume(v: &mut Map<String, Value>) {
    let has_source = v
        .iter()
        .any(|(k, val)| !VOLUME_SOURCES_EXCLUDED.contains(&k.as_str()) && !val.is_null());
    if !has_source {
        v.insert("emptyDir".into(), json!({}));
    }
    for k in ["secret", "configMap", "downwardAPI", "projected"] {
        with_obj(v.get_mut(k), |s| {
            set_if_absent(s, "defaultMode", json!(420))
        });
    }
    with_obj(v.get_mut("downwardAPI"), downward_items);
    with_obj(v.get_mut("hostPath"), |h| {
        set_if_absent(h, "type", json!(""))
    });
    with_obj(v.get_mut("projected"), |p| {
        each_obj(p.get_mut("sources"), |s| {
            with_obj(s.get_mut("serviceAccountToken"), |t| {
                set_if_absent(t, "expirationSeconds", json!(3600))
            });
            with_obj(s.get_mut("downwardAPI"), downward_items);
        });
    });
}

/// SetDefaults for a pod, its spec, containers, probes and volumes.
pub fn pod(obj: &mut Value) {
    let spec = meta::obj_at(obj, &["spec"]);
    set_if_absent(spec, "dnsPolicy", json!("ClusterFirst"));
    set_if_absent(spec, "restartPolicy", json!("Always"));
    set_if_absent(spec, "securityContext", json!({}));
    set_if_absent(spec, "terminationGracePeriodSeconds", json!(30));
    set_if_absent(spec, "schedulerName", json!("default-scheduler"));
    set_if_absent(spec, "enableServiceLinks", json!(true));
    let host_network = spec
        .get("hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        each_obj(spec.get_mut(list), |c| container(c, host_network));
    }
    each_obj(spec.get_mut("volumes"), volume);
}

/// Defaults of the other kinds the double serves.
pub fn object(kind: &str, obj: &mut Value) {
    match kind {
        "Pod" => pod(obj),
        "Secret" => {
            let m = obj.as_object_mut();
            if let Some(m) = m {
                set_if_absent(m, "type", json!("Opaque"));
            }
        }
        "Node" => {
            let status = meta::obj_at(obj, &["status"]);
            if !status.contains_key("allocatable")
                && let Some(c) = status.get("capacity").cloned()
            {
                status.insert("allocatable".into(), c);
            }
        }
        "Service" => {
            let spec = meta::obj_at(obj, &["spec"]);
            set_if_absent(spec, "type", json!("ClusterIP"));
            set_if_absent(spec, "sessionAffinity", json!("None"));
            set_if_absent(spec, "internalTrafficPolicy", json!("Cluster"));
            each_obj(spec.get_mut("ports"), |p| {
                set_if_absent(p, "protocol", json!("TCP"));
                if let Some(port) = p.get("port").cloned() {
                    set_if_absent(p, "targetPort", port);
                }
            });
        }
        "PersistentVolume" => {
            let spec = meta::obj_at(obj, &["spec"]);
            set_if_absent(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            set_if_absent(spec, "volumeMode", json!("Filesystem"));
            set_if_absent(meta::obj_at(obj, &["status"]), "phase", json!("Pending"));
        }
        "PersistentVolumeClaim" => {
            set_if_absent(
                meta::obj_at(obj, &["spec"]),
                "volumeMode",
                json!("Filesystem"),
            );
            set_if_absent(meta::obj_at(obj, &["status"]), "phase", json!("Pending"));
        }
        "CSIDriver" => {
            let spec = meta::obj_at(obj, &["spec"]);
            set_if_absent(spec, "attachRequired", json!(true));
            set_if_absent(spec, "podInfoOnMount", json!(false));
            set_if_absent(spec, "requiresRepublish", json!(false));
            set_if_absent(spec, "storageCapacity", json!(false));
            set_if_absent(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
            set_if_absent(spec, "volumeLifecycleModes", json!(["Persistent"]));
        }
        _ => {}
    }
}

/// The QoS class of a pod spec, as the server records it in status.qosClass:
/// summed positive cpu/memory requests and limits over all containers.
pub fn qos_class(pod: &Value) -> &'static str {
    use kubelet::util::quantity::{Quantity, parse};
    use std::collections::BTreeMap;
    let mut requests: BTreeMap<String, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<String, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    let positive = |m: Option<&Value>| -> Vec<(String, Quantity)> {
        m.and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.as_str() == "cpu" || k.as_str() == "memory")
                    .filter_map(|(k, v)| Some((k.clone(), parse(v.as_str()?).ok()?)))
                    .filter(|(_, q)| q.cmp_value(&Quantity::from_decimal(0)).is_gt())
                    .collect()
            })
            .unwrap_or_default()
    };
    let add = |acc: &mut BTreeMap<String, Quantity>, k: String, q: Quantity| {
        let sum = acc.get(&k).map(|a| a.add(&q)).unwrap_or(q);
        acc.insert(k, sum);
    };
    for list in ["containers", "initContainers"] {
        let Some(Value::Array(cs)) = meta::get_path(pod, &["spec", list]) else {
            continue;
        };
        for c in cs {
            for (k, q) in positive(meta::get_path(c, &["resources", "requests"])) {
                add(&mut requests, k, q);
            }
            let lims = positive(meta::get_path(c, &["resources", "limits"]));
            let found = |r: &str| lims.iter().any(|(k, _)| k == r);
            if !(found("cpu") && found("memory")) {
                guaranteed = false;
            }
            for (k, q) in lims {
                add(&mut limits, k, q);
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed {
        guaranteed = requests
            .iter()
            .all(|(k, r)| limits.get(k).is_some_and(|l| l.cmp_value(r).is_eq()));
    }
    if guaranteed && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}
