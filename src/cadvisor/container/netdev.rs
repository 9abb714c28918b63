//! A network namespace's interface counters from `/proc/<pid>/net/dev`,
//! with the interfaces cadvisor leaves out (loopback, veth ends, docker and
//! nerdctl bridges).

use std::path::Path;

use super::types::InterfaceCounters;

/// Interfaces cadvisor ignores, by prefix.
const IGNORED_PREFIXES: [&str; 4] = ["lo", "veth", "docker", "nerdctl"];

/// Parses the text of a `net/dev` file.
pub fn parse_net_dev(text: &str) -> Vec<InterfaceCounters> {
    let mut out = Vec::new();
    for line in text.lines().skip(2) {
        let Some((name, counters)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if IGNORED_PREFIXES.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let f: Vec<u64> = counters
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if f.len() < 16 {
            continue;
        }
        out.push(InterfaceCounters {
            name: name.to_string(),
            rx_bytes: f[0],
            rx_packets: f[1],
            rx_errors: f[2],
            rx_dropped: f[3],
            tx_bytes: f[8],
            tx_packets: f[9],
            tx_errors: f[10],
            tx_dropped: f[11],
        });
    }
    out
}

/// The interfaces of the network namespace `net_dev` belongs to; `None`
/// when it cannot be read.
pub fn read_net_dev(net_dev: &Path) -> Option<Vec<InterfaceCounters>> {
    std::fs::read_to_string(net_dev)
        .ok()
        .map(|t| parse_net_dev(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_dev_without_loopback_and_veths() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 123456    100    2    1    0     0          0         0    65432      90    3    4    0     0       0          0
veth12ab: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0
  cni0: 7 1 0 0 0 0 0 0 8 1 0 0 0 0 0 0
short: 1 2 3
";
        let got = parse_net_dev(text);
        assert_eq!(
            got,
            vec![
                InterfaceCounters {
                    name: "eth0".into(),
                    rx_bytes: 123456,
                    rx_packets: 100,
                    rx_errors: 2,
                    rx_dropped: 1,
                    tx_bytes: 65432,
                    tx_packets: 90,
                    tx_errors: 3,
                    tx_dropped: 4,
                },
                InterfaceCounters {
                    name: "cni0".into(),
                    rx_bytes: 7,
                    rx_packets: 1,
                    tx_bytes: 8,
                    tx_packets: 1,
                    ..Default::default()
                },
            ]
        );
    }
}
