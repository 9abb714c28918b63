//! `cpuManagerPolicyOptions`: each option belongs to a maturity level whose
//! feature gate must be on; values are booleans.

use std::collections::BTreeMap;

use super::error::CpuManagerError;

pub const FULL_PCPUS_ONLY_OPTION: &str = "full-pcpus-only";
pub const DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION: &str = "distribute-cpus-across-numa";
pub const ALIGN_BY_SOCKET_OPTION: &str = "align-by-socket";

const ALPHA_OPTIONS: &[&str] = &[DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION, ALIGN_BY_SOCKET_OPTION];
const BETA_OPTIONS: &[&str] = &[FULL_PCPUS_ONLY_OPTION];

/// The feature gates the options depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionGates {
    /// CPUManagerPolicyAlphaOptions.
    pub alpha: bool,
    /// CPUManagerPolicyBetaOptions.
    pub beta: bool,
}

impl Default for OptionGates {
    fn default() -> Self {
        OptionGates {
            alpha: false,
            beta: true,
        }
    }
}

/// Whether `option` is known and its level's gate is on.
pub fn check_policy_option_available(
    option: &str,
    gates: OptionGates,
) -> Result<(), CpuManagerError> {
    let alpha = ALPHA_OPTIONS.contains(&option);
    let beta = BETA_OPTIONS.contains(&option);
    if !alpha && !beta {
        return Err(CpuManagerError::UnknownOption(option.into()));
    }
    if alpha && !gates.alpha {
        return Err(CpuManagerError::OptionGateOff {
            level: "Alpha",
            option: option.into(),
        });
    }
    if beta && !gates.beta {
        return Err(CpuManagerError::OptionGateOff {
            level: "Beta",
            option: option.into(),
        });
    }
    Ok(())
}

/// The static policy's options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaticPolicyOptions {
    /// `full-pcpus-only`: only whole physical cores are handed out.
    pub full_physical_cpus_only: bool,
    /// `distribute-cpus-across-numa`: requests spanning NUMA nodes are
    /// spread evenly over them.
    pub distribute_cpus_across_numa: bool,
    /// `align-by-socket`: NUMA hints widen to whole sockets, and hints
    /// spanning the fewest sockets are preferred.
    pub align_by_socket: bool,
}

/// Go's strconv.ParseBool.
fn parse_bool(name: &str, value: &str) -> Result<bool, CpuManagerError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(CpuManagerError::OptionValue {
            name: name.into(),
            value: value.into(),
        }),
    }
}

impl StaticPolicyOptions {
    pub fn new(
        options: &BTreeMap<String, String>,
        gates: OptionGates,
    ) -> Result<Self, CpuManagerError> {
        let mut opts = StaticPolicyOptions::default();
        for (name, value) in options {
            check_policy_option_available(name, gates)?;
            match name.as_str() {
                FULL_PCPUS_ONLY_OPTION => opts.full_physical_cpus_only = parse_bool(name, value)?,
                DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION => {
                    opts.distribute_cpus_across_numa = parse_bool(name, value)?
                }
                ALIGN_BY_SOCKET_OPTION => opts.align_by_socket = parse_bool(name, value)?,
                _ => {
                    return Err(CpuManagerError::UnsupportedOption {
                        name: name.clone(),
                        value: value.clone(),
                    });
                }
            }
        }
        Ok(opts)
    }

    /// Options that do not fit the machine or the topology manager's
    /// policy (Go's ValidateStaticPolicyOptions).
    pub fn validate(
        &self,
        topology: &super::topology::CpuTopology,
        topology_policy: &str,
    ) -> Result<(), CpuManagerError> {
        if !self.align_by_socket {
            return Ok(());
        }
        if topology_policy == crate::cm::topologymanager::policy::POLICY_SINGLE_NUMA_NODE {
            return Err(CpuManagerError::AlignBySocket(format!(
                "Topolgy manager {topology_policy} policy is incompatible with CPUManager {ALIGN_BY_SOCKET_OPTION} policy option"
            )));
        }
        if topology.num_sockets > topology.num_numa_nodes {
            return Err(CpuManagerError::AlignBySocket(
                "Align by socket is not compatible with hardware where number of sockets are more than number of NUMA".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_table() {
        let on = OptionGates {
            alpha: true,
            beta: true,
        };
        let cases: &[(&str, &str, OptionGates, Result<bool, &str>)] = &[
            ("full-pcpus-only", "true", OptionGates::default(), Ok(true)),
            ("full-pcpus-only", "F", OptionGates::default(), Ok(false)),
            (
                "full-pcpus-only",
                "yes",
                OptionGates::default(),
                Err("bad value for option \"full-pcpus-only\""),
            ),
            (
                "full-pcpus-only",
                "true",
                OptionGates {
                    alpha: false,
                    beta: false,
                },
                Err(
                    "CPU Manager Policy Beta-level Options not enabled, but option \"full-pcpus-only\" provided",
                ),
            ),
            (
                "distribute-cpus-across-numa",
                "true",
                OptionGates::default(),
                Err(
                    "CPU Manager Policy Alpha-level Options not enabled, but option \"distribute-cpus-across-numa\" provided",
                ),
            ),
            ("distribute-cpus-across-numa", "true", on, Ok(false)),
            (
                "bogus",
                "true",
                on,
                Err("unknown CPU Manager Policy option: \"bogus\""),
            ),
        ];
        for (name, value, gates, want) in cases {
            let map = [(name.to_string(), value.to_string())].into();
            match (StaticPolicyOptions::new(&map, *gates), want) {
                (Ok(o), Ok(w)) => assert_eq!(o.full_physical_cpus_only, *w, "{name}={value}"),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{name}: {e}"),
                (got, want) => panic!("{name}={value}: got {got:?}, want {want:?}"),
            }
        }
    }
}
