//! The `CgroupManager` seam: create, update, destroy and inspect cgroups by
//! driver-neutral name, with the cgroupfs or systemd driver, on cgroup v1 or
//! v2. All methods block (file and D-Bus I/O): async callers go through
//! `spawn_blocking`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use super::cgroup_name::CgroupName;
use super::cgroupfs::{self, CgroupWriter, WriteMode, v1, v2};
use super::error::CmError;
use super::helpers::MIN_SHARES;
use super::host::HostPaths;
use super::resources::{CgroupConfig, ResourceConfig, host_hugepage_sizes, hugepage_unit_size};
use super::subsystems::CgroupSubsystems;
use super::systemd::{self, DbusSystemd, SystemdDbus};

/// The cgroup driver (`cgroupDriver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CgroupDriver {
    #[default]
    Cgroupfs,
    Systemd,
}

impl FromStr for CgroupDriver {
    type Err = CmError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cgroupfs" => Ok(CgroupDriver::Cgroupfs),
            "systemd" => Ok(CgroupDriver::Systemd),
            other => Err(CmError::Config(format!(
                "cgroupDriver (--cgroup-driver) {other:?} is not one of cgroupfs, systemd"
            ))),
        }
    }
}

impl fmt::Display for CgroupDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupDriver::Cgroupfs => "cgroupfs",
            CgroupDriver::Systemd => "systemd",
        })
    }
}

/// Creates, changes and removes cgroups named driver-neutrally.
pub trait CgroupManager: Send + Sync + 'static {
    /// Creates the cgroup in every hierarchy and applies its limits; a limit
    /// the kernel refuses is logged, not returned (as the Go kubelet does).
    fn create(&self, config: &CgroupConfig) -> Result<(), CmError>;
    /// Applies the limits of an existing cgroup.
    fn update(&self, config: &CgroupConfig) -> Result<(), CmError>;
    /// Removes the cgroup (and any child cgroups) from every hierarchy.
    fn destroy(&self, name: &CgroupName) -> Result<(), CmError>;
    /// Whether the cgroup exists in every hierarchy the kubelet needs.
    fn exists(&self, name: &CgroupName) -> bool;
    /// The driver's literal form of a name (`/kubepods/burstable` or the slice path).
    fn name(&self, name: &CgroupName) -> Result<String, CmError>;
    /// The name behind a driver literal.
    fn cgroup_name(&self, literal: &str) -> CgroupName;
    /// Every process in the cgroup or below it, in any hierarchy.
    fn pids(&self, name: &CgroupName) -> Vec<i32>;
    /// Lowers the cgroup's cpu shares to the minimum.
    fn reduce_cpu_limits(&self, name: &CgroupName) -> Result<(), CmError>;
    /// The cgroup's memory usage in bytes.
    fn memory_usage(&self, name: &CgroupName) -> Result<i64, CmError>;
    /// The mounted hierarchies.
    fn subsystems(&self) -> &CgroupSubsystems;
    fn driver(&self) -> CgroupDriver;
}

/// The cgroup manager for both drivers.
pub struct CgroupManagerImpl {
    subsystems: CgroupSubsystems,
    systemd: Option<Arc<dyn SystemdDbus>>,
    hugepage_sizes: Vec<String>,
    writer: CgroupWriter,
}

impl fmt::Debug for CgroupManagerImpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CgroupManagerImpl")
            .field("driver", &self.driver())
            .field("mode", &self.subsystems.mode())
            .finish()
    }
}

impl CgroupManagerImpl {
    /// The cgroupfs driver over the given hierarchies. `hugepage_sizes` are
    /// the host's page sizes (`2MB`, …), limited to 0 where a config omits them.
    pub fn cgroupfs(subsystems: CgroupSubsystems, hugepage_sizes: Vec<String>) -> Self {
        CgroupManagerImpl {
            subsystems,
            systemd: None,
            hugepage_sizes,
            writer: CgroupWriter::default(),
        }
    }

    /// The systemd driver: slices through `dbus`, limits also written to the files.
    pub fn systemd(
        subsystems: CgroupSubsystems,
        hugepage_sizes: Vec<String>,
        dbus: Arc<dyn SystemdDbus>,
    ) -> Self {
        CgroupManagerImpl {
            subsystems,
            systemd: Some(dbus),
            hugepage_sizes,
            writer: CgroupWriter::default(),
        }
    }

    /// The driver for this host: hierarchies from mountinfo, page sizes from
    /// sysfs, and for systemd a connection to the system bus, refused when
    /// systemd is not the init system. Blocking.
    pub fn for_host(driver: CgroupDriver, host: &HostPaths) -> Result<Self, CmError> {
        let subsystems = CgroupSubsystems::detect(host)?;
        let sizes = host_hugepage_sizes(&host.hugepages);
        match driver {
            CgroupDriver::Cgroupfs => Ok(Self::cgroupfs(subsystems, sizes)),
            CgroupDriver::Systemd => {
                if !host.systemd_running() {
                    return Err(CmError::Systemd(format!(
                        "cgroupDriver \"systemd\" needs systemd as the init system, but {} does not exist; set cgroupDriver to \"cgroupfs\"",
                        host.run_systemd_system.display()
                    )));
                }
                let dbus = DbusSystemd::connect()?;
                Ok(Self::systemd(subsystems, sizes, Arc::new(dbus)))
            }
        }
    }

    /// Changes how files are written (plain files for trees that stand in for cgroupfs).
    pub fn with_write_mode(mut self, mode: WriteMode) -> Self {
        self.writer = CgroupWriter::new(mode);
        self
    }

    /// The hierarchy directories of a cgroup: subsystem → path.
    pub fn paths(&self, name: &CgroupName) -> Result<BTreeMap<String, PathBuf>, CmError> {
        let literal = self.name(name)?;
        Ok(self
            .subsystems
            .mount_points()
            .iter()
            .map(|(s, m)| (s.clone(), cgroupfs::join_literal(m, &literal)))
            .collect())
    }

    /// The v2 directory of a cgroup.
    pub fn unified_path(&self, name: &CgroupName) -> Result<PathBuf, CmError> {
        let mount = self
            .subsystems
            .unified_mount()
            .ok_or_else(|| CmError::Mounts("no cgroup v2 mount".into()))?;
        Ok(cgroupfs::join_literal(mount, &self.name(name)?))
    }

    fn distinct_paths(&self, name: &CgroupName) -> Result<Vec<PathBuf>, CmError> {
        if self.subsystems.is_unified() {
            return Ok(vec![self.unified_path(name)?]);
        }
        let set: BTreeSet<PathBuf> = self.paths(name)?.into_values().collect();
        Ok(set.into_iter().collect())
    }

    /// Page size → limit for the hugetlb controller: the config's sizes, and 0
    /// for every host size it omits; nothing when hugetlb is unavailable.
    fn hugetlb_limits(&self, r: &ResourceConfig) -> v1::HugetlbLimits {
        if !self.subsystems.hugetlb_supported() {
            return Vec::new();
        }
        let mut out: v1::HugetlbLimits = Vec::new();
        for (size, limit) in &r.hugepage_limit {
            match hugepage_unit_size(*size) {
                Some(name) => out.push((name, (*limit).max(0) as u64)),
                None => tracing::info!(page_size = size, "invalid huge page size"),
            }
        }
        for size in &self.hugepage_sizes {
            if !out.iter().any(|(n, _)| n == size) {
                out.push((size.clone(), 0));
            }
        }
        out
    }

    fn set_files(&self, name: &CgroupName, r: &ResourceConfig) -> Result<(), CmError> {
        let hugetlb = self.hugetlb_limits(r);
        if self.subsystems.is_unified() {
            v2::set(&self.writer, &self.unified_path(name)?, r, &hugetlb)
        } else {
            let paths = self.paths(name)?;
            v1::set(&self.writer, &paths, r, &hugetlb)
        }
    }

    fn set_unit(&self, name: &CgroupName, r: &ResourceConfig) -> Result<(), CmError> {
        if let Some(dbus) = &self.systemd {
            let (_, unit) = systemd::unit_for(name)?;
            let props =
                systemd::resource_properties(r, self.subsystems.is_unified(), dbus.version())?;
            if !props.is_empty() {
                dbus.set_unit_properties(&unit, &props)?;
            }
        }
        Ok(())
    }
}

impl CgroupManagerImpl {
    /// Creates the cgroup (and its systemd unit), then sets its limits.
    fn create_cgroup(&self, config: &CgroupConfig) -> Result<(), CmError> {
        let literal = self.name(&config.name)?;
        if let Some(dbus) = &self.systemd {
            let (parent, unit) = systemd::unit_for(&config.name)?;
            let props = systemd::start_properties(&parent, &unit, self.subsystems.is_unified());
            dbus.start_transient_unit(&unit, &props)?;
        }
        if self.subsystems.is_unified() {
            let mount = self
                .subsystems
                .unified_mount()
                .ok_or_else(|| CmError::Mounts("no cgroup v2 mount".into()))?;
            let path = cgroupfs::join_literal(mount, &literal);
            v2::create(
                &self.writer,
                mount,
                &path,
                self.subsystems.unified_controllers(),
            )?;
        } else {
            v1::create(&self.writer, &self.subsystems, &literal)?;
        }
        let applied = self
            .set_unit(&config.name, &config.resources)
            .and_then(|()| self.set_files(&config.name, &config.resources));
        if let Err(e) = applied {
            tracing::error!(cgroup = %config.name, error = %e, "cgroup manager failed to set limits on a new cgroup");
        }
        Ok(())
    }
}

/// Runs a cgroup operation, observing `kubelet_cgroup_manager_duration_seconds`.
fn timed<T>(operation: &str, f: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let out = f();
    crate::metrics::kubelet::cgroup_manager_duration()
        .observe(&[operation], started.elapsed().as_secs_f64());
    out
}

impl CgroupManager for CgroupManagerImpl {
    fn create(&self, config: &CgroupConfig) -> Result<(), CmError> {
        timed("create", || self.create_cgroup(config))
    }

    fn update(&self, config: &CgroupConfig) -> Result<(), CmError> {
        timed("update", || {
            self.set_unit(&config.name, &config.resources)?;
            self.set_files(&config.name, &config.resources)
        })
    }

    fn destroy(&self, name: &CgroupName) -> Result<(), CmError> {
        timed("destroy", || {
            let stopped = match &self.systemd {
                Some(dbus) => systemd::unit_for(name).and_then(|(_, unit)| dbus.stop_unit(&unit)),
                None => Ok(()),
            };
            let removed = self.writer.remove_paths(&self.distinct_paths(name)?);
            stopped.and(removed)
        })
    }

    fn exists(&self, name: &CgroupName) -> bool {
        if self.subsystems.is_unified() {
            let Ok(path) = self.unified_path(name) else {
                return false;
            };
            let Ok(text) = std::fs::read_to_string(path.join("cgroup.controllers")) else {
                return false;
            };
            let enabled: BTreeSet<&str> = text.split_whitespace().collect();
            let missing: Vec<String> = self
                .subsystems
                .unified_supported_controllers()
                .into_iter()
                .filter(|c| !enabled.contains(c.as_str()))
                .collect();
            if !missing.is_empty() {
                crate::vlog!(4, cgroup = %name, controllers = ?missing, "the cgroup has some missing controllers");
                return false;
            }
            return true;
        }
        let Ok(paths) = self.paths(name) else {
            return false;
        };
        let mut needed: BTreeSet<&str> = ["cpu", "cpuacct", "cpuset", "memory", "systemd", "pids"]
            .into_iter()
            .collect();
        if self.subsystems.has("hugetlb") {
            needed.insert("hugetlb");
        }
        let missing: Vec<&PathBuf> = paths
            .iter()
            .filter(|(s, p)| needed.contains(s.as_str()) && !p.exists())
            .map(|(_, p)| p)
            .collect();
        if !missing.is_empty() {
            crate::vlog!(4, cgroup = %name, paths = ?missing, "the cgroup has some missing paths");
            return false;
        }
        true
    }

    fn name(&self, name: &CgroupName) -> Result<String, CmError> {
        match self.driver() {
            CgroupDriver::Cgroupfs => Ok(name.to_cgroupfs()),
            CgroupDriver::Systemd => name.to_systemd(),
        }
    }

    fn cgroup_name(&self, literal: &str) -> CgroupName {
        match self.driver() {
            CgroupDriver::Cgroupfs => CgroupName::from_cgroupfs(literal),
            CgroupDriver::Systemd => CgroupName::from_systemd(literal),
        }
    }

    fn pids(&self, name: &CgroupName) -> Vec<i32> {
        let Ok(paths) = self.distinct_paths(name) else {
            return Vec::new();
        };
        let mut pids = Vec::new();
        for dir in paths.iter().filter(|p| p.is_dir()) {
            cgroupfs::cgroup_procs_recursive(dir, &mut pids);
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    fn reduce_cpu_limits(&self, name: &CgroupName) -> Result<(), CmError> {
        let config = CgroupConfig::new(
            name.clone(),
            ResourceConfig {
                cpu_shares: Some(MIN_SHARES),
                ..Default::default()
            },
        );
        self.update(&config)
    }

    fn memory_usage(&self, name: &CgroupName) -> Result<i64, CmError> {
        let (dir, file) = if self.subsystems.is_unified() {
            (self.unified_path(name)?, "memory.current")
        } else {
            let mount = self.subsystems.mount_point("memory").ok_or_else(|| {
                CmError::Mounts("no cgroup v1 mountpoint for memory controller found".into())
            })?;
            (
                cgroupfs::join_literal(mount, &self.name(name)?),
                "memory.usage_in_bytes",
            )
        };
        Ok(self.writer.read_u64(&dir, file)? as i64)
    }

    fn subsystems(&self) -> &CgroupSubsystems {
        &self.subsystems
    }

    fn driver(&self) -> CgroupDriver {
        if self.systemd.is_some() {
            CgroupDriver::Systemd
        } else {
            CgroupDriver::Cgroupfs
        }
    }
}
