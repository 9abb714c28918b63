//! The systemd side of the systemd cgroup driver: slices are transient units
//! started, changed and stopped over D-Bus, behind the [`SystemdDbus`] seam.
//! The real client uses cgroups-rs's systemd D-Bus client to stop units and
//! set their properties, and zbus (the connection cgroups-rs itself uses) to
//! start them, since that client only starts units that are given processes
//! and a slice has none.

use std::sync::OnceLock;

use cgroups_rs::systemd as sd;

use super::cgroup_name::CgroupName;
use super::error::CmError;
use super::resources::ResourceConfig;

/// A D-Bus property value of a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropValue {
    Bool(bool),
    U64(u64),
    Str(String),
    StrList(Vec<String>),
    Bytes(Vec<u8>),
}

/// One property of a transient unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitProperty {
    pub name: &'static str,
    pub value: PropValue,
}

impl UnitProperty {
    pub fn new(name: &'static str, value: PropValue) -> Self {
        UnitProperty { name, value }
    }
}

/// The systemd manager calls the driver makes.
pub trait SystemdDbus: Send + Sync + 'static {
    /// Starts a transient unit; one that already exists is left as it is.
    fn start_transient_unit(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), CmError>;
    /// Changes properties of a running unit.
    fn set_unit_properties(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), CmError>;
    /// Stops a unit; one that does not exist counts as stopped.
    fn stop_unit(&self, unit: &str) -> Result<(), CmError>;
    /// The systemd version (`252` of `252.12-1`), 0 when unknown.
    fn version(&self) -> u32;
}

/// The parent slice and unit name of a cgroup under the systemd driver:
/// `[kubepods, burstable]` → (`kubepods.slice`, `kubepods-burstable.slice`).
pub fn unit_for(name: &CgroupName) -> Result<(String, String), CmError> {
    let literal = name.to_systemd()?;
    let (dir, base) = literal.rsplit_once('/').unwrap_or(("", &literal));
    if base.is_empty() {
        return Err(CmError::InvalidName {
            name: name.to_string(),
            reason: "the root cgroup is not a unit".into(),
        });
    }
    let parent = match dir.rsplit('/').next() {
        Some(p) if !p.is_empty() => p.to_string(),
        _ => "-.slice".to_string(),
    };
    Ok((parent, base.to_string()))
}

/// Properties a slice is started with (runc's Apply for a slice unit).
pub fn start_properties(parent: &str, unit: &str, unified: bool) -> Vec<UnitProperty> {
    let io = if unified {
        sd::IO_ACCOUNTING
    } else {
        sd::BLOCK_IO_ACCOUNTING
    };
    vec![
        UnitProperty::new(
            sd::DESCRIPTION,
            PropValue::Str(format!("libcontainer container {unit}")),
        ),
        UnitProperty::new(sd::WANTS, PropValue::StrList(vec![parent.to_string()])),
        UnitProperty::new(sd::MEMORY_ACCOUNTING, PropValue::Bool(true)),
        UnitProperty::new(sd::CPU_ACCOUNTING, PropValue::Bool(true)),
        UnitProperty::new(io, PropValue::Bool(true)),
        UnitProperty::new(sd::TASKS_ACCOUNTING, PropValue::Bool(true)),
        UnitProperty::new(sd::DEFAULT_DEPENDENCIES, PropValue::Bool(false)),
    ]
}

/// The unit properties that carry `r`'s limits (runc's resource properties
/// for v1 or v2). `cpu_weight` is the v2 weight already converted from shares.
pub fn resource_properties(
    r: &ResourceConfig,
    unified: bool,
    systemd_version: u32,
) -> Result<Vec<UnitProperty>, CmError> {
    let mut props = Vec::new();
    if let Some(memory) = r.memory.filter(|m| *m != 0) {
        let name = if unified {
            sd::MEMORY_MAX
        } else {
            sd::MEMORY_LIMIT
        };
        props.push(UnitProperty::new(name, PropValue::U64(memory as u64)));
    }
    if let Some(shares) = r.cpu_shares.filter(|s| *s != 0) {
        if unified {
            let weight = super::cgroupfs::v2::cpu_shares_to_weight(shares);
            props.push(UnitProperty::new(sd::CPU_WEIGHT, PropValue::U64(weight)));
        } else {
            props.push(UnitProperty::new(sd::CPU_SHARES, PropValue::U64(shares)));
        }
    }
    let quota = r.cpu_quota.unwrap_or(0);
    let period = r.cpu_period.unwrap_or(0);
    if period != 0 && systemd_version >= 242 {
        props.push(UnitProperty::new(
            sd::CPU_QUOTA_PERIOD_US,
            PropValue::U64(period),
        ));
    }
    if quota != 0 || period != 0 {
        props.push(UnitProperty::new(
            sd::CPU_QUOTA_PER_SEC_US,
            PropValue::U64(quota_per_sec_usec(quota, period)),
        ));
    }
    if let Some(pids) = r.pids_limit.filter(|p| *p > 0 || *p == -1) {
        props.push(UnitProperty::new(
            sd::TASKS_MAX,
            PropValue::U64(pids as u64),
        ));
    }
    if systemd_version >= 244 {
        if let Some(cpus) = r.cpuset_cpus.as_deref().filter(|s| !s.is_empty()) {
            props.push(UnitProperty::new(
                sd::ALLOWED_CPUS,
                PropValue::Bytes(list_to_mask(cpus)?),
            ));
        }
        if let Some(mems) = r.cpuset_mems.as_deref().filter(|s| !s.is_empty()) {
            props.push(UnitProperty::new(
                sd::ALLOWED_MEMORY_NODES,
                PropValue::Bytes(list_to_mask(mems)?),
            ));
        }
    }
    Ok(props)
}

/// CPUQuotaPerSecUSec for a CFS quota and period: infinity for no quota,
/// otherwise rounded up to whole percents of a CPU (10 ms), as runc does.
pub fn quota_per_sec_usec(quota: i64, period: u64) -> u64 {
    if quota <= 0 {
        return u64::MAX;
    }
    let period = if period == 0 { 100_000 } else { period };
    let mut per_sec = (quota as u64).saturating_mul(1_000_000) / period;
    if !per_sec.is_multiple_of(10_000) {
        per_sec = (per_sec / 10_000 + 1) * 10_000;
    }
    per_sec
}

/// A cpu or node list (`0-3,8`) as the byte mask systemd reads for
/// AllowedCPUs: bit `i % 8` of byte `i / 8` is cpu `i`.
pub fn list_to_mask(list: &str) -> Result<Vec<u8>, CmError> {
    let set = super::cpuset::CpuSet::parse(list)
        .map_err(|e| CmError::Config(format!("cpuset {list:?}: {e}")))?;
    let Some(max) = set.iter().max() else {
        return Err(CmError::Config(format!("cpuset {list:?} is empty")));
    };
    let mut mask = vec![0u8; (max as usize) / 8 + 1];
    for cpu in set.iter() {
        mask[(cpu as usize) / 8] |= 1 << (cpu % 8);
    }
    Ok(mask)
}

/// The real systemd manager on the system bus.
pub struct DbusSystemd {
    version: OnceLock<u32>,
}

const SYSTEMD_DEST: &str = "org.freedesktop.systemd1";
const SYSTEMD_PATH: &str = "/org/freedesktop/systemd1";
const SYSTEMD_MANAGER: &str = "org.freedesktop.systemd1.Manager";
const UNIT_EXISTS: &str = "org.freedesktop.systemd1.UnitExists";

impl DbusSystemd {
    /// Connects to the system bus; fails when no systemd answers there.
    pub fn connect() -> Result<Self, CmError> {
        let me = DbusSystemd {
            version: OnceLock::new(),
        };
        let version = me.query_version()?;
        let _ = me.version.set(version);
        Ok(me)
    }

    fn connection() -> Result<zbus::blocking::Connection, CmError> {
        zbus::blocking::Connection::system()
            .map_err(|e| CmError::Systemd(format!("connecting to the system bus: {e}")))
    }

    fn query_version(&self) -> Result<u32, CmError> {
        let conn = Self::connection()?;
        let reply = conn
            .call_method(
                Some(SYSTEMD_DEST),
                SYSTEMD_PATH,
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &(SYSTEMD_MANAGER, "Version"),
            )
            .map_err(|e| CmError::Systemd(format!("reading the systemd version: {e}")))?;
        let value: zbus::zvariant::OwnedValue = reply
            .body()
            .deserialize()
            .map_err(|e| CmError::Systemd(format!("decoding the systemd version: {e}")))?;
        let text: String = value.try_into().unwrap_or_default();
        Ok(parse_version(&text))
    }
}

/// The leading number of a systemd version string (`v245.4-1.fc32` → 245).
pub fn parse_version(text: &str) -> u32 {
    let t = text.trim().trim_matches('"');
    let t = t.strip_prefix('v').unwrap_or(t);
    let digits: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().unwrap_or(0)
}

fn to_value(v: &PropValue) -> zbus::zvariant::Value<'static> {
    use zbus::zvariant::Value;
    match v {
        PropValue::Bool(b) => Value::from(*b),
        PropValue::U64(n) => Value::from(*n),
        PropValue::Str(s) => Value::from(s.clone()),
        PropValue::StrList(l) => Value::from(l.clone()),
        PropValue::Bytes(b) => Value::from(b.clone()),
    }
}

impl SystemdDbus for DbusSystemd {
    fn start_transient_unit(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), CmError> {
        let conn = Self::connection()?;
        let props: Vec<(&str, zbus::zvariant::Value<'static>)> = properties
            .iter()
            .map(|p| (p.name, to_value(&p.value)))
            .collect();
        let aux: Vec<(&str, Vec<(&str, zbus::zvariant::Value<'static>)>)> = Vec::new();
        match conn.call_method(
            Some(SYSTEMD_DEST),
            SYSTEMD_PATH,
            Some(SYSTEMD_MANAGER),
            "StartTransientUnit",
            &(unit, sd::UNIT_MODE_REPLACE, props, aux),
        ) {
            Ok(_) => Ok(()),
            Err(zbus::Error::MethodError(name, _, _)) if name.as_str() == UNIT_EXISTS => Ok(()),
            Err(e) => Err(CmError::Systemd(format!("starting unit {unit}: {e}"))),
        }
    }

    fn set_unit_properties(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), CmError> {
        let props: Vec<sd::Property<'static>> = properties
            .iter()
            .map(|p| (p.name, to_value(&p.value)))
            .collect();
        let mut client = sd::SystemdClient::new(unit, Vec::new())
            .map_err(|e| CmError::Systemd(format!("unit {unit}: {e}")))?;
        client
            .set_properties(&props)
            .map_err(|e| CmError::Systemd(format!("setting properties of unit {unit}: {e}")))
    }

    fn stop_unit(&self, unit: &str) -> Result<(), CmError> {
        let client = sd::SystemdClient::new(unit, Vec::new())
            .map_err(|e| CmError::Systemd(format!("unit {unit}: {e}")))?;
        client
            .stop()
            .map_err(|e| CmError::Systemd(format!("stopping unit {unit}: {e}")))
    }

    fn version(&self) -> u32 {
        *self.version.get().unwrap_or(&0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_of_names() {
        let root = CgroupName::root();
        let kubepods = root.child("kubepods").unwrap();
        let burstable = kubepods.child("burstable").unwrap();
        let pod = burstable.child("pod12-34").unwrap();
        let cases = [
            (&kubepods, "-.slice", "kubepods.slice"),
            (&burstable, "kubepods.slice", "kubepods-burstable.slice"),
            (
                &pod,
                "kubepods-burstable.slice",
                "kubepods-burstable-pod12_34.slice",
            ),
        ];
        for (name, parent, unit) in cases {
            let (p, u) = unit_for(name).unwrap();
            assert_eq!((p.as_str(), u.as_str()), (parent, unit), "{name}");
        }
        assert!(unit_for(&root).is_err());
    }

    #[test]
    fn quota_rounding() {
        let cases = [
            (50_000, 100_000, 500_000),
            (100_000, 100_000, 1_000_000),
            (1_500, 100_000, 20_000),
            (-1, 100_000, u64::MAX),
            (0, 100_000, u64::MAX),
            (25_000, 0, 250_000),
        ];
        for (quota, period, want) in cases {
            assert_eq!(quota_per_sec_usec(quota, period), want, "{quota}/{period}");
        }
    }

    #[test]
    fn masks_are_little_endian_bytes() {
        assert_eq!(list_to_mask("2-4").unwrap(), [0b0001_1100]);
        assert_eq!(list_to_mask("1,7").unwrap(), [0b1000_0010]);
        assert_eq!(list_to_mask("0-4,9").unwrap(), [0b0001_1111, 0b0000_0010]);
        assert!(list_to_mask("").is_err());
        assert!(list_to_mask("1-3-4").is_err());
    }

    #[test]
    fn resource_properties_per_version() {
        let r = ResourceConfig {
            memory: Some(134217728),
            cpu_shares: Some(512),
            cpu_quota: Some(50000),
            cpu_period: Some(100000),
            pids_limit: Some(-1),
            cpuset_cpus: Some("0-1".into()),
            ..Default::default()
        };
        let v1 = resource_properties(&r, false, 252).unwrap();
        let names: Vec<&str> = v1.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "MemoryLimit",
                "CPUShares",
                "CPUQuotaPeriodUSec",
                "CPUQuotaPerSecUSec",
                "TasksMax",
                "AllowedCPUs"
            ]
        );
        assert_eq!(v1[3].value, PropValue::U64(500_000));
        assert_eq!(v1[4].value, PropValue::U64(u64::MAX));
        let v2 = resource_properties(&r, true, 241).unwrap();
        let names: Vec<&str> = v2.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            ["MemoryMax", "CPUWeight", "CPUQuotaPerSecUSec", "TasksMax"]
        );
        assert_eq!(v2[1].value, PropValue::U64(20));
    }

    #[test]
    fn version_strings() {
        for (text, want) in [
            ("252.12-1~deb12u1", 252),
            ("v245.4-1.fc32", 245),
            ("\"239\"", 239),
            ("x", 0),
        ] {
            assert_eq!(parse_version(text), want, "{text}");
        }
    }
}
