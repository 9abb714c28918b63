//! Table tests: a valid static pod, broken one way per case, must fail with
//! the API server's error for that field (after defaulting and identity, as
//! the file source runs them).

use serde_json::{Value, json};

use super::validate_pod_create;
use crate::kubelet::config::common::{StaticPodOrigin, apply_static_pod_identity};
use crate::kubelet::config::defaults::set_object_defaults_pod;

fn base() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "infra", "labels": {"app": "web"}},
        "spec": {
            "containers": [{
                "name": "main", "image": "nginx:1.25",
                "ports": [{"containerPort": 80, "name": "http"}],
                "env": [{"name": "MODE", "value": "x"}],
                "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1", "memory": "64Mi"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "livenessProbe": {"httpGet": {"port": "http"}},
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}}
            }],
            "initContainers": [{"name": "init", "image": "busybox:1.36"}],
            "volumes": [{"name": "data", "hostPath": {"path": "/srv", "type": "Directory"}}]
        }
    })
}

fn errors_for(mutate: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut v = base();
    mutate(&mut v);
    let mut pod = serde_json::from_value(v).expect("test manifest decodes");
    set_object_defaults_pod(&mut pod);
    apply_static_pod_identity(&mut pod, StaticPodOrigin::Url("http://h/p"), "node-1");
    validate_pod_create(&pod)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_base_pod_is_valid() {
    assert_eq!(errors_for(|_| {}), Vec::<String>::new());
}

#[test]
fn each_broken_field_is_reported() {
    type Mutate = fn(&mut Value);
    let cases: &[(&str, Mutate, &str)] = &[
        (
            "bad pod name",
            |v| v["metadata"]["name"] = json!("Web_1"),
            "metadata.name: Invalid value: \"Web_1-node-1\": a lowercase RFC 1123 subdomain",
        ),
        (
            "bad namespace",
            |v| v["metadata"]["namespace"] = json!("in.fra"),
            "metadata.namespace: Invalid value: \"in.fra\": a lowercase RFC 1123 label",
        ),
        (
            "bad label value",
            |v| v["metadata"]["labels"]["app"] = json!("-x"),
            "metadata.labels: Invalid value: \"-x\": a valid label must be an empty string",
        ),
        (
            "bad annotation key",
            |v| v["metadata"]["annotations"] = json!({"a/b/c": "x"}),
            "metadata.annotations: Invalid value: \"a/b/c\": a qualified name",
        ),
        (
            "no containers",
            |v| v["spec"]["containers"] = json!([]),
            "spec.containers: Required value",
        ),
        (
            "no image",
            |v| v["spec"]["containers"][0]["image"] = json!(""),
            "spec.containers[0].image: Required value",
        ),
        (
            "padded image",
            |v| v["spec"]["containers"][0]["image"] = json!(" nginx"),
            "spec.containers[0].image: Invalid value: \" nginx\": must not have leading or trailing whitespace",
        ),
        (
            "bad container name",
            |v| v["spec"]["containers"][0]["name"] = json!("Main"),
            "spec.containers[0].name: Invalid value: \"Main\": a lowercase RFC 1123 label",
        ),
        (
            "duplicate container name",
            |v| v["spec"]["initContainers"][0]["name"] = json!("main"),
            "spec.initContainers[0].name: Duplicate value: \"main\"",
        ),
        (
            "port out of range",
            |v| v["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(70000),
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        ),
        (
            "bad port name",
            |v| v["spec"]["containers"][0]["ports"][0]["name"] = json!("HTTP"),
            "spec.containers[0].ports[0].name: Invalid value: \"HTTP\": must contain only alpha-numeric characters",
        ),
        (
            "bad protocol",
            |v| v["spec"]["containers"][0]["ports"][0]["protocol"] = json!("ICMP"),
            "spec.containers[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ),
        (
            "host port clash",
            |v| {
                v["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8080}]);
            },
            "spec.containers[0].ports[1].hostPort: Duplicate value: \"TCP//8080\"",
        ),
        (
            "host network port mismatch",
            |v| {
                v["spec"]["hostNetwork"] = json!(true);
                v["spec"]["containers"][0]["ports"][0]["hostPort"] = json!(8080);
            },
            "spec.containers[0].ports[0].containerPort: Invalid value: 80: must match `hostPort` when `hostNetwork` is true",
        ),
        (
            "bad env name",
            |v| v["spec"]["containers"][0]["env"][0]["name"] = json!("1MODE"),
            "spec.containers[0].env[0].name: Invalid value: \"1MODE\": a valid environment variable name",
        ),
        (
            "env with two sources",
            |v| {
                v["spec"]["containers"][0]["env"][0]["valueFrom"] =
                    json!({"fieldRef": {"fieldPath": "metadata.name"}})
            },
            "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
        ),
        (
            "env field path",
            |v| v["spec"]["containers"][0]["env"][0] = json!({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.schedulerName"}}}),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.schedulerName\"",
        ),
        (
            "unknown volume",
            |v| v["spec"]["containers"][0]["volumeMounts"][0]["name"] = json!("nope"),
            "spec.containers[0].volumeMounts[0].name: Not found: \"nope\"",
        ),
        (
            "relative subPath",
            |v| v["spec"]["containers"][0]["volumeMounts"][0]["subPath"] = json!("../x"),
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"../x\": must not contain '..'",
        ),
        (
            "request above limit",
            |v| v["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("2"),
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit",
        ),
        (
            "negative request",
            |v| v["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("-1Mi"),
            "spec.containers[0].resources.requests[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0",
        ),
        (
            "unknown resource",
            |v| v["spec"]["containers"][0]["resources"]["limits"]["gpu"] = json!("1"),
            "spec.containers[0].resources.limits[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified",
        ),
        (
            "extended resource overcommit",
            |v| {
                v["spec"]["containers"][0]["resources"]["limits"]["example.com/dev"] = json!("2");
                v["spec"]["containers"][0]["resources"]["requests"]["example.com/dev"] = json!("1");
            },
            "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/dev limit",
        ),
        (
            "hugepages not whole pages",
            |v| v["spec"]["containers"][0]["resources"]["limits"]["hugepages-2Mi"] = json!("3Mi"),
            "spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: \"3Mi\": 3Mi is not positive integer multiple of hugepages-2Mi",
        ),
        (
            "probe without handler",
            |v| v["spec"]["containers"][0]["livenessProbe"] = json!({"periodSeconds": 3}),
            "spec.containers[0].livenessProbe: Required value: must specify a handler type",
        ),
        (
            "liveness success threshold",
            |v| v["spec"]["containers"][0]["livenessProbe"]["successThreshold"] = json!(2),
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        ),
        (
            "two probe handlers",
            |v| v["spec"]["containers"][0]["livenessProbe"]["exec"] = json!({"command": ["true"]}),
            "spec.containers[0].livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
        ),
        (
            "empty exec",
            |v| v["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] = json!([]),
            "spec.containers[0].lifecycle.preStop.exec.command: Required value",
        ),
        (
            "probe on init container",
            |v| {
                v["spec"]["initContainers"][0]["readinessProbe"] =
                    json!({"exec": {"command": ["true"]}})
            },
            "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers",
        ),
        (
            "bad pull policy",
            |v| v["spec"]["containers"][0]["imagePullPolicy"] = json!("Sometimes"),
            "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\"",
        ),
        (
            "bad termination policy",
            |v| v["spec"]["containers"][0]["terminationMessagePolicy"] = json!("Logs"),
            "spec.containers[0].terminationMessagePolicy: Unsupported value: \"Logs\"",
        ),
        (
            "bad restart policy",
            |v| v["spec"]["restartPolicy"] = json!("Sometimes"),
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        ),
        (
            "bad dns policy",
            |v| v["spec"]["dnsPolicy"] = json!("Google"),
            "spec.dnsPolicy: Unsupported value: \"Google\"",
        ),
        (
            "dns none without config",
            |v| v["spec"]["dnsPolicy"] = json!("None"),
            "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
        ),
        (
            "bad nameserver",
            |v| v["spec"]["dnsConfig"] = json!({"nameservers": ["dns.local"]}),
            "spec.dnsConfig.nameservers[0]: Invalid value: \"dns.local\": must be valid IP address",
        ),
        (
            "too many searches",
            |v| v["spec"]["dnsConfig"] = json!({"searches": ["a", "b", "c", "d", "e", "f", "g"]}),
            "spec.dnsConfig.searches: Invalid value: []string{\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\"}: must not have more than 6 search paths",
        ),
        (
            "volume without name",
            |v| v["spec"]["volumes"][0]["name"] = json!(""),
            "spec.volumes[0].name: Required value",
        ),
        (
            "volume with two sources",
            |v| v["spec"]["volumes"][0]["emptyDir"] = json!({}),
            "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
        ),
        (
            "bad host path type",
            |v| v["spec"]["volumes"][0]["hostPath"]["type"] = json!("Dir"),
            "spec.volumes[0].hostPath.type: Unsupported value: \"Dir\"",
        ),
        (
            "duplicate volume",
            |v| {
                v["spec"]["volumes"] =
                    json!([{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}])
            },
            "spec.volumes[1].name: Duplicate value: \"data\"",
        ),
        (
            "bad config map mode",
            |v| {
                v["spec"]["volumes"][0] =
                    json!({"name": "data", "configMap": {"name": "c", "defaultMode": 1000}})
            },
            "spec.volumes[0].configMap.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
        ),
        (
            "absolute item path",
            |v| v["spec"]["volumes"][0] = json!({"name": "data", "secret": {"secretName": "s", "items": [{"key": "k", "path": "/etc/x"}]}}),
            "spec.volumes[0].secret.items[0].path: Invalid value: \"/etc/x\": must be a relative path",
        ),
        (
            "token without service account",
            |v| v["spec"]["volumes"][0] = json!({"name": "data", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}),
            "spec.volumes[0].projected.sources[0].serviceAccountToken: Forbidden: must not be specified when serviceAccountName is not set",
        ),
        (
            "bad toleration",
            |v| {
                v["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists", "value": "v"}])
            },
            "spec.tolerations[0].operator: Invalid value:",
        ),
        (
            "toleration seconds without NoExecute",
            |v| v["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
            "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
        (
            "bad host alias",
            |v| v["spec"]["hostAliases"] = json!([{"ip": "x", "hostnames": ["a"]}]),
            "spec.hostAliases.ip: Invalid value: \"x\": must be valid IP address",
        ),
        (
            "bad hostname",
            |v| v["spec"]["hostname"] = json!("a.b"),
            "spec.hostname: Invalid value: \"a.b\"",
        ),
        (
            "bad deadline",
            |v| v["spec"]["activeDeadlineSeconds"] = json!(0),
            "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
        ),
        (
            "bad run as user",
            |v| v["spec"]["securityContext"] = json!({"runAsUser": -1}),
            "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
        ),
        (
            "bad sysctl",
            |v| {
                v["spec"]["securityContext"] =
                    json!({"sysctls": [{"name": "Net.Core", "value": "1"}]})
            },
            "spec.securityContext.sysctls[0].name: Invalid value: \"Net.Core\": must have at most 253 characters",
        ),
        (
            "bidirectional unprivileged",
            |v| {
                v["spec"]["containers"][0]["volumeMounts"][0]["mountPropagation"] =
                    json!("Bidirectional")
            },
            "spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
        ),
        (
            "no new privileges but privileged",
            |v| {
                v["spec"]["containers"][0]["securityContext"] =
                    json!({"privileged": true, "allowPrivilegeEscalation": false})
            },
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        ),
        (
            "localhost seccomp without profile",
            |v| v["spec"]["securityContext"] = json!({"seccompProfile": {"type": "Localhost"}}),
            "spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost",
        ),
        (
            "bad seccomp annotation",
            |v| {
                v["metadata"]["annotations"] =
                    json!({"seccomp.security.alpha.kubernetes.io/pod": "strict"})
            },
            "metadata.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: \"strict\": must be a valid seccomp profile",
        ),
        (
            "apparmor for unknown container",
            |v| {
                v["metadata"]["annotations"] = json!({"container.apparmor.security.beta.kubernetes.io/other": "runtime/default"})
            },
            "container not found",
        ),
        (
            "node affinity operator",
            |v| v["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Has"}]}]}}}),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: \"Has\": not a valid selector operator",
        ),
        (
            "spread skew",
            |v| v["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
            "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
        ),
        (
            "ephemeral containers",
            |v| v["spec"]["ephemeralContainers"] = json!([{"name": "dbg", "image": "busybox"}]),
            "spec.ephemeralContainers: Forbidden: cannot be set on create",
        ),
        (
            "two hugepage sizes",
            |v| {
                v["spec"]["containers"][0]["resources"]["limits"]["hugepages-2Mi"] = json!("2Mi");
                v["spec"]["containers"][0]["resources"]["limits"]["hugepages-1Gi"] = json!("1Gi");
            },
            "spec: Invalid value: sets.String{\"hugepages-1Gi\":sets.Empty{}, \"hugepages-2Mi\":sets.Empty{}}: must use a single hugepage size in a pod spec",
        ),
        (
            "os name",
            |v| v["spec"]["os"] = json!({"name": "plan9"}),
            "spec.os: Unsupported value: \"plan9\": supported values: \"linux\", \"windows\"",
        ),
    ];
    for (what, mutate, want) in cases {
        let errs = errors_for(mutate);
        assert!(
            errs.iter().any(|e| e.contains(want)),
            "{what}: wanted an error containing {want:?}, got {errs:#?}"
        );
    }
}
