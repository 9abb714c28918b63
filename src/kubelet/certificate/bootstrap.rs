//! The TLS bootstrap (pkg/kubelet/certificate/bootstrap): when the kubeconfig
//! is missing or its client certificate has expired, the kubelet uses the
//! bootstrap kubeconfig's credentials to request a client certificate for
//! `system:node:<name>`, stores it in the cert dir and writes a kubeconfig
//! pointing at `kubelet-client-current.pem`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::csr::{self, CsrRequest, CsrSubject, KUBELET_CLIENT_SIGNER};
use super::store::FileStore;
use super::{CertificateError, blocking};
use crate::kubelet::client::kubeconfig::{self, LoadedKubeconfig};

/// The private key kept while a bootstrap request is pending.
pub const TMP_PRIVATE_KEY_FILE: &str = "kubelet-client.key.tmp";
/// The store's file prefix for client pairs.
pub const CLIENT_PAIR_PREFIX: &str = "kubelet-client";
/// How long the bootstrap waits for its certificate.
pub const BOOTSTRAP_CERT_TIMEOUT: Duration = Duration::from_secs(3600);

/// What the bootstrap works with.
#[derive(Debug, Clone)]
pub struct BootstrapParams {
    pub kubeconfig: PathBuf,
    pub bootstrap_kubeconfig: PathBuf,
    pub cert_dir: PathBuf,
    pub node_name: String,
}

fn kube_err(e: impl std::fmt::Display) -> CertificateError {
    CertificateError::Kubeconfig(e.to_string())
}

/// Bootstraps the client certificate unless the kubeconfig is still valid
/// (the kubelet without certificate rotation). Waits up to an hour for the
/// request to be approved and issued.
pub async fn load_client_cert(p: &BootstrapParams) -> Result<(), CertificateError> {
    if kubeconfig::is_client_config_still_valid(&p.kubeconfig)
        .await
        .map_err(kube_err)?
    {
        crate::vlog!(2, path = %p.kubeconfig.display(), "Kubeconfig exists and is valid, skipping bootstrap");
        return Ok(());
    }
    crate::vlog!(
        2,
        "Using bootstrap kubeconfig to generate TLS client cert, key and kubeconfig file"
    );
    let boot = kubeconfig::load(&p.bootstrap_kubeconfig)
        .await
        .map_err(|e| CertificateError::BootstrapKubeconfig(e.to_string()))?;
    let client = kube::Client::try_from(boot.config.clone()).map_err(|e| {
        CertificateError::Client(format!(
            "unable to create certificates signing request client: {e}"
        ))
    })?;
    let dir = p.cert_dir.clone();
    let store = blocking(move || {
        FileStore::open(CLIENT_PAIR_PREFIX, &dir, &dir, None, None).map_err(|e| {
            CertificateError::Client(format!("unable to build bootstrap cert store: {e}"))
        })
    })
    .await?;

    let mut key_pem = match store.current_async().await {
        Ok(pair) => Some(pair.key_pem),
        Err(_) => None,
    };
    let tmp_key = p.cert_dir.join(TMP_PRIVATE_KEY_FILE);
    if !key_pem.as_deref().is_some_and(csr::verify_key_data) {
        crate::vlog!(
            2,
            "No valid private key and/or certificate found, reusing existing private key or creating a new one"
        );
        let path = tmp_key.clone();
        key_pem = Some(blocking(move || load_or_generate_key_file(&path)).await?);
    }
    let key_pem = String::from_utf8(key_pem.unwrap_or_default())
        .map_err(|e| CertificateError::Parse(format!("private key: {e}")))?;

    if let Err(e) = wait_for_server(&client, Duration::from_secs(60)).await {
        tracing::info!(error = %e, "Error waiting for apiserver to come up");
    }
    let cert_pem = request_node_certificate(&client, &key_pem, &p.node_name).await?;
    store.update_async(cert_pem, key_pem.into_bytes()).await?;
    if let Err(e) = tokio::fs::remove_file(&tmp_key).await
        && e.kind() != std::io::ErrorKind::NotFound
    {
        crate::vlog!(2, path = %tmp_key.display(), error = %e, "Failed cleaning up private key file");
    }
    kubeconfig::write_kubeconfig_from_bootstrapping(
        &boot.cluster_info().map_err(kube_err)?,
        &p.kubeconfig,
        &store.current_path(),
    )
    .await
    .map_err(kube_err)
}

/// Reads the key at `path`, or generates one there (mode 0600). Blocking.
pub fn load_or_generate_key_file(path: &Path) -> Result<Vec<u8>, CertificateError> {
    if let Ok(data) = std::fs::read(path)
        && csr::verify_key_data(&data)
    {
        return Ok(data);
    }
    let pem = csr::generate_key_pem()?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| CertificateError::io(dir, e))?;
    }
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| CertificateError::io(path, e))?;
        f.write_all(pem.as_bytes())
            .map_err(|e| CertificateError::io(path, e))?;
    }
    Ok(pem.into_bytes())
}

/// Polls `/healthz` every ~2 s until the server answers or `deadline` passes.
async fn wait_for_server(
    client: &kube::Client,
    deadline: Duration,
) -> Result<(), CertificateError> {
    let poll = async {
        loop {
            let req = http::Request::get("/healthz")
                .body(Vec::new())
                .map_err(|e| CertificateError::Client(e.to_string()))?;
            match tokio::time::timeout(Duration::from_secs(1), client.request_text(req)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => tracing::info!(error = %e, "Failed to connect to apiserver"),
                Err(_) => tracing::info!("Failed to connect to apiserver: timeout"),
            }
            let jitter = Duration::from_secs(2).mul_f64(0.2 * rand::random::<f64>());
            tokio::time::sleep(Duration::from_secs(2) + jitter).await;
        }
    };
    match tokio::time::timeout(deadline, poll).await {
        Ok(r) => r,
        Err(_) => Err(CertificateError::Client(
            "timed out waiting to connect to apiserver".into(),
        )),
    }
}

/// Requests a node client certificate under the deterministic bootstrap
/// name and waits for it.
pub async fn request_node_certificate(
    client: &kube::Client,
    key_pem: &str,
    node_name: &str,
) -> Result<Vec<u8>, CertificateError> {
    let subject = CsrSubject::node(node_name);
    let usages = csr::kubelet_client_usages();
    let csr_pem = csr::make_csr(key_pem, &subject)?;
    let name = csr::digested_name(key_pem, &subject, &usages)?;
    let req = CsrRequest {
        name,
        csr_pem,
        key_pem: key_pem.to_string(),
        signer_name: KUBELET_CLIENT_SIGNER.to_string(),
        usages,
        expiration_seconds: None,
    };
    let (name, uid) = csr::request_certificate(client, &req).await?;
    crate::vlog!(2, "Waiting for client certificate to be issued");
    csr::wait_for_certificate(client, &name, &uid, BOOTSTRAP_CERT_TIMEOUT).await
}

/// The client configurations of a kubelet that rotates its certificate.
#[derive(Clone)]
pub struct RotationConfig {
    /// Requests certificates while there is no valid current one.
    pub cert_config: kube::Config,
    /// The kubeconfig the clients use (credentials come from the manager).
    pub user: LoadedKubeconfig,
    /// Client certificate and key files the user entry names.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Inline client credentials of the kubeconfig (kubeadm's initial pair).
    pub initial_pair: Option<(Vec<u8>, Vec<u8>)>,
}

/// Chooses the configurations for a rotating kubelet: the kubeconfig when
/// there is no bootstrap kubeconfig or it is still valid; otherwise the
/// bootstrap credentials request certificates, and the kubeconfig is
/// (re)written to point at the store's current pair.
pub async fn load_client_config(
    kubeconfig_path: &Path,
    bootstrap_path: Option<&Path>,
    cert_dir: &Path,
) -> Result<RotationConfig, CertificateError> {
    let from_kubeconfig = |loaded: LoadedKubeconfig| -> Result<RotationConfig, CertificateError> {
        let (cert_file, key_file) = loaded.cert_files();
        Ok(RotationConfig {
            cert_config: loaded.config.clone(),
            initial_pair: loaded.inline_cert_and_key().map_err(kube_err)?,
            user: loaded,
            cert_file,
            key_file,
        })
    };
    let Some(bootstrap_path) = bootstrap_path else {
        let loaded = kubeconfig::load(kubeconfig_path).await.map_err(kube_err)?;
        crate::vlog!(2, "No bootstrapping requested, will use kubeconfig");
        return from_kubeconfig(loaded);
    };
    if kubeconfig::is_client_config_still_valid(kubeconfig_path)
        .await
        .map_err(kube_err)?
    {
        let loaded = kubeconfig::load(kubeconfig_path).await.map_err(kube_err)?;
        crate::vlog!(
            2,
            "Current kubeconfig file contents are still valid, no bootstrap necessary"
        );
        return from_kubeconfig(loaded);
    }
    let boot = kubeconfig::load(bootstrap_path)
        .await
        .map_err(|e| CertificateError::BootstrapKubeconfig(e.to_string()))?;
    let dir = cert_dir.to_path_buf();
    let store =
        blocking(move || FileStore::open(CLIENT_PAIR_PREFIX, &dir, &dir, None, None)).await?;
    let pem = store.current_path();
    kubeconfig::write_kubeconfig_from_bootstrapping(
        &boot.cluster_info().map_err(kube_err)?,
        kubeconfig_path,
        &pem,
    )
    .await
    .map_err(kube_err)?;
    crate::vlog!(
        2,
        "Use the bootstrap credentials to request a cert, and set kubeconfig to point to the certificate dir"
    );
    let mut user = boot.clone();
    user.config = boot.anonymous_config();
    Ok(RotationConfig {
        cert_config: boot.config.clone(),
        user,
        cert_file: Some(pem.clone()),
        key_file: Some(pem),
        initial_pair: None,
    })
}
