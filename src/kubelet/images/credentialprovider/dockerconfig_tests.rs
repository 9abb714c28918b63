//! The node's docker config files: parsing, the search order with its
//! first-found rule, and the five-minute cache.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;

use super::DockerConfigProvider;
use super::dockerconfig::*;
use crate::kubelet::images::keyring::{DockerConfig, DockerConfigEntry};
use crate::util::clock::RealClock;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn users(config: &DockerConfig) -> Vec<(String, String, String)> {
    config
        .iter()
        .map(|(k, e)| (k.clone(), e.username.clone(), e.password.clone()))
        .collect()
}

/// Location, user, password.
type Parsed = &'static [(&'static str, &'static str, &'static str)];

#[test]
fn files_parse_as_go_reads_them() {
    let unpadded = b64("bob:pw").trim_end_matches('=').to_string();
    let cases: &[(&str, String, Result<Parsed, &str>)] = &[
        (
            "config.json with auth (padded)",
            format!(r#"{{"auths":{{"r.io":{{"auth":"{}"}}}}}}"#, b64("al:i:ce")),
            Ok(&[("r.io", "al", "i:ce")]),
        ),
        (
            "config.json with auth (unpadded)",
            format!(r#"{{"auths":{{"r.io":{{"auth":"{unpadded}"}}}}}}"#),
            Ok(&[("r.io", "bob", "pw")]),
        ),
        (
            "auth wins over username/password",
            format!(
                r#"{{"auths":{{"r.io":{{"username":"x","password":"y","auth":"{}"}}}}}}"#,
                b64("u:p")
            ),
            Ok(&[("r.io", "u", "p")]),
        ),
        (
            "username/password, other fields ignored",
            r#"{"auths":{"r.io":{"username":"x","password":"y","email":"e"}},"HttpHeaders":{}}"#
                .into(),
            Ok(&[("r.io", "x", "y")]),
        ),
        ("empty object", "{}".into(), Ok(&[])),
        ("null", "null".into(), Ok(&[])),
        ("null auths", r#"{"auths":null}"#.into(), Ok(&[])),
        (
            "auth without a colon",
            format!(r#"{{"auths":{{"r.io":{{"auth":"{}"}}}}}}"#, b64("nocolon")),
            Err("entry \"r.io\": unable to parse auth field"),
        ),
        (
            "auth not base64",
            r#"{"auths":{"r.io":{"auth":"!!!"}}}"#.into(),
            Err("unable to parse auth field"),
        ),
        (
            "not JSON",
            "auths: {}".into(),
            Err("error occurred while trying to unmarshal json"),
        ),
    ];
    for (name, text, want) in cases {
        match (parse_config_json(text.as_bytes()), want) {
            (Ok(got), Ok(want)) => {
                let want: Vec<(String, String, String)> = want
                    .iter()
                    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
                    .collect();
                assert_eq!(users(&got), want, "{name}");
            }
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{name}: {e}"),
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
    // The legacy file is the bare map.
    let legacy = format!(r#"{{"r.io":{{"auth":"{}"}}}}"#, b64("l:p"));
    assert_eq!(
        users(&parse_dockercfg(legacy.as_bytes()).expect("dockercfg")),
        vec![("r.io".into(), "l".into(), "p".into())]
    );
}

fn config_json(user: &str) -> String {
    format!(r#"{{"auths":{{"r.io":{{"username":"{user}","password":"pw"}}}}}}"#)
}

fn dockercfg(user: &str) -> String {
    format!(r#"{{"r.io":{{"username":"{user}","password":"pw"}}}}"#)
}

enum Content {
    Text(String),
    Directory,
}

fn put(base: &Path, rel: &str, content: Content) {
    let path = base.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    match content {
        Content::Text(t) => std::fs::write(path, t).expect("write"),
        Content::Directory => std::fs::create_dir_all(path).expect("mkdir"),
    }
}

/// Which file is read: `config.json` in the root directory, then in
/// `$HOME/.docker`, before any `.dockercfg`; missing, unreadable and
/// malformed files are skipped; the first readable one wins even when
/// empty. (The working directory and `/` hold none of these files here.)
/// Files to lay out, relative to the test directory.
type Layout = Vec<(&'static str, Content)>;

#[tokio::test]
async fn search_order_and_first_found() {
    use Content::*;
    let cases: Vec<(&str, Layout, Option<&str>)> = vec![
        (
            "root's config.json before home's",
            vec![
                ("root/config.json", Text(config_json("root-json"))),
                ("home/.docker/config.json", Text(config_json("home-json"))),
            ],
            Some("root-json"),
        ),
        (
            "home's config.json",
            vec![("home/.docker/config.json", Text(config_json("home-json")))],
            Some("home-json"),
        ),
        (
            "any config.json before a .dockercfg",
            vec![
                ("root/.dockercfg", Text(dockercfg("root-cfg"))),
                ("home/.docker/config.json", Text(config_json("home-json"))),
            ],
            Some("home-json"),
        ),
        (
            "malformed config.json skipped",
            vec![
                ("root/config.json", Text("{not json".into())),
                ("home/.docker/config.json", Text(config_json("home-json"))),
            ],
            Some("home-json"),
        ),
        (
            "unreadable config.json skipped",
            vec![
                ("root/config.json", Directory),
                ("root/.dockercfg", Text(dockercfg("root-cfg"))),
            ],
            Some("root-cfg"),
        ),
        (
            "root's .dockercfg before home's",
            vec![
                ("root/.dockercfg", Text(dockercfg("root-cfg"))),
                ("home/.dockercfg", Text(dockercfg("home-cfg"))),
            ],
            Some("root-cfg"),
        ),
        (
            "home's .dockercfg (not under .docker)",
            vec![
                ("home/.docker/.dockercfg", Text(dockercfg("wrong"))),
                ("home/.dockercfg", Text(dockercfg("home-cfg"))),
            ],
            Some("home-cfg"),
        ),
        (
            "an empty config.json is found and ends the search",
            vec![
                ("root/config.json", Text("{}".into())),
                ("home/.docker/config.json", Text(config_json("home-json"))),
            ],
            None,
        ),
    ];
    for (name, files, want) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        for (rel, content) in files {
            put(dir.path(), rel, content);
        }
        let paths = SearchPaths::new(dir.path().join("root"), dir.path().join("home"));
        let config = paths.read().await.unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = config.get("r.io").map(|e| e.username.as_str());
        assert_eq!(got, want, "{name}");
    }
}

#[tokio::test]
async fn nothing_found_is_an_error_and_an_empty_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = SearchPaths::new(dir.path().join("root"), dir.path().join("home"));
    let err = paths.read().await.expect_err("no files");
    assert!(
        err.to_string()
            .starts_with("couldn't find valid .dockercfg after checking in"),
        "{err}"
    );
    let provider = DefaultDockerConfigProvider::new(paths);
    assert!(provider.provide("r.io/app").await.is_empty());
}

#[test]
fn search_directories_in_go_order() {
    let paths = SearchPaths::new("/var/lib/kubelet".into(), "/home/k".into());
    let strs = |v: Vec<std::path::PathBuf>| -> Vec<String> {
        v.iter().map(|p| p.display().to_string()).collect()
    };
    assert_eq!(
        strs(paths.config_json_dirs()),
        ["/var/lib/kubelet", "", "/home/k/.docker", "/.docker"]
    );
    assert_eq!(
        strs(paths.dockercfg_dirs()),
        ["/var/lib/kubelet", "", "/home/k", "/"]
    );
    // No $HOME: the working directory stands in, as Go's empty home does.
    let homeless = SearchPaths::new("/r".into(), "".into());
    assert_eq!(strs(homeless.config_json_dirs())[2], ".docker");
}

/// Counts reads and answers with the read number.
#[derive(Default)]
struct Counting(AtomicUsize);

#[async_trait]
impl DockerConfigProvider for Counting {
    async fn provide(&self, _: &str) -> DockerConfig {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        [(
            "r.io".to_string(),
            DockerConfigEntry {
                username: format!("read-{n}"),
                password: String::new(),
            },
        )]
        .into()
    }
}

#[tokio::test(start_paused = true)]
async fn reads_are_kept_for_five_minutes() {
    assert_eq!(CACHE_LIFETIME, Duration::from_secs(300));
    let inner = Arc::new(Counting::default());
    let caching =
        CachingDockerConfigProvider::new(inner.clone(), CACHE_LIFETIME, Arc::new(RealClock));
    // (advance before the lookup, reads so far, user seen)
    let steps: &[(u64, usize, &str)] = &[
        (0, 1, "read-1"),
        (60, 1, "read-1"),
        (239, 1, "read-1"),
        (1, 2, "read-2"),
        (299, 2, "read-2"),
        (301, 3, "read-3"),
    ];
    for (advance, reads, user) in steps {
        tokio::time::advance(Duration::from_secs(*advance)).await;
        let config = caching.provide("r.io/app").await;
        assert_eq!(inner.0.load(Ordering::SeqCst), *reads, "after +{advance}s");
        assert_eq!(config["r.io"].username, *user, "after +{advance}s");
    }
}

/// The files themselves: a change shows after the cache lifetime.
#[tokio::test(start_paused = true)]
async fn file_changes_show_after_the_lifetime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    put(
        dir.path(),
        "root/config.json",
        Content::Text(config_json("first")),
    );
    let caching = CachingDockerConfigProvider::new(
        Arc::new(DefaultDockerConfigProvider::new(SearchPaths::new(
            root.clone(),
            dir.path().join("home"),
        ))),
        CACHE_LIFETIME,
        Arc::new(RealClock),
    );
    assert_eq!(caching.provide("r.io/a").await["r.io"].username, "first");
    std::fs::write(root.join("config.json"), config_json("second")).expect("rewrite");
    assert_eq!(caching.provide("r.io/a").await["r.io"].username, "first");
    tokio::time::advance(CACHE_LIFETIME).await;
    assert_eq!(caching.provide("r.io/a").await["r.io"].username, "second");
}
