//! Container environment through the kubelet (standalone): literal values,
//! `$(VAR)` expansion with `$$` escapes in values, command and args,
//! fieldRef (metadata, spec, status), resourceFieldRef with divisors and
//! defaults, and what the Go kubelet does with configMap/secret references
//! when it has no API server: the container is not created, its status
//! waits with `CreateContainerConfigError` and Go's message. The
//! environment is read from the container's first process, so it is what
//! the runtime gave it: the image's PATH, the HOSTNAME containerd adds, and
//! the pod's variables (no service variables without an API server).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::harness;
use crate::node::*;
use crate::support::containerd::images;

const START: Duration = Duration::from_secs(60);

pub async fn env(node: &Node) {
    tokio::join!(
        values_and_references(node),
        config_error(
            node,
            "env-cm",
            "    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: cfg, key: greeting}}
",
            "couldn't get configMap default/cfg, no kubeClient defined",
        ),
        config_error(
            node,
            "env-secret-opt",
            "    env:
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: creds, key: password, optional: true}}
",
            "couldn't get secret default/creds, no kubeClient defined",
        ),
        config_error(
            node,
            "env-from",
            "    envFrom:
    - prefix: CFG_
      configMapRef: {name: settings, optional: true}
",
            "couldn't get configMap default/settings, no kubeClient defined",
        ),
    );
}

/// The environment of the container's first process.
async fn environ(node: &Node, pod: &Pod) -> BTreeMap<String, String> {
    node.sh(pod, "main", "tr '\\0' '\\n' < /proc/1/environ")
        .await
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn values_and_references(node: &Node) {
    let bb = &images().busybox;
    node.write_pod_in(
        "env",
        "default",
        "  labels: {app: env-app}\n  annotations: {note: 'a note'}\n",
        &format!(
            "  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {bb}
    command: [sh, -c, 'printf \"%s\\n\" \"$0\" \"$1\" > /tmp/args; exec sleep \"$2\"']
    args: ['$(LITERAL)', '$$(LITERAL) $(NOPE)', '$(NAP)']
    resources:
      requests: {{cpu: 100m, memory: 32Mi}}
      limits: {{cpu: 500m, memory: 64Mi}}
    env:
    - {{name: NAP, value: '3600'}}
    - {{name: LITERAL, value: plain}}
    - {{name: EMPTY, value: ''}}
    - name: POD_NAME
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    - name: POD_NAMESPACE
      valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}
    - name: POD_UID
      valueFrom: {{fieldRef: {{fieldPath: metadata.uid}}}}
    - name: APP
      valueFrom: {{fieldRef: {{fieldPath: \"metadata.labels['app']\"}}}}
    - name: NOTE
      valueFrom: {{fieldRef: {{fieldPath: \"metadata.annotations['note']\"}}}}
    - name: NODE_NAME
      valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}
    - name: SERVICE_ACCOUNT
      valueFrom: {{fieldRef: {{fieldPath: spec.serviceAccountName}}}}
    - name: POD_IP
      valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
    - name: POD_IPS
      valueFrom: {{fieldRef: {{fieldPath: status.podIPs}}}}
    - name: HOST_IP
      valueFrom: {{fieldRef: {{fieldPath: status.hostIP}}}}
    - name: CPU_LIMIT
      valueFrom: {{resourceFieldRef: {{resource: limits.cpu, divisor: 1m}}}}
    - name: CPU_REQUEST
      valueFrom: {{resourceFieldRef: {{resource: requests.cpu}}}}
    - name: MEM_LIMIT
      valueFrom: {{resourceFieldRef: {{resource: limits.memory}}}}
    - name: MEM_REQUEST_MI
      valueFrom: {{resourceFieldRef: {{containerName: main, resource: requests.memory, divisor: 1Mi}}}}
    - name: EXPANDED
      value: '$(POD_NAME)/$(LITERAL)/$$(LITERAL)/$(MISSING)/$$$(LITERAL)/$(LATER)'
    - {{name: LATER, value: after}}
"
        ),
    );
    let (pod, _) = node
        .wait("env", START, "running", |p| harness::is_running(p, "main"))
        .await;
    let name = format!("env-{NODE}");
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("pod IP");
    let ips: Vec<String> = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ips.as_ref())
        .into_iter()
        .flatten()
        .map(|i| i.ip.clone())
        .collect();
    // Standalone: no hostIP in the status (Go reports it only with an API
    // server), but status.hostIP resolves to the InternalIP the node
    // would report (its name resolved, else the default route's address).
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.host_ip.clone()),
        None,
        "env: no hostIP in a standalone status"
    );
    let addresses = kubelet::kubelet::nodestatus::node_addresses(
        &kubelet::kubelet::nodestatus::AddressConfig {
            hostname: NODE.to_string(),
            ..Default::default()
        },
        NODE,
    )
    .await
    .expect("node addresses");
    let host_ip = addresses
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
        .expect("an InternalIP");
    assert!(
        nix::ifaddrs::getifaddrs()
            .expect("interfaces")
            .filter_map(|a| a.address?.as_sockaddr_in().map(|s| s.ip().to_string()))
            .any(|ip| ip == host_ip),
        "env: the host IP {host_ip} is one of the node's"
    );
    // HOME comes from the runtime (runc adds it), PWD and SHLVL from the
    // container's shell: none of them is the kubelet's doing.
    let mut got = environ(node, &pod).await;
    for not_kubelet in ["HOME", "PWD", "SHLVL"] {
        got.remove(not_kubelet);
    }
    let path = got.get("PATH").cloned().expect("the image's PATH");
    let want: BTreeMap<String, String> = [
        ("PATH", path.as_str()),
        ("HOSTNAME", name.as_str()),
        ("NAP", "3600"),
        ("LITERAL", "plain"),
        ("EMPTY", ""),
        ("POD_NAME", name.as_str()),
        ("POD_NAMESPACE", "default"),
        ("POD_UID", harness::uid(&pod).as_str()),
        ("APP", "env-app"),
        ("NOTE", "a note"),
        ("NODE_NAME", NODE),
        ("SERVICE_ACCOUNT", ""),
        ("POD_IP", ip.as_str()),
        ("POD_IPS", ips.join(",").as_str()),
        ("HOST_IP", host_ip.as_str()),
        // 500m in millicores; 100m rounds up to one core; bytes.
        ("CPU_LIMIT", "500"),
        ("CPU_REQUEST", "1"),
        ("MEM_LIMIT", "67108864"),
        ("MEM_REQUEST_MI", "32"),
        // Declared earlier: expanded; `$$` escapes; unknown and
        // later-declared names stay as written.
        (
            "EXPANDED",
            &format!("{name}/plain/$(LITERAL)/$(MISSING)/$plain/$(LATER)"),
        ),
        ("LATER", "after"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(got, want, "env: the container's environment");
    assert_eq!(
        node.sh(&pod, "main", "cat /tmp/args").await,
        "plain\n$(LITERAL) $(NOPE)\n",
        "env: args expanded from the environment"
    );
    node.remove_pod("env");
}

/// A reference the kubelet cannot resolve: the container never starts,
/// and its status says why, as Go's does.
async fn config_error(node: &Node, pod: &str, env: &str, message: &str) {
    let bb = &images().busybox;
    node.write_pod(
        pod,
        &format!(
            "  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {bb}
    command: [sleep, '3600']
{env}"
        ),
    );
    let (p, _) = node
        .wait(pod, START, "CreateContainerConfigError", |p| {
            waiting(p).is_some_and(|(r, _)| r == "CreateContainerConfigError")
        })
        .await;
    assert_eq!(
        waiting(&p),
        Some(("CreateContainerConfigError", message)),
        "{pod}: waiting reason and message"
    );
    assert_eq!(harness::phase(&p), "Pending", "{pod}: phase");
    assert!(!pod_ready(&p, true), "{pod}: not ready");
    let uid = harness::uid(&p);
    assert!(
        harness::cri_containers(&node.rt, &uid).await.is_empty(),
        "{pod}: no container created"
    );
    node.remove_pod(pod);
}

fn waiting(p: &Pod) -> Option<(&str, &str)> {
    let w = harness::container(p, "main")?
        .state
        .as_ref()?
        .waiting
        .as_ref()?;
    Some((
        w.reason.as_deref()?,
        w.message.as_deref().unwrap_or_default(),
    ))
}
