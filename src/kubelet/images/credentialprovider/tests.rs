//! The node keyring: providers in name order merged into one keyring, and
//! the plugins' start-up checks.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::*;
use crate::kubelet::images::keyring::DockerConfigEntry;
use crate::util::clock::RealClock;

/// A provider with fixed entries.
struct Fixed(Vec<(&'static str, &'static str)>);

#[async_trait]
impl DockerConfigProvider for Fixed {
    async fn provide(&self, _: &str) -> DockerConfig {
        self.0
            .iter()
            .map(|(location, user)| {
                (
                    location.to_string(),
                    DockerConfigEntry {
                        username: user.to_string(),
                        password: String::new(),
                    },
                )
            })
            .collect()
    }
}

/// Every provider's entries go into one keyring: more specific keys first,
/// and for one key the providers' credentials in the order of their names.
#[tokio::test]
async fn providers_merge_in_name_order() {
    let keyring = ProvidersKeyring::new(vec![
        (
            "zeta".into(),
            Arc::new(Fixed(vec![("registry.io", "zeta-host")])) as Arc<dyn DockerConfigProvider>,
        ),
        (
            ".dockercfg".into(),
            Arc::new(Fixed(vec![("registry.io", "files-host")])),
        ),
        (
            "alpha".into(),
            Arc::new(Fixed(vec![
                ("registry.io/team", "alpha-team"),
                ("other.io", "alpha-other"),
            ])),
        ),
    ]);
    assert_eq!(keyring.names(), [".dockercfg", "alpha", "zeta"]);
    let cases: &[(&str, &[&str])] = &[
        (
            "registry.io/team/app",
            &["alpha-team", "files-host", "zeta-host"],
        ),
        ("registry.io/app", &["files-host", "zeta-host"]),
        ("other.io/app", &["alpha-other"]),
        ("none.io/app", &[]),
    ];
    for (image, want) in cases {
        let got: Vec<String> = keyring
            .lookup(image)
            .await
            .into_iter()
            .map(|a| a.username)
            .collect();
        assert_eq!(got, *want, "{image}");
    }
    assert!(
        ProvidersKeyring::default()
            .lookup("r.io/a")
            .await
            .is_empty()
    );
}

fn write_executable(path: &Path, script: &str) {
    std::fs::write(path, script).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

const CONFIG: &str = "apiVersion: kubelet.config.k8s.io/v1beta1
kind: CredentialProviderConfig
providers:
- name: test-plugin
  matchImages: [\"*.plugin.io\"]
  defaultCacheDuration: 10m
  apiVersion: credentialprovider.kubelet.k8s.io/v1beta1
";

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["bin", "root", "home"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        Setup { dir }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    fn settings(&self, plugins: bool) -> NodeKeyringSettings {
        NodeKeyringSettings {
            root_dir: self.path("root"),
            home_dir: self.path("home"),
            plugins: plugins.then(|| PluginFlags {
                config_file: self.path("config.yaml"),
                bin_dir: self.path("bin"),
            }),
            clock: Arc::new(RealClock),
        }
    }
}

/// The start-up errors, each naming what is wrong.
#[tokio::test]
async fn plugin_start_up_errors() {
    type Prepare = fn(&Setup);
    let cases: &[(&str, Prepare, &str)] = &[
        (
            "missing bin dir",
            |s| std::fs::remove_dir(s.path("bin")).expect("rmdir"),
            "plugin binary directory {dir}/bin did not exist",
        ),
        (
            "missing config",
            |_| {},
            "unable to read external registry credential provider configuration from \"{dir}/config.yaml\"",
        ),
        (
            "invalid config",
            |s| std::fs::write(s.path("config.yaml"), CONFIG.replace("10m", "-1s")).expect("write"),
            "failed to validate credential provider config {dir}/config.yaml: providers[0].defaultCacheDuration: Invalid value: -1s",
        ),
        (
            "missing binary",
            |s| std::fs::write(s.path("config.yaml"), CONFIG).expect("write"),
            "plugin binary executable {dir}/bin/test-plugin did not exist (credential provider \"test-plugin\")",
        ),
        (
            "name of the files provider",
            |s| {
                std::fs::write(
                    s.path("config.yaml"),
                    CONFIG.replace("test-plugin", ".dockercfg"),
                )
                .expect("write");
                write_executable(&s.path("bin/.dockercfg"), "#!/bin/sh\n");
            },
            "credential provider \".dockercfg\" was registered twice",
        ),
    ];
    for (name, prepare, want) in cases {
        let setup = Setup::new();
        prepare(&setup);
        let want = want.replace("{dir}", &setup.dir.path().display().to_string());
        let err = node_keyring(setup.settings(true))
            .await
            .expect_err(name)
            .to_string();
        assert!(err.starts_with(&want), "{name}: {err}\nwant: {want}");
    }
}

/// Files and plugin together: the plugin's credentials for its images
/// (its run cached), the files' for others.
#[tokio::test]
async fn files_and_plugins_on_a_node() {
    let setup = Setup::new();
    std::fs::write(setup.path("config.yaml"), CONFIG).expect("write config");
    let runs = setup.path("runs");
    write_executable(
        &setup.path("bin/test-plugin"),
        &format!(
            "#!/bin/sh\ncat >> {runs}\n\
             echo '{{\"kind\":\"CredentialProviderResponse\",\"apiVersion\":\"credentialprovider.kubelet.k8s.io/v1beta1\",\
             \"cacheKeyType\":\"Registry\",\"auth\":{{\"*.plugin.io\":{{\"username\":\"from-plugin\",\"password\":\"p\"}}}}}}'\n",
            runs = runs.display()
        ),
    );
    std::fs::write(
        setup.path("root/config.json"),
        r#"{"auths":{"files.io":{"username":"from-files","password":"p"}}}"#,
    )
    .expect("write config.json");
    let keyring = node_keyring(setup.settings(true)).await.expect("keyring");
    assert_eq!(keyring.names(), [".dockercfg", "test-plugin"]);
    let user = |v: Vec<AuthConfig>| v.into_iter().map(|a| a.username).collect::<Vec<_>>();
    assert_eq!(
        user(keyring.lookup("eu.plugin.io/app").await),
        ["from-plugin"]
    );
    assert_eq!(
        user(keyring.lookup("eu.plugin.io/other").await),
        ["from-plugin"]
    );
    assert_eq!(user(keyring.lookup("files.io/app").await), ["from-files"]);
    let requests = std::fs::read_to_string(&runs).expect("plugin ran");
    assert_eq!(
        requests.lines().count(),
        1,
        "cached by registry: {requests}"
    );
    assert!(
        requests.contains("\"image\":\"eu.plugin.io/app\""),
        "{requests}"
    );

    // Without plugin flags, the files alone.
    let files_only = node_keyring(setup.settings(false)).await.expect("keyring");
    assert_eq!(files_only.names(), [".dockercfg"]);
    assert!(files_only.lookup("eu.plugin.io/app").await.is_empty());
}
