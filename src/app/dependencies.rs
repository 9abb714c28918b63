//! Dependencies (Go's UnsecuredDependencies): the injectable parts of the
//! host the kubelet works on, built without starting anything. Tests swap
//! a seam (a fake swap table, another /proc, a clock) before calling
//! `app::run::run_with`; production uses [`Dependencies::unsecured`].
//!
//! Also here: the container manager's configuration from the kubelet's
//! (the NodeConfig Go's run() assembles) and `--node-ip` parsing.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use super::server::KubeletServer;
use crate::apis::eviction::parse_threshold_config;
use crate::cadvisor::{HostMachineInfo, MachineInfoProvider};
use crate::cm::cpumanager::{CpuManagerConfig, OptionGates};
use crate::cm::cpuset::CpuSet;
use crate::cm::memorymanager::MemoryManagerConfig;
use crate::cm::node_allocatable::NodeAllocatableConfig;
use crate::cm::topologymanager::TopologyManagerConfig;
use crate::cm::{CgroupDriver, CmFeatureGates, HostPaths, NodeConfig, ResourceList};
use crate::features;
use crate::util::clock::{Clock, RealClock};
use crate::util::oom::OomAdjuster;
use crate::util::quantity::Quantity;
use crate::util::swap::SwapCheck;

/// Why the dependencies or the node configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DependenciesError {
    #[error("failed to parse {field}: {reason}")]
    Field { field: &'static str, reason: String },
    #[error("bad --node-ip {0:?}; must contain either a single IP or a dual-stack pair of IPs")]
    NodeIp(String),
    #[error("dual-stack --node-ip {0:?} cannot include '0.0.0.0' or '::'")]
    NodeIpUnspecified(String),
}

/// The host seams of one kubelet.
#[derive(Clone)]
pub struct Dependencies {
    /// The swap table (`failSwapOn`).
    pub swap: SwapCheck,
    /// /proc, sysctls, the systemd marker, huge pages (the container manager).
    pub host_paths: HostPaths,
    /// Adjusts the kubelet's own OOM score.
    pub oom: OomAdjuster,
    /// The machine (cAdvisor's MachineInfo).
    pub machine_info: Arc<dyn MachineInfoProvider>,
    pub clock: Arc<dyn Clock>,
    /// The node's hosts file, copied into host-network pods.
    pub node_hosts_file: PathBuf,
    /// Where pod logs go (`/var/log/pods`).
    pub pod_logs_root: PathBuf,
    /// Where the per-container log symlinks go (`/var/log/containers`).
    pub container_logs_dir: PathBuf,
}

/// Moves both log directories under one root (`<root>/pods`,
/// `<root>/containers`): a test and bench seam, so runs on a shared machine
/// leave nothing in /var/log.
pub const LOG_ROOT_ENV: &str = "KUBELET_RS_LOG_ROOT";

impl std::fmt::Debug for Dependencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dependencies")
            .field("swap", &self.swap)
            .field("host_paths", &self.host_paths)
            .finish_non_exhaustive()
    }
}

impl Dependencies {
    /// The real host (UnsecuredDependencies). Pure construction.
    pub fn unsecured(_server: &KubeletServer) -> Self {
        Dependencies {
            swap: SwapCheck::new(),
            host_paths: HostPaths::default(),
            oom: OomAdjuster::new(),
            machine_info: Arc::new(HostMachineInfo::default()),
            clock: Arc::new(RealClock),
            node_hosts_file: PathBuf::from("/etc/hosts"),
            pod_logs_root: PathBuf::from(
                crate::kubelet::kuberuntime::log_paths::POD_LOGS_ROOT_DIRECTORY,
            ),
            container_logs_dir: PathBuf::from(
                crate::kubelet::kuberuntime::log_paths::LEGACY_CONTAINER_LOGS_DIR,
            ),
        }
        .with_log_root_from_env()
    }

    /// Applies [`LOG_ROOT_ENV`] when set.
    pub fn with_log_root_from_env(mut self) -> Self {
        if let Some(root) = std::env::var_os(LOG_ROOT_ENV).filter(|v| !v.is_empty()) {
            let root = PathBuf::from(root);
            self.pod_logs_root = root.join("pods");
            self.container_logs_dir = root.join("containers");
        }
        self
    }

    /// (pod logs root, container logs directory).
    pub fn log_dirs(&self) -> (PathBuf, PathBuf) {
        (self.pod_logs_root.clone(), self.container_logs_dir.clone())
    }
}

/// `--node-ip`, as RunKubelet parses it: unparsable entries are ignored
/// (logged); at most a dual-stack pair.
pub fn parse_node_ips(flag: &str) -> Result<Vec<IpAddr>, DependenciesError> {
    if flag.is_empty() {
        return Ok(Vec::new());
    }
    let mut ips = Vec::new();
    for raw in flag.split(',') {
        match raw.trim().parse::<IpAddr>() {
            Ok(ip) => ips.push(ip),
            Err(_) => tracing::info!(ip = raw, "Could not parse --node-ip ignoring"),
        }
    }
    if ips.len() > 2 || (ips.len() == 2 && ips[0].is_ipv6() == ips[1].is_ipv6()) {
        return Err(DependenciesError::NodeIp(flag.to_string()));
    }
    if ips.len() == 2 && ips.iter().any(IpAddr::is_unspecified) {
        return Err(DependenciesError::NodeIpUnspecified(flag.to_string()));
    }
    Ok(ips)
}

fn parse_resource_list(
    field: &'static str,
    map: &BTreeMap<String, String>,
) -> Result<ResourceList, DependenciesError> {
    let mut out = ResourceList::new();
    for (name, value) in map {
        let q: Quantity = value.parse().map_err(|e| DependenciesError::Field {
            field,
            reason: format!("{name}={value}: {e}"),
        })?;
        out.insert(name.clone(), q);
    }
    Ok(out)
}

fn parse_qos_reserved(
    map: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, i64>, DependenciesError> {
    let mut out = BTreeMap::new();
    for (name, value) in map {
        let pct = value
            .strip_suffix('%')
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|v| (0..=100).contains(v))
            .ok_or_else(|| DependenciesError::Field {
                field: "qosReserved",
                reason: format!("invalid percentage {value:?} for {name}"),
            })?;
        out.insert(name.clone(), pct);
    }
    Ok(out)
}

/// The container manager's configuration from the kubelet's (run()).
pub fn node_config(
    server: &KubeletServer,
    node_name: &str,
) -> Result<NodeConfig, DependenciesError> {
    let c = &server.config;
    let gate = &server.feature_gate;
    let driver = match c.cgroup_driver.as_str() {
        "systemd" => CgroupDriver::Systemd,
        _ => CgroupDriver::Cgroupfs,
    };
    let thresholds = if server
        .flags
        .experimental_node_allocatable_ignore_eviction_threshold
    {
        Vec::new()
    } else {
        parse_threshold_config(
            &c.enforce_node_allocatable,
            &c.eviction_hard,
            &c.eviction_soft,
            &c.eviction_soft_grace_period,
            &c.eviction_minimum_reclaim,
        )
        .map_err(|e| DependenciesError::Field {
            field: "evictionHard",
            reason: e.to_string(),
        })?
    };
    let reserved_cpus = if c.reserved_system_cpus.is_empty() {
        CpuSet::new()
    } else {
        CpuSet::parse(&c.reserved_system_cpus).map_err(|e| DependenciesError::Field {
            field: "reservedSystemCPUs",
            reason: e.to_string(),
        })?
    };
    let cpu_manager_on = gate.enabled(features::CPU_MANAGER);
    if cpu_manager_on
        && !gate.enabled(features::CPU_MANAGER_POLICY_OPTIONS)
        && !c.cpu_manager_policy_options.is_empty()
    {
        let options: Vec<String> = c
            .cpu_manager_policy_options
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        return Err(DependenciesError::Field {
            field: "cpuManagerPolicyOptions",
            reason: format!(
                "CPU Manager policy options map[{}] require feature gates \"CPUManager\", \"CPUManagerPolicyOptions\" enabled",
                options.join(" ")
            ),
        });
    }
    // reservedSystemCPUs overrides the cpu of kubeReserved and systemReserved.
    let (mut kube_reserved, mut system_reserved) =
        (c.kube_reserved.clone(), c.system_reserved.clone());
    crate::cm::capacity::apply_reserved_cpus(
        &mut kube_reserved,
        &mut system_reserved,
        &reserved_cpus,
    );
    let mut config = NodeConfig {
        node_name: node_name.to_string(),
        runtime_cgroups_name: server.flags.runtime_cgroups.clone(),
        system_cgroups_name: c.system_cgroups.clone(),
        kubelet_cgroups_name: c.kubelet_cgroups.clone(),
        kubelet_oom_score_adj: c.oom_score_adj,
        cgroups_per_qos: c.cgroups_per_qos,
        cgroup_root: c.cgroup_root.clone(),
        cgroup_driver: driver,
        kubelet_root_dir: PathBuf::from(&server.flags.root_directory),
        protect_kernel_defaults: c.protect_kernel_defaults,
        node_allocatable: NodeAllocatableConfig {
            kube_reserved_cgroup_name: c.kube_reserved_cgroup.clone(),
            system_reserved_cgroup_name: c.system_reserved_cgroup.clone(),
            reserved_system_cpus: reserved_cpus,
            enforce_node_allocatable: c.enforce_node_allocatable.iter().cloned().collect(),
            kube_reserved: parse_resource_list("kubeReserved", &kube_reserved)?,
            system_reserved: parse_resource_list("systemReserved", &system_reserved)?,
            hard_eviction_thresholds: thresholds,
        },
        qos_reserved: parse_qos_reserved(&c.qos_reserved)?,
        pod_pids_limit: c.pod_pids_limit,
        enforce_cpu_limits: c.cpu_cfs_quota,
        cpu_cfs_quota_period: c.cpu_cfs_quota_period.to_std(),
        fail_swap_on: c.fail_swap_on,
        features: CmFeatureGates {
            qos_reserved: gate.enabled(features::QOS_RESERVED),
            memory_qos: gate.enabled(features::MEMORY_QOS),
            custom_cpu_cfs_quota_period: gate.enabled(features::CPU_CFS_QUOTA_PERIOD),
            local_storage_capacity_isolation: c.local_storage_capacity_isolation,
            cpu_manager: cpu_manager_on,
            topology_manager: gate.enabled(features::TOPOLOGY_MANAGER),
            memory_manager: gate.enabled(features::MEMORY_MANAGER),
            device_plugins: gate.enabled(features::DEVICE_PLUGINS),
        },
        cpu_manager: CpuManagerConfig {
            policy: c.cpu_manager_policy.clone(),
            options: c.cpu_manager_policy_options.clone(),
            reconcile_period: c.cpu_manager_reconcile_period.to_std(),
            option_gates: OptionGates {
                alpha: gate.enabled(features::CPU_MANAGER_POLICY_ALPHA_OPTIONS),
                beta: gate.enabled(features::CPU_MANAGER_POLICY_BETA_OPTIONS),
            },
            topology_policy: if gate.enabled(features::TOPOLOGY_MANAGER) {
                c.topology_manager_policy.clone()
            } else {
                "none".into()
            },
        },
        topology_manager: TopologyManagerConfig {
            policy: c.topology_manager_policy.clone(),
            scope: c.topology_manager_scope.clone(),
        },
        memory_manager: MemoryManagerConfig {
            policy: c.memory_manager_policy.clone(),
            reserved_memory: c.reserved_memory.clone(),
        },
    };
    config.apply_cgroup_root_default();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ip_table() {
        let cases: [(&str, Result<usize, &str>); 6] = [
            ("", Ok(0)),
            ("10.0.0.1", Ok(1)),
            ("10.0.0.1,fd00::1", Ok(2)),
            ("10.0.0.1,nonsense", Ok(1)),
            ("10.0.0.1,10.0.0.2", Err("must contain either a single IP")),
            ("0.0.0.0,::1", Err("cannot include '0.0.0.0' or '::'")),
        ];
        for (flag, want) in cases {
            match (parse_node_ips(flag), want) {
                (Ok(ips), Ok(n)) => assert_eq!(ips.len(), n, "{flag}"),
                (Err(e), Err(text)) => assert!(e.to_string().contains(text), "{flag}: {e}"),
                (got, want) => panic!("{flag}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn node_config_follows_the_configuration() {
        let mut config = crate::apis::config::types::KubeletConfiguration::v1beta1_defaults();
        config.cgroup_root = String::new();
        config.kube_reserved = [("cpu".to_string(), "100m".to_string())].into();
        config.qos_reserved = [("memory".to_string(), "50%".to_string())].into();
        config.cgroup_driver = "systemd".into();
        let server = KubeletServer::new(Default::default(), config, Default::default());
        let nc = node_config(&server, "node-a").unwrap();
        assert_eq!(nc.node_name, "node-a");
        assert_eq!(nc.cgroup_root, "/", "cgroupsPerQOS defaults the root to /");
        assert_eq!(nc.cgroup_driver, CgroupDriver::Systemd);
        assert_eq!(nc.node_allocatable.kube_reserved["cpu"].milli_value(), 100);
        assert_eq!(nc.qos_reserved["memory"], 50);
        assert!(
            !nc.node_allocatable.hard_eviction_thresholds.is_empty(),
            "default evictionHard"
        );
        // reservedSystemCPUs: the cpu reservation is their count, as a
        // system reservation; the CPU manager settings pass through.
        let mut pinned = crate::apis::config::types::KubeletConfiguration::v1beta1_defaults();
        pinned.reserved_system_cpus = "0".into();
        pinned.kube_reserved = [("cpu".to_string(), "500m".to_string())].into();
        pinned.cpu_manager_policy = "static".into();
        pinned.cpu_manager_policy_options =
            [("full-pcpus-only".to_string(), "true".to_string())].into();
        let server = KubeletServer::new(Default::default(), pinned.clone(), Default::default());
        let nc = node_config(&server, "n").unwrap();
        let na = &nc.node_allocatable;
        assert!(!na.kube_reserved.contains_key("cpu"));
        assert_eq!(na.system_reserved["cpu"].milli_value(), 1000);
        assert_eq!(na.reserved_system_cpus.to_string(), "0");
        assert_eq!(nc.cpu_manager.policy, "static");
        assert_eq!(nc.cpu_manager.options["full-pcpus-only"], "true");
        assert!(nc.features.cpu_manager);
        let mut gate = crate::features::FeatureGate::default();
        gate.set("CPUManagerPolicyOptions=false").unwrap();
        let server = KubeletServer::new(Default::default(), pinned, gate);
        let err = node_config(&server, "n").unwrap_err().to_string();
        assert!(
            err.contains("cpuManagerPolicyOptions")
                && err.contains("CPU Manager policy options map[full-pcpus-only:true] require feature gates \"CPUManager\", \"CPUManagerPolicyOptions\" enabled"),
            "{err}"
        );
        let mut bad = crate::apis::config::types::KubeletConfiguration::v1beta1_defaults();
        bad.qos_reserved = [("memory".to_string(), "lots".to_string())].into();
        let server = KubeletServer::new(Default::default(), bad, Default::default());
        assert!(
            node_config(&server, "n")
                .unwrap_err()
                .to_string()
                .contains("qosReserved")
        );
    }
}
