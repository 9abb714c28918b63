//! SubjectAccessReview as kube-apiserver answers it with RBAC: the review's
//! user and groups against the stored ClusterRoleBindings and their
//! ClusterRoles (namespaced Roles are not modelled; the kubelet only asks
//! about cluster-scoped `nodes`). `system:masters` is always allowed, as the
//! real server's superuser group.

use serde_json::Value;

use super::resources;
use super::server::Shared;
use super::store::ObjKey;

/// How the double answers SubjectAccessReviews.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SarPolicy {
    AllowAll,
    DenyAll,
    /// RBAC over the stored ClusterRoles and ClusterRoleBindings.
    Rbac,
}

/// What a review asks, read off its spec.
struct Ask<'a> {
    user: &'a str,
    groups: Vec<&'a str>,
    verb: &'a str,
    group: &'a str,
    resource: String,
    name: &'a str,
    path: Option<&'a str>,
}

fn ask(spec: &Value) -> Ask<'_> {
    let str_at = |path: &[&str]| -> &str {
        let mut v = spec;
        for k in path {
            match v.get(k) {
                Some(x) => v = x,
                None => return "",
            }
        }
        v.as_str().unwrap_or("")
    };
    let groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let ra = ["resourceAttributes"];
    let sub = str_at(&[ra[0], "subresource"]);
    let res = str_at(&[ra[0], "resource"]);
    let nonres = spec.get("nonResourceAttributes").is_some();
    Ask {
        user: str_at(&["user"]),
        groups,
        verb: if nonres {
            str_at(&["nonResourceAttributes", "verb"])
        } else {
            str_at(&[ra[0], "verb"])
        },
        group: str_at(&[ra[0], "group"]),
        resource: if sub.is_empty() {
            res.to_string()
        } else {
            format!("{res}/{sub}")
        },
        name: str_at(&[ra[0], "name"]),
        path: nonres.then(|| str_at(&["nonResourceAttributes", "path"])),
    }
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

fn rule_allows(rule: &Value, a: &Ask<'_>) -> bool {
    if !has(&strings(rule, "verbs"), a.verb) {
        return false;
    }
    if let Some(path) = a.path {
        return strings(rule, "nonResourceURLs").iter().any(|u| {
            u == path || u == "*" || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
        });
    }
    let names = strings(rule, "resourceNames");
    has(&strings(rule, "apiGroups"), a.group)
        && has(&strings(rule, "resources"), &a.resource)
        && (names.is_empty() || names.iter().any(|n| n == a.name))
}

fn subject_matches(subject: &Value, a: &Ask<'_>) -> bool {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "User" => field("name") == a.user,
        "Group" => a.groups.contains(&field("name")),
        "ServiceAccount" => {
            a.user
                == format!(
                    "system:serviceaccount:{}:{}",
                    field("namespace"),
                    field("name")
                )
        }
        _ => false,
    }
}

/// Whether RBAC lets the review's subject do what it asks.
pub fn allowed(shared: &Shared, spec: &Value) -> bool {
    let a = ask(spec);
    if a.groups.contains(&"system:masters") {
        return true;
    }
    let (Some(bindings), Some(roles)) = (
        resources::by_id("clusterrolebindings.rbac.authorization.k8s.io"),
        resources::by_id("clusterroles.rbac.authorization.k8s.io"),
    ) else {
        return false;
    };
    shared.store.tx(|tx| {
        tx.list(bindings, None).iter().any(|b| {
            let subjects = b.get("subjects").and_then(Value::as_array);
            if !subjects.is_some_and(|s| s.iter().any(|s| subject_matches(s, &a))) {
                return false;
            }
            let role = b
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            tx.get(roles, &ObjKey::new("", role))
                .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
                .is_some_and(|rules| rules.iter().any(|r| rule_allows(r, &a)))
        })
    })
}
