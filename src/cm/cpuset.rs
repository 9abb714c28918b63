//! Sets of CPU (or NUMA node) ids in the kernel's list form, `0-3,8`.

use std::collections::BTreeSet;
use std::fmt;

use crate::util::cpuset::{CpuListError, parse_cpu_list};

/// A set of CPU ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet(BTreeSet<u32>);

impl CpuSet {
    pub fn new() -> Self {
        CpuSet::default()
    }

    /// Parses `0-3,8`; the empty string is the empty set.
    pub fn parse(text: &str) -> Result<Self, CpuListError> {
        parse_cpu_list(text).map(CpuSet)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn is_subset_of(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    /// The set of one CPU.
    pub fn of(cpu: u32) -> Self {
        CpuSet([cpu].into())
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    /// The CPUs of `self` not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    /// The ids, ascending.
    pub fn to_vec(&self) -> Vec<u32> {
        self.0.iter().copied().collect()
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let cases = [
            ("", "", 0),
            ("0", "0", 1),
            ("0-3", "0-3", 4),
            ("0,1,2,5", "0-2,5", 4),
            ("5,0-1", "0-1,5", 3),
            (" 2 - 3 ", "2-3", 2),
        ];
        for (text, printed, len) in cases {
            let s = CpuSet::parse(text).unwrap();
            assert_eq!(s.to_string(), printed, "{text:?}");
            assert_eq!(s.len(), len, "{text:?}");
        }
        for bad in ["a", "3-1", "1-2-3", "1,,2", "-1"] {
            assert!(CpuSet::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn subsets() {
        let all = CpuSet::parse("0-3").unwrap();
        assert!(CpuSet::parse("1,3").unwrap().is_subset_of(&all));
        assert!(!CpuSet::parse("4").unwrap().is_subset_of(&all));
    }
}
