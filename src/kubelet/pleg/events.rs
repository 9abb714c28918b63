//! Pod lifecycle events and the stream that carries them to the syncLoop.
//!
//! The stream never drops an event: unlike Go's bounded channel, which
//! discards a relist's events when the consumer is slow, the sender queues
//! events per pod and the receiver takes them in arrival order of pods. A pod
//! that changed several times while the consumer was busy keeps every event,
//! and memory stays bounded by what the runtime actually reported.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::kubelet::container::PodUid;

/// What happened to a pod's container (Go's PodLifeCycleEventType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodLifecycleEventType {
    ContainerStarted,
    ContainerDied,
    ContainerRemoved,
    /// Something changed that is not a container state (e.g. the sandbox).
    PodSync,
    ContainerChanged,
}

/// One event: the pod and, for container events, the container ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLifecycleEvent {
    pub id: PodUid,
    pub event_type: PodLifecycleEventType,
    /// The container ID (without the runtime prefix) for container events.
    pub data: String,
}

#[derive(Debug, Default)]
struct Queue {
    order: VecDeque<PodUid>,
    per_pod: HashMap<PodUid, VecDeque<PodLifecycleEvent>>,
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    notify: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The sending side, held by the PLEG.
#[derive(Debug, Clone)]
pub struct EventSender {
    shared: Arc<Shared>,
}

/// The receiving side, held by the syncLoop.
#[derive(Debug)]
pub struct EventStream {
    shared: Arc<Shared>,
}

/// A connected sender/stream pair.
pub fn event_stream() -> (EventSender, EventStream) {
    let shared = Arc::new(Shared::default());
    (
        EventSender {
            shared: shared.clone(),
        },
        EventStream { shared },
    )
}

impl EventSender {
    pub fn send(&self, event: PodLifecycleEvent) {
        {
            let mut q = self.shared.lock();
            if q.closed {
                return;
            }
            let id = event.id.clone();
            let pending = q.per_pod.entry(id.clone()).or_default();
            let was_empty = pending.is_empty();
            pending.push_back(event);
            if was_empty {
                q.order.push_back(id);
            }
        }
        self.shared.notify.notify_one();
    }

    /// Ends the stream once its queued events are taken.
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.notify.notify_one();
    }

    /// Events queued and not yet received.
    pub fn pending(&self) -> usize {
        self.shared.lock().per_pod.values().map(VecDeque::len).sum()
    }
}

impl EventStream {
    fn take(&self) -> Option<Result<PodLifecycleEvent, ()>> {
        let mut q = self.shared.lock();
        while let Some(id) = q.order.front().cloned() {
            let next = q.per_pod.get_mut(&id).and_then(VecDeque::pop_front);
            let now_empty = q.per_pod.get(&id).is_none_or(VecDeque::is_empty);
            if now_empty {
                q.per_pod.remove(&id);
                q.order.pop_front();
            }
            if let Some(e) = next {
                return Some(Ok(e));
            }
        }
        q.closed.then_some(Err(()))
    }

    /// The next event; `None` once the sender closed and the queue is empty.
    pub async fn recv(&mut self) -> Option<PodLifecycleEvent> {
        loop {
            let notified = self.shared.notify.notified();
            match self.take() {
                Some(Ok(e)) => return Some(e),
                Some(Err(())) => return None,
                None => notified.await,
            }
        }
    }

    /// The next event if one is queued.
    pub fn try_recv(&mut self) -> Option<PodLifecycleEvent> {
        match self.take() {
            Some(Ok(e)) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(pod: &str, t: PodLifecycleEventType, c: &str) -> PodLifecycleEvent {
        PodLifecycleEvent {
            id: pod.into(),
            event_type: t,
            data: c.into(),
        }
    }

    #[tokio::test]
    async fn a_slow_consumer_loses_nothing() {
        let (tx, mut rx) = event_stream();
        for i in 0..10_000 {
            tx.send(ev(
                &format!("pod-{}", i % 7),
                PodLifecycleEventType::ContainerStarted,
                &i.to_string(),
            ));
        }
        assert_eq!(tx.pending(), 10_000);
        let mut seen = 0;
        let mut last_per_pod: HashMap<String, i32> = HashMap::new();
        while let Some(e) = rx.try_recv() {
            let n: i32 = e.data.parse().expect("numeric data");
            let last = last_per_pod.insert(e.id.clone(), n);
            assert!(last.is_none_or(|l| l < n), "per-pod order kept");
            seen += 1;
        }
        assert_eq!(seen, 10_000);
    }

    #[tokio::test]
    async fn recv_waits_and_ends_after_close() {
        let (tx, mut rx) = event_stream();
        let consumer = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(e) = rx.recv().await {
                got.push(e.event_type);
            }
            got
        });
        tx.send(ev("a", PodLifecycleEventType::ContainerStarted, "1"));
        tx.send(ev("a", PodLifecycleEventType::ContainerDied, "1"));
        tx.close();
        let got = consumer.await.expect("consumer");
        assert_eq!(
            got,
            vec![
                PodLifecycleEventType::ContainerStarted,
                PodLifecycleEventType::ContainerDied
            ]
        );
    }
}
