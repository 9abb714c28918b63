//! A real kube-apiserver named by the environment:
//! `KUBELET_RS_TEST_KUBECONFIG` (an admin kubeconfig) and optionally
//! `KUBELET_RS_TEST_APISERVER` (a URL replacing the kubeconfig's server).

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::Kubeconfig;

pub const ENV_KUBECONFIG: &str = "KUBELET_RS_TEST_KUBECONFIG";
pub const ENV_APISERVER: &str = "KUBELET_RS_TEST_APISERVER";

pub struct RealServer {
    kubeconfig: Kubeconfig,
    pub source: PathBuf,
}

impl RealServer {
    /// The server the environment names, if it names one.
    pub fn from_env() -> Option<Result<RealServer, String>> {
        let path = std::env::var_os(ENV_KUBECONFIG).filter(|p| !p.is_empty())?;
        let path = PathBuf::from(path);
        let url = std::env::var(ENV_APISERVER).ok().filter(|u| !u.is_empty());
        Some(Self::load(path, url.as_deref()).map_err(|e| format!("{ENV_KUBECONFIG}: {e}")))
    }

    /// The server an admin kubeconfig names, at `url` if given.
    pub fn load(path: PathBuf, url: Option<&str>) -> Result<RealServer, String> {
        let mut kc =
            Kubeconfig::read_from(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(url) = url {
            let cluster =
                current_cluster_name(&kc).ok_or("the kubeconfig has no current context")?;
            for c in &mut kc.clusters {
                if c.name == cluster
                    && let Some(cl) = c.cluster.as_mut()
                {
                    cl.server = Some(url.to_string());
                }
            }
        }
        Ok(RealServer {
            kubeconfig: kc,
            source: path,
        })
    }

    fn cluster(&self) -> Option<&kube::config::Cluster> {
        let name = current_cluster_name(&self.kubeconfig)?;
        self.kubeconfig
            .clusters
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.cluster.as_ref())
    }

    pub fn url(&self) -> String {
        self.cluster()
            .and_then(|c| c.server.clone())
            .unwrap_or_default()
    }

    /// The cluster CA the kubeconfig trusts, PEM.
    pub fn ca_pem(&self) -> String {
        let Some(c) = self.cluster() else {
            return String::new();
        };
        if let Some(d) = &c.certificate_authority_data {
            return STANDARD
                .decode(d)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .unwrap_or_default();
        }
        c.certificate_authority
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// The admin kubeconfig (with the URL override applied), as YAML.
    pub fn admin_yaml(&self) -> String {
        // JSON is YAML; every kubeconfig reader takes it.
        serde_json::to_string_pretty(&self.kubeconfig).unwrap_or_default()
    }

    pub async fn admin_client(&self) -> kube::Client {
        let cfg = kube::Config::from_custom_kubeconfig(
            self.kubeconfig.clone(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("loading {ENV_KUBECONFIG}: {e}"));
        kube::Client::try_from(cfg)
            .unwrap_or_else(|e| panic!("building a kube client for the real server: {e}"))
    }
}

fn current_cluster_name(kc: &Kubeconfig) -> Option<String> {
    let ctx = kc.current_context.as_ref()?;
    kc.contexts
        .iter()
        .find(|c| &c.name == ctx)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
}
