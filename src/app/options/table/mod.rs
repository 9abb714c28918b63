//! The one flag table (declared in `kubelet` and `config`): every flag of the v1.25 kubelet with its value kind,
//! where it writes, its deprecation and its help text. Parsing, help,
//! precedence over the configuration file and the `FLAG:` log all read it.

use std::sync::LazyLock;

use super::values::ValueError;
use super::{CommandFlags, KubeletFlags};
use crate::apis::config::types::KubeletConfiguration;

/// Where a flag's value goes.
pub enum Target {
    /// A [`KubeletFlags`] field.
    Flags {
        set: fn(&mut KubeletFlags, &str, bool) -> Result<(), ValueError>,
        get: fn(&KubeletFlags) -> String,
    },
    /// A configuration field: re-applied over a `--config` file.
    Config {
        set: fn(&mut KubeletConfiguration, &str, bool) -> Result<(), ValueError>,
        get: fn(&KubeletConfiguration) -> String,
    },
    /// `--help`, `--version`.
    Command {
        set: fn(&mut CommandFlags, &str, bool) -> Result<(), ValueError>,
        get: fn(&CommandFlags) -> String,
    },
}

/// One flag.
pub struct Flag {
    pub name: &'static str,
    pub short: Option<char>,
    /// The value type as help names it.
    pub type_name: &'static str,
    /// What a bare `--flag` means (bool-like flags); `None`: a value is required.
    pub no_opt: Option<&'static str>,
    /// Why the flag is deprecated; it still works, with a warning.
    pub deprecated: Option<&'static str>,
    pub usage: &'static str,
    pub target: Target,
}

impl Flag {
    /// Whether the flag writes a configuration field.
    pub fn is_config(&self) -> bool {
        matches!(self.target, Target::Config { .. })
    }

    /// The type shown after the flag name in help: a word quoted with
    /// backquotes in the usage, else the type (with `[=default]` for
    /// optional-value flags that are not bool).
    pub fn help_type(&self) -> String {
        if let Some(start) = self.usage.find('`')
            && let Some(len) = self.usage[start + 1..].find('`')
        {
            return self.usage[start + 1..start + 1 + len].to_string();
        }
        match self.no_opt {
            Some(v) if self.type_name != "bool" => format!("{}[={v}]", self.type_name),
            _ => self.type_name.to_string(),
        }
    }
}

/// Deprecation of configuration fields that are also flags.
pub const CONFIG_FILE: &str = "set it in the file given by --config instead (see https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/)";
const CADVISOR: &str =
    "it came from cAdvisor by mistake and will be removed after the usual deprecation period";
const KLOG: &str = "klog's own flags will be removed in a future release (see https://github.com/kubernetes/enhancements/tree/master/keps/sig-instrumentation/2845-deprecate-klog-specific-flags-in-k8s-components)";
const EVICTION: &str =
    "use --eviction-hard or --eviction-soft instead; it will be removed in a future version";
const FUTURE: &str = "it will be removed in a future version";
const PRE_CSI: &str = "it will be removed in 1.25 or later, in favour of CSI";
const CLOUD: &str =
    "it will be removed in 1.25 or later, together with the in-tree cloud providers";

macro_rules! flag {
    ($target:ident, $name:literal, $short:expr, $kind:ident, $($field:ident).+, $dep:expr, $usage:literal) => {
        Flag {
            name: $name,
            short: $short,
            type_name: <values::$kind as FlagValue>::TYPE,
            no_opt: <values::$kind as FlagValue>::NO_OPT,
            deprecated: $dep,
            usage: $usage,
            target: Target::$target {
                set: |t, v, first| <values::$kind as FlagValue>::set(&mut t.$($field).+, v, first),
                get: |t| <values::$kind as FlagValue>::get(&t.$($field).+),
            },
        }
    };
}

/// A KubeletFlags field.
macro_rules! kf {
    ($name:literal, $kind:ident, $($field:ident).+, $dep:expr, $usage:literal) => {
        flag!(Flags, $name, None, $kind, $($field).+, $dep, $usage)
    };
}

/// A configuration field, deprecated as a flag.
macro_rules! cf {
    ($name:literal, $kind:ident, $($field:ident).+, $usage:literal) => {
        flag!(Config, $name, None, $kind, $($field).+, Some(CONFIG_FILE), $usage)
    };
}

mod config;
mod kubelet;

static FLAGS: LazyLock<Vec<Flag>> = LazyLock::new(build);

/// The flag table.
pub fn flag_table() -> &'static [Flag] {
    &FLAGS
}

/// Looks a flag up by its (normalised) long name.
pub fn lookup(name: &str) -> Option<(usize, &'static Flag)> {
    flag_table()
        .iter()
        .enumerate()
        .find(|(_, f)| f.name == name)
}

/// Looks a flag up by its one-letter form.
pub fn lookup_short(c: char) -> Option<(usize, &'static Flag)> {
    flag_table()
        .iter()
        .enumerate()
        .find(|(_, f)| f.short == Some(c))
}

fn build() -> Vec<Flag> {
    let mut flags = kubelet::flags();
    flags.extend(config::flags());
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_shorthands_are_unique() {
        let mut names = std::collections::HashSet::new();
        for f in flag_table() {
            assert!(names.insert(f.name), "{} twice", f.name);
            assert!(!f.name.contains('_'), "{}", f.name);
        }
        let shorts: Vec<char> = flag_table().iter().filter_map(|f| f.short).collect();
        assert_eq!(shorts, vec!['h', 'v']);
    }

    #[test]
    fn help_types_follow_pflag() {
        let ty = |name: &str| lookup(name).unwrap().1.help_type();
        assert_eq!(ty("seccomp-default"), "RuntimeDefault");
        assert_eq!(ty("version"), "version[=true]");
        assert_eq!(ty("fail-swap-on"), "bool");
        assert_eq!(ty("eviction-hard"), "mapStringString");
        assert_eq!(ty("max-open-files"), "int");
    }
}
