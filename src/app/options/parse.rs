//! Parsing argv with pflag's semantics, clap doing the collecting.
//!
//! A first pass reads the arguments the way pflag does, so that errors read
//! as a Go kubelet's (`unknown flag: --foo`, `flag needs an argument: --port`)
//! and pflag's forms are understood: `--flag=value`, `--flag value`, bare
//! bool flags (`--flag`, never `--flag false`), `-v 3`/`-v3`/`-v=3`,
//! `_` and `-` alike in names (`--cgroup_driver`), `--` ending the flags.
//! It rewrites every flag occurrence as `--name=value`, which the clap
//! command built from the flag table then collects, in order, together with
//! the positional arguments.

use std::ffi::OsString;

use clap::{Arg, ArgAction, Command};

use super::table::{Flag, flag_table, lookup, lookup_short};

const POSITIONAL: &str = "\u{0}positional";

/// One flag occurrence: the flag's index in the table and its value text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    pub index: usize,
    pub value: String,
}

impl Occurrence {
    pub fn flag(&self) -> &'static Flag {
        &flag_table()[self.index]
    }
}

/// The command line split into flag occurrences (in order) and positional
/// arguments (which the kubelet refuses).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub occurrences: Vec<Occurrence>,
    pub positionals: Vec<String>,
}

/// A command line pflag would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unknown flag: --{0}")]
    UnknownFlag(String),
    #[error("unknown shorthand flag: {ch:?} in -{shorthands}")]
    UnknownShorthand { ch: char, shorthands: String },
    #[error("bad flag syntax: {0}")]
    BadSyntax(String),
    #[error("flag needs an argument: {0}")]
    MissingValue(String),
    #[error("argument {0:?} is not valid UTF-8")]
    NotUtf8(OsString),
    #[error("{0}")]
    Clap(String),
}

/// Rewrites argv into `--name=value` occurrences and positionals.
fn normalize(args: &[String]) -> Result<Vec<String>, ParseError> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let s = &args[i];
        i += 1;
        if s.len() < 2 || !s.starts_with('-') {
            out.push(s.clone());
            continue;
        }
        if s == "--" {
            out.push(s.clone());
            out.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(body) = s.strip_prefix("--") {
            if body.starts_with(['-', '=']) {
                return Err(ParseError::BadSyntax(s.clone()));
            }
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let normalized = name.replace('_', "-");
            let (_, flag) =
                lookup(&normalized).ok_or_else(|| ParseError::UnknownFlag(name.to_string()))?;
            let value = match (inline, flag.no_opt) {
                (Some(v), _) => v.to_string(),
                (None, Some(v)) => v.to_string(),
                (None, None) if i < args.len() => {
                    i += 1;
                    args[i - 1].clone()
                }
                (None, None) => return Err(ParseError::MissingValue(s.clone())),
            };
            out.push(format!("--{}={value}", flag.name));
            continue;
        }
        // A cluster of one-letter flags: -hv3, -v=3, -v 3.
        let mut shorthands = &s[1..];
        while let Some(c) = shorthands.chars().next() {
            let (_, flag) = lookup_short(c).ok_or_else(|| ParseError::UnknownShorthand {
                ch: c,
                shorthands: shorthands.to_string(),
            })?;
            let rest = &shorthands[c.len_utf8()..];
            let value = if let Some(v) = rest.strip_prefix('=').filter(|_| rest.len() > 1) {
                shorthands = "";
                v.to_string()
            } else if let Some(v) = flag.no_opt {
                shorthands = rest;
                v.to_string()
            } else if !rest.is_empty() {
                shorthands = "";
                rest.to_string()
            } else if i < args.len() {
                shorthands = "";
                i += 1;
                args[i - 1].clone()
            } else {
                return Err(ParseError::MissingValue(format!("{c:?} in -{shorthands}")));
            };
            out.push(format!("--{}={value}", flag.name));
        }
    }
    Ok(out)
}

/// The clap command generated from the flag table.
pub fn command() -> Command {
    let mut cmd = Command::new("kubelet")
        .no_binary_name(true)
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true)
        .arg(
            Arg::new(POSITIONAL)
                .num_args(0..)
                .action(ArgAction::Append)
                .value_parser(clap::value_parser!(String)),
        );
    for flag in flag_table() {
        cmd = cmd.arg(
            Arg::new(flag.name)
                .long(flag.name)
                .num_args(1)
                .require_equals(true)
                .allow_hyphen_values(true)
                .action(ArgAction::Append)
                .value_parser(clap::value_parser!(String)),
        );
    }
    cmd
}

/// Splits a command line (without the program name) into flag occurrences
/// and positional arguments.
pub fn parse_args<I, T>(args: I) -> Result<Parsed, ParseError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let args: Vec<String> = args
        .into_iter()
        .map(|a| {
            let a: OsString = a.into();
            a.into_string().map_err(ParseError::NotUtf8)
        })
        .collect::<Result<_, _>>()?;
    let normalized = normalize(&args)?;
    let matches = command()
        .try_get_matches_from(normalized)
        .map_err(|e| ParseError::Clap(e.to_string().trim().to_string()))?;
    let mut indexed: Vec<(usize, Occurrence)> = Vec::new();
    for (index, flag) in flag_table().iter().enumerate() {
        let (Some(positions), Some(values)) = (
            matches.indices_of(flag.name),
            matches.get_many::<String>(flag.name),
        ) else {
            continue;
        };
        for (pos, value) in positions.zip(values) {
            indexed.push((
                pos,
                Occurrence {
                    index,
                    value: value.clone(),
                },
            ));
        }
    }
    indexed.sort_by_key(|(pos, _)| *pos);
    let positionals = matches
        .get_many::<String>(POSITIONAL)
        .map(|v| v.cloned().collect())
        .unwrap_or_default();
    Ok(Parsed {
        occurrences: indexed.into_iter().map(|(_, o)| o).collect(),
        positionals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occurrences(args: &[&str]) -> Vec<(&'static str, String)> {
        parse_args(args.iter().copied())
            .unwrap()
            .occurrences
            .iter()
            .map(|o| (o.flag().name, o.value.clone()))
            .collect()
    }

    fn pairs(p: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        p.iter().map(|(n, v)| (*n, v.to_string())).collect()
    }

    #[test]
    fn pflag_forms() {
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
        let cases: &[Case] = &[
            (&["--port=1"], &[("port", "1")]),
            (&["--port", "1"], &[("port", "1")]),
            (&["--oom-score-adj", "-5"], &[("oom-score-adj", "-5")]),
            (
                &["--hostname-override", "--x"],
                &[("hostname-override", "--x")],
            ),
            (&["--hostname-override="], &[("hostname-override", "")]),
            (&["--fail-swap-on"], &[("fail-swap-on", "true")]),
            (&["--fail-swap-on=false"], &[("fail-swap-on", "false")]),
            (
                &["--cgroup_driver=systemd"],
                &[("cgroup-driver", "systemd")],
            ),
            (&["-v", "4"], &[("v", "4")]),
            (&["-v4"], &[("v", "4")]),
            (&["-v=4"], &[("v", "4")]),
            (&["--v=4"], &[("v", "4")]),
            (&["-h"], &[("help", "true")]),
            (&["-hv", "2"], &[("help", "true"), ("v", "2")]),
            (&["--version"], &[("version", "true")]),
            (&["--version=raw"], &[("version", "raw")]),
            (
                &["--node-labels", "a=b", "--port=2", "--node-labels=c=d"],
                &[
                    ("node-labels", "a=b"),
                    ("port", "2"),
                    ("node-labels", "c=d"),
                ],
            ),
            (
                &["--eviction-hard", "memory.available<1Gi"],
                &[("eviction-hard", "memory.available<1Gi")],
            ),
        ];
        for (args, want) in cases {
            assert_eq!(occurrences(args), pairs(want), "{args:?}");
        }
    }

    #[test]
    fn positionals_are_collected() {
        let cases: &[(&[&str], &[&str])] = &[
            (&["run"], &["run"]),
            (&["--fail-swap-on", "false"], &["false"]),
            (&["--port=1", "--", "--port=2"], &["--port=2"]),
            (&["-"], &["-"]),
            (&["a", "--port=1", "b"], &["a", "b"]),
        ];
        for (args, want) in cases {
            let parsed = parse_args(args.iter().copied()).unwrap();
            assert_eq!(parsed.positionals, *want, "{args:?}");
        }
    }

    #[test]
    fn errors_read_like_pflag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--no-such-flag"], "unknown flag: --no-such-flag"),
            (&["--no-such-flag=1"], "unknown flag: --no-such-flag"),
            (&["--docker-endpoint=x"], "unknown flag: --docker-endpoint"),
            (
                &["--dynamic-config-dir", "/x"],
                "unknown flag: --dynamic-config-dir",
            ),
            (&["--network-plugin=cni"], "unknown flag: --network-plugin"),
            (&["-x"], "unknown shorthand flag: 'x' in -x"),
            (&["-config"], "unknown shorthand flag: 'c' in -config"),
            (&["--port"], "flag needs an argument: --port"),
            (&["-v"], "flag needs an argument: 'v' in -v"),
            (&["---port"], "bad flag syntax: ---port"),
            (&["--=x"], "bad flag syntax: --=x"),
        ];
        for (args, want) in cases {
            let err = parse_args(args.iter().copied()).unwrap_err();
            assert_eq!(err.to_string(), *want, "{args:?}");
        }
    }

    #[test]
    fn clap_command_is_consistent() {
        command().debug_assert();
    }
}
