//! The kubelet's view of the cluster's Services (Go's service informer),
//! for the service environment variables of containers. Standalone there
//! is none and no service variables are made.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::util::lifecycle::TaskSet;

#[derive(Default)]
struct Store {
    synced: bool,
    services: BTreeMap<(String, String), Service>,
}

/// Every Service, kept by a list + watch of all namespaces.
#[derive(Clone)]
pub struct ServiceLister {
    client: kube::Client,
    store: Arc<RwLock<Store>>,
}

fn key(s: &Service) -> (String, String) {
    (
        s.metadata.namespace.clone().unwrap_or_default(),
        s.metadata.name.clone().unwrap_or_default(),
    )
}

impl ServiceLister {
    /// Build phase: nothing is watched until [`ServiceLister::start`].
    pub fn new(client: kube::Client) -> Self {
        ServiceLister {
            client,
            store: Arc::default(),
        }
    }

    /// (whether the first list arrived, the services).
    pub fn snapshot(&self) -> (bool, Vec<Service>) {
        let s = self.store.read().unwrap_or_else(|p| p.into_inner());
        (s.synced, s.services.values().cloned().collect())
    }

    /// Spawns the watch (list, watch, relist on expiry, with backoff).
    pub fn start(&self, tasks: &TaskSet) {
        let api: Api<Service> = Api::all(self.client.clone());
        let store = self.store.clone();
        let token = tasks.token();
        tasks.spawn("service-informer", async move {
            let mut stream =
                std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
            let mut relist: BTreeMap<(String, String), Service> = BTreeMap::new();
            loop {
                let ev = tokio::select! {
                    _ = token.cancelled() => return,
                    ev = stream.next() => ev,
                };
                let mut s = store.write().unwrap_or_else(|p| p.into_inner());
                match ev {
                    None => return,
                    Some(Ok(Event::Init)) => relist.clear(),
                    Some(Ok(Event::InitApply(svc))) => {
                        relist.insert(key(&svc), svc);
                    }
                    Some(Ok(Event::InitDone)) => {
                        s.services = std::mem::take(&mut relist);
                        s.synced = true;
                    }
                    Some(Ok(Event::Apply(svc))) => {
                        s.services.insert(key(&svc), svc);
                    }
                    Some(Ok(Event::Delete(svc))) => {
                        s.services.remove(&key(&svc));
                    }
                    Some(Err(e)) => crate::vlog!(4, error = %e, "Service watch error (retrying)"),
                }
            }
        });
    }
}
