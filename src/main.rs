//! The `kubelet` binary. The pipeline lives in the library (`kubelet::app`).

use std::process::ExitCode;

fn main() -> anyhow::Result<ExitCode> {
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("another rustls crypto provider is already installed"))?;
    Ok(ExitCode::from(kubelet::app::command::execute(
        std::env::args_os(),
    )))
}
