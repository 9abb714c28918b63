//! The kubelet's view of its own Node object (Go's node informer, a watch
//! of nodes with `metadata.name=<node>`): the latest Node the API server
//! sent, for GetNode, the fast status update and admission.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use crate::util::lifecycle::TaskSet;

/// The latest Node object of this kubelet.
#[derive(Clone)]
pub struct NodeLister {
    node_name: String,
    client: kube::Client,
    tx: watch::Sender<Option<Arc<Node>>>,
}

impl std::fmt::Debug for NodeLister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLister")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

impl NodeLister {
    /// Build phase: nothing is watched until [`NodeLister::start`].
    pub fn new(client: kube::Client, node_name: &str) -> Self {
        let (tx, _) = watch::channel(None);
        NodeLister {
            node_name: node_name.to_string(),
            client,
            tx,
        }
    }

    /// The Node as last seen.
    pub fn get(&self) -> Option<Arc<Node>> {
        self.tx.borrow().clone()
    }

    /// Changes of the Node as they arrive.
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<Node>>> {
        self.tx.subscribe()
    }

    /// Spawns the watch (list, watch, relist on expiry, with backoff).
    pub fn start(&self, tasks: &TaskSet) {
        let api: Api<Node> = Api::all(self.client.clone());
        let cfg = watcher::Config::default().fields(&format!("metadata.name={}", self.node_name));
        let tx = self.tx.clone();
        let token = tasks.token();
        tasks.spawn("node-informer", async move {
            let mut stream = std::pin::pin!(watcher::watcher(api, cfg).default_backoff());
            loop {
                let ev = tokio::select! {
                    _ = token.cancelled() => return,
                    ev = stream.next() => ev,
                };
                match ev {
                    None => return,
                    Some(Ok(Event::Apply(n))) | Some(Ok(Event::InitApply(n))) => {
                        tx.send_replace(Some(Arc::new(n)));
                    }
                    Some(Ok(Event::Delete(_))) => {
                        tx.send_replace(None);
                    }
                    Some(Ok(Event::Init)) | Some(Ok(Event::InitDone)) => {}
                    Some(Err(e)) => crate::vlog!(4, error = %e, "Node watch error (retrying)"),
                }
            }
        });
    }
}
