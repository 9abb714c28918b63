//! A pod worker's mailbox. The pod workers hand a worker its next update
//! only while it is idle (the rest wait in `last_undelivered`), so at most
//! one update is ever in flight: a slot and a `Notify` do, where a channel
//! would keep a block of 32 slots alive for every pod.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

struct Slots<T> {
    next: Option<T>,
    /// Updates sent while `next` was still full (never, if the protocol
    /// above holds): kept in order rather than dropped.
    overflow: VecDeque<T>,
    closed: bool,
}

struct Inner<T> {
    slots: Mutex<Slots<T>>,
    wake: Notify,
}

impl<T> Inner<T> {
    fn slots(&self) -> MutexGuard<'_, Slots<T>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The sending half, kept by the pod workers; dropping it closes the
/// mailbox (the worker ends once it has taken what is left).
pub(crate) struct Sender<T>(Arc<Inner<T>>);

/// The receiving half, owned by the worker task.
pub(crate) struct Receiver<T>(Arc<Inner<T>>);

pub(crate) fn mailbox<T>() -> (Sender<T>, Receiver<T>) {
    let inner = Arc::new(Inner {
        slots: Mutex::new(Slots {
            next: None,
            overflow: VecDeque::new(),
            closed: false,
        }),
        wake: Notify::new(),
    });
    (Sender(inner.clone()), Receiver(inner))
}

impl<T> Sender<T> {
    pub fn send(&self, value: T) {
        {
            let mut s = self.0.slots();
            if s.next.is_none() {
                s.next = Some(value);
            } else {
                s.overflow.push_back(value);
            }
        }
        self.0.wake.notify_one();
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.0.slots().closed = true;
        self.0.wake.notify_one();
    }
}

impl<T> Receiver<T> {
    /// The next update; `None` once the sender is gone and nothing is left.
    pub async fn recv(&mut self) -> Option<T> {
        loop {
            {
                let mut s = self.0.slots();
                if let Some(v) = s.next.take() {
                    s.next = s.overflow.pop_front();
                    return Some(v);
                }
                if s.closed {
                    return None;
                }
            }
            // notify_one keeps a permit when no one waits, so a send
            // between the check above and this wait is not missed.
            self.0.wake.notified().await;
        }
    }

    /// Whether the sender is gone and nothing is left to take.
    pub fn is_closed(&self) -> bool {
        let s = self.0.slots();
        s.closed && s.next.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn delivers_in_order_then_ends_when_the_sender_is_gone() {
        let (tx, mut rx) = mailbox();
        tx.send(1);
        tx.send(2);
        tx.send(3);
        assert!(!rx.is_closed());
        drop(tx);
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(3));
        assert!(rx.is_closed());
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_waiting_receiver_wakes_on_send_and_on_close() {
        let (tx, mut rx) = mailbox();
        let waiter = tokio::spawn(async move {
            let first = rx.recv().await;
            let second = rx.recv().await;
            (first, second)
        });
        tokio::task::yield_now().await;
        tx.send("update");
        tokio::task::yield_now().await;
        drop(tx);
        assert_eq!(waiter.await.ok(), Some((Some("update"), None)));
    }

    #[test]
    fn closed_only_once_emptied() {
        let (tx, rx) = mailbox();
        tx.send(());
        drop(tx);
        assert!(!rx.is_closed());
    }
}
