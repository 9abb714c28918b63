//! The API event recorder: a bounded queue (1000 events; more are dropped,
//! as the broadcaster drops) drained by one sink task that correlates each
//! event and creates or patches it, retrying transport failures up to 12
//! times, 10 s apart (the first wait randomised).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::mpsc;

use super::correlator::{EventCorrelator, api_time, event_name};
use super::{COMPONENT_KUBELET, EventRecorder, EventType, log_event};
use crate::util::clock::{Clock, Moment};
use crate::util::lifecycle::TaskSet;

const MAX_QUEUED_EVENTS: usize = 1000;
const MAX_TRIES_PER_EVENT: u32 = 12;
/// The sink's wait between tries of one event.
pub const SINK_RETRY_SLEEP: Duration = Duration::from_secs(10);

/// Where correlated events go.
#[async_trait::async_trait]
pub trait EventSink: Send + Sync + 'static {
    async fn create(&self, event: &Event) -> Result<Event, kube::Error>;
    async fn patch(&self, event: &Event, patch: &serde_json::Value) -> Result<Event, kube::Error>;
}

/// Events through a kube client (the event client).
#[derive(Clone)]
pub struct KubeEventSink {
    client: kube::Client,
}

impl KubeEventSink {
    pub fn new(client: kube::Client) -> Self {
        KubeEventSink { client }
    }

    fn api(&self, e: &Event) -> Api<Event> {
        Api::namespaced(
            self.client.clone(),
            e.metadata.namespace.as_deref().unwrap_or("default"),
        )
    }
}

#[async_trait::async_trait]
impl EventSink for KubeEventSink {
    async fn create(&self, event: &Event) -> Result<Event, kube::Error> {
        self.api(event).create(&PostParams::default(), event).await
    }

    async fn patch(&self, event: &Event, patch: &serde_json::Value) -> Result<Event, kube::Error> {
        let name = event.metadata.name.as_deref().unwrap_or("");
        self.api(event)
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
    }
}

/// Records events to the API server (after the sink task is started).
pub struct ApiEventRecorder {
    tx: mpsc::Sender<Event>,
    rx: Mutex<Option<mpsc::Receiver<Event>>>,
    source: EventSource,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ApiEventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiEventRecorder")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl ApiEventRecorder {
    /// A recorder for the kubelet of `node_name` (build phase; events queue
    /// until [`ApiEventRecorder::start`]).
    pub fn new(node_name: &str, clock: Arc<dyn Clock>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(MAX_QUEUED_EVENTS);
        Arc::new(ApiEventRecorder {
            tx,
            rx: Mutex::new(Some(rx)),
            source: EventSource {
                component: Some(COMPONENT_KUBELET.to_string()),
                host: Some(node_name.to_string()),
            },
            clock,
        })
    }

    /// Spawns the task that writes queued events to `sink`. Only the first
    /// call starts anything.
    pub fn start(&self, tasks: &TaskSet, sink: Arc<dyn EventSink>) {
        self.start_with_sleep(tasks, sink, SINK_RETRY_SLEEP);
    }

    /// [`ApiEventRecorder::start`] with another wait between tries.
    pub fn start_with_sleep(&self, tasks: &TaskSet, sink: Arc<dyn EventSink>, sleep: Duration) {
        let Some(mut rx) = self.rx.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        crate::vlog!(4, "Sending events to api server");
        let clock = self.clock.clone();
        let token = tasks.token();
        tasks.spawn("event-sink", async move {
            let mut correlator = EventCorrelator::new();
            loop {
                let event = tokio::select! {
                    _ = token.cancelled() => return,
                    e = rx.recv() => match e {
                        Some(e) => e,
                        None => return,
                    },
                };
                let write =
                    record_to_sink(sink.as_ref(), &mut correlator, event, clock.as_ref(), sleep);
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = write => {}
                }
            }
        });
    }

    fn make_event(
        &self,
        object: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Event {
        let now = self.clock.now();
        let t = api_time(now);
        let ns = object
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_string());
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(object.name.as_deref().unwrap_or(""), now)),
                namespace: Some(ns),
                ..Default::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            first_timestamp: Some(t.clone()),
            last_timestamp: Some(t),
            count: Some(1),
            type_: Some(event_type.as_str().to_string()),
            source: Some(self.source.clone()),
            reporting_component: self.source.component.clone(),
            reporting_instance: self.source.host.clone(),
            ..Default::default()
        }
    }
}

impl EventRecorder for ApiEventRecorder {
    fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) {
        log_event(object, event_type, reason, message);
        let event = self.make_event(object, event_type, reason, message);
        if let Err(e) = self.tx.try_send(event) {
            let why = match e {
                mpsc::error::TrySendError::Full(_) => "too many queued events",
                mpsc::error::TrySendError::Closed(_) => "the event sink stopped",
            };
            tracing::error!(why, event_reason = %reason, message, "Unable to record event, dropped");
        }
    }
}

async fn record_to_sink(
    sink: &dyn EventSink,
    correlator: &mut EventCorrelator,
    event: Event,
    clock: &dyn Clock,
    sleep: Duration,
) {
    let Some(result) = correlator.correlate(&event, Moment::now(clock)) else {
        return;
    };
    let mut tries = 0;
    loop {
        if record_event(sink, correlator, &result.event, result.patch.as_ref()).await {
            return;
        }
        tries += 1;
        if tries >= MAX_TRIES_PER_EVENT {
            tracing::error!(
                event = result.event.metadata.name.as_deref().unwrap_or(""),
                "Unable to write event (retry limit exceeded!)"
            );
            return;
        }
        let wait = if tries == 1 {
            sleep.mul_f64(rand::random::<f64>())
        } else {
            sleep
        };
        tokio::time::sleep(wait).await;
    }
}

/// One try; `true` when done (written, or rejected for good).
async fn record_event(
    sink: &dyn EventSink,
    correlator: &mut EventCorrelator,
    event: &Event,
    patch: Option<&serde_json::Value>,
) -> bool {
    let update = event.count.unwrap_or(1) > 1;
    let mut result = None;
    if update && let Some(p) = patch {
        result = Some(sink.patch(event, p).await);
    }
    let not_found = matches!(&result, Some(Err(kube::Error::Api(s))) if s.code == 404);
    if !update || patch.is_none() || not_found {
        let mut fresh = event.clone();
        fresh.metadata.resource_version = None;
        result = Some(sink.create(&fresh).await);
    }
    match result {
        Some(Ok(stored)) => {
            correlator.update_state(&stored);
            true
        }
        Some(Err(kube::Error::Api(s))) => {
            let name = event.metadata.name.as_deref().unwrap_or("");
            if s.code == 409 {
                crate::vlog!(5, event = name, error = %s.message, "Server rejected event (will not retry!)");
            } else {
                tracing::error!(event = name, error = %s.message, "Server rejected event (will not retry!)");
            }
            true
        }
        Some(Err(e)) => {
            tracing::error!(
                event = event.metadata.name.as_deref().unwrap_or(""),
                error = %e,
                "Unable to write event (may retry after sleeping)"
            );
            false
        }
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::RealClock;
    use std::sync::Mutex as StdMutex;

    #[derive(Default)]
    struct FakeSink {
        calls: StdMutex<Vec<String>>,
        fail_first: StdMutex<u32>,
        stored: StdMutex<Vec<Event>>,
    }

    fn status(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: format!("status {code}"),
            ..Default::default()
        }))
    }

    #[async_trait::async_trait]
    impl EventSink for FakeSink {
        async fn create(&self, event: &Event) -> Result<Event, kube::Error> {
            self.calls.lock().unwrap().push("create".into());
            {
                let mut f = self.fail_first.lock().unwrap();
                if *f > 0 {
                    *f -= 1;
                    return Err(kube::Error::Service("connection refused".into()));
                }
            }
            let mut e = event.clone();
            e.metadata.resource_version = Some("1".into());
            self.stored.lock().unwrap().push(e.clone());
            Ok(e)
        }
        async fn patch(&self, event: &Event, _p: &serde_json::Value) -> Result<Event, kube::Error> {
            self.calls.lock().unwrap().push("patch".into());
            let mut stored = self.stored.lock().unwrap();
            match stored
                .iter_mut()
                .find(|s| s.metadata.name == event.metadata.name)
            {
                Some(s) => {
                    s.count = event.count;
                    Ok(s.clone())
                }
                None => Err(status(404)),
            }
        }
    }

    fn pod_ref() -> ObjectReference {
        ObjectReference {
            kind: Some("Pod".into()),
            name: Some("p".into()),
            namespace: Some("ns".into()),
            uid: Some("u".into()),
            api_version: Some("v1".into()),
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_are_created_then_patched_and_retried_on_transport_errors() {
        let sink = Arc::new(FakeSink::default());
        *sink.fail_first.lock().unwrap() = 2;
        let rec = ApiEventRecorder::new("n1", Arc::new(RealClock));
        let tasks = TaskSet::new();
        rec.start(&tasks, sink.clone());
        rec.event(&pod_ref(), EventType::Normal, "Pulled", "done");
        rec.event(&pod_ref(), EventType::Normal, "Pulled", "done");
        for _ in 0..100 {
            if sink.calls.lock().unwrap().len() >= 4 {
                break;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        assert_eq!(
            *sink.calls.lock().unwrap(),
            vec!["create", "create", "create", "patch"]
        );
        let stored = sink.stored.lock().unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].count, Some(2));
        assert_eq!(stored[0].metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            stored[0].source.as_ref().and_then(|s| s.host.as_deref()),
            Some("n1")
        );
        assert_eq!(stored[0].reporting_component.as_deref(), Some("kubelet"));
        assert!(
            stored[0]
                .metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with("p.")
        );
    }

    #[tokio::test]
    async fn node_events_land_in_default() {
        let rec = ApiEventRecorder::new("n1", Arc::new(RealClock));
        let e = rec.make_event(
            &super::super::node_ref("n1"),
            EventType::Normal,
            "Starting",
            "Starting kubelet.",
        );
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("n1"));
    }
}
