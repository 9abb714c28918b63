//! Every flag of the reference kubelet's flag list (tests/fixtures/kubelet-v1.24-flags.tsv):
//! it parses with a value of its type, its type and default are the
//! reference's, and deprecated flags warn. Where the v1.25 line differs
//! from the v1.24 development build the list was taken from, the difference
//! is spelled out below.

use std::collections::BTreeMap;

use crate::app::command::{CommandError, build};
use crate::app::options::help::{Defaults, default_display};
use crate::app::options::parse::ParseError;
use crate::app::options::table::lookup;

const TSV: &str = include_str!("../../../tests/fixtures/kubelet-v1.24-flags.tsv");

struct Row<'a> {
    name: &'a str,
    ty: &'a str,
    default: &'a str,
    status: &'a str,
}

fn rows() -> Vec<Row<'static>> {
    TSV.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("flag\t"))
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            Row {
                name: cols[0],
                ty: cols[1],
                default: cols.get(2).copied().unwrap_or(""),
                status: cols.get(3).copied().unwrap_or(""),
            }
        })
        .collect()
}

/// Defaults that the v1.25 line changed.
fn v125_defaults() -> BTreeMap<&'static str, &'static str> {
    [
        ("pod-infra-container-image", "\"registry.k8s.io/pause:3.8\""),
        (
            "container-runtime-endpoint",
            "\"unix:///run/containerd/containerd.sock\"",
        ),
        ("logging-format", "\"text\""),
    ]
    .into()
}

/// Flags the list shows as current whose v1.25 registration deprecates them
/// (configuration fields whose multi-line help hid the marker in the list).
const V125_DEPRECATED: &[&str] = &["feature-gates", "logging-format", "tls-cipher-suites"];

/// Gone from the v1.25 line besides dockershim and dynamic configuration:
/// log sanitization was removed from component-base in 1.25, and the flag
/// dump of a v1.25 kubelet in the seeds (002, `FLAG:` lines) no longer has
/// the other three.
const V125_REMOVED: &[&str] = &[
    "experimental-logging-sanitization",
    "experimental-check-node-capabilities-before-mount",
    "experimental-kernel-memcg-notification",
    "non-masquerade-cidr",
];

/// A value of the flag's type.
fn sample(ty: &str) -> &'static str {
    match ty {
        "bool" | "RuntimeDefault" => "true",
        "int32" | "int" | "uint" | "Level" => "3",
        "duration" => "1m30s",
        "ip" => "10.1.2.3",
        "strings" => "a,b",
        "mapStringString" => "memory.available=1Gi",
        "mapStringBool" => "NodeSwap=true",
        "colonSeparatedMultimapStringString" => "a:b,a:c",
        "[]v1.Taint" => "dedicated=infra:NoSchedule",
        "quantity" => "1Ki",
        "traceLocation" => "file.go:10",
        "severity" => "ERROR",
        "version[=true]" => "false",
        _ => "value",
    }
}

#[test]
fn every_reference_flag() {
    let defaults = Defaults::new();
    let changed = v125_defaults();
    let rows = rows();
    assert!(rows.len() > 150, "the list is read");
    for row in rows {
        if row.status == "removed-by-v1.25" || V125_REMOVED.contains(&row.name) {
            let err = build([format!("--{}=x", row.name)], &mut Vec::new()).unwrap_err();
            assert!(
                matches!(err, CommandError::Parse(ParseError::UnknownFlag(ref n)) if n == row.name),
                "{}: {err}",
                row.name
            );
            continue;
        }
        let (_, flag) = lookup(row.name).unwrap_or_else(|| panic!("--{} is missing", row.name));
        assert_eq!(flag.help_type(), row.ty, "type of --{}", row.name);

        let shown = default_display(flag, &defaults).unwrap_or_default();
        let want = changed.get(row.name).copied().unwrap_or(row.default);
        assert_eq!(shown, want, "default of --{}", row.name);

        let deprecated = !row.status.is_empty() || V125_DEPRECATED.contains(&row.name);
        assert_eq!(
            flag.deprecated.is_some(),
            deprecated,
            "deprecation of --{}",
            row.name
        );

        if row.name == "help" || row.name == "version" {
            continue;
        }
        let value = if row.name == "feature-gates" || row.ty == "mapStringBool" {
            "NodeSwap=true"
        } else if row.name.starts_with("eviction-hard") || row.name == "eviction-soft" {
            "memory.available<1Gi"
        } else if row.name == "authorization-mode" {
            "Webhook"
        } else if row.name.starts_with("log-json") || row.name == "logging-format" {
            // Needs a gate or a format the sample cannot give; parsing is
            // covered, the outcome is checked elsewhere.
            continue;
        } else {
            sample(row.ty)
        };
        let mut warnings = Vec::new();
        let arg = format!("--{}={value}", row.name);
        let result = build([arg.as_str()], &mut warnings);
        if let Err(CommandError::InvalidValue { .. } | CommandError::Parse(_)) = &result {
            panic!("{arg}: {:?}", result.err());
        }
        let warned = String::from_utf8(warnings).unwrap();
        if deprecated {
            assert_eq!(
                warned.lines().next().unwrap_or(""),
                format!(
                    "Flag --{} has been deprecated, {}",
                    row.name,
                    flag.deprecated.unwrap_or("")
                ),
                "{arg}"
            );
        } else {
            assert!(warned.is_empty(), "{arg}: {warned}");
        }
    }
}

#[test]
fn flags_the_v125_line_added_are_present() {
    for name in [
        "local-storage-capacity-isolation",
        "reserved-memory",
        "vmodule",
        "image-service-endpoint",
        "azure-container-registry-config",
    ] {
        assert!(lookup(name).is_some(), "--{name}");
    }
}

/// A v1.25 kubelet's `FLAG:` lines (the flag dump in the seeds, article
/// 002), started with the command line in [`V125_ARGS`]: every flag of the
/// v1.25 line with the value the command line gave it.
const V125_FLAG_DUMP: &[&str] = &[
    "--add-dir-header=\"false\"",
    "--address=\"0.0.0.0\"",
    "--allowed-unsafe-sysctls=\"[]\"",
    "--alsologtostderr=\"false\"",
    "--anonymous-auth=\"true\"",
    "--application-metrics-count-limit=\"100\"",
    "--authentication-token-webhook-cache-ttl=\"2m0s\"",
    "--authentication-token-webhook=\"false\"",
    "--authorization-mode=\"AlwaysAllow\"",
    "--authorization-webhook-cache-authorized-ttl=\"5m0s\"",
    "--authorization-webhook-cache-unauthorized-ttl=\"30s\"",
    "--azure-container-registry-config=\"\"",
    "--boot-id-file=\"/proc/sys/kernel/random/boot_id\"",
    "--bootstrap-kubeconfig=\"/etc/kubernetes/bootstrap-kubelet.kubeconfig\"",
    "--cert-dir=\"/var/lib/kubelet/pki\"",
    "--cgroup-driver=\"cgroupfs\"",
    "--cgroup-root=\"\"",
    "--cgroups-per-qos=\"true\"",
    "--client-ca-file=\"\"",
    "--cloud-config=\"\"",
    "--cloud-provider=\"\"",
    "--cluster-dns=\"[]\"",
    "--cluster-domain=\"\"",
    "--config=\"/etc/kubernetes/kubelet-conf.yml\"",
    "--container-hints=\"/etc/cadvisor/container_hints.json\"",
    "--container-log-max-files=\"5\"",
    "--container-log-max-size=\"10Mi\"",
    "--container-runtime-endpoint=\"unix:///run/containerd/containerd.sock\"",
    "--container-runtime=\"remote\"",
    "--containerd-namespace=\"k8s.io\"",
    "--containerd=\"/run/containerd/containerd.sock\"",
    "--contention-profiling=\"false\"",
    "--cpu-cfs-quota-period=\"100ms\"",
    "--cpu-cfs-quota=\"true\"",
    "--cpu-manager-policy-options=\"\"",
    "--cpu-manager-policy=\"none\"",
    "--cpu-manager-reconcile-period=\"10s\"",
    "--enable-controller-attach-detach=\"true\"",
    "--enable-debugging-handlers=\"true\"",
    "--enable-load-reader=\"false\"",
    "--enable-server=\"true\"",
    "--enforce-node-allocatable=\"[pods]\"",
    "--event-burst=\"10\"",
    "--event-qps=\"5\"",
    "--event-storage-age-limit=\"default=0\"",
    "--event-storage-event-limit=\"default=0\"",
    "--eviction-hard=\"imagefs.available<15%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%\"",
    "--eviction-max-pod-grace-period=\"0\"",
    "--eviction-minimum-reclaim=\"\"",
    "--eviction-pressure-transition-period=\"5m0s\"",
    "--eviction-soft-grace-period=\"\"",
    "--eviction-soft=\"\"",
    "--exit-on-lock-contention=\"false\"",
    "--experimental-allocatable-ignore-eviction=\"false\"",
    "--experimental-mounter-path=\"\"",
    "--fail-swap-on=\"true\"",
    "--feature-gates=\"\"",
    "--file-check-frequency=\"20s\"",
    "--global-housekeeping-interval=\"1m0s\"",
    "--hairpin-mode=\"promiscuous-bridge\"",
    "--healthz-bind-address=\"127.0.0.1\"",
    "--healthz-port=\"10248\"",
    "--help=\"false\"",
    "--hostname-override=\"\"",
    "--housekeeping-interval=\"10s\"",
    "--http-check-frequency=\"20s\"",
    "--image-credential-provider-bin-dir=\"\"",
    "--image-credential-provider-config=\"\"",
    "--image-gc-high-threshold=\"85\"",
    "--image-gc-low-threshold=\"80\"",
    "--image-service-endpoint=\"\"",
    "--iptables-drop-bit=\"15\"",
    "--iptables-masquerade-bit=\"14\"",
    "--keep-terminated-pod-volumes=\"false\"",
    "--kernel-memcg-notification=\"false\"",
    "--kube-api-burst=\"10\"",
    "--kube-api-content-type=\"application/vnd.kubernetes.protobuf\"",
    "--kube-api-qps=\"5\"",
    "--kube-reserved-cgroup=\"\"",
    "--kube-reserved=\"\"",
    "--kubeconfig=\"/etc/kubernetes/kubelet.kubeconfig\"",
    "--kubelet-cgroups=\"\"",
    "--local-storage-capacity-isolation=\"true\"",
    "--lock-file=\"\"",
    "--log-backtrace-at=\":0\"",
    "--log-cadvisor-usage=\"false\"",
    "--log-dir=\"\"",
    "--log-file-max-size=\"1800\"",
    "--log-file=\"\"",
    "--log-flush-frequency=\"5s\"",
    "--log-json-info-buffer-size=\"0\"",
    "--log-json-split-stream=\"false\"",
    "--logging-format=\"text\"",
    "--logtostderr=\"true\"",
    "--machine-id-file=\"/etc/machine-id,/var/lib/dbus/machine-id\"",
    "--make-iptables-util-chains=\"true\"",
    "--manifest-url-header=\"\"",
    "--manifest-url=\"\"",
    "--master-service-namespace=\"default\"",
    "--max-open-files=\"1000000\"",
    "--max-pods=\"110\"",
    "--maximum-dead-containers-per-container=\"1\"",
    "--maximum-dead-containers=\"-1\"",
    "--memory-manager-policy=\"None\"",
    "--minimum-container-ttl-duration=\"0s\"",
    "--minimum-image-ttl-duration=\"2m0s\"",
    "--node-ip=\"\"",
    "--node-labels=\"node.kubernetes.io/node=\"",
    "--node-status-max-images=\"50\"",
    "--node-status-update-frequency=\"10s\"",
    "--one-output=\"false\"",
    "--oom-score-adj=\"-999\"",
    "--pod-cidr=\"\"",
    "--pod-infra-container-image=\"registry.k8s.io/pause:3.8\"",
    "--pod-manifest-path=\"\"",
    "--pod-max-pids=\"-1\"",
    "--pods-per-core=\"0\"",
    "--port=\"10250\"",
    "--protect-kernel-defaults=\"false\"",
    "--provider-id=\"\"",
    "--qos-reserved=\"\"",
    "--read-only-port=\"10255\"",
    "--register-node=\"true\"",
    "--register-schedulable=\"true\"",
    "--register-with-taints=\"\"",
    "--registry-burst=\"10\"",
    "--registry-qps=\"5\"",
    "--reserved-cpus=\"\"",
    "--reserved-memory=\"\"",
    "--resolv-conf=\"/etc/resolv.conf\"",
    "--root-dir=\"/var/lib/kubelet\"",
    "--rotate-certificates=\"false\"",
    "--rotate-server-certificates=\"false\"",
    "--runonce=\"false\"",
    "--runtime-cgroups=\"\"",
    "--runtime-request-timeout=\"2m0s\"",
    "--seccomp-default=\"false\"",
    "--serialize-image-pulls=\"true\"",
    "--skip-headers=\"false\"",
    "--skip-log-headers=\"false\"",
    "--stderrthreshold=\"2\"",
    "--storage-driver-buffer-duration=\"1m0s\"",
    "--storage-driver-db=\"cadvisor\"",
    "--storage-driver-host=\"localhost:8086\"",
    "--storage-driver-password=\"root\"",
    "--storage-driver-secure=\"false\"",
    "--storage-driver-table=\"stats\"",
    "--storage-driver-user=\"root\"",
    "--streaming-connection-idle-timeout=\"4h0m0s\"",
    "--sync-frequency=\"1m0s\"",
    "--system-cgroups=\"\"",
    "--system-reserved-cgroup=\"\"",
    "--system-reserved=\"\"",
    "--tls-cert-file=\"\"",
    "--tls-cipher-suites=\"[]\"",
    "--tls-min-version=\"\"",
    "--tls-private-key-file=\"\"",
    "--topology-manager-policy=\"none\"",
    "--topology-manager-scope=\"container\"",
    "--v=\"8\"",
    "--version=\"false\"",
    "--vmodule=\"\"",
    "--volume-plugin-dir=\"/usr/libexec/kubernetes/kubelet-plugins/volume/exec/\"",
    "--volume-stats-agg-period=\"1m0s\"",
];

const V125_ARGS: &[&str] = &[
    "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.kubeconfig",
    "--kubeconfig=/etc/kubernetes/kubelet.kubeconfig",
    "--config=/etc/kubernetes/kubelet-conf.yml",
    "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
    "--node-labels=node.kubernetes.io/node=",
    "--v=8",
];

#[test]
fn flags_and_values_match_a_v125_kubelet() {
    let parsed = crate::app::options::parse_args(V125_ARGS.iter().copied()).unwrap();
    let mut values = Defaults::new();
    let mut seen = std::collections::HashSet::new();
    for o in &parsed.occurrences {
        let first = seen.insert(o.index);
        let result = match &o.flag().target {
            crate::app::options::Target::Flags { set, .. } => {
                set(&mut values.flags, &o.value, first)
            }
            crate::app::options::Target::Config { set, .. } => {
                set(&mut values.config, &o.value, first)
            }
            crate::app::options::Target::Command { set, .. } => {
                set(&mut values.command, &o.value, first)
            }
        };
        result.unwrap();
    }
    let mut ours: Vec<String> = crate::app::options::flag_table()
        .iter()
        .map(|f| format!("--{}={:?}", f.name, values.value_of(f)))
        .collect();
    ours.sort_unstable();
    assert_eq!(ours, V125_FLAG_DUMP);
}
