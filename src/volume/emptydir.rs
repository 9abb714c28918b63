//! emptyDir (pkg/volume/emptydir): a directory under the pod's volumes dir
//! (medium ""), a tmpfs sized from sizeLimit, the pod's memory limit and
//! the node's allocatable memory (medium Memory), or hugetlbfs (HugePages,
//! HugePages-<size>). `plugins/kubernetes.io~empty-dir/<name>/ready`
//! records a finished SetUp. The atomic-writer plugins wrap an emptyDir
//! called `wrapped_<name>` for their directory.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Pod, Volume};

use crate::cm::helpers::{PodResourceOptions, resource_config_for_pod};
use crate::util::quantity;
use crate::volume::error::VolumeError;
use crate::volume::host::VolumeHost;
use crate::volume::plugin::{Mounter, Unmounter, VolumePlugin};
use crate::volume::spec::{Attributes, MounterArgs, Spec};
use crate::volume::util::mount::find_mount_info;
use crate::volume::util::ownership::set_volume_ownership;

pub const EMPTY_DIR_PLUGIN_NAME: &str = "kubernetes.io/empty-dir";
const PERM: u32 = 0o777;
const READY_FILE_NAME: &str = "ready";

/// Where an emptyDir's data lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Medium {
    /// The node's disk.
    Default,
    /// tmpfs.
    Memory,
    /// hugetlbfs with the page size the containers request.
    HugePages,
    /// hugetlbfs with this page size (`HugePages-2Mi`: "2Mi").
    HugePagesSized(String),
    /// Anything else; SetUp fails.
    Unknown(String),
}

impl Medium {
    pub fn parse(medium: Option<&str>) -> Medium {
        match medium.unwrap_or("") {
            "" => Medium::Default,
            "Memory" => Medium::Memory,
            "HugePages" => Medium::HugePages,
            m => match m.strip_prefix("HugePages-") {
                Some(size) => Medium::HugePagesSized(size.to_string()),
                None => Medium::Unknown(m.to_string()),
            },
        }
    }

    fn is_huge_pages(&self) -> bool {
        matches!(self, Medium::HugePages | Medium::HugePagesSized(_))
    }

    fn text(&self) -> String {
        match self {
            Medium::Default => String::new(),
            Medium::Memory => "Memory".into(),
            Medium::HugePages => "HugePages".into(),
            Medium::HugePagesSized(s) => format!("HugePages-{s}"),
            Medium::Unknown(s) => s.clone(),
        }
    }
}

/// The plugin.
pub struct EmptyDirPlugin {
    host: Arc<VolumeHost>,
}

impl EmptyDirPlugin {
    pub fn new(host: Arc<VolumeHost>) -> Self {
        EmptyDirPlugin { host }
    }
}

impl VolumePlugin for EmptyDirPlugin {
    fn name(&self) -> &'static str {
        EMPTY_DIR_PLUGIN_NAME
    }

    fn can_support(&self, spec: &Spec) -> bool {
        spec.empty_dir().is_some()
    }

    fn requires_remount(&self, _spec: &Spec) -> bool {
        false
    }

    fn new_mounter(&self, spec: &Spec, pod: &Arc<Pod>) -> Result<Arc<dyn Mounter>, VolumeError> {
        let source = spec
            .empty_dir()
            .ok_or(VolumeError::WrongSpec("an emptyDir"))?;
        Ok(Arc::new(EmptyDir::new_mounter(
            self.host.clone(),
            spec.name(),
            source,
            pod,
        )?))
    }

    fn new_unmounter(
        &self,
        volume_name: &str,
        pod_uid: &str,
    ) -> Result<Arc<dyn Unmounter>, VolumeError> {
        Ok(Arc::new(EmptyDir::new_unmounter(
            self.host.clone(),
            volume_name,
            pod_uid,
        )))
    }

    fn construct_volume_spec(
        &self,
        volume_name: &str,
        _mount_path: &Path,
    ) -> Result<Spec, VolumeError> {
        Ok(Spec::from_volume(Volume {
            name: volume_name.to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        }))
    }
}

/// One emptyDir volume of one pod.
#[derive(Clone)]
pub struct EmptyDir {
    host: Arc<VolumeHost>,
    pod: Option<Arc<Pod>>,
    pod_uid: String,
    vol_name: String,
    medium: Medium,
    /// tmpfs `size=` in bytes; 0 for none.
    size_limit: i64,
}

fn pod_uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// The tmpfs size for a memory-backed volume: the node's allocatable
/// memory, lowered to the pod's memory limit and then to the volume's
/// sizeLimit when those are positive and smaller. 0 means no size option.
pub fn memory_size_limit(node_allocatable_memory: i64, size_limit: Option<i64>, pod: &Pod) -> i64 {
    let mut limit = node_allocatable_memory;
    let pod_cfg = resource_config_for_pod(pod, &PodResourceOptions::default());
    if let Some(pod_mem) = pod_cfg.memory
        && pod_mem > 0
        && pod_mem <= limit
    {
        limit = pod_mem;
    }
    if let Some(v) = size_limit
        && v > 0
        && v <= limit
    {
        limit = v;
    }
    limit
}

impl EmptyDir {
    /// A mounter for the pod's emptyDir volume `name`.
    pub fn new_mounter(
        host: Arc<VolumeHost>,
        name: &str,
        source: &EmptyDirVolumeSource,
        pod: &Arc<Pod>,
    ) -> Result<Self, VolumeError> {
        let medium = Medium::parse(source.medium.as_deref());
        let mut size_limit = 0;
        if medium == Medium::Memory {
            let alloc = host.node_allocatable()?;
            let mem = alloc
                .get("memory")
                .and_then(|q| quantity::parse(q.0.trim()).ok())
                .map_or(0, |q| q.value());
            let volume_limit = source
                .size_limit
                .as_ref()
                .and_then(|q| quantity::parse(q.0.trim()).ok())
                .map(|q| q.value());
            size_limit = memory_size_limit(mem, volume_limit, pod);
        }
        Ok(EmptyDir {
            pod_uid: pod_uid(pod),
            host,
            pod: Some(pod.clone()),
            vol_name: name.to_string(),
            medium,
            size_limit,
        })
    }

    /// The emptyDir that backs an atomic-writer volume (`wrapped_<name>`).
    pub fn new_wrapper(
        host: Arc<VolumeHost>,
        name: &str,
        memory: bool,
        pod: &Arc<Pod>,
    ) -> Result<Self, VolumeError> {
        let source = EmptyDirVolumeSource {
            medium: memory.then(|| "Memory".to_string()),
            size_limit: None,
        };
        Self::new_mounter(host, &format!("wrapped_{name}"), &source, pod)
    }

    /// An unmounter; the medium is found on disk.
    pub fn new_unmounter(host: Arc<VolumeHost>, name: &str, pod_uid: &str) -> Self {
        EmptyDir {
            host,
            pod: None,
            pod_uid: pod_uid.to_string(),
            vol_name: name.to_string(),
            medium: Medium::Default,
            size_limit: 0,
        }
    }

    /// The unmounter of the emptyDir backing an atomic-writer volume.
    pub fn new_wrapper_unmounter(host: Arc<VolumeHost>, name: &str, pod_uid: &str) -> Self {
        Self::new_unmounter(host, &format!("wrapped_{name}"), pod_uid)
    }

    pub fn medium(&self) -> &Medium {
        &self.medium
    }

    /// The `size=` given to tmpfs (0: none).
    pub fn size_limit(&self) -> i64 {
        self.size_limit
    }

    /// `<pod>/volumes/kubernetes.io~empty-dir/<name>`.
    pub fn own_path(&self) -> PathBuf {
        self.host
            .pod_volume_dir(&self.pod_uid, EMPTY_DIR_PLUGIN_NAME, &self.vol_name)
    }

    /// `<pod>/plugins/kubernetes.io~empty-dir/<name>`: holds `ready`.
    pub fn meta_dir(&self) -> PathBuf {
        self.host
            .pod_plugin_dir(&self.pod_uid, EMPTY_DIR_PLUGIN_NAME)
            .join(&self.vol_name)
    }

    /// Sets the volume up at `dir` (blocking).
    pub fn set_up_at(&self, dir: &Path, args: &MounterArgs) -> Result<(), VolumeError> {
        let m = self.host.mounter();
        let not_mnt = match m.is_likely_not_mount_point(dir) {
            Ok(v) => v,
            Err(e) if e.kind() == io::ErrorKind::NotFound => true,
            Err(e) => return Err(VolumeError::io("stat", dir, &e)),
        };
        let ready_dir = self.meta_dir();
        if is_ready(&ready_dir) {
            match self.medium {
                Medium::Memory if !not_mnt => return Ok(()),
                Medium::Default => {
                    if fs::metadata(dir).is_ok() {
                        return Ok(());
                    }
                    tracing::warn!(ready = %ready_dir.display(), dir = %dir.display(), "Volume ready file dir exists, but volume dir does not. Remove ready dir");
                    if let Err(e) = fs::remove_dir_all(&ready_dir)
                        && e.kind() != io::ErrorKind::NotFound
                    {
                        tracing::warn!(dir = %ready_dir.display(), error = %e, "Failed to remove ready dir");
                    }
                }
                _ => {}
            }
        }
        let result = match &self.medium {
            Medium::Default => setup_dir(dir),
            Medium::Memory => self.setup_tmpfs(dir),
            m if m.is_huge_pages() => self.setup_hugepages(dir),
            other => Err(VolumeError::other(format!(
                "unknown storage medium {:?}",
                other.text()
            ))),
        };
        // Go applies the group to the plugin's own path and ignores failures
        // (for wrappers that path does not exist).
        let _ = set_volume_ownership(&self.own_path(), false, args.fs_group, None);
        if result.is_ok() {
            set_ready(&ready_dir);
        }
        result
    }

    fn setup_tmpfs(&self, dir: &Path) -> Result<(), VolumeError> {
        setup_dir(dir)?;
        let (medium, is_mnt, _) = self.mount_medium(dir)?;
        if is_mnt && medium == Medium::Memory {
            return Ok(());
        }
        let mut options = Vec::new();
        if self.size_limit > 0 {
            options.push(format!("size={}", self.size_limit));
        }
        crate::vlog!(3, pod = %self.pod_uid, volume = %self.vol_name, "Mounting tmpfs for volume");
        self.host.mounter().mount("tmpfs", dir, "tmpfs", &options)
    }

    fn setup_hugepages(&self, dir: &Path) -> Result<(), VolumeError> {
        setup_dir(dir)?;
        let (medium, is_mnt, page_size) = self.mount_medium(dir)?;
        crate::vlog!(3, pod = %self.pod_uid, medium = ?medium, is_mnt, dir = %dir.display(), "setupHugepages");
        if is_mnt && medium.is_huge_pages() {
            let Medium::HugePagesSized(size) = &self.medium else {
                return Ok(());
            };
            let Some(mounted) = page_size else {
                return Err(VolumeError::other(format!(
                    "pod {}: mounted dir {} pagesize is not determined",
                    self.pod_uid,
                    dir.display()
                )));
            };
            let want = parse_size(size, &self.medium.text())?;
            if want != mounted {
                return Err(VolumeError::other(format!(
                    "pod {}: mounted dir {} pagesize '{}' and requested medium size '{}' differ",
                    self.pod_uid,
                    dir.display(),
                    quantity::Quantity::from_binary(mounted).to_canonical_string(),
                    quantity::Quantity::from_binary(want).to_canonical_string()
                )));
            }
            return Ok(());
        }
        let option = self.page_size_mount_option()?;
        crate::vlog!(3, pod = %self.pod_uid, volume = %self.vol_name, "Mounting hugepages for volume");
        self.host
            .mounter()
            .mount("nodev", dir, "hugetlbfs", &[option])
    }

    /// `pagesize=<size>` from the medium and the containers' huge page
    /// requests (init containers too).
    fn page_size_mount_option(&self) -> Result<String, VolumeError> {
        let medium_text = self.medium.text();
        let medium_size = match &self.medium {
            Medium::HugePagesSized(s) => Some(parse_size(s, &medium_text)?),
            _ => None,
        };
        let mut found: Option<i64> = None;
        let spec = self.pod.as_ref().and_then(|p| p.spec.as_ref());
        let containers = spec.into_iter().flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        });
        for c in containers {
            let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
            for name in requests.into_iter().flat_map(|r| r.keys()) {
                let Some(size) = name.strip_prefix("hugepages-") else {
                    continue;
                };
                let current = parse_size(size, name)?;
                match medium_size {
                    None => {
                        if found.is_some_and(|f| f != current) {
                            return Err(VolumeError::other(format!(
                                "medium: {medium_text} can't be used if container requests multiple huge page sizes"
                            )));
                        }
                        found = Some(current);
                    }
                    Some(m) if m == current => found = Some(current),
                    Some(_) => {}
                }
            }
        }
        let size = found.ok_or_else(|| {
            VolumeError::other(format!(
                "medium {medium_text}: hugePages storage requested, but there is no resource request for huge pages"
            ))
        })?;
        Ok(format!(
            "pagesize={}",
            quantity::Quantity::from_binary(size).to_canonical_string()
        ))
    }

    /// What backs `dir`, whether it is a mount point, and the huge page
    /// size of a hugetlbfs mount.
    fn mount_medium(&self, dir: &Path) -> Result<(Medium, bool, Option<i64>), VolumeError> {
        let m = self.host.mounter();
        let not_mnt = m.is_likely_not_mount_point(dir).map_err(|e| {
            VolumeError::other(format!(
                "IsLikelyNotMountPoint({:?}): {}",
                dir.display().to_string(),
                crate::volume::error::io_reason(&e)
            ))
        })?;
        let st = nix::sys::statfs::statfs(dir).map_err(|e| {
            VolumeError::other(format!(
                "statfs({:?}): {}",
                dir.display().to_string(),
                e.desc().to_lowercase()
            ))
        })?;
        let fs_type = st.filesystem_type();
        if fs_type == nix::sys::statfs::TMPFS_MAGIC {
            return Ok((Medium::Memory, !not_mnt, None));
        }
        if fs_type == nix::sys::statfs::HUGETLBFS_MAGIC {
            if self.medium == Medium::HugePages {
                return Ok((Medium::HugePages, !not_mnt, None));
            }
            let size = self.mounted_page_size(dir)?;
            return Ok((Medium::HugePages, !not_mnt, Some(size)));
        }
        Ok((Medium::Default, !not_mnt, None))
    }

    fn mounted_page_size(&self, dir: &Path) -> Result<i64, VolumeError> {
        let mounts = self
            .host
            .mounter()
            .list()
            .map_err(|e| VolumeError::other(format!("error listing mount points: {e}")))?;
        let mp = find_mount_info(dir, &mounts)
            .filter(|mp| mp.mount_point == dir)
            .ok_or_else(|| {
                VolumeError::other(format!("mount point for {} not found", dir.display()))
            })?;
        for opt in mp.options.iter().chain(mp.super_options.iter()) {
            if let Some(v) = opt.trim().strip_prefix("pagesize=") {
                let v = if v.ends_with('i') {
                    v.to_string()
                } else {
                    format!("{v}i")
                };
                return parse_size(&v, opt);
            }
        }
        Err(VolumeError::other(format!(
            "no pagesize option specified for {} mount",
            dir.display()
        )))
    }

    /// Tears the volume down at `dir` (blocking): the ready marker first,
    /// then the mount (tmpfs/hugetlbfs) and the directory.
    pub fn tear_down_at(&self, dir: &Path) -> Result<(), VolumeError> {
        let ready_dir = self.meta_dir();
        if let Err(e) = fs::remove_dir_all(&ready_dir)
            && e.kind() != io::ErrorKind::NotFound
        {
            return Err(VolumeError::other(format!(
                "failed to remove ready dir [{}]: {}",
                ready_dir.display(),
                VolumeError::io("unlinkat", &ready_dir, &e)
            )));
        }
        match fs::metadata(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::warn!(path = %dir.display(), "Unmount skipped because path does not exist");
                return Ok(());
            }
            Err(e) => {
                return Err(VolumeError::other(format!(
                    "error checking if path exists: {}",
                    VolumeError::io("stat", dir, &e)
                )));
            }
            Ok(_) => {}
        }
        let (medium, is_mnt, _) = self.mount_medium(dir)?;
        if is_mnt && (medium == Medium::Memory || medium.is_huge_pages()) {
            self.host.mounter().unmount(dir)?;
        }
        fs::remove_dir_all(dir).map_err(|e| VolumeError::io("unlinkat", dir, &e))
    }
}

fn parse_size(text: &str, what: &str) -> Result<i64, VolumeError> {
    quantity::parse(text)
        .map(|q| q.value())
        .map_err(|_| VolumeError::other(format!("invalid huge page size {text:?} in {what}")))
}

/// Creates `dir` with mode 0777 whatever the umask.
fn setup_dir(dir: &Path) -> Result<(), VolumeError> {
    crate::util::pod_dirs::mkdir_all(dir, PERM).map_err(|e| VolumeError::io("mkdir", dir, &e))?;
    let meta = fs::symlink_metadata(dir).map_err(|e| VolumeError::io("lstat", dir, &e))?;
    if meta.permissions().mode() & 0o777 != PERM {
        fs::set_permissions(dir, fs::Permissions::from_mode(PERM))
            .map_err(|e| VolumeError::io("chmod", dir, &e))?;
        let meta = fs::symlink_metadata(dir).map_err(|e| VolumeError::io("lstat", dir, &e))?;
        if meta.permissions().mode() & 0o777 != PERM {
            tracing::error!(dir = %dir.display(), "Unexpected directory permissions after chmod");
        }
    }
    Ok(())
}

/// Whether `<dir>/ready` is a regular file.
pub fn is_ready(dir: &Path) -> bool {
    let file = dir.join(READY_FILE_NAME);
    match fs::metadata(&file) {
        Ok(m) if m.is_file() => true,
        Ok(_) => {
            tracing::error!(path = %file.display(), "ready-file is not a file");
            false
        }
        Err(_) => false,
    }
}

/// Creates `<dir>/ready` (dir mode 0750); failures are logged.
pub fn set_ready(dir: &Path) {
    if let Err(e) = crate::util::pod_dirs::mkdir_all(dir, 0o750) {
        tracing::error!(dir = %dir.display(), error = %e, "Can't mkdir");
        return;
    }
    let file = dir.join(READY_FILE_NAME);
    if let Err(e) = fs::File::create(&file) {
        tracing::error!(path = %file.display(), error = %e, "Can't touch");
    }
}

#[async_trait]
impl Mounter for EmptyDir {
    fn path(&self) -> PathBuf {
        self.own_path()
    }

    fn attributes(&self) -> Attributes {
        Attributes {
            read_only: false,
            managed: true,
            selinux_relabel: true,
        }
    }

    async fn set_up(&self, args: &MounterArgs) -> Result<(), VolumeError> {
        let me = self.clone();
        let args = args.clone();
        tokio::task::spawn_blocking(move || me.set_up_at(&me.own_path(), &args))
            .await
            .map_err(|e| VolumeError::other(format!("emptyDir setup task failed: {e}")))?
    }
}

#[async_trait]
impl Unmounter for EmptyDir {
    fn path(&self) -> PathBuf {
        self.own_path()
    }

    async fn tear_down(&self) -> Result<(), VolumeError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.tear_down_at(&me.own_path()))
            .await
            .map_err(|e| VolumeError::other(format!("emptyDir teardown task failed: {e}")))?
    }
}

#[cfg(test)]
#[path = "emptydir_tests.rs"]
mod tests;
