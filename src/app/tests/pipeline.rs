//! argv → KubeletServer: file-only, flag-only, file+flag precedence,
//! relative paths, feature gates, help and version.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::apis::config::duration::Duration;
use crate::app::command::{CommandError, Outcome, build};
use crate::app::server::KubeletServer;
use crate::features;

const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
const FIXTURE: &str =
    include_str!("../../../tests/fixtures/kubeletconfiguration-v1beta1-defaults.json");

/// A configuration file in its own directory.
pub struct ConfigFile {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn config_file(body: &str) -> ConfigFile {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubelet-conf.yml");
    std::fs::write(&path, format!("{HEAD}{body}")).expect("write config");
    ConfigFile { _dir: dir, path }
}

pub fn server(args: &[&str]) -> Arc<KubeletServer> {
    match build(args.iter().copied(), &mut Vec::new()) {
        Ok(Outcome::Run { server: s, .. }) => s,
        other => panic!("{args:?}: {other:?}"),
    }
}

fn server_with_file(body: &str, extra: &[&str]) -> Arc<KubeletServer> {
    let file = config_file(body);
    let path = file.path.to_string_lossy().into_owned();
    let mut args = vec!["--config", path.as_str()];
    args.extend_from_slice(extra);
    server(&args)
}

/// What the v1.25 line adds to the reference (a v1.24 development build)
/// for a file that sets nothing.
fn v125_additions() -> Value {
    json!({ "localStorageCapacityIsolation": true })
}

#[test]
fn configz_of_a_file_that_sets_nothing_is_the_reference() {
    let fixture: Value = serde_json::from_str(FIXTURE).unwrap();
    let mut want = fixture["kubeletconfig"].clone();
    for (k, v) in v125_additions().as_object().unwrap() {
        want[k] = v.clone();
    }
    let s = server_with_file("", &[]);
    assert_eq!(s.configz()["kubeletconfig"], want);
}

#[test]
fn flags_only_uses_the_legacy_command_line_defaults() {
    let s = server(&[]);
    let z = &s.configz()["kubeletconfig"];
    assert_eq!(z["readOnlyPort"], 10255);
    assert_eq!(z["authentication"]["anonymous"]["enabled"], true);
    assert_eq!(z["authentication"]["webhook"]["enabled"], false);
    assert_eq!(z["authorization"]["mode"], "AlwaysAllow");
    // Everything else is the file defaults.
    let fixture: Value = serde_json::from_str(FIXTURE).unwrap();
    let mut want = fixture["kubeletconfig"].clone();
    want["readOnlyPort"] = json!(10255);
    want["authentication"]["anonymous"]["enabled"] = json!(true);
    want["authentication"]["webhook"]["enabled"] = json!(false);
    want["authorization"]["mode"] = json!("AlwaysAllow");
    want["localStorageCapacityIsolation"] = json!(true);
    assert_eq!(*z, want);
}

#[test]
fn precedence_table() {
    struct Case {
        name: &'static str,
        file: &'static str,
        flags: &'static [&'static str],
        check: fn(&KubeletServer) -> bool,
    }
    let cases = [
        Case {
            name: "file only",
            file: "port: 10260\nsyncFrequency: 30s\n",
            flags: &[],
            check: |s| s.config.port == 10260 && s.config.sync_frequency == Duration::from_secs(30),
        },
        Case {
            name: "flag beats file",
            file: "port: 10260\n",
            flags: &["--port=10270"],
            check: |s| s.config.port == 10270,
        },
        Case {
            name: "a flag left at its default does not reset the file",
            file: "readOnlyPort: 0\nfailSwapOn: false\n",
            flags: &["--port=10270"],
            check: |s| s.config.read_only_port == 0 && !s.config.fail_swap_on,
        },
        Case {
            name: "bool flag over the file",
            file: "failSwapOn: true\n",
            flags: &["--fail-swap-on=false"],
            check: |s| !s.config.fail_swap_on,
        },
        Case {
            name: "a map flag replaces the file's map",
            file: "evictionHard: {memory.available: 1Gi, nodefs.available: 5%}\n",
            flags: &["--eviction-hard=imagefs.available<20%"],
            check: |s| {
                s.config.eviction_hard.len() == 1
                    && s.config.eviction_hard["imagefs.available"] == "20%"
            },
        },
        Case {
            name: "repeated map flags accumulate over the file",
            file: "systemReserved: {memory: 1Gi}\n",
            flags: &["--system-reserved=cpu=100m", "--system-reserved=pid=100"],
            check: |s| {
                s.config.system_reserved.len() == 2
                    && !s.config.system_reserved.contains_key("memory")
            },
        },
        Case {
            name: "a list flag replaces the file's list",
            file: "clusterDNS: [10.0.0.10]\n",
            flags: &["--cluster-dns=10.0.0.20,10.0.0.30"],
            check: |s| s.config.cluster_dns == ["10.0.0.20", "10.0.0.30"],
        },
        Case {
            name: "nested field",
            file: "authentication: {webhook: {enabled: true}}\n",
            flags: &["--authentication-token-webhook=false", "--anonymous-auth"],
            check: |s| {
                !s.config.authentication.webhook.enabled
                    && s.config.authentication.anonymous.enabled
            },
        },
        Case {
            name: "verbosity flag over the logging block",
            file: "logging: {verbosity: 2, format: text}\n",
            flags: &["-v", "4"],
            check: |s| s.config.logging.verbosity == 4 && s.config.logging.format == "text",
        },
        Case {
            name: "logging block kept without flags",
            file: "logging: {verbosity: 2}\n",
            flags: &[],
            check: |s| s.config.logging.verbosity == 2,
        },
        Case {
            name: "underscore flag names",
            file: "cgroupDriver: cgroupfs\n",
            flags: &["--cgroup_driver=systemd"],
            check: |s| s.config.cgroup_driver == "systemd",
        },
        Case {
            name: "last occurrence wins",
            file: "",
            flags: &["--max-pods=10", "--max-pods=20"],
            check: |s| s.config.max_pods == 20,
        },
        Case {
            name: "flag-only settings are not in the file's reach",
            file: "",
            flags: &[
                "--node-labels=a=b",
                "--node-labels",
                "c=d",
                "--hostname-override=Node-1",
            ],
            check: |s| s.flags.node_labels.len() == 2 && s.flags.hostname_override == "Node-1",
        },
        Case {
            name: "taints from the command line",
            file: "registerWithTaints: [{key: a, effect: NoExecute}]\n",
            flags: &["--register-with-taints=k=v:NoSchedule"],
            check: |s| {
                s.config.register_with_taints.len() == 1
                    && s.config.register_with_taints[0].key == "k"
            },
        },
        Case {
            name: "manifest url headers",
            file: "",
            flags: &[
                "--manifest-url-header",
                "a:hello,b:again",
                "--manifest-url-header=b:beautiful",
            ],
            check: |s| s.config.static_pod_url_header["b"] == ["again", "beautiful"],
        },
    ];
    for case in cases {
        let s = server_with_file(case.file, case.flags);
        assert!((case.check)(&s), "{}", case.name);
    }
}

#[test]
fn relative_paths_in_the_file() {
    let file = config_file(
        "staticPodPath: manifests\ntlsCertFile: pki/k.crt\ntlsPrivateKeyFile: pki/k.key\n",
    );
    let path = file.path.to_string_lossy().into_owned();
    let s = server(&["--config", &path]);
    let dir = file.path.parent().unwrap();
    assert_eq!(
        s.config.static_pod_path,
        dir.join("manifests").to_string_lossy()
    );
    assert_eq!(
        s.config.tls_cert_file,
        dir.join("pki/k.crt").to_string_lossy()
    );
    // A path given by flag is taken as given.
    let s = server(&["--config", &path, "--pod-manifest-path=rel"]);
    assert_eq!(s.config.static_pod_path, "rel");
}

#[test]
fn feature_gates_merge_and_unknown_gates_fail() {
    let s = server_with_file(
        "featureGates: {NodeSwap: true, MemoryQoS: true}\n",
        &["--feature-gates=MemoryQoS=false,KubeletTracing=true"],
    );
    let gates = &s.config.feature_gates;
    assert_eq!(gates.get("NodeSwap"), Some(&true), "kept from the file");
    assert_eq!(gates.get("MemoryQoS"), Some(&false), "the flag wins");
    assert_eq!(
        gates.get("KubeletTracing"),
        Some(&true),
        "added by the flag"
    );
    assert!(s.feature_gate.enabled(features::NODE_SWAP));
    assert!(!s.feature_gate.enabled(features::MEMORY_QOS));
    assert!(s.feature_gate.enabled(features::KUBELET_TRACING));

    let file = config_file("featureGates: {NoSuchGate: true}\n");
    let path = file.path.to_string_lossy().into_owned();
    let err = build(["--config", path.as_str()], &mut Vec::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("unrecognized feature gate: NoSuchGate"),
        "{err}"
    );

    let err = build(["--feature-gates=Bogus=true"], &mut Vec::new()).unwrap_err();
    assert!(matches!(err, CommandError::FeatureGates { .. }), "{err}");
    assert!(
        err.to_string().contains("unrecognized feature gate: Bogus"),
        "{err}"
    );

    let err = build(
        ["--feature-gates=LocalStorageCapacityIsolation=false"],
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("locked"), "{err}");
}

#[test]
fn help_version_and_command_line_errors() {
    assert!(matches!(
        build(["--help"], &mut Vec::new()),
        Ok(Outcome::Help(_))
    ));
    assert!(matches!(
        build(["-h"], &mut Vec::new()),
        Ok(Outcome::Help(_))
    ));
    match build(["--version"], &mut Vec::new()) {
        Ok(Outcome::Version(v)) => {
            assert_eq!(v, format!("Kubernetes {}\n", crate::version::git_version()))
        }
        other => panic!("{other:?}"),
    }
    match build(["--version=raw"], &mut Vec::new()) {
        Ok(Outcome::Version(v)) => assert!(
            v.starts_with("version.Info{Major:\"1\", Minor:\"25\""),
            "{v}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        build(["--version=false"], &mut Vec::new()),
        Ok(Outcome::Run { .. })
    ));
    let cases: &[(&[&str], &str)] = &[
        (&["--bogus"], "unknown flag: --bogus"),
        (&["run"], "unknown command run"),
        (
            &["--port=abc"],
            "invalid argument \"abc\" for \"--port\" flag: strconv.ParseInt",
        ),
        (&["-v=x"], "invalid argument \"x\" for \"-v, --v\" flag"),
        (
            &["--address=nowhere"],
            "\"nowhere\" is not a valid IP address",
        ),
        (
            &["--sync-frequency=5"],
            "time: missing unit in duration \"5\"",
        ),
        (&["--fail-swap-on=yes"], "strconv.ParseBool"),
        (
            &["--eviction-hard=memory.available"],
            "malformed pair, expect string<string",
        ),
    ];
    for (args, want) in cases {
        let err = build(args.iter().copied(), &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains(want), "{args:?}: {err}");
        assert!(err.shows_usage(), "{args:?}");
    }
}

#[test]
fn node_labels_are_validated() {
    let err = build(
        ["--node-labels=node-role.kubernetes.io/master="],
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(err, CommandError::Flags(_)), "{err}");
    assert!(
        err.to_string().contains("node-role.kubernetes.io/master"),
        "{err}"
    );
}

#[test]
fn deprecated_flags_warn_once_per_use() {
    let mut warnings = Vec::new();
    let file = config_file("");
    let path = file.path.to_string_lossy().into_owned();
    build(
        [
            "--config",
            path.as_str(),
            "--cgroup-driver=systemd",
            "--cgroup-driver=cgroupfs",
            "-v=2",
        ],
        &mut warnings,
    )
    .unwrap();
    let text = String::from_utf8(warnings).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("Flag --cgroup-driver has been deprecated, "),
        "{text}"
    );
}
