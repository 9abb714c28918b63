//! The lease controller across wall-clock steps (paused tokio time, a
//! fake API server): renewals are paced by the monotonic ticker, each
//! carries the clock's wall time of the moment it is made, and none is
//! skipped or repeated whatever the wall clock does.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;
use crate::kubelet::client::testing::{Answer, fake_client};
use crate::util::clock::testing::JumpClock;

const NODE: &str = "n1";
const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

/// A write of the Lease the fake server took.
#[derive(Debug, Clone)]
struct Write {
    method: String,
    /// Monotonic time of the write.
    at: Instant,
    /// The test clock's wall time then.
    wall: SystemTime,
    /// The renewTime it carried.
    renew: jiff::Timestamp,
}

/// One Lease and one Node; records every write of the Lease.
#[derive(Clone)]
struct FakeApi {
    lease: Arc<Mutex<Option<Value>>>,
    writes: Arc<Mutex<Vec<Write>>>,
    clock: Arc<JumpClock>,
}

impl Answer for FakeApi {
    fn answer(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "not found"});
        let lease_named = format!("{LEASE_PATH}/{NODE}");
        match (method, path) {
            ("GET", p) if p == format!("/api/v1/nodes/{NODE}") => (
                200,
                json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": NODE, "uid": "node-uid"}}),
            ),
            ("GET", p) if p == lease_named => match self.lease.lock().unwrap().clone() {
                Some(l) => (200, l),
                None => (404, not_found),
            },
            (m, p) if (m == "POST" && p == LEASE_PATH) || (m == "PUT" && p == lease_named) => {
                let mut lease: Value = serde_json::from_slice(body).unwrap();
                let n = self.writes.lock().unwrap().len() + 1;
                lease["metadata"]["resourceVersion"] = json!(n.to_string());
                let l: Lease = serde_json::from_value(lease.clone()).unwrap();
                self.writes.lock().unwrap().push(Write {
                    method: method.to_string(),
                    at: Instant::now(),
                    wall: self.clock.now(),
                    renew: l.spec.unwrap().renew_time.unwrap().0,
                });
                *self.lease.lock().unwrap() = Some(lease.clone());
                (if method == "POST" { 201 } else { 200 }, lease)
            }
            _ => (404, not_found),
        }
    }
}

impl FakeApi {
    fn writes(&self) -> Vec<Write> {
        self.writes.lock().unwrap().clone()
    }
}

fn client(api: FakeApi) -> kube::Client {
    fake_client(api)
}

fn micros(t: SystemTime) -> i64 {
    jiff::Timestamp::try_from(t).unwrap().as_microsecond()
}

/// A 40 s lease (renewals every 10 s, 4% jitter) over 40 s of steady
/// time, then a wall-clock step, 40 s more, another step, 40 s more.
/// Every renewal carries the wall time of its moment (so the first one
/// after a step forward is an hour ahead, the first after a step back an
/// hour behind) and renewals stay on the ticker: 10–10.4 s apart on the
/// monotonic clock, never a tight loop, never a gap.
#[tokio::test(start_paused = true)]
async fn renewals_follow_the_ticker_and_carry_the_new_wall_time_across_jumps() {
    // (first step, second step) in seconds
    let cases = [(3600, -3600), (-3600, 3600), (3600, -7200), (-7200, 7200)];
    for (first, second) in cases {
        let clock = JumpClock::at_a_fixed_date();
        let api = FakeApi {
            lease: Arc::default(),
            writes: Arc::default(),
            clock: clock.clone(),
        };
        let lease = LeaseController::new(client(api.clone()), NODE, 40, clock.clone(), None);
        assert_eq!(lease.renew_interval(), Duration::from_secs(10));
        let tasks = TaskSet::new();
        lease.start(&tasks);
        let start = Instant::now();
        let mut steps = Vec::new();
        for jump in [0, first, second] {
            clock.jump(jump);
            steps.push((Instant::now(), jump));
            tokio::time::sleep(Duration::from_secs(40)).await;
        }
        tasks
            .into_shutdown_handle()
            .shutdown(Duration::from_secs(1))
            .await
            .unwrap();

        let writes = api.writes();
        let name = format!("steps {first} s then {second} s");
        assert_eq!(writes[0].method, "POST", "{name}: created first");
        assert!(
            writes[1..].iter().all(|w| w.method == "PUT"),
            "{name}: then renewed"
        );
        // 120 s at 10–10.4 s a renewal, the first at once.
        assert!(
            (12..=13).contains(&writes.len()),
            "{name}: {} writes in 120 s",
            writes.len()
        );
        for pair in writes.windows(2) {
            let gap = pair[1].at - pair[0].at;
            assert!(
                gap >= Duration::from_secs(10) && gap <= Duration::from_millis(10_400),
                "{name}: renewals {gap:?} apart at {:?}",
                pair[1].at - start
            );
        }
        for w in &writes {
            assert_eq!(
                w.renew.as_microsecond(),
                micros(w.wall),
                "{name}: renewTime is the clock's time of the write at {:?}",
                w.at - start
            );
        }
        // The first renewal after each step: an hour (or two) off the
        // previous one, as the wall clock is.
        for (at, jump) in steps.into_iter().skip(1) {
            let i = writes.iter().position(|w| w.at >= at).expect("renewed");
            let moved = writes[i].renew.as_microsecond() - writes[i - 1].renew.as_microsecond();
            let ticks = (writes[i].at - writes[i - 1].at).as_micros() as i64;
            assert!(
                (moved - (jump * 1_000_000 + ticks)).abs() <= 1,
                "{name}: after the {jump} s step the renewTime moved {moved} µs in {ticks} µs"
            );
        }
    }
}
