//! Command-line flags: KubeletFlags and the configuration fields that are also flags.
