//! The /metrics/cadvisor exposition: cadvisor's container families for
//! the metric sets the kubelet turns on (CPU, CPU load, memory, disk usage
//! and I/O, network, processes, OOM events), the spec families, the
//! machine families and the version info, labelled as the kubelet labels
//! them (`container`, `id`, `image`, `name`, `namespace`, `pod`). Families
//! are sorted by name, samples by label values; help texts are ours.

mod container;
mod machine;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use super::container::ContainerInfo;
use super::{MachineInfo, VersionInfo};
use crate::metrics::constant::{ConstFamily, render_const};

pub use container::container_families;
pub use machine::machine_families;

/// What one scrape renders.
#[derive(Debug, Clone, Default)]
pub struct CadvisorSnapshot {
    /// `None` when listing containers failed (`container_scrape_error 1`).
    pub containers: Option<Vec<ContainerInfo>>,
    /// `None` when machine information failed (`machine_scrape_error 1`).
    pub machine: Option<(MachineInfo, SystemTime)>,
    pub version: Option<VersionInfo>,
}

/// Milliseconds since the epoch.
pub(crate) fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Families keyed by name, created on first sample.
#[derive(Default)]
pub(crate) struct Families(BTreeMap<&'static str, ConstFamily>);

impl Families {
    pub(crate) fn add(
        &mut self,
        name: &'static str,
        kind: &'static str,
        help: &'static str,
        labels: Vec<(String, String)>,
        value: f64,
        timestamp_ms: Option<i64>,
    ) {
        self.0
            .entry(name)
            .or_insert_with(|| ConstFamily::new(name, kind, help))
            .push(labels, value, timestamp_ms);
    }

    pub(crate) fn into_vec(self) -> Vec<ConstFamily> {
        self.0.into_values().collect()
    }
}

/// The whole /metrics/cadvisor text of a snapshot.
pub fn render(snapshot: &CadvisorSnapshot, now: SystemTime) -> String {
    let mut fams = container_families(
        snapshot.containers.as_deref(),
        snapshot.version.as_ref(),
        now,
    );
    fams.extend(machine_families(snapshot.machine.as_ref()));
    render_const(fams)
}
