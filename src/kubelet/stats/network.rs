//! Network statistics as cadvisor gathers them for the summary: the
//! counters of `/proc/<pid>/net/dev` in a network namespace (the host's, or
//! a pod's through one of its processes), loopback and virtual Ethernet
//! ends left out; the summary's top-level counters are those of `eth0`.

use std::path::Path;
use std::time::SystemTime;

/// The interface the summary's top-level counters come from.
pub const DEFAULT_INTERFACE: &str = "eth0";

/// One interface's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceStats {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_errors: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
}

/// The interfaces of one network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkStats {
    pub time: Option<SystemTime>,
    pub interfaces: Vec<InterfaceStats>,
}

impl NetworkStats {
    /// The default interface's counters, when it has one.
    pub fn default_interface(&self) -> Option<&InterfaceStats> {
        self.interfaces.iter().find(|i| i.name == DEFAULT_INTERFACE)
    }
}

/// The summary's view of a `net/dev` file's interfaces (cadvisor's
/// parser, loopback and virtual Ethernet ends left out).
pub fn parse_net_dev(text: &str) -> Vec<InterfaceStats> {
    crate::cadvisor::container::parse_net_dev(text)
        .into_iter()
        .map(|i| InterfaceStats {
            name: i.name,
            rx_bytes: i.rx_bytes,
            rx_errors: i.rx_errors,
            tx_bytes: i.tx_bytes,
            tx_errors: i.tx_errors,
        })
        .collect()
}

/// The network statistics of the namespace `net_dev` belongs to (None when
/// the file cannot be read).
pub fn network_stats(net_dev: &Path, now: SystemTime) -> Option<NetworkStats> {
    let text = std::fs::read_to_string(net_dev).ok()?;
    Some(NetworkStats {
        time: Some(now),
        interfaces: parse_net_dev(&text),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_view_of_cadvisors_parse() {
        let text = "h1\nh2\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n  eth0: 123456 100 2 1 0 0 0 0 65432 90 3 0 0 0 0 0\n";
        let stats = NetworkStats {
            time: None,
            interfaces: parse_net_dev(text),
        };
        assert_eq!(
            stats.interfaces,
            vec![InterfaceStats {
                name: "eth0".into(),
                rx_bytes: 123456,
                rx_errors: 2,
                tx_bytes: 65432,
                tx_errors: 3,
            }]
        );
        assert_eq!(stats.default_interface().unwrap().rx_bytes, 123456);
    }
}
