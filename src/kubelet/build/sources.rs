//! The pod sources (Go's PodConfig with its file, HTTP and API server
//! sources) and the pod manager over them.

use std::sync::Arc;

use super::BuildError;
use super::api::ApiObjects;
use crate::apis::config::server::KubeletServer;
use crate::kubelet::config::{FileSource, HttpSource, PodConfig, PodUpdates, SourcesReady};
use crate::kubelet::pod::PodManager;
use crate::util::clock::Clock;

/// The pod config, its update stream and readiness.
pub struct PodSources {
    pub config: PodConfig,
    pub updates: PodUpdates,
    pub ready: SourcesReady,
}

/// The configured sources (staticPodPath, staticPodURL, the API server)
/// and the pod manager (with mirror pods' registrars when there is an API
/// server).
pub fn build(
    server: &KubeletServer,
    node_name: &str,
    api: Option<&ApiObjects>,
    clock: Arc<dyn Clock>,
) -> Result<(PodSources, Arc<PodManager>), BuildError> {
    let (config, updates) = PodConfig::new(clock.clone());
    add_local_sources(server, node_name, &config, &clock)?;
    if let Some(a) = api {
        tracing::info!("Adding apiserver pod source");
        config.add_source(Box::new(a.pod_source(node_name)));
    }
    let pod_manager = Arc::new(match api {
        Some(a) => PodManager::with_registrars(a.objects.registrars()),
        None => PodManager::new(),
    });
    let ready = config.sources_ready();
    Ok((
        PodSources {
            config,
            updates,
            ready,
        },
        pod_manager,
    ))
}

fn add_local_sources(
    server: &KubeletServer,
    node_name: &str,
    config: &PodConfig,
    clock: &Arc<dyn Clock>,
) -> Result<(), BuildError> {
    let c = &server.config;
    if !c.static_pod_path.is_empty() {
        tracing::info!(path = %c.static_pod_path, "Adding static pod path");
        let period = c.file_check_frequency.to_std();
        let source = FileSource::new(&c.static_pod_path, node_name, period);
        config.add_source(Box::new(source.with_clock(clock.clone())));
    }
    if !c.static_pod_url.is_empty() {
        tracing::info!(url = %c.static_pod_url, "Adding pod URL with HTTP header");
        let source = HttpSource::new(
            &c.static_pod_url,
            &c.static_pod_url_header,
            node_name,
            c.http_check_frequency.to_std(),
        )
        .map_err(|e| BuildError::Source {
            what: "staticPodURL",
            reason: e.to_string(),
        })?;
        config.add_source(Box::new(source));
    }
    Ok(())
}
