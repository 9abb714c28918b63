//! Help and usage text, generated from the flag table, and the rendering of
//! a flag's default the way pflag shows it (zero values left out, strings
//! quoted).

use super::table::{Flag, Target, flag_table};
use super::{CommandFlags, KubeletFlags};
use crate::apis::config::types::KubeletConfiguration;

/// The values flags start from, which help shows as defaults.
#[derive(Debug, Clone)]
pub struct Defaults {
    pub flags: KubeletFlags,
    pub config: KubeletConfiguration,
    pub command: CommandFlags,
}

impl Defaults {
    pub fn new() -> Self {
        Defaults {
            flags: KubeletFlags::default(),
            config: KubeletConfiguration::legacy_flag_defaults(),
            command: CommandFlags::default(),
        }
    }

    /// The flag's current text in these values.
    pub fn value_of(&self, flag: &Flag) -> String {
        match &flag.target {
            Target::Flags { get, .. } => get(&self.flags),
            Target::Config { get, .. } => get(&self.config),
            Target::Command { get, .. } => get(&self.command),
        }
    }
}

impl Default for Defaults {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether pflag would leave this default out of the help text.
fn is_zero(flag: &Flag, value: &str) -> bool {
    match flag.type_name {
        "bool" => value == "false",
        "duration" => value == "0" || value == "0s",
        "strings" => value == "[]",
        _ => matches!(value, "" | "0" | "false" | "<nil>"),
    }
}

/// The default as help shows it: `None` for zero values, quoted for strings.
pub fn default_display(flag: &Flag, defaults: &Defaults) -> Option<String> {
    let value = defaults.value_of(flag);
    if is_zero(flag, &value) {
        return None;
    }
    Some(if flag.type_name == "string" {
        format!("{value:?}")
    } else {
        value
    })
}

const ABOUT: &str = "The kubelet is the agent that runs on every node. It registers the node \
with the API server, starts and watches the containers of the pods assigned to the node (from \
the API server, static pod files or a manifest URL) through a CRI container runtime, and keeps \
their status, the node's status and its lease up to date.";

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in text.split('\n') {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            if !line.is_empty() && line.len() + 1 + word.len() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
    }
    lines
}

/// The flags section: one entry per flag, sorted by name.
pub fn flag_usages() -> String {
    let defaults = Defaults::new();
    let mut flags: Vec<&Flag> = flag_table().iter().collect();
    flags.sort_by_key(|f| f.name);
    let heads: Vec<String> = flags
        .iter()
        .map(|f| {
            let mut head = match f.short {
                Some(c) => format!("  -{c}, --{}", f.name),
                None => format!("      --{}", f.name),
            };
            let ty = f.help_type();
            if ty != "bool" {
                head.push(' ');
                head.push_str(&ty);
            }
            head
        })
        .collect();
    // Usage text starts in this column; longer heads get a line of their own.
    let width = 44;
    let mut out = String::new();
    for (flag, head) in flags.iter().zip(&heads) {
        let mut text = flag.usage.replace('`', "");
        if let Some(d) = default_display(flag, &defaults) {
            text.push_str(&format!(" (default {d})"));
        }
        if let Some(reason) = flag.deprecated {
            text.push_str(&format!(" (DEPRECATED: {reason})"));
        }
        let lines = wrap(&text, 110 - width);
        let mut lines = lines.iter();
        if head.len() + 2 > width {
            out.push_str(head);
            out.push('\n');
        } else if let Some(first) = lines.next() {
            out.push_str(&format!("{head:<width$}{first}\n"));
        }
        for line in lines {
            out.push_str(&format!("{:<width$}{line}\n", ""));
        }
    }
    out
}

/// The usage block printed after a command-line error.
pub fn usage() -> String {
    format!("Usage:\n  kubelet [flags]\n\nFlags:\n{}", flag_usages())
}

/// The full `--help` text.
pub fn help() -> String {
    format!("{}\n\n{}", wrap(ABOUT, 100).join("\n"), usage())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::options::table::lookup;

    #[test]
    fn defaults_render_like_pflag() {
        let d = Defaults::new();
        let shown = |name: &str| default_display(lookup(name).unwrap().1, &d);
        assert_eq!(
            shown("authorization-mode").as_deref(),
            Some("\"AlwaysAllow\"")
        );
        assert_eq!(shown("read-only-port").as_deref(), Some("10255"));
        assert_eq!(shown("anonymous-auth").as_deref(), Some("true"));
        assert_eq!(shown("authentication-token-webhook"), None);
        assert_eq!(
            shown("streaming-connection-idle-timeout").as_deref(),
            Some("4h0m0s")
        );
        assert_eq!(shown("enforce-node-allocatable").as_deref(), Some("[pods]"));
        assert_eq!(shown("minimum-container-ttl-duration"), None);
        assert_eq!(shown("v"), None);
        assert_eq!(shown("log-backtrace-at").as_deref(), Some(":0"));
    }

    #[test]
    fn help_mentions_every_flag_once() {
        let text = help();
        for f in flag_table() {
            let needle = format!("--{} ", f.name);
            let needle_eol = format!("--{}\n", f.name);
            assert!(
                text.contains(&needle) || text.contains(&needle_eol),
                "{} missing",
                f.name
            );
        }
        assert!(text.contains("(DEPRECATED: "));
    }
}
