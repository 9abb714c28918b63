//! Node addresses without a cloud provider (the NodeAddress setter): the
//! InternalIP is `--node-ip` when given; else the hostname if it is an IP;
//! else the first valid address the node name resolves to (IPv4 first);
//! else the address of the interface that carries the default route. The
//! Hostname address is the kubelet's hostname.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::NodeAddress;

/// A host interface address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    pub interface: String,
    pub ip: IpAddr,
    pub up: bool,
    pub loopback: bool,
    pub point_to_point: bool,
}

/// Where the address choice looks: interfaces and routing tables. The real
/// host by default; tests describe other hosts.
#[derive(Debug, Clone)]
pub struct HostNetwork {
    pub ipv4_route_file: PathBuf,
    pub ipv6_route_file: PathBuf,
    /// `None`: read the host's interfaces.
    pub interfaces: Option<Vec<IfAddr>>,
}

impl Default for HostNetwork {
    fn default() -> Self {
        HostNetwork {
            ipv4_route_file: PathBuf::from("/proc/net/route"),
            ipv6_route_file: PathBuf::from("/proc/net/ipv6_route"),
            interfaces: None,
        }
    }
}

impl HostNetwork {
    /// Every interface address (blocking).
    pub fn addrs(&self) -> Result<Vec<IfAddr>, String> {
        if let Some(i) = &self.interfaces {
            return Ok(i.clone());
        }
        use nix::net::if_::InterfaceFlags;
        let list = nix::ifaddrs::getifaddrs().map_err(|e| e.to_string())?;
        Ok(list
            .filter_map(|a| {
                let addr = a.address?;
                let ip = if let Some(v4) = addr.as_sockaddr_in() {
                    IpAddr::V4(v4.ip())
                } else if let Some(v6) = addr.as_sockaddr_in6() {
                    IpAddr::V6(v6.ip())
                } else {
                    return None;
                };
                Some(IfAddr {
                    interface: a.interface_name,
                    ip,
                    up: a.flags.contains(InterfaceFlags::IFF_UP),
                    loopback: a.flags.contains(InterfaceFlags::IFF_LOOPBACK),
                    point_to_point: a.flags.contains(InterfaceFlags::IFF_POINTOPOINT),
                })
            })
            .collect())
    }
}

/// The address settings of the kubelet.
#[derive(Debug, Clone, Default)]
pub struct AddressConfig {
    /// `--node-ip`, parsed (one, or two for dual-stack).
    pub node_ips: Vec<IpAddr>,
    /// The kubelet's hostname (the Hostname address).
    pub hostname: String,
    pub host: HostNetwork,
}

/// Parses `--node-ip`: empty, one IP, or two of different families.
pub fn parse_node_ips(arg: &str) -> Result<Vec<IpAddr>, String> {
    if arg.trim().is_empty() {
        return Ok(Vec::new());
    }
    let ips: Vec<IpAddr> = arg
        .split(',')
        .map(|s| {
            s.trim().parse::<IpAddr>().map_err(|_| {
                format!(
                    "--node-ip {arg:?}: {:?} is not a valid IP address",
                    s.trim()
                )
            })
        })
        .collect::<Result<_, _>>()?;
    match ips.as_slice() {
        [_] => Ok(ips),
        [a, b] if a.is_ipv4() != b.is_ipv4() => Ok(ips),
        [_, _] => Err(format!(
            "--node-ip {arg:?}: dual-stack --node-ip must have one IPv4 and one IPv6 address"
        )),
        _ => Err(format!(
            "--node-ip {arg:?}: must contain at most two IP addresses"
        )),
    }
}

fn is_link_local_unicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// Go's IsGlobalUnicast: not unspecified, loopback, multicast, link-local
/// or the IPv4 broadcast address.
pub fn is_global_unicast(ip: &IpAddr) -> bool {
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || is_link_local_unicast(ip)
        || broadcast)
}

/// The node IP must be a usable unicast address of one of this host's
/// interfaces.
pub fn validate_node_ip(ip: &IpAddr, host: &HostNetwork) -> Result<(), String> {
    if ip.is_loopback() {
        return Err("nodeIP can't be loopback address".into());
    }
    if ip.is_multicast() {
        return Err("nodeIP can't be a multicast address".into());
    }
    if is_link_local_unicast(ip) {
        return Err("nodeIP can't be a link-local unicast address".into());
    }
    if ip.is_unspecified() {
        return Err("nodeIP can't be an all zeros address".into());
    }
    if host.addrs()?.iter().any(|a| a.ip == *ip) {
        return Ok(());
    }
    Err(format!(
        "node IP: {ip:?} not found in the host's network interfaces"
    ))
}

/// A default route: (interface, IPv4?).
fn default_routes(host: &HostNetwork) -> Result<Vec<(String, bool)>, String> {
    let read = |p: &Path| std::fs::read_to_string(p);
    let v4 = read(&host.ipv4_route_file)
        .map_err(|e| format!("{}: {e}", host.ipv4_route_file.display()))?;
    let mut routes = Vec::new();
    for line in v4.lines() {
        if line.starts_with("Iface") {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() > 2 && f[1] == "00000000" {
            routes.push((f[0].to_string(), true));
        }
    }
    if let Ok(v6) = read(&host.ipv6_route_file) {
        for line in v6.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let zero = "00000000000000000000000000000000";
            if f.len() > 9 && f[0] == zero && f[4] != zero {
                routes.push((f[9].to_string(), false));
            }
        }
    }
    if routes.is_empty() {
        return Err(format!(
            "no default routes found in {:?} or {:?}",
            host.ipv4_route_file, host.ipv6_route_file
        ));
    }
    Ok(routes)
}

fn global_ip_of<'a>(addrs: &'a [IfAddr], iface: &str, v4: bool) -> Option<&'a IfAddr> {
    addrs
        .iter()
        .filter(|a| a.interface == iface && a.up)
        .find(|a| a.ip.is_ipv4() == v4 && is_global_unicast(&a.ip))
}

/// The IP of the interface carrying a default route (Go's
/// ChooseHostInterface, IPv4 preferred unless `prefer_v6`).
pub fn choose_host_interface(host: &HostNetwork, prefer_v6: bool) -> Result<IpAddr, String> {
    let families = if prefer_v6 {
        [false, true]
    } else {
        [true, false]
    };
    let addrs = host.addrs()?;
    if !host.ipv4_route_file.exists() {
        for v4 in families {
            if let Some(a) = addrs.iter().find(|a| {
                a.up && !a.loopback
                    && !a.point_to_point
                    && a.ip.is_ipv4() == v4
                    && is_global_unicast(&a.ip)
            }) {
                return Ok(a.ip);
            }
        }
        return Err("no acceptable interface with global unicast address found on host".into());
    }
    let routes = default_routes(host)?;
    for v4 in families {
        for (iface, route_v4) in &routes {
            if *route_v4 != v4 {
                continue;
            }
            if let Some(a) = global_ip_of(&addrs, iface, v4) {
                return Ok(a.ip);
            }
            if let Some(a) = addrs
                .iter()
                .find(|a| a.up && a.loopback && a.ip.is_ipv4() == v4 && is_global_unicast(&a.ip))
            {
                return Ok(a.ip);
            }
        }
    }
    Err("unable to select an IP from default routes.".into())
}

/// The node's addresses: InternalIP and Hostname.
pub async fn node_addresses(
    cfg: &AddressConfig,
    node_name: &str,
) -> Result<Vec<NodeAddress>, String> {
    let node_ip = cfg.node_ips.first().copied();
    let specified = node_ip.filter(|ip| !ip.is_unspecified());
    let prefer_v4 = node_ip.is_none_or(|ip| ip.is_ipv4());
    let host = cfg.host.clone();
    if let Some(ip) = specified {
        let h = host.clone();
        blocking(move || validate_node_ip(&ip, &h))
            .await
            .map_err(|e| format!("failed to validate nodeIP: {e}"))?;
        crate::vlog!(4, ip = %ip, "Using node IP");
    }
    if let Some(second) = cfg
        .node_ips
        .get(1)
        .copied()
        .filter(|ip| !ip.is_unspecified())
    {
        let h = host.clone();
        blocking(move || validate_node_ip(&second, &h))
            .await
            .map_err(|e| format!("failed to validate secondaryNodeIP: {e}"))?;
    }
    let ip = if let Some(ip) = specified {
        ip
    } else if let Ok(ip) = cfg.hostname.parse::<IpAddr>() {
        ip
    } else {
        let mut chosen: Option<IpAddr> = None;
        let mut last_err = String::new();
        if let Ok(addrs) = tokio::net::lookup_host((node_name, 0)).await {
            let resolved: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            for a in resolved {
                let h = host.clone();
                match blocking(move || validate_node_ip(&a, &h)).await {
                    Ok(()) if a.is_ipv4() == prefer_v4 => {
                        chosen = Some(a);
                        break;
                    }
                    Ok(()) => {
                        chosen.get_or_insert(a);
                    }
                    Err(e) => last_err = e,
                }
            }
        }
        match chosen {
            Some(ip) => ip,
            None => {
                let h = host.clone();
                let prefer_v6 = node_ip.is_some_and(|ip| ip.is_ipv6());
                blocking(move || choose_host_interface(&h, prefer_v6))
                    .await
                    .map_err(|e| {
                        let e = if last_err.is_empty() {
                            e
                        } else {
                            format!("{e}; {last_err}")
                        };
                        format!("can't get ip address of node {node_name}. error: {e}")
                    })?
            }
        }
    };
    Ok(vec![
        NodeAddress {
            type_: "InternalIP".into(),
            address: ip.to_string(),
        },
        NodeAddress {
            type_: "Hostname".into(),
            address: cfg.hostname.clone(),
        },
    ])
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifa(name: &str, ip: &str, lo: bool) -> IfAddr {
        IfAddr {
            interface: name.into(),
            ip: ip.parse().unwrap(),
            up: true,
            loopback: lo,
            point_to_point: false,
        }
    }

    fn host(dir: &Path, v4_routes: &str, ifaces: Vec<IfAddr>) -> HostNetwork {
        let r4 = dir.join("route");
        std::fs::write(&r4, v4_routes).unwrap();
        HostNetwork {
            ipv4_route_file: r4,
            ipv6_route_file: dir.join("ipv6_route-missing"),
            interfaces: Some(ifaces),
        }
    }

    const ROUTES: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

    #[test]
    fn parse_node_ips_table() {
        let cases: &[(&str, Result<usize, ()>)] = &[
            ("", Ok(0)),
            ("10.0.0.1", Ok(1)),
            ("10.0.0.1,fd00::1", Ok(2)),
            ("10.0.0.1,10.0.0.2", Err(())),
            ("nope", Err(())),
            ("10.0.0.1,fd00::1,10.0.0.2", Err(())),
        ];
        for (arg, want) in cases {
            assert_eq!(
                parse_node_ips(arg).map(|v| v.len()).map_err(|_| ()),
                *want,
                "{arg}"
            );
        }
    }

    #[test]
    fn validate_table() {
        let dir = tempfile::tempdir().unwrap();
        let h = host(
            dir.path(),
            ROUTES,
            vec![
                ifa("lo", "127.0.0.1", true),
                ifa("eth0", "192.0.2.2", false),
            ],
        );
        let cases = [
            ("192.0.2.2", None),
            ("127.0.0.1", Some("nodeIP can't be loopback address")),
            ("224.0.0.1", Some("nodeIP can't be a multicast address")),
            (
                "169.254.1.1",
                Some("nodeIP can't be a link-local unicast address"),
            ),
            ("0.0.0.0", Some("nodeIP can't be an all zeros address")),
            (
                "10.9.9.9",
                Some("node IP: 10.9.9.9 not found in the host's network interfaces"),
            ),
        ];
        for (ip, want) in cases {
            let got = validate_node_ip(&ip.parse().unwrap(), &h).err();
            assert_eq!(got.as_deref(), want, "{ip}");
        }
    }

    #[test]
    fn default_route_interface_wins() {
        let dir = tempfile::tempdir().unwrap();
        let h = host(
            dir.path(),
            ROUTES,
            vec![
                ifa("lo", "127.0.0.1", true),
                ifa("cni0", "10.88.0.1", false),
                ifa("eth0", "fe80::1", false),
                ifa("eth0", "192.0.2.2", false),
            ],
        );
        assert_eq!(
            choose_host_interface(&h, false).unwrap().to_string(),
            "192.0.2.2"
        );
        // No default route at all.
        let none = host(
            dir.path(),
            "Iface\tDestination\n",
            vec![ifa("eth0", "192.0.2.2", false)],
        );
        assert!(
            choose_host_interface(&none, false)
                .unwrap_err()
                .contains("no default routes")
        );
        // No routing table: the first global address of an up, non-loopback interface.
        let mut no_table = h.clone();
        no_table.ipv4_route_file = dir.path().join("absent");
        assert_eq!(
            choose_host_interface(&no_table, false).unwrap().to_string(),
            "10.88.0.1"
        );
    }

    #[tokio::test]
    async fn addresses_table() {
        let dir = tempfile::tempdir().unwrap();
        let h = host(
            dir.path(),
            ROUTES,
            vec![
                ifa("lo", "127.0.0.1", true),
                ifa("eth0", "192.0.2.2", false),
            ],
        );
        // (node ips, hostname, node name, want internal ip or error)
        let cases: Vec<(&str, &str, &str, Result<&str, &str>)> = vec![
            ("192.0.2.2", "h1", "n1", Ok("192.0.2.2")),
            (
                "10.1.1.1",
                "h1",
                "n1",
                Err("failed to validate nodeIP: node IP: 10.1.1.1 not found"),
            ),
            ("", "192.0.2.77", "n1", Ok("192.0.2.77")),
            // localhost resolves to loopback only: the default route decides.
            ("", "h1", "localhost", Ok("192.0.2.2")),
            ("0.0.0.0", "h1", "localhost", Ok("192.0.2.2")),
        ];
        for (ips, hostname, node, want) in cases {
            let cfg = AddressConfig {
                node_ips: parse_node_ips(ips).unwrap(),
                hostname: hostname.into(),
                host: h.clone(),
            };
            match (node_addresses(&cfg, node).await, want) {
                (Ok(a), Ok(ip)) => {
                    assert_eq!(a[0].type_, "InternalIP");
                    assert_eq!(a[0].address, ip, "{ips} {hostname}");
                    assert_eq!(
                        (a[1].type_.as_str(), a[1].address.as_str()),
                        ("Hostname", hostname)
                    );
                }
                (Err(e), Err(w)) => assert!(e.starts_with(w), "{e}"),
                (got, want) => panic!("{ips} {hostname}: got {got:?}, want {want:?}"),
            }
        }
    }
}
