//! cmd/kubelet/app: the start-up pipeline up to RunKubelet.
//!
//! [`command::execute`] turns argv into an immutable [`server::KubeletServer`]
//! (flags → config file → flag precedence → feature gates → validation) and
//! hands it to [`run::run`].

pub mod command;
pub mod dependencies;
pub mod hollow;
pub mod options;
pub mod run;
pub mod run_kubelet;
pub mod server;

#[cfg(test)]
mod tests;
