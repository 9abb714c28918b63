//! `machine_*`: the machine's CPUs, sockets and memory (and the NVM
//! families, zero without NVM), labelled by machine, system and boot ids.

use std::time::SystemTime;

use super::{Families, millis};
use crate::cadvisor::MachineInfo;
use crate::metrics::constant::ConstFamily;

/// The machine families; `None` gives only `machine_scrape_error 1`.
pub fn machine_families(machine: Option<&(MachineInfo, SystemTime)>) -> Vec<ConstFamily> {
    let mut f = Families::default();
    f.add(
        "machine_scrape_error",
        "gauge",
        "1 when reading the machine's description failed, else 0.",
        vec![],
        if machine.is_some() { 0.0 } else { 1.0 },
        None,
    );
    let Some((m, at)) = machine else {
        return f.into_vec();
    };
    let ts = Some(millis(*at));
    let base = || {
        vec![
            ("boot_id".to_string(), m.boot_id.clone()),
            ("machine_id".to_string(), m.machine_id.clone()),
            ("system_uuid".to_string(), m.system_uuid.clone()),
        ]
    };
    let plain: [(&'static str, &'static str, f64); 5] = [
        (
            "machine_cpu_physical_cores",
            "Physical CPU cores of the machine.",
            m.num_physical_cores as f64,
        ),
        (
            "machine_cpu_cores",
            "Logical CPUs of the machine.",
            m.num_cores as f64,
        ),
        (
            "machine_cpu_sockets",
            "CPU sockets of the machine.",
            m.num_sockets as f64,
        ),
        (
            "machine_memory_bytes",
            "Memory installed in the machine, in bytes.",
            m.memory_capacity as f64,
        ),
        (
            "machine_nvm_avg_power_budget_watts",
            "Average power budget of the machine's non-volatile memory, in watts.",
            0.0,
        ),
    ];
    for (name, help, v) in plain {
        f.add(name, "gauge", help, base(), v, ts);
    }
    for mode in ["memory_mode", "app_direct_mode"] {
        let mut l = base();
        l.push(("mode".to_string(), mode.to_string()));
        f.add(
            "machine_nvm_capacity",
            "gauge",
            "Non-volatile memory capacity by mode, in bytes.",
            l,
            0.0,
            ts,
        );
    }
    f.into_vec()
}
