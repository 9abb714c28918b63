//! `kubelet hollow`'s own flags; every other argument is a kubelet flag
//! (`--kubeconfig`, `--max-pods`, `--node-labels`, `--register-with-taints`,
//! `--config`, `-v`, ...), parsed by the kubelet's command line as usual.

use std::path::PathBuf;

use crate::cadvisor::MachineSpec;
use crate::util::quantity::Quantity;

/// Why the hollow flags are unusable.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error("invalid value {value:?} for --{flag}: {reason}")]
    Value {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("flag needs an argument: --{0}")]
    Missing(&'static str),
    #[error("--nodes must be at least 1")]
    NoNodes,
}

/// The hollow nodes to run.
#[derive(Debug, Clone, PartialEq)]
pub struct HollowOptions {
    /// How many nodes (`--nodes`).
    pub nodes: u32,
    /// Node names are `<prefix>-<i>` (`--node-name-prefix`, default `hollow`).
    pub prefix: String,
    /// The first `i` (`--first-node-index`, default 0).
    pub first_index: u32,
    /// Each node's root directory is `<state-dir>/<name>` (`--state-dir`).
    pub state_dir: PathBuf,
    /// The machine every node describes (`--machine-cpus`,
    /// `--machine-memory`, `--machine-disk`).
    pub machine: MachineSpec,
}

impl Default for HollowOptions {
    fn default() -> Self {
        HollowOptions {
            nodes: 1,
            prefix: "hollow".into(),
            first_index: 0,
            state_dir: PathBuf::from("/var/lib/kubelet-hollow"),
            machine: MachineSpec::default(),
        }
    }
}

/// The hollow flags' names.
const FLAGS: [&str; 7] = [
    "nodes",
    "node-name-prefix",
    "first-node-index",
    "state-dir",
    "machine-cpus",
    "machine-memory",
    "machine-disk",
];

fn number<T: std::str::FromStr>(flag: &'static str, v: &str) -> Result<T, OptionsError>
where
    T::Err: std::fmt::Display,
{
    v.parse().map_err(|e: T::Err| OptionsError::Value {
        flag,
        value: v.to_string(),
        reason: e.to_string(),
    })
}

fn bytes(flag: &'static str, v: &str) -> Result<u64, OptionsError> {
    let q: Quantity = v.parse().map_err(|e| OptionsError::Value {
        flag,
        value: v.to_string(),
        reason: format!("{e}"),
    })?;
    u64::try_from(q.value()).map_err(|_| OptionsError::Value {
        flag,
        value: v.to_string(),
        reason: "must not be negative".into(),
    })
}

impl HollowOptions {
    fn set(&mut self, flag: &'static str, v: &str) -> Result<(), OptionsError> {
        match flag {
            "nodes" => self.nodes = number(flag, v)?,
            "node-name-prefix" => self.prefix = v.to_string(),
            "first-node-index" => self.first_index = number(flag, v)?,
            "state-dir" => self.state_dir = PathBuf::from(v),
            "machine-cpus" => self.machine.cpus = number(flag, v)?,
            "machine-memory" => self.machine.memory = bytes(flag, v)?,
            _ => self.machine.disk = bytes(flag, v)?,
        }
        Ok(())
    }

    /// Splits argv (after `hollow`) into the hollow options and the
    /// kubelet's arguments (`--flag=value` or `--flag value`).
    pub fn parse(args: Vec<String>) -> Result<(Self, Vec<String>), OptionsError> {
        let mut opts = HollowOptions::default();
        let mut rest = Vec::new();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let body = arg.strip_prefix("--").unwrap_or("");
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let Some(flag) = FLAGS.iter().copied().find(|f| *f == name) else {
                rest.push(arg);
                continue;
            };
            let value = match inline {
                Some(v) => v,
                None => it.next().ok_or(OptionsError::Missing(flag))?,
            };
            opts.set(flag, &value)?;
        }
        if opts.nodes == 0 {
            return Err(OptionsError::NoNodes);
        }
        Ok((opts, rest))
    }

    /// The name of the `n`-th node run here (0-based).
    pub fn node_name(&self, n: u32) -> String {
        format!("{}-{}", self.prefix, self.first_index.saturating_add(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    /// nodes, prefix, CPUs, the kubelet's arguments.
    type Parsed = (u32, &'static str, u32, &'static str);

    #[test]
    fn parse_table() {
        let cases: [(&str, Result<Parsed, &str>); 6] = [
            (
                "--nodes=3 --kubeconfig=/k",
                Ok((3, "hollow", 4, "--kubeconfig=/k")),
            ),
            (
                "--nodes 2 --node-name-prefix h --machine-cpus=8 --max-pods=20",
                Ok((2, "h", 8, "--max-pods=20")),
            ),
            ("--machine-memory=2Gi", Ok((1, "hollow", 4, ""))),
            ("--nodes=0", Err("at least 1")),
            ("--nodes=x", Err("invalid value \"x\" for --nodes")),
            ("--nodes", Err("needs an argument")),
        ];
        for (args, want) in cases {
            match (HollowOptions::parse(argv(args)), want) {
                (Ok((o, rest)), Ok((nodes, prefix, cpus, rest_want))) => {
                    assert_eq!(
                        (o.nodes, o.prefix.as_str(), o.machine.cpus),
                        (nodes, prefix, cpus),
                        "{args}"
                    );
                    assert_eq!(rest.join(" "), rest_want, "{args}");
                }
                (Err(e), Err(text)) => assert!(e.to_string().contains(text), "{args}: {e}"),
                (got, want) => panic!("{args}: got {got:?}, want {want:?}"),
            }
        }
        let (o, _) =
            HollowOptions::parse(argv("--machine-memory=2Gi --first-node-index=10")).unwrap();
        assert_eq!(o.machine.memory, 2 << 30);
        assert_eq!(o.node_name(0), "hollow-10");
    }
}
