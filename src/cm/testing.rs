//! Fake cgroup trees and a fake systemd for unit tests.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::cgroup_manager::CgroupManagerImpl;
use super::cgroupfs::WriteMode;
use super::error::CmError;
use super::subsystems::CgroupSubsystems;
use super::systemd::{SystemdDbus, UnitProperty};

/// A directory tree laid out like cgroup v1 hierarchies.
pub struct FakeV1 {
    pub dir: tempfile::TempDir,
    pub subsystems: CgroupSubsystems,
}

impl FakeV1 {
    pub fn new(controllers: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut mountinfo = String::new();
        for (i, s) in controllers.iter().enumerate() {
            let mount = dir.path().join(s);
            std::fs::create_dir_all(&mount).unwrap();
            let opt = if *s == "systemd" {
                "name=systemd".to_string()
            } else {
                s.to_string()
            };
            mountinfo.push_str(&format!(
                "{} 1 0:{i} / {} rw - cgroup cgroup rw,{opt}\n",
                40 + i,
                mount.display()
            ));
        }
        if controllers.contains(&"cpuset") {
            std::fs::write(dir.path().join("cpuset/cpuset.cpus"), "0-3").unwrap();
            std::fs::write(dir.path().join("cpuset/cpuset.mems"), "0").unwrap();
        }
        let subsystems = CgroupSubsystems::from_mountinfo(&mountinfo, &BTreeSet::new()).unwrap();
        FakeV1 { dir, subsystems }
    }

    /// The usual v1 node without hugetlb.
    pub fn standard() -> Self {
        Self::new(&["cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"])
    }

    pub fn path(&self, subsystem: &str, rel: &str) -> PathBuf {
        self.dir
            .path()
            .join(subsystem)
            .join(rel.trim_start_matches('/'))
    }

    pub fn read(&self, subsystem: &str, rel: &str, file: &str) -> String {
        std::fs::read_to_string(self.path(subsystem, rel).join(file))
            .unwrap_or_else(|e| panic!("{subsystem}{rel}/{file}: {e}"))
            .trim()
            .to_string()
    }

    pub fn manager(&self, hugepage_sizes: &[&str]) -> CgroupManagerImpl {
        CgroupManagerImpl::cgroupfs(self.subsystems.clone(), sizes(hugepage_sizes))
            .with_write_mode(WriteMode::PlainFiles)
    }

    pub fn systemd_manager(&self, dbus: Arc<FakeDbus>) -> CgroupManagerImpl {
        CgroupManagerImpl::systemd(self.subsystems.clone(), Vec::new(), dbus)
            .with_write_mode(WriteMode::PlainFiles)
    }
}

/// A directory tree laid out like a cgroup v2 mount.
pub struct FakeV2 {
    pub dir: tempfile::TempDir,
    pub subsystems: CgroupSubsystems,
}

impl FakeV2 {
    pub fn new(controllers: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cgroup.controllers"),
            format!("{controllers}\n"),
        )
        .unwrap();
        let subsystems = CgroupSubsystems::unified_at(dir.path()).unwrap();
        FakeV2 { dir, subsystems }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel.trim_start_matches('/'))
    }

    pub fn read(&self, rel: &str, file: &str) -> String {
        std::fs::read_to_string(self.path(rel).join(file))
            .unwrap_or_else(|e| panic!("{rel}/{file}: {e}"))
            .trim()
            .to_string()
    }

    /// What the kernel does for a child cgroup: list the controllers its
    /// parent enables.
    pub fn kernel_lists_controllers(&self, rel: &str, controllers: &str) {
        std::fs::write(self.path(rel).join("cgroup.controllers"), controllers).unwrap();
    }

    pub fn manager(&self, hugepage_sizes: &[&str]) -> CgroupManagerImpl {
        CgroupManagerImpl::cgroupfs(self.subsystems.clone(), sizes(hugepage_sizes))
            .with_write_mode(WriteMode::PlainFiles)
    }
}

fn sizes(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

/// One call to the fake systemd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbusCall {
    Start(String, Vec<UnitProperty>),
    Set(String, Vec<UnitProperty>),
    Stop(String),
}

/// Records D-Bus calls; can be told to fail starts.
#[derive(Default)]
pub struct FakeDbus {
    pub calls: Mutex<Vec<DbusCall>>,
    pub fail_start: Mutex<bool>,
    pub version: u32,
}

impl FakeDbus {
    pub fn with_version(version: u32) -> Arc<Self> {
        Arc::new(FakeDbus {
            version,
            ..Default::default()
        })
    }

    pub fn calls(&self) -> Vec<DbusCall> {
        self.calls.lock().unwrap().clone()
    }
}

impl SystemdDbus for FakeDbus {
    fn start_transient_unit(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), CmError> {
        if *self.fail_start.lock().unwrap() {
            return Err(CmError::Systemd(format!("starting unit {unit}: refused")));
        }
        self.calls
            .lock()
            .unwrap()
            .push(DbusCall::Start(unit.into(), properties.to_vec()));
        Ok(())
    }
    fn set_unit_properties(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), CmError> {
        self.calls
            .lock()
            .unwrap()
            .push(DbusCall::Set(unit.into(), properties.to_vec()));
        Ok(())
    }
    fn stop_unit(&self, unit: &str) -> Result<(), CmError> {
        self.calls.lock().unwrap().push(DbusCall::Stop(unit.into()));
        Ok(())
    }
    fn version(&self) -> u32 {
        self.version
    }
}
