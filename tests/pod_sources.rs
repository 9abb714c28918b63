//! Pod sources end to end: static pod decoding against the reference Go
//! kubelet's pods, the file source on a real directory with inotify, the
//! HTTP source against a local HTTP server, merged through PodConfig.

use std::collections::{BTreeMap, HashSet};
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use kubelet::kubelet::config::common::StaticPodOrigin;
use kubelet::kubelet::config::decode::decode_single_pod;
use kubelet::kubelet::config::{FileSource, HttpSource, PodConfig, PodUpdates};
use kubelet::kubelet::types::{
    CONFIG_FIRST_SEEN_ANNOTATION_KEY, CONFIG_HASH_ANNOTATION_KEY, CONFIG_SOURCE_ANNOTATION_KEY,
    PodOperation, PodUpdate,
};
use kubelet::util::clock::RealClock;
use kubelet::util::lifecycle::{ShutdownHandle, TaskSet};

const WAIT: Duration = Duration::from_secs(10);
/// Long enough that only inotify can explain a prompt update.
const NO_RELIST: Duration = Duration::from_secs(3600);

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/go-kubelet-examples")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture readable"))
        .expect("fixture is JSON")
}

/// The reference pods were created with `kubectl apply`; the manifest each was
/// made from is in its last-applied annotation. Decoding that manifest as a
/// static pod must give the same spec the API server stored, apart from what
/// admission plugins (not defaulting) added.
#[test]
fn defaulting_matches_the_reference_api_server() {
    for name in [
        "pod-guaranteed.json",
        "pod-burstable.json",
        "pod-besteffort.json",
    ] {
        let reference = fixture(name);
        let manifest = reference["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("last-applied annotation");
        let origin = StaticPodOrigin::File(Path::new("/etc/kubernetes/manifests/x.yaml"));
        let pod = decode_single_pod(manifest.as_bytes(), origin, "gonode")
            .expect("reference manifest is valid");
        let ours = serde_json::to_value(&pod).unwrap();

        let mut want = reference["spec"].clone();
        // Added by the ServiceAccount, Priority and DefaultTolerationSeconds admission plugins.
        let spec = want.as_object_mut().unwrap();
        for key in [
            "serviceAccount",
            "serviceAccountName",
            "priority",
            "preemptionPolicy",
            "tolerations",
        ] {
            spec.remove(key);
        }
        let is_token = |v: &Value| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("kube-api-access-"))
        };
        if let Some(Value::Array(volumes)) = spec.get_mut("volumes") {
            volumes.retain(|v| !is_token(v));
        }
        for list in ["containers", "initContainers"] {
            for c in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(Value::Array(mounts)) = c.get_mut("volumeMounts") {
                    mounts.retain(|m| !is_token(m));
                }
            }
        }
        let mut got = ours["spec"].clone();
        got.as_object_mut().unwrap().remove("tolerations");
        drop_empty(&mut got);
        drop_empty(&mut want);
        assert_eq!(got, want, "{name}");
        assert_eq!(
            ours["spec"]["tolerations"],
            json!([{"operator": "Exists", "effect": "NoExecute"}]),
            "{name}: static pods tolerate every NoExecute taint"
        );
        assert_eq!(ours["metadata"]["namespace"], "refpack");
        let base = reference["metadata"]["name"].as_str().unwrap();
        assert_eq!(ours["metadata"]["name"], format!("{base}-gonode"));
        assert_eq!(
            ours["metadata"]["annotations"][CONFIG_HASH_ANNOTATION_KEY],
            ours["metadata"]["uid"]
        );
        assert_eq!(ours["status"]["phase"], "Pending");
    }
}

/// Go prints a container's `resources` struct even when empty, and removing
/// the token volume leaves empty lists: neither is a difference in meaning.
fn drop_empty(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, v| {
                !(v.as_array().is_some_and(Vec::is_empty) || (k == "resources" && v == &json!({})))
            });
            map.values_mut().for_each(drop_empty);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_empty),
        _ => {}
    }
}

const WEB: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: nginx:1.25
    command: [nginx, -g, daemon off;]
";

#[test]
fn identity_is_a_content_hash() {
    let origin = StaticPodOrigin::File(Path::new("/m/web.yaml"));
    let uid = |text: &str, origin, node| {
        decode_single_pod(text.as_bytes(), origin, node)
            .expect("valid")
            .metadata
            .uid
            .expect("uid")
    };
    let first = uid(WEB, origin, "node-a");
    assert_eq!(first, uid(WEB, origin, "node-a"), "same manifest, same UID");
    assert_eq!(
        first,
        uid(&format!("# a comment\n{WEB}"), origin, "node-a"),
        "formatting is not content"
    );
    assert_ne!(
        first,
        uid(&WEB.replace("1.25", "1.26"), origin, "node-a"),
        "one byte of spec changed"
    );
    assert_ne!(
        first,
        uid(
            WEB,
            StaticPodOrigin::File(Path::new("/m/web2.yaml")),
            "node-a"
        )
    );
    assert_ne!(first, uid(WEB, origin, "node-b"));
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},
        "spec":{"containers":[{"name":"web","image":"nginx:1.25","command":["nginx","-g","daemon off;"]}]}}"#;
    assert_eq!(
        first,
        uid(json, origin, "node-a"),
        "JSON and YAML of the same pod"
    );
}

/// Starts a PodConfig with the given sources.
fn start(
    sources: Vec<Box<dyn kubelet::kubelet::config::PodSource>>,
) -> (PodConfig, PodUpdates, ShutdownHandle) {
    let (config, updates) = PodConfig::new(Arc::new(RealClock));
    for s in sources {
        config.add_source(s);
    }
    let tasks = TaskSet::new();
    config.start(&tasks);
    (config, updates, tasks.into_shutdown_handle())
}

async fn next(updates: &mut PodUpdates) -> PodUpdate {
    tokio::time::timeout(WAIT, updates.recv())
        .await
        .expect("an update arrives in time")
        .expect("the stream is open")
}

/// Waits until no update has arrived for `quiet`.
async fn assert_quiet(updates: &mut PodUpdates, quiet: Duration) {
    if let Ok(Some(u)) = tokio::time::timeout(quiet, updates.recv()).await {
        panic!("unexpected update {:?} {:?}", u.op, names(&u));
    }
}

fn names(update: &PodUpdate) -> Vec<String> {
    let mut v: Vec<String> = update
        .pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    v.sort();
    v
}

fn manifest(name: &str, image: &str) -> String {
    WEB.replace("name: web\nspec", &format!("name: {name}\nspec"))
        .replace("nginx:1.25", image)
}

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    // Written aside and renamed in, as editors and config tools do.
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    let path = dir.join(file);
    std::fs::rename(&tmp, &path).unwrap();
    path
}

#[tokio::test]
async fn file_source_follows_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "a.yaml", &manifest("a", "busybox:1.36"));
    write(
        d,
        "bad.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers: [{name: c}]\n",
    );
    std::fs::write(d.join(".hidden.yaml"), manifest("hidden", "busybox:1.36")).unwrap();
    let (config, mut updates, shutdown) =
        start(vec![Box::new(FileSource::new(d, "node-1", NO_RELIST))]);
    let ready = config.sources_ready();

    let first = next(&mut updates).await;
    ready.add_source(&first.source);
    assert_eq!(
        (first.op, first.source.as_str()),
        (PodOperation::Add, "file")
    );
    assert_eq!(
        names(&first),
        ["a-node-1"],
        "the bad manifest is skipped, the good one runs"
    );
    assert!(ready.all_ready());
    let a = first.pods[0].clone();
    let ann = a.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann[CONFIG_SOURCE_ANNOTATION_KEY], "file");
    assert!(ann.contains_key(CONFIG_FIRST_SEEN_ANNOTATION_KEY));

    // A new manifest shows up through inotify (no relisting for an hour).
    write(d, "b.yaml", &manifest("b", "busybox:1.36"));
    let added = next(&mut updates).await;
    assert_eq!(
        (added.op, names(&added)),
        (PodOperation::Add, vec!["b-node-1".to_string()])
    );

    // Editing a manifest changes its UID: the old pod goes, the new one comes.
    write(d, "a.yaml", &manifest("a", "busybox:1.37"));
    let mut seen: Vec<(PodOperation, Vec<String>, String)> = Vec::new();
    while seen.len() < 2 {
        let u = next(&mut updates).await;
        for p in &u.pods {
            seen.push((u.op, names(&u), p.metadata.uid.clone().unwrap()));
        }
    }
    let old_uid = a.metadata.uid.clone().unwrap();
    assert!(
        seen.iter()
            .any(|(op, _, uid)| *op == PodOperation::Remove && *uid == old_uid),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|(op, _, uid)| *op == PodOperation::Add && *uid != old_uid),
        "{seen:?}"
    );

    // Touching a manifest without changing it changes nothing.
    let text = std::fs::read_to_string(d.join("b.yaml")).unwrap();
    std::fs::write(d.join("b.yaml"), text).unwrap();
    assert_quiet(&mut updates, Duration::from_millis(500)).await;

    // Hidden files are ignored.
    std::fs::write(d.join(".c.yaml"), manifest("c", "busybox:1.36")).unwrap();
    assert_quiet(&mut updates, Duration::from_millis(500)).await;

    // Removing a manifest removes its pod.
    std::fs::remove_file(d.join("b.yaml")).unwrap();
    let removed = next(&mut updates).await;
    assert_eq!(
        (removed.op, names(&removed)),
        (PodOperation::Remove, vec!["b-node-1".to_string()])
    );

    // Removing the directory removes the rest.
    let path = d.to_path_buf();
    drop(dir);
    let gone = next(&mut updates).await;
    assert_eq!(
        (gone.op, names(&gone)),
        (PodOperation::Remove, vec!["a-node-1".to_string()]),
        "{path:?}"
    );
    shutdown.shutdown(WAIT).await.unwrap();
}

#[tokio::test]
async fn file_source_waits_for_a_directory_created_later() {
    let parent = tempfile::tempdir().unwrap();
    let d = parent.path().join("manifests");
    let (config, mut updates, shutdown) =
        start(vec![Box::new(FileSource::new(&d, "n", NO_RELIST))]);
    let first = next(&mut updates).await;
    assert_eq!(
        (first.op, first.pods.len()),
        (PodOperation::Add, 0),
        "an empty set marks the source seen"
    );
    assert!(config.seen_all_sources(&HashSet::from(["file".to_string()])));

    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("late.yaml"), manifest("late", "busybox:1.36")).unwrap();
    let added = next(&mut updates).await;
    assert_eq!(
        (added.op, names(&added)),
        (PodOperation::Add, vec!["late-n".to_string()])
    );

    // Once watched, the directory reports new files through inotify.
    write(&d, "later.yaml", &manifest("later", "busybox:1.36"));
    let added = next(&mut updates).await;
    assert_eq!(names(&added), ["later-n"]);
    shutdown.shutdown(WAIT).await.unwrap();
}

#[tokio::test]
async fn file_source_relists_periodically_what_inotify_cannot_see() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("real.yaml");
    std::fs::write(&target, manifest("linked", "busybox:1.36")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("linked.yaml")).unwrap();
    let (_config, mut updates, shutdown) = start(vec![Box::new(FileSource::new(
        dir.path(),
        "n",
        Duration::from_millis(300),
    ))]);
    let first = next(&mut updates).await;
    assert_eq!(
        names(&first),
        ["linked-n"],
        "symlinked manifests are followed"
    );
    let old = first.pods[0].metadata.uid.clone();

    // The link's target changes outside the watched directory: no inotify
    // event reaches the source, the periodic listing catches it.
    std::fs::write(&target, manifest("linked", "busybox:1.37")).unwrap();
    let mut ops = Vec::new();
    while ops.len() < 2 {
        let u = next(&mut updates).await;
        for p in &u.pods {
            ops.push((u.op, p.metadata.uid.clone()));
        }
    }
    assert!(
        ops.contains(&(PodOperation::Remove, old.clone())),
        "{ops:?}"
    );
    assert!(
        ops.iter()
            .any(|(op, uid)| *op == PodOperation::Add && *uid != old),
        "{ops:?}"
    );
    shutdown.shutdown(WAIT).await.unwrap();
}

#[tokio::test]
async fn file_source_follows_a_symlinked_directory() {
    let real = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("manifests");
    std::os::unix::fs::symlink(real.path(), &link).unwrap();
    write(real.path(), "a.yaml", &manifest("a", "busybox:1.36"));
    let (_config, mut updates, shutdown) =
        start(vec![Box::new(FileSource::new(&link, "n", NO_RELIST))]);
    assert_eq!(names(&next(&mut updates).await), ["a-n"]);
    write(real.path(), "b.yaml", &manifest("b", "busybox:1.36"));
    let added = next(&mut updates).await;
    assert_eq!(
        (added.op, names(&added)),
        (PodOperation::Add, vec!["b-n".to_string()])
    );
    shutdown.shutdown(WAIT).await.unwrap();
}

#[tokio::test]
async fn file_source_reads_a_single_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "only.yaml", &manifest("only", "busybox:1.36"));
    let (_config, mut updates, shutdown) =
        start(vec![Box::new(FileSource::new(&file, "n", NO_RELIST))]);
    let first = next(&mut updates).await;
    assert_eq!(names(&first), ["only-n"]);
    let old = first.pods[0].metadata.uid.clone();
    // Replaced by rename: the watch on the old file is lost, set up again,
    // and the new content read.
    write(dir.path(), "only.yaml", &manifest("only", "busybox:1.37"));
    let mut ops = Vec::new();
    while ops.len() < 2 {
        let u = next(&mut updates).await;
        for p in &u.pods {
            ops.push((u.op, p.metadata.uid.clone()));
        }
    }
    assert!(
        ops.contains(&(PodOperation::Remove, old.clone())),
        "{ops:?}"
    );
    assert!(
        ops.iter()
            .any(|(op, uid)| *op == PodOperation::Add && *uid != old),
        "{ops:?}"
    );
    shutdown.shutdown(WAIT).await.unwrap();
}

/// What the test server answers.
#[derive(Clone)]
struct Served {
    status: StatusCode,
    body: String,
}

struct Server {
    url: String,
    served: Arc<Mutex<Served>>,
    requests: Arc<Mutex<usize>>,
    stop: tokio_util::sync::CancellationToken,
}

/// A local HTTP server that answers 403 unless `X-Token: secret` is sent.
async fn serve() -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/pods", listener.local_addr().unwrap());
    let served = Arc::new(Mutex::new(Served {
        status: StatusCode::OK,
        body: String::new(),
    }));
    let requests = Arc::new(Mutex::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let (s, r, token) = (served.clone(), requests.clone(), stop.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = token.cancelled() => return,
                accepted = listener.accept() => accepted.unwrap(),
            };
            let (s, r) = (s.clone(), r.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (s, r) = (s.clone(), r.clone());
                    async move {
                        *r.lock().unwrap() += 1;
                        let authorized = req
                            .headers()
                            .get_all("x-token")
                            .iter()
                            .any(|v| v == "secret")
                            && req.uri().path() == "/pods";
                        let served = s.lock().unwrap().clone();
                        let (status, body) = if authorized {
                            (served.status, served.body)
                        } else {
                            (StatusCode::FORBIDDEN, "forbidden".to_string())
                        };
                        let mut resp = Response::new(Full::new(Bytes::from(body)));
                        *resp.status_mut() = status;
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Server {
        url,
        served,
        requests,
        stop,
    }
}

impl Server {
    fn answer(&self, status: StatusCode, body: &str) {
        *self.served.lock().unwrap() = Served {
            status,
            body: body.to_string(),
        };
    }
}

fn pod_json(name: &str, image: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": image}]}})
}

fn http_source(url: &str, token: &str) -> HttpSource {
    let headers: BTreeMap<String, Vec<String>> =
        [("X-Token".to_string(), vec![token.to_string()])].into();
    HttpSource::new(url, &headers, "n", Duration::from_millis(100)).expect("valid source")
}

#[tokio::test]
async fn http_source_fetches_pods_with_its_headers() {
    let server = serve().await;
    server.answer(StatusCode::OK, &pod_json("one", "busybox:1.36").to_string());
    let (_config, mut updates, shutdown) =
        start(vec![Box::new(http_source(&server.url, "secret"))]);
    let first = next(&mut updates).await;
    assert_eq!(
        (first.op, first.source.as_str(), names(&first)),
        (PodOperation::Add, "http", vec!["one-n".to_string()])
    );
    let uid = first.pods[0].metadata.uid.clone();
    assert!(
        first.pods[0].spec.as_ref().unwrap().tolerations.is_none(),
        "only file pods get the NoExecute toleration"
    );

    // An unchanged body changes nothing.
    let before = *server.requests.lock().unwrap();
    assert_quiet(&mut updates, Duration::from_millis(400)).await;
    assert!(
        *server.requests.lock().unwrap() > before,
        "the URL is polled"
    );

    // A list of pods replaces the single one.
    let list = json!({"apiVersion": "v1", "kind": "PodList", "items": [pod_json("two", "busybox:1.36"), pod_json("three", "busybox:1.36")]});
    server.answer(StatusCode::OK, &list.to_string());
    let mut got: Vec<(PodOperation, Vec<String>)> = Vec::new();
    while got.iter().map(|(_, n)| n.len()).sum::<usize>() < 3 {
        let u = next(&mut updates).await;
        got.push((u.op, names(&u)));
    }
    got.sort_by_key(|(op, n)| (op.to_string(), n.clone()));
    assert_eq!(
        got,
        vec![
            (
                PodOperation::Add,
                vec!["three-n".to_string(), "two-n".to_string()]
            ),
            (PodOperation::Remove, vec!["one-n".to_string()]),
        ],
        "{uid:?}"
    );

    // Errors keep the last good set; an invalid list is refused whole.
    server.answer(StatusCode::NOT_FOUND, "");
    assert_quiet(&mut updates, Duration::from_millis(400)).await;
    let bad_list = json!({"apiVersion": "v1", "kind": "PodList", "items": [pod_json("ok", "busybox:1.36"), pod_json("bad", "")]});
    server.answer(StatusCode::OK, &bad_list.to_string());
    assert_quiet(&mut updates, Duration::from_millis(400)).await;
    server.answer(StatusCode::OK, "not a pod at all");
    assert_quiet(&mut updates, Duration::from_millis(400)).await;

    // An empty body is an empty set.
    server.answer(StatusCode::OK, "");
    let emptied = next(&mut updates).await;
    assert_eq!(
        (emptied.op, names(&emptied)),
        (
            PodOperation::Remove,
            vec!["three-n".to_string(), "two-n".to_string()]
        )
    );
    shutdown.shutdown(WAIT).await.unwrap();
    server.stop.cancel();
}

#[tokio::test]
async fn http_source_without_the_header_gets_nothing() {
    let server = serve().await;
    server.answer(StatusCode::OK, &pod_json("one", "busybox:1.36").to_string());
    let (config, mut updates, shutdown) = start(vec![Box::new(http_source(&server.url, "wrong"))]);
    assert_quiet(&mut updates, Duration::from_millis(500)).await;
    assert!(*server.requests.lock().unwrap() >= 2, "403s are retried");
    assert!(!config.seen_all_sources(&HashSet::from(["http".to_string()])));
    shutdown.shutdown(WAIT).await.unwrap();
    server.stop.cancel();
}

#[tokio::test]
async fn file_and_http_sources_merge_into_one_stream() {
    let server = serve().await;
    server.answer(
        StatusCode::OK,
        &pod_json("remote", "busybox:1.36").to_string(),
    );
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "local.yaml", &manifest("local", "busybox:1.36"));
    let (config, mut updates, shutdown) = start(vec![
        Box::new(FileSource::new(dir.path(), "n", NO_RELIST)),
        Box::new(http_source(&server.url, "secret")),
    ]);
    let ready = config.sources_ready();
    let mut by_source: BTreeMap<String, Vec<String>> = BTreeMap::new();
    while by_source.len() < 2 {
        let u = next(&mut updates).await;
        ready.add_source(&u.source);
        by_source
            .entry(u.source.clone())
            .or_default()
            .extend(names(&u));
    }
    assert_eq!(by_source["file"], ["local-n"]);
    assert_eq!(by_source["http"], ["remote-n"]);
    assert!(ready.all_ready());
    let all: Vec<Arc<Pod>> = config.merged_state();
    assert_eq!(all.len(), 2);
    shutdown.shutdown(WAIT).await.unwrap();
    server.stop.cancel();
}

#[tokio::test]
async fn http_source_speaks_https_with_given_roots() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = certified.cert.der().clone();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server_config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = pod_json("secure", "busybox:1.36").to_string();
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let body = body.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                    let body = body.clone();
                    async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    let url = format!("https://localhost:{port}/pods");
    let trusted = HttpSource::new(&url, &BTreeMap::new(), "n", Duration::from_millis(100))
        .unwrap()
        .with_root_certificates(vec![cert]);
    let (_config, mut updates, shutdown) = start(vec![Box::new(trusted)]);
    assert_eq!(names(&next(&mut updates).await), ["secure-n"]);
    shutdown.shutdown(WAIT).await.unwrap();

    // Without the server's certificate among the roots, nothing is read.
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let untrusted = HttpSource::new(&url, &BTreeMap::new(), "n", Duration::from_millis(100))
        .unwrap()
        .with_root_certificates(vec![other.cert.der().clone()]);
    let (_config, mut updates, shutdown) = start(vec![Box::new(untrusted)]);
    assert_quiet(&mut updates, Duration::from_millis(500)).await;
    shutdown.shutdown(WAIT).await.unwrap();
    server.abort();
}
