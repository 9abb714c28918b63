//! Pod DNS (pkg/kubelet/network/dns): resolv.conf parsing with the resolver
//! limits of the v1.25 line, the DNS config each dnsPolicy gets, and the pod
//! hostname and domain.

pub mod configurer;
pub mod hostname;
pub mod resolv;

pub use configurer::{DnsConfigurer, DnsEvent, EventTarget, PodDns};
pub use hostname::{HostnameError, generate_pod_hostname_and_domain, nodename_for_kernel};
pub use resolv::{DnsError, ResolvConf, parse_resolv_conf, read_resolv_conf};
