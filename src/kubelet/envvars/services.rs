//! Service environment variables (`FOO_SERVICE_HOST`, `FOO_PORT_80_TCP`, ...)
//! as the kubelet injects them: for the master services of the master
//! service namespace always, and for the services of the pod's own namespace
//! when enableServiceLinks.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

use crate::kubelet::container::EnvVar;

/// The services whose variables every pod gets, in the master namespace.
pub const MASTER_SERVICES: &[&str] = &["kubernetes"];
/// The default `--master-service-namespace`.
pub const DEFAULT_MASTER_SERVICE_NAMESPACE: &str = "default";

fn cluster_ip(service: &Service) -> &str {
    service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or("")
}

/// A service has a usable cluster IP (not empty, not headless `None`).
pub fn is_service_ip_set(service: &Service) -> bool {
    let ip = cluster_ip(service);
    !ip.is_empty() && ip != "None"
}

fn env_name(s: &str) -> String {
    s.replace('-', "_").to_uppercase()
}

/// `host:port`, bracketing IPv6 hosts.
fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The variables for `services`, in order: for each service its host, first
/// port, named ports, then the Docker-link style variables per port.
/// Services without a cluster IP or without ports are skipped.
pub fn from_services(services: &[&Service]) -> Vec<EnvVar> {
    let mut out = Vec::new();
    for service in services {
        if !is_service_ip_set(service) {
            continue;
        }
        let ports = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_deref())
            .unwrap_or(&[]);
        let Some(first) = ports.first() else {
            continue;
        };
        let name = service.metadata.name.as_deref().unwrap_or("");
        let prefix = env_name(name);
        let ip = cluster_ip(service);
        out.push(EnvVar::new(format!("{prefix}_SERVICE_HOST"), ip));
        let port_var = format!("{prefix}_SERVICE_PORT");
        out.push(EnvVar::new(port_var.clone(), first.port.to_string()));
        for sp in ports {
            if let Some(pn) = sp.name.as_deref().filter(|n| !n.is_empty()) {
                out.push(EnvVar::new(
                    format!("{port_var}_{}", env_name(pn)),
                    sp.port.to_string(),
                ));
            }
        }
        out.extend(link_variables(&prefix, ip, ports));
    }
    out
}

fn link_variables(
    prefix: &str,
    ip: &str,
    ports: &[k8s_openapi::api::core::v1::ServicePort],
) -> Vec<EnvVar> {
    let mut all = Vec::new();
    for (i, sp) in ports.iter().enumerate() {
        let protocol = sp
            .protocol
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("TCP");
        let lower = protocol.to_lowercase();
        let url = format!("{lower}://{}", join_host_port(ip, sp.port));
        if i == 0 {
            all.push(EnvVar::new(format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", sp.port, protocol.to_uppercase());
        all.push(EnvVar::new(port_prefix.clone(), url));
        all.push(EnvVar::new(format!("{port_prefix}_PROTO"), lower));
        all.push(EnvVar::new(
            format!("{port_prefix}_PORT"),
            sp.port.to_string(),
        ));
        all.push(EnvVar::new(format!("{port_prefix}_ADDR"), ip));
    }
    all
}

/// The service variables a pod in `namespace` gets, de-duplicated by name
/// (last wins, first position kept). Master services of
/// `master_service_namespace` are always included; other services of the
/// pod's namespace only with `enable_service_links`.
pub fn service_env_vars(
    services: &[Service],
    namespace: &str,
    enable_service_links: bool,
    master_service_namespace: &str,
) -> Vec<EnvVar> {
    let mut selected: BTreeMap<&str, &Service> = BTreeMap::new();
    for service in services {
        if !is_service_ip_set(service) {
            continue;
        }
        let name = service.metadata.name.as_deref().unwrap_or("");
        let ns = service.metadata.namespace.as_deref().unwrap_or("");
        if ns == master_service_namespace && MASTER_SERVICES.contains(&name) {
            selected.entry(name).or_insert(service);
        } else if ns == namespace && enable_service_links {
            selected.insert(name, service);
        }
    }
    let list: Vec<&Service> = selected.into_values().collect();
    let mut out: Vec<EnvVar> = Vec::new();
    for e in from_services(&list) {
        match out.iter_mut().find(|x| x.name == e.name) {
            Some(existing) => existing.value = e.value,
            None => out.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": ports}
        }))
        .expect("service")
    }

    fn pairs(v: &[EnvVar]) -> Vec<(String, String)> {
        v.iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect()
    }

    #[test]
    fn kubernetes_service_variables() {
        let k = svc(
            "default",
            "kubernetes",
            "10.96.0.1",
            serde_json::json!([{"name": "https", "port": 443, "protocol": "TCP"}]),
        );
        let got = pairs(&from_services(&[&k]));
        let want: Vec<(String, String)> = [
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn multi_port_dashes_and_ipv6() {
        let s = svc(
            "ns",
            "my-svc",
            "fd00::10",
            serde_json::json!([{"port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53}]),
        );
        let got = pairs(&from_services(&[&s]));
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "MY_SVC_SERVICE_HOST",
                "MY_SVC_SERVICE_PORT",
                "MY_SVC_SERVICE_PORT_DNS_TCP",
                "MY_SVC_PORT",
                "MY_SVC_PORT_53_UDP",
                "MY_SVC_PORT_53_UDP_PROTO",
                "MY_SVC_PORT_53_UDP_PORT",
                "MY_SVC_PORT_53_UDP_ADDR",
                "MY_SVC_PORT_53_TCP",
                "MY_SVC_PORT_53_TCP_PROTO",
                "MY_SVC_PORT_53_TCP_PORT",
                "MY_SVC_PORT_53_TCP_ADDR",
            ]
        );
        assert_eq!(got[3].1, "udp://[fd00::10]:53");
        assert_eq!(got[8].1, "tcp://[fd00::10]:53");
    }

    #[test]
    fn selection_table() {
        let https = serde_json::json!([{"name": "https", "port": 443}]);
        let web = serde_json::json!([{"port": 80}]);
        let services = vec![
            svc("default", "kubernetes", "10.96.0.1", https.clone()),
            svc("default", "other", "10.96.0.2", web.clone()),
            svc("app", "web", "10.96.0.3", web.clone()),
            svc("app", "headless", "None", web.clone()),
            svc("app", "noip", "", web.clone()),
            svc("elsewhere", "db", "10.96.0.4", web.clone()),
        ];
        let has = |v: &[EnvVar], n: &str| v.iter().any(|e| e.name == n);
        let cases: &[(&str, bool, &[&str], &[&str])] = &[
            (
                "app",
                true,
                &["KUBERNETES_SERVICE_HOST", "WEB_SERVICE_HOST"],
                &[
                    "OTHER_SERVICE_HOST",
                    "HEADLESS_SERVICE_HOST",
                    "NOIP_SERVICE_HOST",
                    "DB_SERVICE_HOST",
                ],
            ),
            (
                "app",
                false,
                &["KUBERNETES_SERVICE_HOST"],
                &["WEB_SERVICE_HOST"],
            ),
            (
                "default",
                true,
                &["KUBERNETES_SERVICE_HOST", "OTHER_SERVICE_HOST"],
                &["WEB_SERVICE_HOST"],
            ),
            (
                "default",
                false,
                &["KUBERNETES_SERVICE_HOST"],
                &["OTHER_SERVICE_HOST"],
            ),
        ];
        for (ns, links, present, absent) in cases {
            let got = service_env_vars(&services, ns, *links, "default");
            for n in *present {
                assert!(has(&got, n), "ns {ns} links {links}: {n} missing");
            }
            for n in *absent {
                assert!(!has(&got, n), "ns {ns} links {links}: {n} present");
            }
        }
    }

    #[test]
    fn master_service_wins_over_same_name_elsewhere_only_when_first() {
        let https = serde_json::json!([{"name": "https", "port": 443}]);
        // A "kubernetes" service in the pod's namespace replaces the master one.
        let services = vec![
            svc("default", "kubernetes", "10.96.0.1", https.clone()),
            svc("app", "kubernetes", "10.0.0.9", https.clone()),
        ];
        let got = service_env_vars(&services, "app", true, "default");
        let host = got
            .iter()
            .find(|e| e.name == "KUBERNETES_SERVICE_HOST")
            .map(|e| e.value.clone());
        assert_eq!(host.as_deref(), Some("10.0.0.9"));
        // Without links the master one is used.
        let got = service_env_vars(&services, "app", false, "default");
        let host = got
            .iter()
            .find(|e| e.name == "KUBERNETES_SERVICE_HOST")
            .map(|e| e.value.clone());
        assert_eq!(host.as_deref(), Some("10.96.0.1"));
    }
}
