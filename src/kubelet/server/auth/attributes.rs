//! Request → authorization attributes, as the kubelet maps them: every
//! request is a request on the `nodes` resource named after this node, with
//! the verb from the HTTP method and the subresource `proxy`, narrowed to
//! `stats`, `metrics`, `log` or `spec` for those path trees.

use super::{Attributes, UserInfo};

const STATS_PATH: &str = "/stats/";
/// The metrics tree (also `/metrics/cadvisor`, `/metrics/probes`, ...).
const METRICS_PATH: &str = "/metrics";
const LOGS_PATH: &str = "/logs/";
const SPEC_PATH: &str = "/spec/";

/// Whether `subpath` is `path` itself or lies below it.
fn is_subpath(subpath: &str, path: &str) -> bool {
    let path = path.strip_suffix('/').unwrap_or(path);
    subpath == path
        || (subpath.starts_with(path) && subpath.as_bytes().get(path.len()) == Some(&b'/'))
}

fn verb_for(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// The attributes of a request by `user` with `method` on `path` to the
/// kubelet of `node_name`.
pub fn node_request_attributes(
    user: UserInfo,
    method: &str,
    path: &str,
    node_name: &str,
) -> Attributes {
    let subresource = if is_subpath(path, STATS_PATH) {
        "stats"
    } else if is_subpath(path, METRICS_PATH) {
        "metrics"
    } else if is_subpath(path, LOGS_PATH) {
        "log"
    } else if is_subpath(path, SPEC_PATH) {
        "spec"
    } else {
        "proxy"
    };
    let attrs = Attributes {
        user,
        verb: verb_for(method).to_string(),
        namespace: String::new(),
        api_group: String::new(),
        api_version: "v1".to_string(),
        resource: "nodes".to_string(),
        subresource: subresource.to_string(),
        name: node_name.to_string(),
        resource_request: true,
        path: path.to_string(),
    };
    crate::vlog!(
        5,
        user = %attrs.user.name,
        verb = %attrs.verb,
        resource = %attrs.resource,
        subresource = %attrs.subresource,
        "Node request attributes"
    );
    attrs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_table() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("GET", "/stats/summary", "get", "stats"),
            ("GET", "/stats", "get", "stats"),
            ("GET", "/stats/", "get", "stats"),
            ("GET", "/statsfoo", "get", "proxy"),
            ("GET", "/metrics", "get", "metrics"),
            ("GET", "/metrics/cadvisor", "get", "metrics"),
            ("GET", "/metrics/resource", "get", "metrics"),
            ("GET", "/metricsfoo", "get", "proxy"),
            ("GET", "/logs/", "get", "log"),
            ("GET", "/logs/syslog", "get", "log"),
            ("GET", "/logs", "get", "log"),
            ("GET", "/spec/", "get", "spec"),
            ("GET", "/healthz", "get", "proxy"),
            ("GET", "/configz", "get", "proxy"),
            ("GET", "/pods", "get", "proxy"),
            ("POST", "/exec/ns/pod/c", "create", "proxy"),
            ("PUT", "/configz", "update", "proxy"),
            ("PATCH", "/pods", "patch", "proxy"),
            ("DELETE", "/pods", "delete", "proxy"),
            ("HEAD", "/healthz", "", "proxy"),
            ("OPTIONS", "/metrics", "", "metrics"),
        ];
        for (method, path, verb, sub) in cases {
            let user = UserInfo {
                name: "u".into(),
                ..Default::default()
            };
            let a = node_request_attributes(user.clone(), method, path, "node-a");
            assert_eq!(a.verb, *verb, "{method} {path}");
            assert_eq!(a.subresource, *sub, "{method} {path}");
            assert_eq!(a.resource, "nodes");
            assert_eq!(a.api_version, "v1");
            assert_eq!(a.api_group, "");
            assert_eq!(a.namespace, "");
            assert_eq!(a.name, "node-a");
            assert!(a.resource_request);
            assert_eq!(a.path, *path);
            assert_eq!(a.user, user);
        }
    }
}
