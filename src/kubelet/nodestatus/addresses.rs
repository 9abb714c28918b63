//! Node addresses without a cloud provider (the NodeAddress setter): the
//! InternalIP is `--node-ip` when given; else the hostname if it is an IP;
//! else the first valid address the node name resolves to (IPv4 first);
//! else the address of the interface that carries the default route. The
//! Hostname address is the kubelet's hostname.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::NodeAddress;

/// A malformed `--node-ip` flag.
#[derive(Debug, thiserror::Error)]
pub enum NodeIpFlagError {
    #[error("--node-ip {arg:?}: {value:?} is not a valid IP address")]
    NotAnIp {
        arg: String,
        value: String,
        #[source]
        source: std::net::AddrParseError,
    },
    #[error("--node-ip {arg:?}: dual-stack --node-ip must have one IPv4 and one IPv6 address")]
    SameFamily { arg: String },
    #[error("--node-ip {arg:?}: must contain at most two IP addresses")]
    TooMany { arg: String },
}

/// Choosing or validating the node's address failed.
#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("nodeIP can't be loopback address")]
    Loopback,
    #[error("nodeIP can't be a multicast address")]
    Multicast,
    #[error("nodeIP can't be a link-local unicast address")]
    LinkLocal,
    #[error("nodeIP can't be an all zeros address")]
    Unspecified,
    #[error("node IP: {0:?} not found in the host's network interfaces")]
    NotOnHost(IpAddr),
    /// Listing the host's interfaces failed.
    #[error("{0}")]
    Interfaces(#[source] nix::Error),
    #[error("{}: {source}", path.display())]
    RouteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no default routes found in {v4:?} or {v6:?}")]
    NoDefaultRoutes { v4: PathBuf, v6: PathBuf },
    #[error("no acceptable interface with global unicast address found on host")]
    NoGlobalInterface,
    #[error("unable to select an IP from default routes.")]
    NoRouteAddress,
    #[error("failed to validate nodeIP: {0}")]
    InvalidNodeIp(#[source] Box<AddressError>),
    #[error("failed to validate secondaryNodeIP: {0}")]
    InvalidSecondaryNodeIp(#[source] Box<AddressError>),
    /// No node IP: the interface choice failed (`source`), after the last
    /// resolved address of the node name was rejected (`resolved`).
    #[error("can't get ip address of node {node}. error: {source}{}", semicolon(.resolved))]
    NoNodeIp {
        node: String,
        #[source]
        source: Box<AddressError>,
        resolved: Option<Box<AddressError>>,
    },
    /// The blocking task that read the host panicked or was cancelled.
    #[error("{0}")]
    Blocking(#[source] tokio::task::JoinError),
}

fn semicolon(e: &Option<Box<AddressError>>) -> String {
    e.as_ref().map(|e| format!("; {e}")).unwrap_or_default()
}

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
    pub fn addrs(&self) -> Result<Vec<IfAddr>, AddressError> {
        if let Some(i) = &self.interfaces {
            return Ok(i.clone());
        }
        use nix::net::if_::InterfaceFlags;
        let list = nix::ifaddrs::getifaddrs().map_err(AddressError::Interfaces)?;
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
pub fn parse_node_ips(arg: &str) -> Result<Vec<IpAddr>, NodeIpFlagError> {
    if arg.trim().is_empty() {
        return Ok(Vec::new());
    }
    let ips: Vec<IpAddr> = arg
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<IpAddr>()
                .map_err(|source| NodeIpFlagError::NotAnIp {
                    arg: arg.to_string(),
                    value: s.trim().to_string(),
                    source,
                })
        })
        .collect::<Result<_, _>>()?;
    match ips.as_slice() {
        [_] => Ok(ips),
        [a, b] if a.is_ipv4() != b.is_ipv4() => Ok(ips),
        [_, _] => Err(NodeIpFlagError::SameFamily {
            arg: arg.to_string(),
        }),
        _ => Err(NodeIpFlagError::TooMany {
            arg: arg.to_string(),
        }),
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
pub fn validate_node_ip(ip: &IpAddr, host: &HostNetwork) -> Result<(), AddressError> {
    if ip.is_loopback() {
        return Err(AddressError::Loopback);
    }
    if ip.is_multicast() {
        return Err(AddressError::Multicast);
    }
    if is_link_local_unicast(ip) {
        return Err(AddressError::LinkLocal);
    }
    if ip.is_unspecified() {
        return Err(AddressError::Unspecified);
    }
    if host.addrs()?.iter().any(|a| a.ip == *ip) {
        return Ok(());
    }
    Err(AddressError::NotOnHost(*ip))
}

/// A default route: (interface, IPv4?).
fn default_routes(host: &HostNetwork) -> Result<Vec<(String, bool)>, AddressError> {
    let read = |p: &Path| std::fs::read_to_string(p);
    let v4 = read(&host.ipv4_route_file).map_err(|source| AddressError::RouteFile {
        path: host.ipv4_route_file.clone(),
        source,
    })?;
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
        return Err(AddressError::NoDefaultRoutes {
            v4: host.ipv4_route_file.clone(),
            v6: host.ipv6_route_file.clone(),
        });
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
pub fn choose_host_interface(host: &HostNetwork, prefer_v6: bool) -> Result<IpAddr, AddressError> {
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
        return Err(AddressError::NoGlobalInterface);
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
    Err(AddressError::NoRouteAddress)
}

/// The node's addresses: InternalIP and Hostname.
pub async fn node_addresses(
    cfg: &AddressConfig,
    node_name: &str,
) -> Result<Vec<NodeAddress>, AddressError> {
    let node_ip = cfg.node_ips.first().copied();
    let specified = node_ip.filter(|ip| !ip.is_unspecified());
    let prefer_v4 = node_ip.is_none_or(|ip| ip.is_ipv4());
    let host = cfg.host.clone();
    if let Some(ip) = specified {
        let h = host.clone();
        blocking(move || validate_node_ip(&ip, &h))
            .await
            .map_err(|e| AddressError::InvalidNodeIp(Box::new(e)))?;
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
            .map_err(|e| AddressError::InvalidSecondaryNodeIp(Box::new(e)))?;
    }
    let ip = if let Some(ip) = specified {
        ip
    } else if let Ok(ip) = cfg.hostname.parse::<IpAddr>() {
        ip
    } else {
        let mut chosen: Option<IpAddr> = None;
        let mut last_err: Option<AddressError> = None;
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
                    Err(e) => last_err = Some(e),
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
                    .map_err(|e| AddressError::NoNodeIp {
                        node: node_name.to_string(),
                        source: Box::new(e),
                        resolved: last_err.map(Box::new),
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
    f: impl FnOnce() -> Result<T, AddressError> + Send + 'static,
) -> Result<T, AddressError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(AddressError::Blocking)?
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
    fn messages_read_as_before() {
        let msg = |arg: &str| parse_node_ips(arg).unwrap_err().to_string();
        assert_eq!(
            msg("nope"),
            r#"--node-ip "nope": "nope" is not a valid IP address"#
        );
        assert_eq!(
            msg("10.0.0.1,10.0.0.2"),
            r#"--node-ip "10.0.0.1,10.0.0.2": dual-stack --node-ip must have one IPv4 and one IPv6 address"#
        );
        let no_ip = |resolved: Option<AddressError>| AddressError::NoNodeIp {
            node: "n1".into(),
            source: Box::new(AddressError::NoRouteAddress),
            resolved: resolved.map(Box::new),
        };
        assert_eq!(
            no_ip(None).to_string(),
            "can't get ip address of node n1. error: unable to select an IP from default routes."
        );
        assert_eq!(
            no_ip(Some(AddressError::Loopback)).to_string(),
            "can't get ip address of node n1. error: unable to select an IP from default routes.; nodeIP can't be loopback address"
        );
        let invalid = AddressError::InvalidNodeIp(Box::new(AddressError::Unspecified));
        assert_eq!(
            invalid.to_string(),
            "failed to validate nodeIP: nodeIP can't be an all zeros address"
        );
        assert!(std::error::Error::source(&invalid).is_some());
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
            let got = validate_node_ip(&ip.parse().unwrap(), &h)
                .err()
                .map(|e| e.to_string());
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
                .to_string()
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
                (Err(e), Err(w)) => assert!(e.to_string().starts_with(w), "{e}"),
                (got, want) => panic!("{ips} {hostname}: got {got:?}, want {want:?}"),
            }
        }
    }
}
