//! Process tests of the `kubelet` binary's command line: help, version,
//! command-line errors, deprecation warnings, configuration errors, and a
//! start with SIGTERM/SIGINT. The started kubelets keep their files in a
//! temp dir and talk to a runtime socket that never answers, so they stay
//! in start-up until the signal (the full start is tests/e2e_standalone.rs).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

fn kubelet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kubelet"))
}

fn run(args: &[&str]) -> Output {
    kubelet().args(args).output().expect("run kubelet")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_config(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("kubelet-conf.yml");
    std::fs::write(&path, format!("{HEAD}{body}")).expect("write config");
    path
}

/// A CRI socket that accepts connections and never answers.
struct SilentRuntime {
    endpoint: String,
    _dir: tempfile::TempDir,
}

fn silent_runtime() -> SilentRuntime {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("cri.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind cri socket");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            match conn {
                Ok(c) => held.push(c),
                Err(_) => break,
            }
        }
    });
    SilentRuntime {
        endpoint: format!("unix://{}", path.display()),
        _dir: dir,
    }
}

/// Flags that keep a started kubelet's files in `dir` and its start-up
/// waiting on `runtime`.
fn isolated(dir: &Path, runtime: &SilentRuntime) -> Vec<String> {
    vec![
        format!("--root-dir={}", dir.join("root").display()),
        format!("--cert-dir={}", dir.join("pki").display()),
        format!("--container-runtime-endpoint={}", runtime.endpoint),
        "--fail-swap-on=false".into(),
        "--cgroups-per-qos=false".into(),
        "--enforce-node-allocatable=".into(),
        "--read-only-port=0".into(),
    ]
}

/// Waits for the child to exit, at most `limit`.
fn wait_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Reads stderr until `needle` shows up (or the limit passes).
fn wait_for_stderr(child: &mut Child, needle: &str, limit: Duration) -> String {
    let mut stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            match stderr.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < limit {
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(50)) {
            seen.extend(chunk);
            if text(&seen).contains(needle) {
                break;
            }
        }
    }
    text(&seen)
}

#[test]
fn help_exits_zero_with_usage_on_stdout() {
    for flag in ["--help", "-h"] {
        let out = run(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        let stdout = text(&out.stdout);
        assert!(stdout.contains("Usage:\n  kubelet [flags]"), "{stdout}");
        assert!(stdout.contains("--config string"), "{stdout}");
        assert!(
            stdout.contains("--eviction-hard mapStringString"),
            "{stdout}"
        );
        assert!(stdout.contains("(DEPRECATED: "), "{stdout}");
    }
}

#[test]
fn version_forms() {
    let out = run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("Kubernetes v1.25."), "{stdout}");
    assert_eq!(stdout.lines().count(), 1);
    let version = stdout.trim().trim_start_matches("Kubernetes ");
    assert!(
        version.contains('+'),
        "build identity after the version: {version}"
    );

    let out = run(&["--version=raw"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("version.Info{Major:\"1\", Minor:\"25\""));

    // --version=false does not print and the command carries on (here into
    // a validation error).
    let out = run(&["--version=false", "--max-pods=-1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

#[test]
fn unknown_flags_and_positionals_fail_with_usage() {
    let cases: &[(&[&str], &str)] = &[
        (&["--bogus"], "unknown flag: --bogus"),
        (
            &["--docker-endpoint=unix:///var/run/docker.sock"],
            "unknown flag: --docker-endpoint",
        ),
        (
            &["--dynamic-config-dir=/var/lib/kubelet/dyn"],
            "unknown flag: --dynamic-config-dir",
        ),
        (&["--port"], "flag needs an argument: --port"),
        (
            &["--port=http"],
            "invalid argument \\\"http\\\" for \\\"--port\\\" flag",
        ),
        (&["extra"], "unknown command extra"),
        (&["--fail-swap-on", "false"], "unknown command false"),
    ];
    for (args, want) in cases {
        let out = run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(
            stderr.contains("Usage:\n  kubelet [flags]"),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn deprecated_flags_warn_on_stderr() {
    let out = run(&[
        "--cgroup_driver=systemd",
        "--cloud-provider=",
        "--max-pods=-1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Flag --cgroup-driver has been deprecated, "),
        "{stderr}"
    );
    assert!(
        stderr.contains("Flag --cloud-provider has been deprecated, "),
        "{stderr}"
    );
    let warnings = stderr.lines().filter(|l| l.starts_with("Flag --")).count();
    assert_eq!(
        warnings, 3,
        "one warning per deprecated flag given: {stderr}"
    );
}

#[test]
fn a_bad_config_file_names_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("port: abc\n", "port"),
        (
            "authentication: {webhook: {cacheTTL: forever}}\n",
            "authentication.webhook.cacheTTL",
        ),
        ("cgroupDriver: yes\n", "cgroupDriver"),
    ];
    for (body, field) in cases {
        let path = write_config(dir.path(), body);
        let out = run(&["--config", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{body}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(path.to_str().unwrap()), "{body}: {stderr}");
        assert!(
            stderr.contains(&format!("field {field}")),
            "{body}: {stderr}"
        );
    }
    std::fs::write(dir.path().join("wrong.yml"), "apiVersion: v1\nkind: Pod\n").unwrap();
    let out = run(&["--config", dir.path().join("wrong.yml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("apiVersion"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn several_validation_errors_are_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        "port: 70000\nmaxPods: -1\nhairpinMode: sideways\n",
    );
    let out = run(&["--config", path.to_str().unwrap(), "--oom-score-adj=2000"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    for field in [
        "port (--port) 70000",
        "maxPods (--max-pods) -1",
        "hairpinMode (--hairpin-mode)",
        "oomScoreAdj (--oom-score-adj) 2000",
    ] {
        assert!(stderr.contains(field), "{field}: {stderr}");
    }
    assert!(
        stderr.contains("failed to validate kubelet configuration"),
        "{stderr}"
    );
}

#[test]
fn starts_and_stops_on_sigterm_and_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = silent_runtime();
    // Standalone: no webhook authentication or authorization without a client.
    let path = write_config(
        dir.path(),
        "staticPodPath: manifests\nauthentication:\n  anonymous:\n    enabled: true\n  webhook:\n    enabled: false\nauthorization:\n  mode: AlwaysAllow\n",
    );
    for (signal, extra) in [
        (nix::sys::signal::Signal::SIGTERM, vec![]),
        (
            nix::sys::signal::Signal::SIGINT,
            vec!["--logging-format=json"],
        ),
    ] {
        let mut child = kubelet()
            .arg("--config")
            .arg(&path)
            .args(isolated(dir.path(), &runtime))
            .args(&extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kubelet");
        let seen = wait_for_stderr(&mut child, "Standalone mode", Duration::from_secs(10));
        assert!(seen.contains("Kubelet version"), "{seen}");
        if extra.is_empty() {
            assert!(
                seen.lines().any(|l| l.starts_with('I')
                    && l.contains("] \"Kubelet version\" kubelet_version=\"v1.25.")),
                "klog text line: {seen}"
            );
        } else {
            let line = seen
                .lines()
                .find(|l| l.contains("Kubelet version"))
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
            assert_eq!(v["msg"], "Kubelet version");
            assert_eq!(v["v"], 0);
            assert!(v["ts"].is_f64() || v["ts"].is_u64(), "{line}");
        }
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        let status = wait_within(&mut child, Duration::from_secs(5));
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(status.and_then(|s| s.code()), Some(0), "{signal}");
    }
}

#[test]
fn klog_file_flags_send_the_text_log_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = silent_runtime();
    let log = dir.path().join("kubelet.log");
    let mut child = kubelet()
        .args(isolated(dir.path(), &runtime))
        .arg("--logtostderr=false")
        .arg(format!("--log-file={}", log.display()))
        .arg("--skip-headers")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kubelet");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if std::fs::read_to_string(&log).is_ok_and(|t| t.contains("Standalone mode")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = wait_within(&mut child, Duration::from_secs(5));
    if status.is_none() {
        let _ = child.kill();
    }
    let output = child.wait_with_output().unwrap();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.starts_with("\"Kubelet version\" kubelet_version="),
        "{logged}"
    );
    let stderr = text(&output.stderr);
    assert!(
        !stderr.contains("Kubelet version"),
        "info stays out of stderr: {stderr}"
    );
    assert!(
        stderr.contains("Flag --logtostderr has been deprecated"),
        "{stderr}"
    );
    assert_eq!(status.and_then(|s| s.code()), Some(0));
}
