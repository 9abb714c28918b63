//! Plugin providers: image matching, the cache by key type and duration,
//! one run for concurrent lookups, and real plugin executables speaking the
//! exec protocol.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use super::DockerConfigProvider;
use super::config::{CredentialProvider, EXEC_API_VERSIONS, ExecEnvVar};
use super::exec::*;
use super::plugin::PluginProvider;
use crate::apis::config::Duration as GoDuration;
use crate::util::clock::RealClock;

/// Answers with `response`, counting runs; each run takes a second of
/// (paused) time.
struct FakePlugin {
    response: CredentialProviderResponse,
    runs: AtomicUsize,
}

#[async_trait]
impl Plugin for FakePlugin {
    async fn exec(&self, _: &str) -> Result<CredentialProviderResponse, PluginError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(self.response.clone())
    }
}

fn response(key_type: &str, duration: Option<GoDuration>) -> CredentialProviderResponse {
    CredentialProviderResponse {
        cache_key_type: key_type.into(),
        cache_duration: duration,
        auth: BTreeMap::from([(
            "*.registry.io".to_string(),
            AuthConfig {
                username: "u".into(),
                password: "p".into(),
            },
        )]),
    }
}

fn provider(
    match_images: &[&str],
    default: Duration,
    response: CredentialProviderResponse,
) -> (PluginProvider, Arc<FakePlugin>) {
    let plugin = Arc::new(FakePlugin {
        response,
        runs: AtomicUsize::new(0),
    });
    let p = PluginProvider::new(
        "fake".into(),
        match_images.iter().map(|s| s.to_string()).collect(),
        default,
        plugin.clone(),
        Arc::new(RealClock),
    );
    (p, plugin)
}

#[tokio::test(start_paused = true)]
async fn only_matching_images_reach_the_plugin() {
    let (p, plugin) = provider(
        &["*.registry.io", "registry.io:5000/team"],
        Duration::ZERO,
        response("Image", Some(GoDuration::ZERO)),
    );
    let cases = [
        ("eu.registry.io/app", true),
        ("registry.io/app", false),
        ("a.eu.registry.io/app", false),
        ("registry.io:5000/team/app", true),
        ("registry.io:5000/other/app", false),
        ("docker.io/library/busybox", false),
    ];
    for (image, want) in cases {
        assert_eq!(p.is_image_allowed(image), want, "{image}");
        let before = plugin.runs.load(Ordering::SeqCst);
        let config = p.provide(image).await;
        let ran = plugin.runs.load(Ordering::SeqCst) > before;
        assert_eq!(ran, want, "{image}");
        assert_eq!(!config.is_empty(), want, "{image}");
    }
}

/// Which lookups run the plugin, by the response's cacheKeyType and
/// cacheDuration and the plugin's default duration.
#[tokio::test(start_paused = true)]
async fn cache_by_key_type_and_duration() {
    let min = |m| Some(GoDuration::from_mins(m));
    type Steps = &'static [(u64, &'static str, usize)];
    // (name, key type, response duration, default, steps of (advance
    // seconds, image, runs so far))
    let cases: Vec<(&str, &str, Option<GoDuration>, Duration, Steps)> = vec![
        (
            "Image: same image cached, other image runs",
            "Image",
            min(10),
            Duration::ZERO,
            &[
                (0, "a.registry.io/x", 1),
                (0, "a.registry.io/x", 1),
                (0, "a.registry.io/y", 2),
            ],
        ),
        (
            "Registry: any image of the host",
            "Registry",
            min(10),
            Duration::ZERO,
            &[
                (0, "a.registry.io/x", 1),
                (0, "a.registry.io/y", 1),
                (0, "b.registry.io/x", 2),
            ],
        ),
        (
            "Global: every image",
            "Global",
            min(10),
            Duration::ZERO,
            &[(0, "a.registry.io/x", 1), (0, "b.registry.io/y", 1)],
        ),
        (
            "expiry: good through its last instant, gone after",
            "Image",
            min(10),
            Duration::ZERO,
            // The run itself takes a second: cached at t=1 through t=601.
            &[
                (0, "a.registry.io/x", 1),
                (599, "a.registry.io/x", 1),
                (1, "a.registry.io/x", 1),
                (1, "a.registry.io/x", 2),
            ],
        ),
        (
            "no duration: the plugin's default",
            "Image",
            None,
            Duration::from_secs(60),
            &[
                (0, "a.registry.io/x", 1),
                (59, "a.registry.io/x", 1),
                (2, "a.registry.io/x", 2),
            ],
        ),
        (
            "no duration and a zero default: not cached",
            "Image",
            None,
            Duration::ZERO,
            &[(0, "a.registry.io/x", 1), (0, "a.registry.io/x", 2)],
        ),
        (
            "zero duration: not cached despite a default",
            "Image",
            Some(GoDuration::ZERO),
            Duration::from_secs(60),
            &[(0, "a.registry.io/x", 1), (0, "a.registry.io/x", 2)],
        ),
        (
            "negative duration: not cached",
            "Image",
            Some(GoDuration::from_secs(-5)),
            Duration::from_secs(60),
            &[(0, "a.registry.io/x", 1), (0, "a.registry.io/x", 2)],
        ),
        (
            "unknown key type: not used, not cached",
            "Repository",
            min(10),
            Duration::from_secs(60),
            &[(0, "a.registry.io/x", 1), (0, "a.registry.io/x", 2)],
        ),
    ];
    for (name, key_type, duration, default, steps) in cases {
        let (p, plugin) = provider(&["*.registry.io"], default, response(key_type, duration));
        for (advance, image, runs) in steps {
            tokio::time::advance(Duration::from_secs(*advance)).await;
            let config = p.provide(image).await;
            assert_eq!(
                plugin.runs.load(Ordering::SeqCst),
                *runs,
                "{name}: {image} after +{advance}s"
            );
            let want_creds = CacheKeyType::parse(key_type).is_some();
            assert_eq!(!config.is_empty(), want_creds, "{name}");
            if want_creds {
                assert_eq!(config["*.registry.io"].username, "u", "{name}");
            }
        }
    }
}

/// Concurrent lookups of one image run the plugin once (singleflight);
/// another image runs its own.
#[tokio::test(start_paused = true)]
async fn concurrent_lookups_run_the_plugin_once() {
    let (p, plugin) = provider(
        &["*.registry.io"],
        Duration::ZERO,
        response("Image", Some(GoDuration::ZERO)),
    );
    let p = Arc::new(p);
    let mut tasks = Vec::new();
    for image in [
        "a.registry.io/x",
        "a.registry.io/x",
        "a.registry.io/x",
        "b.registry.io/x",
    ] {
        let p = p.clone();
        tasks.push(tokio::spawn(async move { p.provide(image).await }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("task")["*.registry.io"].username, "u");
    }
    assert_eq!(plugin.runs.load(Ordering::SeqCst), 2);
}

fn exec_plugin(bin_dir: &Path, name: &str, script: &str, api_version: &str) -> ExecPlugin {
    let path = bin_dir.join(name);
    std::fs::write(&path, script).expect("write plugin");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    ExecPlugin::new(
        bin_dir,
        &CredentialProvider {
            name: name.into(),
            match_images: vec!["*".into()],
            default_cache_duration: Some(GoDuration::ZERO),
            api_version: api_version.into(),
            args: vec!["--flag".into(), "value".into()],
            env: vec![ExecEnvVar {
                name: "PLUGIN_ENV".into(),
                value: "from-config".into(),
            }],
        },
    )
}

/// A real executable: the request on stdin, arguments and environment
/// (the kubelet's, plus the configured), the response on stdout.
#[tokio::test]
async fn exec_protocol_with_a_real_plugin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seen = dir.path().join("seen");
    let v1beta1 = EXEC_API_VERSIONS[1];
    let script = format!(
        "#!/bin/sh\ncat > {seen}.stdin\necho \"$@\" > {seen}.args\necho \"$PLUGIN_ENV $PATH\" > {seen}.env\n\
         echo '{{\"kind\":\"CredentialProviderResponse\",\"apiVersion\":\"{v1beta1}\",\"cacheKeyType\":\"Registry\",\
         \"cacheDuration\":\"1h30m\",\"auth\":{{\"registry.io\":{{\"username\":\"u\",\"password\":\"p\"}}}}}}'\n",
        seen = seen.display()
    );
    let plugin = exec_plugin(dir.path(), "good", &script, v1beta1);
    let response = plugin.exec("registry.io/team/app").await.expect("response");
    assert_eq!(
        response,
        CredentialProviderResponse {
            cache_key_type: "Registry".into(),
            cache_duration: Some(GoDuration::from_mins(90)),
            auth: BTreeMap::from([(
                "registry.io".to_string(),
                AuthConfig {
                    username: "u".into(),
                    password: "p".into()
                }
            )]),
        }
    );
    let read = |ext: &str| {
        std::fs::read_to_string(format!("{}.{ext}", seen.display())).expect("plugin wrote")
    };
    assert_eq!(
        read("stdin"),
        format!(
            "{{\"kind\":\"CredentialProviderRequest\",\"apiVersion\":\"{v1beta1}\",\"image\":\"registry.io/team/app\"}}\n"
        )
    );
    assert_eq!(read("args"), "--flag value\n");
    let env = read("env");
    assert!(env.starts_with("from-config "), "{env}");
    assert!(
        env.trim_end().len() > "from-config ".len(),
        "kubelet's PATH kept: {env}"
    );
}

#[tokio::test]
async fn exec_failures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v1alpha1 = EXEC_API_VERSIONS[0];
    let respond = |body: &str| format!("#!/bin/sh\ncat >/dev/null\necho '{body}'\n");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "exit status",
            "#!/bin/sh\necho oops >&2\nexit 3\n".into(),
            "error execing credential provider plugin exit-status for image r.io/app: exit status: 3",
        ),
        (
            "other apiVersion",
            respond(&format!(
                r#"{{"kind":"CredentialProviderResponse","apiVersion":"{}","cacheKeyType":"Image"}}"#,
                EXEC_API_VERSIONS[1]
            )),
            "apiVersion from credential plugin response did not match expected apiVersion:credentialprovider.kubelet.k8s.io/v1alpha1, actual apiVersion:credentialprovider.kubelet.k8s.io/v1beta1",
        ),
        (
            "other kind",
            respond(&format!(
                r#"{{"kind":"CredentialProviderRequest","apiVersion":"{v1alpha1}"}}"#
            )),
            "error decoding credential provider plugin response from stdout",
        ),
        (
            "bad field, details withheld",
            respond(&format!(
                r#"{{"kind":"CredentialProviderResponse","apiVersion":"{v1alpha1}","auth":{{"r.io":{{"password":["secret"]}}}}}}"#
            )),
            "error decoding credential provider plugin response from stdout",
        ),
        (
            "not JSON",
            respond("user: secret"),
            "error reading GVK from response",
        ),
        (
            "exits without reading its input",
            format!(
                "#!/bin/sh\necho '{{\"kind\":\"CredentialProviderResponse\",\"apiVersion\":\"{v1alpha1}\",\"cacheKeyType\":\"Global\"}}'\n"
            ),
            "",
        ),
    ];
    for (name, script, want) in cases {
        let file = name.split(' ').take(2).collect::<Vec<_>>().join("-");
        let plugin = exec_plugin(dir.path(), &file, &script, v1alpha1);
        match plugin.exec("r.io/app").await {
            Ok(r) => assert!(want.is_empty(), "{name}: {r:?}"),
            Err(e) => {
                assert!(
                    !want.is_empty() && e.to_string().contains(want),
                    "{name}: {e}"
                );
                assert!(!e.to_string().contains("secret"), "{name}: {e}");
            }
        }
    }
    // Missing executable.
    let gone = ExecPlugin::new(
        dir.path(),
        &CredentialProvider {
            name: "gone".into(),
            api_version: v1alpha1.into(),
            ..Default::default()
        },
    );
    let err = gone.exec("r.io/app").await.expect_err("missing");
    assert!(
        err.to_string()
            .starts_with("error execing credential provider plugin gone for image r.io/app: "),
        "{err}"
    );
}

/// A plugin that outlives the limit is killed and fails.
#[tokio::test]
async fn exec_times_out() {
    assert_eq!(EXEC_TIMEOUT, Duration::from_secs(60));
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = exec_plugin(
        dir.path(),
        "slow",
        "#!/bin/sh\nexec sleep 30\n",
        EXEC_API_VERSIONS[0],
    )
    .with_timeout(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = plugin.exec("r.io/app").await.expect_err("timeout");
    assert_eq!(
        err.to_string(),
        "error execing credential provider plugin slow for image r.io/app: context deadline exceeded"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}
