//! The file source: static pods from staticPodPath, a directory of manifests
//! or a single manifest file.
//!
//! As in Go: the path is listed at start and every fileCheckFrequency, and
//! watched with inotify; every change sends the complete set of the source's
//! pods (a SET). In a directory, names starting with `.` are ignored, sub-
//! directories are not entered, symlinks are followed, and a manifest that
//! cannot be used is logged with its path and skipped while the others run.
//! A path that does not exist yields an empty set (so the source still counts
//! as seen) and is watched for again every second.
//!
//! Differences from Go, by design: a listing replaces everything the source
//! had (Go kept pods whose files vanished between watch events in its store
//! when a listing found nothing); a file whose pod changes name drops the old
//! pod at once; a lost watch (path removed, moved or replaced) is set up again
//! and the path listed, instead of going silent until the next listing.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::common::StaticPodOrigin;
use super::decode::decode_single_pod;
use super::error::{MAX_CONFIG_LENGTH, SourceError};
use super::file_watch::{WatchEvent, Watcher};
use super::pod_config::{PodSource, SourceSender};
use crate::kubelet::types::FILE_SOURCE;
use crate::util::clock::{Clock, RealClock};

/// How soon a missing or lost path is watched for again.
const WATCH_RETRY_PERIOD: Duration = Duration::from_secs(1);
/// Longest wait between attempts after a watch error.
const MAX_WATCH_RETRY_PERIOD: Duration = Duration::from_secs(20);

/// Static pods from a directory or file.
pub struct FileSource {
    path: PathBuf,
    node_name: String,
    period: Duration,
    clock: Arc<dyn Clock>,
}

impl FileSource {
    /// `path` is staticPodPath (a trailing `/` is ignored), `period` is
    /// fileCheckFrequency.
    pub fn new(path: impl Into<PathBuf>, node_name: impl Into<String>, period: Duration) -> Self {
        let path: PathBuf = path.into();
        let text = path.to_string_lossy();
        let trimmed = text.trim_end_matches('/');
        let path = if trimmed.is_empty() {
            path
        } else {
            PathBuf::from(trimmed)
        };
        FileSource {
            clock: Arc::new(RealClock),
            path,
            node_name: node_name.into(),
            period: period.max(Duration::from_millis(1)),
        }
    }

    /// The same source reading time through `clock`.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        FileSource { clock, ..self }
    }
}

/// Reads a manifest, refusing more than [`MAX_CONFIG_LENGTH`] bytes.
fn read_manifest(path: &Path) -> Result<Vec<u8>, SourceError> {
    let read_err = |source| SourceError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut data = Vec::new();
    file.take(MAX_CONFIG_LENGTH as u64 + 1)
        .read_to_end(&mut data)
        .map_err(read_err)?;
    if data.len() > MAX_CONFIG_LENGTH {
        return Err(SourceError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_CONFIG_LENGTH,
        });
    }
    Ok(data)
}

/// Reads and decodes one manifest file into a static pod (blocking).
pub fn extract_from_file(path: &Path, node_name: &str) -> Result<Pod, SourceError> {
    crate::vlog!(3, path = %path.display(), "Reading config file");
    let data = read_manifest(path)?;
    decode_single_pod(&data, StaticPodOrigin::File(path), node_name).map_err(|source| {
        if source.is_parsed() {
            SourceError::InvalidPod {
                path: path.to_path_buf(),
                source,
            }
        } else {
            SourceError::NotAPod {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

fn is_not_found(e: &SourceError) -> bool {
    matches!(e, SourceError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// What listing the path found.
enum Listing {
    Missing,
    Pods(Vec<(PathBuf, Pod)>),
}

/// Lists the path (blocking): every usable manifest; bad ones are logged.
fn list_config(path: &Path, node_name: &str) -> Result<Listing, SourceError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing::Missing),
        Err(source) => {
            return Err(SourceError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if meta.is_dir() {
        return Ok(Listing::Pods(extract_from_dir(path, node_name)?));
    }
    if meta.is_file() {
        return Ok(Listing::Pods(vec![(
            path.to_path_buf(),
            extract_from_file(path, node_name)?,
        )]));
    }
    Err(SourceError::NotDirOrFile(path.to_path_buf()))
}

fn extract_from_dir(dir: &Path, node_name: &str) -> Result<Vec<(PathBuf, Pod)>, SourceError> {
    let read_err = |source| SourceError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .as_encoded_bytes()
                .first()
                .is_some_and(|b| *b != b'.')
        })
        .map(|e| dir.join(e.file_name()))
        .collect();
    entries.sort();
    let mut pods = Vec::with_capacity(entries.len());
    for path in entries {
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "Could not get metadata");
                continue;
            }
        };
        if meta.is_dir() {
            tracing::error!(path = %path.display(), "Provided manifest path is a directory, not recursing into manifest path");
        } else if meta.is_file() {
            match extract_from_file(&path, node_name) {
                Ok(pod) => pods.push((path, pod)),
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "Could not process manifest file")
                }
            }
        } else {
            tracing::error!(path = %path.display(), "Manifest path is not a directory or file");
        }
    }
    Ok(pods)
}

fn store_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The source's current pods by `namespace/name`, and which file gave each.
#[derive(Default)]
struct Store {
    pods: BTreeMap<String, Pod>,
    file_keys: HashMap<PathBuf, String>,
}

impl Store {
    fn replace(&mut self, listed: Vec<(PathBuf, Pod)>) {
        self.pods.clear();
        self.file_keys.clear();
        for (path, pod) in listed {
            let key = store_key(&pod);
            self.file_keys.insert(path, key.clone());
            self.pods.insert(key, pod);
        }
    }

    fn upsert(&mut self, path: PathBuf, pod: Pod) {
        let key = store_key(&pod);
        if let Some(old) = self.file_keys.insert(path, key.clone())
            && old != key
            && !self.file_keys.values().any(|k| *k == old)
        {
            self.pods.remove(&old);
        }
        self.pods.insert(key, pod);
    }

    fn remove_file(&mut self, path: &Path) -> bool {
        let Some(key) = self.file_keys.remove(path) else {
            return false;
        };
        if self.file_keys.values().any(|k| *k == key) {
            return false;
        }
        self.pods.remove(&key).is_some()
    }

    fn snapshot(&self) -> Vec<Pod> {
        self.pods.values().cloned().collect()
    }
}

struct Runner {
    path: PathBuf,
    node_name: String,
    store: Store,
    updates: SourceSender,
}

impl Runner {
    /// Lists the path and sends the complete set.
    async fn relist(&mut self) {
        let (path, node) = (self.path.clone(), self.node_name.clone());
        match tokio::task::spawn_blocking(move || list_config(&path, &node)).await {
            Ok(Ok(Listing::Pods(pods))) => {
                self.store.replace(pods);
                self.updates.set(self.store.snapshot());
            }
            Ok(Ok(Listing::Missing)) => {
                self.store.replace(Vec::new());
                self.updates.set(Vec::new());
                crate::vlog!(4, path = %self.path.display(), "Static pod path does not exist, ignoring");
            }
            Ok(Err(e)) => {
                tracing::error!(path = %self.path.display(), error = %e, "Unable to read config path")
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "Listing the config path failed")
            }
        }
    }

    /// Applies a batch of watch events; returns whether the path must be
    /// listed again (and, for `Lost`, watched again).
    async fn apply(&mut self, events: Vec<WatchEvent>) -> (bool, bool) {
        let mut relist = false;
        let mut lost = false;
        // The last event per file decides; the order of first appearance is kept.
        let mut order: Vec<PathBuf> = Vec::new();
        let mut last: HashMap<PathBuf, bool> = HashMap::new();
        for ev in events {
            match ev {
                WatchEvent::Changed(p) => {
                    if last.insert(p.clone(), true).is_none() {
                        order.push(p);
                    }
                }
                WatchEvent::Removed(p) => {
                    if last.insert(p.clone(), false).is_none() {
                        order.push(p);
                    }
                }
                WatchEvent::Lost => lost = true,
                WatchEvent::Resync => relist = true,
            }
        }
        if lost || relist {
            return (true, lost);
        }
        let changed: Vec<PathBuf> = order
            .iter()
            .filter(|p| last.get(*p).copied().unwrap_or(false))
            .cloned()
            .collect();
        let node = self.node_name.clone();
        let parsed = tokio::task::spawn_blocking(move || {
            changed
                .into_iter()
                .map(|p| {
                    let r = extract_from_file(&p, &node);
                    (p, r)
                })
                .collect::<HashMap<_, _>>()
        })
        .await
        .unwrap_or_default();
        let mut parsed = parsed;
        let mut dirty = false;
        for path in order {
            if last.get(&path).copied().unwrap_or(false) {
                match parsed.remove(&path) {
                    Some(Ok(pod)) => {
                        self.store.upsert(path, pod);
                        dirty = true;
                    }
                    Some(Err(e)) if is_not_found(&e) => {}
                    Some(Err(e)) => tracing::error!(
                        path = %path.display(),
                        error = %e,
                        "Unable to process watch event: can't process config file"
                    ),
                    None => {}
                }
            } else if self.store.remove_file(&path) {
                dirty = true;
            }
        }
        if dirty {
            self.updates.set(self.store.snapshot());
        }
        (false, false)
    }
}

#[async_trait::async_trait]
impl PodSource for FileSource {
    fn name(&self) -> &'static str {
        FILE_SOURCE
    }

    async fn run(self: Box<Self>, updates: SourceSender, stop: CancellationToken) {
        crate::vlog!(1, path = %self.path.display(), "Watching path");
        let mut runner = Runner {
            path: self.path.clone(),
            node_name: self.node_name.clone(),
            store: Store::default(),
            updates,
        };
        let mut watcher = watch(&self.path);
        let mut backoff = WATCH_RETRY_PERIOD;
        let clock = self.clock.clone();
        let mut retry_at = clock.monotonic() + WATCH_RETRY_PERIOD;
        runner.relist().await;
        let mut ticker = tokio::time::interval_at(clock.monotonic() + self.period, self.period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticker.tick() => runner.relist().await,
                batch = next_batch(&mut watcher), if watcher.is_some() => match batch {
                    Ok(events) => {
                        let (relist, lost) = runner.apply(events).await;
                        if lost {
                            watcher = None;
                            retry_at = clock.monotonic();
                        } else if relist {
                            runner.relist().await;
                        }
                    }
                    Err(e) => {
                        tracing::error!(path = %self.path.display(), error = %e, "Unable to read config path");
                        watcher = None;
                        retry_at = clock.monotonic() + backoff;
                        backoff = (backoff * 2).min(MAX_WATCH_RETRY_PERIOD);
                    }
                },
                _ = tokio::time::sleep_until(retry_at), if watcher.is_none() => {
                    match Watcher::new(&self.path) {
                        Ok(w) => {
                            watcher = Some(w);
                            backoff = WATCH_RETRY_PERIOD;
                            // Whatever changed while nothing watched is picked up now.
                            runner.relist().await;
                        }
                        Err(e) if e.is_not_found() => {
                            runner.relist().await;
                            retry_at = clock.monotonic() + WATCH_RETRY_PERIOD;
                        }
                        Err(e) => {
                            tracing::error!(path = %self.path.display(), error = %e, "Unable to read config path");
                            retry_at = clock.monotonic() + backoff;
                            backoff = (backoff * 2).min(MAX_WATCH_RETRY_PERIOD);
                        }
                    }
                }
            }
        }
    }
}

fn watch(path: &Path) -> Option<Watcher> {
    match Watcher::new(path) {
        Ok(w) => Some(w),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "Unable to read config path");
            None
        }
    }
}

async fn next_batch(
    watcher: &mut Option<Watcher>,
) -> Result<Vec<WatchEvent>, super::file_watch::WatchError> {
    match watcher {
        Some(w) => w.next_batch().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n";

    fn manifest(name: &str) -> String {
        POD.replace("NAME", name)
    }

    fn names(listing: Listing) -> Vec<String> {
        match listing {
            Listing::Missing => vec!["<missing>".into()],
            Listing::Pods(p) => p
                .into_iter()
                .map(|(_, p)| p.metadata.name.unwrap_or_default())
                .collect(),
        }
    }

    #[test]
    fn listing_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("b.yaml"), manifest("b")).unwrap();
        std::fs::write(d.join("a.json"), r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#).unwrap();
        std::fs::write(d.join(".hidden.yaml"), manifest("hidden")).unwrap();
        std::fs::write(
            d.join("bad.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {containers: []}\n",
        )
        .unwrap();
        std::fs::write(
            d.join("list.yaml"),
            "apiVersion: v1\nkind: PodList\nitems: []\n",
        )
        .unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub").join("c.yaml"), manifest("c")).unwrap();
        std::os::unix::fs::symlink(d.join("sub").join("c.yaml"), d.join("link.yaml")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling.yaml")).unwrap();
        let got = names(list_config(d, "node").unwrap());
        assert_eq!(got, ["a-node", "b-node", "c-node"]);
        assert_eq!(
            names(list_config(&d.join("b.yaml"), "node").unwrap()),
            ["b-node"]
        );
        assert_eq!(
            names(list_config(&d.join("absent"), "node").unwrap()),
            ["<missing>"]
        );
        assert!(matches!(
            list_config(&d.join("bad.yaml"), "node"),
            Err(SourceError::InvalidPod { .. })
        ));
        assert!(matches!(
            list_config(&d.join("list.yaml"), "node"),
            Err(SourceError::NotAPod { .. })
        ));
    }

    #[test]
    fn oversized_manifests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        let mut text = manifest("big");
        text.push_str(&format!("# {}\n", "x".repeat(MAX_CONFIG_LENGTH)));
        std::fs::write(&path, text).unwrap();
        assert!(matches!(
            extract_from_file(&path, "n"),
            Err(SourceError::TooLarge { .. })
        ));
    }

    #[test]
    fn store_tracks_files() {
        let pod = |name: &str| {
            let mut p = Pod::default();
            p.metadata.name = Some(name.into());
            p.metadata.namespace = Some("default".into());
            p
        };
        let mut s = Store::default();
        s.replace(vec![
            (PathBuf::from("/m/a"), pod("a")),
            (PathBuf::from("/m/b"), pod("b")),
        ]);
        s.upsert(PathBuf::from("/m/a"), pod("a2"));
        let names: Vec<_> = s
            .snapshot()
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
        assert_eq!(
            names,
            ["a2", "b"],
            "renaming a pod in its file drops the old name"
        );
        assert!(s.remove_file(Path::new("/m/b")));
        assert!(!s.remove_file(Path::new("/m/unknown")));
        assert_eq!(s.snapshot().len(), 1);
    }

    #[test]
    fn trailing_slashes_are_ignored() {
        let s = FileSource::new("/etc/kubernetes/manifests/", "n", Duration::from_secs(20));
        assert_eq!(s.path, PathBuf::from("/etc/kubernetes/manifests"));
        let root = FileSource::new("/", "n", Duration::from_secs(20));
        assert_eq!(root.path, PathBuf::from("/"));
    }
}
