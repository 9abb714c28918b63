//! NewKubeletCommand: argv → flags → `--config` file → flags again over the
//! file (kubernetes#56171: a flag the user gave beats the file) → feature
//! gates → validation → [`KubeletServer`] → logging → `run()`.
//!
//! Everything up to the server is pure and synchronous ([`build`]); the
//! tokio runtime starts only once the configuration is known to be valid.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::options::help;
use super::options::parse::{Occurrence, ParseError, parse_args};
use super::options::values::ValueError;
use super::options::{
    CommandFlags, FlagValidationError, KubeletFlags, VersionRequest, table::Target,
    validate_kubelet_flags,
};
use super::server::KubeletServer;
use crate::apis::config::loader::{self, LoadError};
use crate::apis::config::types::KubeletConfiguration;
use crate::apis::config::validation::validate_kubelet_configuration;
use crate::features::{self, FeatureGate, FeatureGateError};
use crate::{logs, version};

/// What the command line asks for.
#[derive(Debug)]
pub enum Outcome {
    /// `--help`: the text for stdout.
    Help(String),
    /// `--version`: the text for stdout.
    Version(String),
    /// Start the kubelet with this server. `flag_values` are the values as
    /// the command line alone set them (what the `FLAG:` log lines show).
    Run {
        server: Arc<KubeletServer>,
        flag_values: Box<help::Defaults>,
    },
}

/// Why the kubelet will not start. Every variant means exit status 1.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("failed to parse kubelet flag: {0}")]
    Parse(#[from] ParseError),
    #[error("failed to parse kubelet flag: invalid argument {value:?} for {flag:?} flag: {source}")]
    InvalidValue {
        value: String,
        flag: String,
        source: ValueError,
    },
    #[error("unknown command {0}")]
    UnknownCommand(String),
    #[error("failed to set feature gates from the {source_name}: {error}")]
    FeatureGates {
        source_name: &'static str,
        error: FeatureGateError,
    },
    #[error("failed to validate kubelet flags: {0}")]
    Flags(#[from] FlagValidationError),
    #[error("failed to load kubelet config file: {0}")]
    Load(#[from] LoadError),
    #[error("failed to validate kubelet configuration{}:\n{}", .path.as_deref().map(|p| format!(" from {p:?}")).unwrap_or_default(), .errors.join("\n"))]
    Validation {
        path: Option<String>,
        errors: Vec<String>,
    },
    #[error("{0}")]
    Logging(#[from] logs::LogsError),
    #[error("cannot set feature gate DynamicKubeletConfig to true, feature is locked to false")]
    DynamicConfig,
    #[error("failed to start the async runtime: {0}")]
    Runtime(std::io::Error),
}

impl CommandError {
    /// Errors about the command line itself, which print the usage too.
    pub fn shows_usage(&self) -> bool {
        matches!(
            self,
            CommandError::Parse(_)
                | CommandError::InvalidValue { .. }
                | CommandError::UnknownCommand(_)
        )
    }
}

/// The values a pass over the flags produced.
struct Applied {
    flags: KubeletFlags,
    config: KubeletConfiguration,
    command: CommandFlags,
    /// klog-only flags the user gave (a non-text format refuses them).
    legacy_log_flags: Vec<String>,
}

fn display_name(occurrence: &Occurrence) -> String {
    let flag = occurrence.flag();
    match flag.short {
        Some(c) => format!("-{c}, --{}", flag.name),
        None => format!("--{}", flag.name),
    }
}

fn invalid(occurrence: &Occurrence, source: ValueError) -> CommandError {
    CommandError::InvalidValue {
        value: occurrence.value.clone(),
        flag: display_name(occurrence),
        source,
    }
}

/// The first pass: every flag onto the defaults, deprecation warnings to `warn`.
fn apply_flags(occurrences: &[Occurrence], warn: &mut dyn Write) -> Result<Applied, CommandError> {
    let mut applied = Applied {
        flags: KubeletFlags::default(),
        config: KubeletConfiguration::legacy_flag_defaults(),
        command: CommandFlags::default(),
        legacy_log_flags: Vec::new(),
    };
    let mut seen = HashSet::new();
    for o in occurrences {
        let first = seen.insert(o.index);
        let flag = o.flag();
        let result = match &flag.target {
            Target::Flags { set, .. } => set(&mut applied.flags, &o.value, first),
            Target::Config { set, .. } => set(&mut applied.config, &o.value, first),
            Target::Command { set, .. } => set(&mut applied.command, &o.value, first),
        };
        result.map_err(|reason| invalid(o, reason))?;
        if let Some(reason) = flag.deprecated {
            // A broken stderr cannot be reported anywhere better.
            let _ = writeln!(warn, "Flag --{} has been deprecated, {reason}", flag.name);
            if reason.contains("klog") && first {
                applied.legacy_log_flags.push(flag.name.to_string());
            }
        }
    }
    Ok(applied)
}

/// The precedence pass: the configuration flags again, over the file's
/// configuration, as if given for the first time. Feature gates from the
/// file that the flags did not name are kept.
pub fn apply_flag_precedence(
    occurrences: &[Occurrence],
    config: &mut KubeletConfiguration,
) -> Result<(), CommandError> {
    let original_gates = config.feature_gates.clone();
    let mut seen = HashSet::new();
    for o in occurrences {
        if let Target::Config { set, .. } = &o.flag().target {
            let first = seen.insert(o.index);
            set(config, &o.value, first).map_err(|reason| invalid(o, reason))?;
        }
    }
    for (name, value) in original_gates {
        config.feature_gates.entry(name).or_insert(value);
    }
    Ok(())
}

fn gate_from(
    settings: &BTreeMap<String, bool>,
    source_name: &'static str,
) -> Result<FeatureGate, CommandError> {
    let mut gate = FeatureGate::new();
    gate.set_from_map(settings)
        .map_err(|error| CommandError::FeatureGates { source_name, error })?;
    Ok(gate)
}

/// The `--version` text (`Kubernetes v1.25.x+…`, which kubeadm parses).
pub fn version_text(request: VersionRequest) -> Option<String> {
    match request {
        VersionRequest::No => None,
        VersionRequest::Yes => Some(format!("Kubernetes {}\n", version::git_version())),
        VersionRequest::Raw => {
            let core = version::KUBERNETES_VERSION.trim_start_matches('v');
            let mut parts = core.split('.');
            let (major, minor) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            Some(format!(
                "version.Info{{Major:{major:?}, Minor:{minor:?}, GitVersion:{:?}, GitCommit:\"\", GitTreeState:\"\", BuildDate:\"\", GoVersion:\"\", Compiler:\"rustc\", Platform:\"{}/{}\"}}\n",
                version::git_version(),
                std::env::consts::OS,
                match std::env::consts::ARCH {
                    "x86_64" => "amd64",
                    "aarch64" => "arm64",
                    other => other,
                }
            ))
        }
    }
}

/// Everything from argv to the server, without side effects other than the
/// deprecation warnings written to `warn` and log lines.
pub fn build<I, T>(args: I, warn: &mut dyn Write) -> Result<Outcome, CommandError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    let parsed = parse_args(args)?;
    let applied = apply_flags(&parsed.occurrences, warn)?;
    if let Some(command) = parsed.positionals.first() {
        return Err(CommandError::UnknownCommand(command.clone()));
    }
    if applied.command.help {
        return Ok(Outcome::Help(help::help()));
    }
    if let Some(text) = version_text(applied.command.version) {
        return Ok(Outcome::Version(text));
    }
    let Applied {
        flags,
        config: flag_config,
        legacy_log_flags,
        command,
    } = applied;
    let flag_values = Box::new(help::Defaults {
        flags: flags.clone(),
        config: flag_config.clone(),
        command,
    });
    let mut gate = gate_from(&flag_config.feature_gates, "command line")?;
    validate_kubelet_flags(&flags, &gate)?;
    if parsed
        .occurrences
        .iter()
        .any(|o| o.flag().name == "pod-infra-container-image")
    {
        tracing::info!(
            "The image in --pod-infra-container-image is only protected from image garbage collection; set the same image in the container runtime"
        );
    }

    let mut config = flag_config;
    let mut config_path = None;
    if !flags.kubelet_config_file.is_empty() {
        let loaded = loader::load_config_file(Path::new(&flags.kubelet_config_file))?;
        if !loaded.strict_errors.is_empty() {
            tracing::info!(
                err = %loaded.strict_errors.join("; "),
                path = %flags.kubelet_config_file,
                "Using lenient decoding as strict decoding failed"
            );
        }
        config = loaded.config;
        apply_flag_precedence(&parsed.occurrences, &mut config)?;
        gate = gate_from(&config.feature_gates, "configuration file")?;
        config_path = Some(flags.kubelet_config_file.clone());
    }

    let mut errors = match validate_kubelet_configuration(&config, &gate) {
        Ok(()) => Vec::new(),
        Err(e) => e.errors,
    };
    for e in config.logging.validate(&gate, &legacy_log_flags) {
        if !errors.contains(&e) {
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        return Err(CommandError::Validation {
            path: config_path,
            errors,
        });
    }
    if !config.kubelet_cgroups.is_empty()
        && !config.kube_reserved_cgroup.is_empty()
        && !config
            .kubelet_cgroups
            .starts_with(&config.kube_reserved_cgroup)
    {
        tracing::info!(
            "Unsupported configuration: kubeletCgroups is not within kubeReservedCgroup"
        );
    }
    if gate.enabled(features::DYNAMIC_KUBELET_CONFIG) {
        return Err(CommandError::DynamicConfig);
    }
    Ok(Outcome::Run {
        server: KubeletServer::new(flags, config, gate),
        flag_values,
    })
}

/// `FLAG: --name="value"` for every flag, at `-v=1`, as the Go kubelet logs
/// its command line.
fn log_flags(values: &help::Defaults) {
    if !logs::v_enabled(1) {
        return;
    }
    let mut flags: Vec<_> = super::options::flag_table().iter().collect();
    flags.sort_by_key(|f| f.name);
    for flag in flags {
        tracing::info!(
            target: logs::PRINTF_TARGET,
            v = 1,
            "FLAG: --{}={:?}",
            flag.name,
            values.value_of(flag)
        );
    }
}

/// klog's own (deprecated) output flags, which the text format honours.
fn apply_klog_flags(server: &KubeletServer) -> Result<(), logs::LogsError> {
    if server.config.logging.format != logs::config::TEXT_FORMAT {
        return Ok(());
    }
    let k = &server.flags.globals.klog;
    let path = |p: &str| (!p.is_empty()).then(|| std::path::PathBuf::from(p));
    logs::set_legacy_output(logs::LegacyOutput {
        logtostderr: k.logtostderr,
        alsologtostderr: k.alsologtostderr,
        stderr_threshold: logs::legacy::parse_threshold(&k.stderrthreshold),
        log_file: path(&k.log_file),
        log_dir: path(&k.log_dir),
        skip_headers: k.skip_headers,
        add_dir_header: k.add_dir_header,
    })
}

/// Logs why the command failed (as the Go kubelet's `command failed`
/// line) and, for command-line mistakes, the usage.
fn report(error: &CommandError) {
    tracing::error!(err = %error, "command failed");
    if error.shows_usage() {
        let _ = std::io::stderr().write_all(help::usage().as_bytes());
    }
}

/// Runs the kubelet command: returns the process exit status. `kubelet
/// hollow ...` runs hollow nodes instead ([`super::hollow`]).
pub fn execute<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    logs::init_default();
    let args: Vec<std::ffi::OsString> = args.into_iter().skip(1).map(Into::into).collect();
    if args.first().is_some_and(|a| a == "hollow") {
        let rest = args[1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return super::hollow::execute(rest);
    }
    let server = match prepare(args) {
        Ok(server) => server,
        Err(code) => return code,
    };
    let runtime = match crate::util::runtime::build() {
        Ok(rt) => rt,
        Err(e) => {
            report(&CommandError::Runtime(e));
            return 1;
        }
    };
    match runtime.block_on(super::run::run(server)) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(err = %e, "Kubelet exited");
            1
        }
    }
}

/// The kubelet's arguments (without the program name) to the server, with
/// feature gates and logging applied; `Err` is the exit status when the
/// command ends here (help, version, errors).
pub fn prepare<I, T>(args: I) -> Result<Arc<KubeletServer>, u8>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    let outcome = build(args, &mut std::io::stderr());
    let (server, flag_values) = match outcome {
        Ok(Outcome::Help(text)) | Ok(Outcome::Version(text)) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            return Err(0);
        }
        Ok(Outcome::Run {
            server,
            flag_values,
        }) => (server, flag_values),
        Err(e) => {
            report(&e);
            return Err(1);
        }
    };
    features::set_default_feature_gate(server.feature_gate.clone());
    if let Err(e) = logs::apply(&server.config.logging).and_then(|()| apply_klog_flags(&server)) {
        report(&CommandError::Logging(e));
        return Err(1);
    }
    log_flags(&flag_values);
    if logs::v_enabled(1) {
        tracing::info!(
            target: logs::PRINTF_TARGET,
            v = 1,
            "feature gates: {}",
            server.feature_gate.go_string()
        );
    }
    if logs::v_enabled(5) {
        let mut shown = server.config.clone();
        for values in shown.static_pod_url_header.values_mut() {
            *values = vec!["<masked>".to_string()];
        }
        crate::vlog!(5, configuration = %shown.to_configz_json(), "KubeletConfiguration");
    }
    Ok(server)
}
