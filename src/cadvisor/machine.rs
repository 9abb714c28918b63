//! The real machine-info provider, reading /proc, /sys and /etc under a root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::topology;
use super::{
    FsInfo, HugePagesInfo, MachineInfo, MachineInfoError, MachineInfoProvider, VersionInfo,
};

/// Reads the machine from `<root>/proc`, `<root>/sys` and `<root>/etc`.
#[derive(Debug, Clone)]
pub struct HostMachineInfo {
    root: PathBuf,
}

impl Default for HostMachineInfo {
    fn default() -> Self {
        HostMachineInfo::new("/")
    }
}

const MACHINE_ID_FILES: [&str; 2] = ["etc/machine-id", "var/lib/dbus/machine-id"];
const BOOT_ID_FILE: &str = "proc/sys/kernel/random/boot_id";
const SYSTEM_UUID_FILES: [&str; 4] = [
    "sys/class/dmi/id/product_uuid",
    "proc/device-tree/system-id",
    "proc/device-tree/vm,uuid",
    "etc/machine-id",
];

impl HostMachineInfo {
    /// A provider for the machine whose files live under `root` (`/` for this host).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HostMachineInfo { root: root.into() }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    fn read(&self, rel: &str) -> Result<String, MachineInfoError> {
        let path = self.path(rel);
        std::fs::read_to_string(&path).map_err(|source| MachineInfoError::Read { path, source })
    }

    /// The first of `files` that can be read, trimmed (and NUL-stripped); empty when none.
    fn first_of(&self, files: &[&str]) -> String {
        files
            .iter()
            .find_map(|f| std::fs::read(self.path(f)).ok())
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .trim_end_matches('\0')
                    .trim()
                    .to_string()
            })
            .unwrap_or_default()
    }

    fn hugepages(&self, dir: &Path) -> Result<Vec<HugePagesInfo>, MachineInfoError> {
        hugepages_in(dir)
    }
}

/// Huge pages listed in a directory of `hugepages-<n>kB` entries, by name.
pub(super) fn hugepages_in(dir: &Path) -> Result<Vec<HugePagesInfo>, MachineInfoError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(MachineInfoError::Read {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let Some(kib) = name
            .strip_prefix("hugepages-")
            .and_then(|s| s.strip_suffix("kB"))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        let path = dir.join(&name).join("nr_hugepages");
        let text = std::fs::read_to_string(&path).map_err(|source| MachineInfoError::Read {
            path: path.clone(),
            source,
        })?;
        let num_pages = text.trim().parse().map_err(|_| MachineInfoError::Parse {
            path,
            detail: format!("{:?} is not a page count", text.trim()),
        })?;
        out.push(HugePagesInfo {
            page_size_kib: kib,
            num_pages,
        });
    }
    Ok(out)
}

/// A `Key: <n> kB` line of a meminfo file, in bytes.
pub(super) fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, rest) = line.split_once(':')?;
        if k.trim() != key && !k.trim().ends_with(&format!(" {key}")) {
            return None;
        }
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb.saturating_mul(1024))
    })
}

fn cpuinfo_field_values<'a>(cpuinfo: &'a str, field: &str) -> Vec<&'a str> {
    cpuinfo
        .lines()
        .filter_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == field).then(|| v.trim())
        })
        .collect()
}

fn unique_count(values: &[&str]) -> u32 {
    values.iter().collect::<BTreeSet<_>>().len() as u32
}

impl HostMachineInfo {
    fn unique_sysfs_cpu_property(&self, file: &str) -> u32 {
        let dir = self.path("sys/bus/cpu/devices");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let values: BTreeSet<String> = entries
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("topology").join(file)).ok())
            .map(|s| s.trim().to_string())
            .collect();
        values.len() as u32
    }

    fn clock_speed_khz(&self, cpuinfo: &str) -> u64 {
        if let Ok(max) = self.read("sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
            && let Ok(khz) = max.trim().parse()
        {
            return khz;
        }
        cpuinfo_field_values(cpuinfo, "cpu MHz")
            .first()
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0, |mhz| (mhz * 1000.0) as u64)
    }
}

impl MachineInfoProvider for HostMachineInfo {
    fn machine_info(&self) -> Result<MachineInfo, MachineInfoError> {
        let cpuinfo = self.read("proc/cpuinfo")?;
        let meminfo = self.read("proc/meminfo")?;
        let memory_capacity =
            meminfo_bytes(&meminfo, "MemTotal").ok_or_else(|| MachineInfoError::Parse {
                path: self.path("proc/meminfo"),
                detail: "no MemTotal line".into(),
            })?;
        let swap_capacity = meminfo_bytes(&meminfo, "SwapTotal").unwrap_or(0);
        let hugepages = self.hugepages(&self.path("sys/kernel/mm/hugepages"))?;
        let (topology, num_cores) = match topology::nodes(&self.path("sys")) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(error = %e, "failed to get topology information");
                (Vec::new(), 0)
            }
        };
        let mut num_physical_cores = unique_count(&cpuinfo_field_values(&cpuinfo, "core id"));
        if num_physical_cores == 0 {
            num_physical_cores = self.unique_sysfs_cpu_property("core_id");
        }
        let mut num_sockets = unique_count(&cpuinfo_field_values(&cpuinfo, "physical id"));
        if num_sockets == 0 {
            num_sockets = self.unique_sysfs_cpu_property("physical_package_id");
        }
        Ok(MachineInfo {
            num_cores,
            num_physical_cores,
            num_sockets,
            cpu_vendor_id: cpuinfo_field_values(&cpuinfo, "vendor_id")
                .first()
                .map(|s| s.to_string())
                .unwrap_or_default(),
            cpu_frequency_khz: self.clock_speed_khz(&cpuinfo),
            memory_capacity,
            swap_capacity,
            hugepages,
            topology,
            machine_id: self.first_of(&MACHINE_ID_FILES),
            system_uuid: self.first_of(&SYSTEM_UUID_FILES),
            boot_id: self.first_of(&[BOOT_ID_FILE]),
        })
    }

    fn version_info(&self) -> Result<VersionInfo, MachineInfoError> {
        let kernel_version = self.read("proc/sys/kernel/osrelease")?.trim().to_string();
        let os_release = self
            .read("etc/os-release")
            .or_else(|_| self.read("usr/lib/os-release"))?;
        Ok(VersionInfo {
            kernel_version,
            os_image: pretty_name(&os_release),
        })
    }

    fn fs_info(&self, path: &Path) -> Result<FsInfo, MachineInfoError> {
        let mountinfo = self.read("proc/self/mountinfo").unwrap_or_default();
        super::fs_info_at(path, &mountinfo)
    }
}

/// PRETTY_NAME of an os-release file, unquoted; `Linux` when absent.
pub(super) fn pretty_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".to_string())
}
