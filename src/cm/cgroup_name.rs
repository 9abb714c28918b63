//! Driver-neutral cgroup names (Go's `CgroupName`, a list of components) and
//! their literal forms under the cgroupfs and systemd drivers.
//!
//! `["kubepods", "burstable", "pod1234-5678"]` is `/kubepods/burstable/pod1234-5678`
//! for cgroupfs and
//! `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice`
//! for systemd (dashes inside a component become underscores, since systemd
//! uses the dash as its nesting separator).

use std::fmt;

use super::error::CmError;

const SYSTEMD_SUFFIX: &str = ".slice";

/// A cgroup named by its components from the root of the hierarchy. The empty
/// name is the root itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CgroupName(Vec<String>);

impl CgroupName {
    /// The root cgroup.
    pub fn root() -> Self {
        CgroupName(Vec::new())
    }

    /// `base` extended by `components`. A component may contain neither `/`
    /// (it would not be one component) nor `_` (the systemd mapping would not
    /// be reversible).
    pub fn new<S: AsRef<str>>(base: &CgroupName, components: &[S]) -> Result<Self, CmError> {
        let mut parts = base.0.clone();
        for c in components {
            let c = c.as_ref();
            if c.contains('/') || c.contains('_') {
                return Err(CmError::InvalidName {
                    name: c.to_string(),
                    reason: "a cgroup name component may not contain '/' or '_'".into(),
                });
            }
            parts.push(c.to_string());
        }
        Ok(CgroupName(parts))
    }

    /// This name with one more component.
    pub fn child(&self, component: &str) -> Result<Self, CmError> {
        Self::new(self, &[component])
    }

    /// The components, outermost first.
    pub fn components(&self) -> &[String] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The last component, if any.
    pub fn base(&self) -> Option<&str> {
        self.0.last().map(String::as_str)
    }

    /// The cgroupfs literal: `/a/b/c`, `/` for the root.
    pub fn to_cgroupfs(&self) -> String {
        let joined: Vec<&str> = self
            .0
            .iter()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .collect();
        format!("/{}", joined.join("/"))
    }

    /// The systemd literal: the expanded slice path of `a-b-c.slice`.
    pub fn to_systemd(&self) -> Result<String, CmError> {
        if self.0.is_empty() || (self.0.len() == 1 && self.0[0].is_empty()) {
            return Ok("/".to_string());
        }
        let unit: Vec<String> = self.0.iter().map(|p| p.replace('-', "_")).collect();
        expand_slice(&format!("{}{SYSTEMD_SUFFIX}", unit.join("-")))
    }

    /// Reads a cgroupfs literal (`/a/b`) back into a name.
    pub fn from_cgroupfs(literal: &str) -> Self {
        let trimmed = literal.strip_prefix('/').unwrap_or(literal);
        if trimmed.is_empty() {
            return CgroupName::root();
        }
        CgroupName(trimmed.split('/').map(str::to_string).collect())
    }

    /// Reads a systemd literal back into a name: only the last path element
    /// matters, since every slice name spells out its ancestors.
    pub fn from_systemd(literal: &str) -> Self {
        let base = literal.rsplit('/').next().unwrap_or(literal);
        let unit = base.strip_suffix(SYSTEMD_SUFFIX).unwrap_or(base);
        CgroupName(unit.split('-').map(|p| p.replace('_', "-")).collect())
    }
}

impl fmt::Display for CgroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.0.join(" "))
    }
}

/// Expands a slice unit name into the path systemd gives its cgroup:
/// `a-b-c.slice` → `/a.slice/a-b.slice/a-b-c.slice`; `-.slice` is the root.
pub fn expand_slice(slice: &str) -> Result<String, CmError> {
    let invalid = |reason: &str| CmError::InvalidName {
        name: slice.to_string(),
        reason: reason.to_string(),
    };
    let name = slice
        .strip_suffix(SYSTEMD_SUFFIX)
        .ok_or_else(|| invalid("a slice name must end in .slice"))?;
    if slice.contains('/') {
        return Err(invalid("a slice name may not contain '/'"));
    }
    if name == "-" {
        return Ok("/".to_string());
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for component in name.split('-') {
        if component.is_empty() {
            return Err(invalid("empty component in slice name"));
        }
        path.push('/');
        path.push_str(&prefix);
        path.push_str(component);
        path.push_str(SYSTEMD_SUFFIX);
        prefix.push_str(component);
        prefix.push('-');
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(parts: &[&str]) -> CgroupName {
        CgroupName::new(&CgroupName::root(), parts).unwrap()
    }

    #[test]
    fn literal_forms() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&[], "/", "/"),
            (&["kubepods"], "/kubepods", "/kubepods.slice"),
            (
                &["kubepods", "burstable"],
                "/kubepods/burstable",
                "/kubepods.slice/kubepods-burstable.slice",
            ),
            (
                &["kubepods", "burstable", "pod91c5eba9-485b-4531"],
                "/kubepods/burstable/pod91c5eba9-485b-4531",
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod91c5eba9_485b_4531.slice",
            ),
            (
                &["kubepods", "pod520ef51a-fff4"],
                "/kubepods/pod520ef51a-fff4",
                "/kubepods.slice/kubepods-pod520ef51a_fff4.slice",
            ),
            (
                &["system-reserved"],
                "/system-reserved",
                "/system_reserved.slice",
            ),
        ];
        for (parts, cgroupfs, systemd) in cases {
            let n = name(parts);
            assert_eq!(n.to_cgroupfs(), *cgroupfs, "cgroupfs form of {parts:?}");
            assert_eq!(
                n.to_systemd().unwrap(),
                *systemd,
                "systemd form of {parts:?}"
            );
            assert_eq!(CgroupName::from_cgroupfs(cgroupfs), n, "parse {cgroupfs}");
            if !parts.is_empty() {
                assert_eq!(CgroupName::from_systemd(systemd), n, "parse {systemd}");
            }
        }
    }

    #[test]
    fn components_are_validated() {
        assert!(CgroupName::root().child("a/b").is_err());
        assert!(CgroupName::root().child("a_b").is_err());
        assert!(CgroupName::root().child("a-b").is_ok());
    }

    #[test]
    fn slice_expansion() {
        assert_eq!(expand_slice("-.slice").unwrap(), "/");
        assert_eq!(
            expand_slice("a-b-c.slice").unwrap(),
            "/a.slice/a-b.slice/a-b-c.slice"
        );
        for bad in ["a.scope", "a--b.slice", "-a.slice", "a/b.slice", "a-.slice"] {
            assert!(expand_slice(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn cgroupfs_parse_of_nested_roots() {
        let n = CgroupName::from_cgroupfs("/kubelet-rs-test/kubepods");
        assert_eq!(n.components(), ["kubelet-rs-test", "kubepods"]);
        assert_eq!(n.to_cgroupfs(), "/kubelet-rs-test/kubepods");
    }
}
