//! Watch streams: JSON lines of {"type", "object"} from a resourceVersion,
//! with the initial state for RV ""/"0", selector transitions (an object
//! leaving the selection is a DELETED), periodic BOOKMARKs, timeoutSeconds,
//! and ERROR 410 once the history the watch needs has been compacted.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::errors::ApiError;
use super::http::Body;
use super::list::as_partial_metadata;
use super::resources::ResourceDef;
use super::selectors::Selectors;
use super::server::Shared;
use super::store::{Change, ChangeKind, Compacted};

/// The watch parameters of a request.
#[derive(Debug, Clone, Default)]
pub struct WatchQuery {
    pub selectors: Selectors,
    pub resource_version: Option<String>,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
}

struct Filter {
    res: &'static ResourceDef,
    namespace: Option<String>,
    selectors: Selectors,
    partial: bool,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        self.selectors.matches(obj)
    }

    fn render(&self, obj: &Value) -> Value {
        if self.partial {
            as_partial_metadata(obj)
        } else {
            obj.clone()
        }
    }

    /// The event a change means to this watch, if any.
    fn event(&self, c: &Change) -> Option<(&'static str, Value)> {
        if c.res != self.res.id {
            return None;
        }
        if self
            .namespace
            .as_deref()
            .is_some_and(|ns| ns != c.key.namespace)
        {
            return None;
        }
        match c.kind {
            ChangeKind::Added => self
                .matches(&c.object)
                .then(|| ("ADDED", self.render(&c.object))),
            ChangeKind::Deleted => {
                let before = c.previous.as_ref().unwrap_or(&c.object);
                self.matches(before)
                    .then(|| ("DELETED", self.render(&c.object)))
            }
            ChangeKind::Modified => {
                let now = self.matches(&c.object);
                let before = c.previous.as_ref().is_some_and(|p| self.matches(p));
                match (before, now) {
                    (true, true) => Some(("MODIFIED", self.render(&c.object))),
                    (false, true) => Some(("ADDED", self.render(&c.object))),
                    (true, false) => {
                        let mut prev = c.previous.clone().unwrap_or(Value::Null);
                        if let Some(rv) = c.object.pointer("/metadata/resourceVersion").cloned()
                            && let Some(m) =
                                prev.pointer_mut("/metadata").and_then(Value::as_object_mut)
                        {
                            m.insert("resourceVersion".into(), rv);
                        }
                        Some(("DELETED", self.render(&prev)))
                    }
                    (false, false) => None,
                }
            }
        }
    }

    fn bookmark(&self, rv: u64) -> Value {
        let (kind, api_version) = if self.partial {
            (
                "PartialObjectMetadata".to_string(),
                "meta.k8s.io/v1".to_string(),
            )
        } else {
            (self.res.kind.to_string(), self.res.api_version())
        };
        json!({
            "kind": kind,
            "apiVersion": api_version,
            "metadata": {"resourceVersion": rv.to_string(), "creationTimestamp": null},
        })
    }
}

fn line(ty: &str, object: Value) -> Bytes {
    let mut s = json!({"type": ty, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

fn expired(requested: u64, c: Compacted) -> Bytes {
    let e = ApiError::expired(format!("too old resource version: {requested} ({})", c.0));
    line("ERROR", e.to_status())
}

/// Starts a watch; the response streams until the client goes, the timeout
/// passes, the double stops, or a test closes watches.
pub fn start(
    shared: Arc<Shared>,
    cancel: CancellationToken,
    res: &'static ResourceDef,
    namespace: Option<String>,
    q: WatchQuery,
    partial: bool,
) -> Result<Response<Body>, ApiError> {
    let from = match q.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))?,
        ),
    };
    let filter = Filter {
        res,
        namespace,
        selectors: q.selectors.clone(),
        partial,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let bookmark_every = shared.opts.bookmark_interval;
    // Without timeoutSeconds the server picks 30 to 60 minutes.
    let timeout = q.timeout.unwrap_or(Duration::from_secs(1800));
    tokio::spawn(run(
        shared,
        cancel,
        filter,
        from,
        q.bookmarks,
        bookmark_every,
        timeout,
        tx,
    ));
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b)));
    let body = BodyExt::boxed(StreamBody::new(stream));
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))
}

#[allow(clippy::too_many_arguments)]
async fn run(
    shared: Arc<Shared>,
    cancel: CancellationToken,
    filter: Filter,
    from: Option<u64>,
    bookmarks: bool,
    bookmark_every: Duration,
    timeout: Duration,
    out: mpsc::Sender<Bytes>,
) {
    let mut wake = shared.store.subscribe();
    let (epoch, start) = shared.store.tx(|tx| {
        let epoch = tx.watch_epoch();
        match from {
            None => {
                let initial: Vec<Value> = tx
                    .list(filter.res, filter.namespace.as_deref())
                    .into_iter()
                    .filter(|o| filter.matches(o))
                    .collect();
                (epoch, Ok((tx.current_rv(), initial)))
            }
            Some(rv) if rv < tx.compacted_rv() => (epoch, Err(Compacted(tx.compacted_rv()))),
            Some(rv) => (epoch, Ok((rv, Vec::new()))),
        }
    });
    let mut cursor = match start {
        Ok((rv, initial)) => {
            for o in initial {
                if out.send(line("ADDED", filter.render(&o))).await.is_err() {
                    return;
                }
            }
            rv
        }
        Err(c) => {
            let _ = out.send(expired(from.unwrap_or(0), c)).await;
            return;
        }
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + bookmark_every, bookmark_every);
    loop {
        let mut bookmark_due = false;
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = out.closed() => return,
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tick.tick(), if bookmarks => bookmark_due = true,
            changed = wake.changed() => if changed.is_err() { return },
        }
        let (changes, epoch_now, rv_now) = shared
            .store
            .tx(|tx| (tx.changes_since(cursor), tx.watch_epoch(), tx.current_rv()));
        if epoch_now != epoch {
            return;
        }
        let changes = match changes {
            Ok(c) => c,
            Err(c) => {
                let _ = out.send(expired(cursor, c)).await;
                return;
            }
        };
        for c in &changes {
            if let Some((ty, obj)) = filter.event(c)
                && out.send(line(ty, obj)).await.is_err()
            {
                return;
            }
            cursor = c.rv;
        }
        if bookmark_due {
            cursor = cursor.max(rv_now);
            if out
                .send(line("BOOKMARK", filter.bookmark(cursor)))
                .await
                .is_err()
            {
                return;
            }
        }
    }
}
