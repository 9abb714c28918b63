//! pkg/kubelet/nodestatus: the setters that fill in a Node's status, one per
//! part (addresses, machine info and capacity, versions, daemon endpoints,
//! images, conditions, volumes), plus the runtime state the Ready
//! condition reads and the seams the setters read from.

pub mod addresses;
pub mod gather;
pub mod lister;
pub mod patch;
pub mod registration;
pub use crate::kubelet::runtime_state;
pub mod setters;
pub mod sources;

pub use addresses::{
    AddressConfig, AddressError, HostNetwork, NodeIpFlagError, node_addresses, parse_node_ips,
};
pub use gather::StatusSources;
pub use lister::NodeLister;
pub use runtime_state::RuntimeState;
pub use setters::{
    SetterConfig, SetterError, StatusEvent, StatusInputs, VersionInfoError, set_node_status,
};
pub use sources::{
    CriRuntimeInfo, NoPressure, NoVolumes, PressureSource, RuntimeAdapter, RuntimeInfo,
    RuntimeInfoError, VolumesInUse,
};

/// GOARCH of this build (`amd64`, `arm64`, ...), as node labels and node
/// info spell it.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "arm" => "arm",
        "riscv64" => "riscv64",
        other => other,
    }
}

/// GOOS of this build.
pub fn go_os() -> &'static str {
    std::env::consts::OS
}
