//! Discovery documents: /version, /api, /apis, /apis/<group>,
//! /api/v1 and /apis/<group>/<version>.

use serde_json::{Value, json};

use super::options::DoubleOptions;
use super::resources::{self, RESOURCES};

pub fn version(opts: &DoubleOptions) -> Value {
    let minor = opts
        .git_version
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .unwrap_or("25")
        .to_string();
    json!({
        "major": "1",
        "minor": minor,
        "gitVersion": opts.git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2023-11-15T00:00:00Z",
        "goVersion": "go1.20.10",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_doc(group: &str) -> Value {
    let versions: Vec<Value> = resources::group_versions()
        .into_iter()
        .filter(|(g, _)| *g == group)
        .map(|(g, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

pub fn groups() -> Value {
    let mut names: Vec<&str> = Vec::new();
    for (g, _) in resources::group_versions() {
        if !g.is_empty() && !names.contains(&g) {
            names.push(g);
        }
    }
    let groups: Vec<Value> = names.into_iter().map(group_doc).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(name: &str) -> Option<Value> {
    if name.is_empty() || !resources::group_versions().iter().any(|(g, _)| *g == name) {
        return None;
    }
    let mut d = group_doc(name);
    d["kind"] = json!("APIGroup");
    d["apiVersion"] = json!("v1");
    Some(d)
}

/// The APIResourceList of one group/version, with subresources.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let rs: Vec<_> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for r in rs {
        let mut e = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs(),
        });
        if !r.short_names.is_empty() {
            e["shortNames"] = json!(r.short_names);
        }
        out.push(e);
        for sub in r.subresources {
            let (kind, verbs): (&str, &[&str]) = match *sub {
                "token" => ("TokenRequest", &["create"]),
                "approval" | "finalize" => (r.kind, &["get", "patch", "update"]),
                _ => (r.kind, &["get", "patch", "update"]),
            };
            let mut e = json!({
                "name": format!("{}/{}", r.plural, sub),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if *sub == "token" {
                e["group"] = json!("authentication.k8s.io");
                e["version"] = json!("v1");
            }
            out.push(e);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": out,
    }))
}
