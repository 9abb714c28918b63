//! Kubeconfig files as the kubelet uses them: loading one into a client
//! configuration, checking whether its client certificate is still good
//! (the bootstrap's short-circuit), and writing the kubeconfig that points
//! at the certificate store after a TLS bootstrap.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine;
use kube::config::{AuthInfo, Cluster, KubeConfigOptions, Kubeconfig};

use super::ClientError;
use crate::kubelet::certificate::pem::{leaf_info, parse_certs};

/// A client certificate (chain) and its key, as PEM.
pub type CertKeyPem = (Vec<u8>, Vec<u8>);

/// A kubeconfig as read from disk: the file form and the client
/// configuration of its current context.
#[derive(Clone)]
pub struct LoadedKubeconfig {
    pub path: PathBuf,
    pub raw: Kubeconfig,
    pub config: kube::Config,
}

impl std::fmt::Debug for LoadedKubeconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedKubeconfig")
            .field("path", &self.path)
            .field("server", &self.config.cluster_url)
            .finish_non_exhaustive()
    }
}

impl LoadedKubeconfig {
    /// The user entry of the current context.
    pub fn auth_info(&self) -> Option<&AuthInfo> {
        let user = current_context(&self.raw)?.user.clone()?;
        self.raw
            .auth_infos
            .iter()
            .find(|a| a.name == user)
            .and_then(|a| a.auth_info.as_ref())
    }

    /// The cluster entry of the current context.
    pub fn cluster(&self) -> Option<&Cluster> {
        let name = current_context(&self.raw)?.cluster.clone();
        self.raw
            .clusters
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.cluster.as_ref())
    }

    /// The client certificate and key PEM the user entry names (inline data
    /// or files), when it names both.
    pub fn client_cert_and_key(&self) -> Result<Option<CertKeyPem>, ClientError> {
        let Some(auth) = self.auth_info() else {
            return Ok(None);
        };
        let cert = data_or_file(
            auth.client_certificate_data.as_deref(),
            auth.client_certificate.as_deref(),
            &self.path,
        )?;
        let key_data = client_key_data(auth);
        let key = data_or_file(key_data.as_deref(), auth.client_key.as_deref(), &self.path)?;
        Ok(cert.zip(key))
    }

    /// Inline client certificate data only (what kubeadm hands a kubelet
    /// that should rotate its initial credentials).
    pub fn inline_cert_and_key(&self) -> Result<Option<CertKeyPem>, ClientError> {
        let Some(auth) = self.auth_info() else {
            return Ok(None);
        };
        let key_data = client_key_data(auth);
        let cert = data_or_file(auth.client_certificate_data.as_deref(), None, &self.path)?;
        let key = data_or_file(key_data.as_deref(), None, &self.path)?;
        Ok(cert.zip(key))
    }

    /// The client certificate and key file paths of the user entry.
    pub fn cert_files(&self) -> (Option<PathBuf>, Option<PathBuf>) {
        match self.auth_info() {
            Some(a) => (
                a.client_certificate.as_ref().map(PathBuf::from),
                a.client_key.as_ref().map(PathBuf::from),
            ),
            None => (None, None),
        }
    }

    /// This configuration without credentials (Go's AnonymousClientConfig):
    /// server and trust only.
    pub fn anonymous_config(&self) -> kube::Config {
        let mut c = self.config.clone();
        c.auth_info = AuthInfo::default();
        c
    }

    /// The pieces of the cluster entry a bootstrapped kubeconfig keeps.
    pub fn cluster_info(&self) -> Result<ClusterInfo, ClientError> {
        let cluster = self.cluster().cloned().unwrap_or_default();
        let ca_data = match &cluster.certificate_authority_data {
            Some(d) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(d.trim())
                    .map_err(|e| ClientError::Kubeconfig {
                        path: self.path.clone(),
                        reason: format!("certificate-authority-data: {e}"),
                    })?,
            ),
            None => None,
        };
        Ok(ClusterInfo {
            server: self
                .config
                .cluster_url
                .to_string()
                .trim_end_matches('/')
                .to_string(),
            insecure_skip_tls_verify: cluster.insecure_skip_tls_verify.unwrap_or(false),
            ca_file: cluster.certificate_authority.clone(),
            ca_data,
            tls_server_name: cluster.tls_server_name.clone(),
        })
    }
}

/// The inline client key (kube keeps it as a secret string; its
/// serialised form is the kubeconfig value).
fn client_key_data(auth: &AuthInfo) -> Option<String> {
    auth.client_key_data.as_ref()?;
    serde_json::to_value(auth)
        .ok()?
        .get("client-key-data")?
        .as_str()
        .map(str::to_string)
}

fn current_context(raw: &Kubeconfig) -> Option<&kube::config::Context> {
    let name = raw.current_context.as_deref()?;
    raw.contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.as_ref())
}

fn data_or_file(
    data: Option<&str>,
    file: Option<&str>,
    kubeconfig: &Path,
) -> Result<Option<Vec<u8>>, ClientError> {
    if let Some(d) = data {
        return base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map(Some)
            .map_err(|e| ClientError::Kubeconfig {
                path: kubeconfig.to_path_buf(),
                reason: format!("client credential data: {e}"),
            });
    }
    match file {
        Some(f) => std::fs::read(f)
            .map(Some)
            .map_err(|e| ClientError::Kubeconfig {
                path: kubeconfig.to_path_buf(),
                reason: format!("reading {f}: {e}"),
            }),
        None => Ok(None),
    }
}

/// A file that says it is UTF-16 (a byte order mark) but ends in half a
/// code unit: refused here, as the decoder it goes to next indexes past
/// the end of such a file (found by the `kubeconfig` fuzz target).
fn truncated_utf16(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0xFF, 0xFE, rest @ ..] | [0xFE, 0xFF, rest @ ..] if rest.len() % 2 == 1 => {
            Some("invalid UTF-16: the file ends in half a character")
        }
        _ => None,
    }
}

/// Reads and resolves a kubeconfig (its current context).
pub async fn load(path: &Path) -> Result<LoadedKubeconfig, ClientError> {
    let invalid = |reason: String| ClientError::Kubeconfig {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| invalid(e.to_string()))?;
    if let Some(reason) = truncated_utf16(&bytes) {
        return Err(invalid(reason.to_string()));
    }
    let raw = Kubeconfig::read_from(path).map_err(|e| invalid(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(raw.clone(), &KubeConfigOptions::default())
        .await
        .map_err(|e| invalid(e.to_string()))?;
    let loaded = LoadedKubeconfig {
        path: path.to_path_buf(),
        raw,
        config,
    };
    check_client_cert_version(&loaded).map_err(|source| ClientError::ClientCertVersion {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(loaded)
}

/// A client certificate older than X.509 v3; `origin` names where it came
/// from (`client-certificate <file>` or `client-certificate-data`).
#[derive(Debug, thiserror::Error)]
#[error(
    "{origin}: an X.509 v{version} certificate (no extensions); this kubelet's TLS stack accepts only v3 \
     client certificates: re-issue it with extensions (for example `openssl x509 -req … -extfile` \
     naming extendedKeyUsage=clientAuth)"
)]
pub struct ClientCertVersionError {
    pub origin: String,
    pub version: u32,
}

/// The TLS stack takes only X.509 v3 client certificates (the Go kubelet's
/// also takes v1 ones, as `openssl x509 -req` makes them without
/// `-extfile`): such a certificate is refused here, naming it, rather than
/// failing later with a TLS error about the private key.
fn check_client_cert_version(loaded: &LoadedKubeconfig) -> Result<(), ClientCertVersionError> {
    let Ok(Some((cert, _))) = loaded.client_cert_and_key() else {
        // Unreadable or absent: the paths that use it report that.
        return Ok(());
    };
    let Some(leaf) = parse_certs(&cert).ok().and_then(|c| c.into_iter().next()) else {
        return Ok(());
    };
    let Ok(info) = leaf_info(&leaf) else {
        return Ok(());
    };
    if info.version >= 3 {
        return Ok(());
    }
    let origin = match loaded.cert_files().0 {
        Some(f) => format!("client-certificate {}", f.display()),
        None => "client-certificate-data".to_string(),
    };
    Err(ClientCertVersionError {
        origin,
        version: info.version,
    })
}

/// Whether the kubeconfig at `path` exists and carries a client certificate
/// that has not expired; a missing file or one that cannot be used is
/// `false` (and logged), only an unreadable path is an error.
pub async fn is_client_config_still_valid(path: &Path) -> Result<bool, ClientError> {
    match tokio::fs::metadata(path).await {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(ClientError::Kubeconfig {
                path: path.to_path_buf(),
                reason: format!("error reading existing bootstrap kubeconfig: {e}"),
            });
        }
        Ok(_) => {}
    }
    let loaded = match load(path).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, path = %path.display(), "Unable to read existing bootstrap client config");
            return Ok(false);
        }
    };
    let pair = match loaded.client_cert_and_key() {
        Ok(Some(p)) => p,
        Ok(None) => {
            tracing::error!(path = %path.display(), "Unable to read TLS certificates from existing bootstrap client config");
            return Ok(false);
        }
        Err(e) => {
            tracing::error!(error = %e, path = %path.display(), "Unable to load TLS configuration from existing bootstrap client config");
            return Ok(false);
        }
    };
    let certs = match parse_certs(&pair.0) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, path = %path.display(), "Unable to load TLS certificates from existing bootstrap client config");
            return Ok(false);
        }
    };
    let now = SystemTime::now();
    for c in &certs {
        match leaf_info(c) {
            Ok(info) if now > info.not_after => {
                tracing::error!(
                    path = %path.display(),
                    not_after = %jiff::Timestamp::try_from(info.not_after).map(|t| t.to_string()).unwrap_or_default(),
                    "Part of the existing bootstrap client certificate is expired"
                );
                return Ok(false);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, path = %path.display(), "Unable to parse the existing client certificate");
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The cluster part of a kubeconfig.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    pub server: String,
    pub insecure_skip_tls_verify: bool,
    /// `certificate-authority` (a path), kept as a path when set.
    pub ca_file: Option<String>,
    /// `certificate-authority-data`, written inline when no file is named.
    pub ca_data: Option<Vec<u8>>,
    pub tls_server_name: Option<String>,
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The kubeconfig a bootstrapped kubelet runs with: the bootstrap's cluster,
/// the certificate store's current pair as client certificate and key.
pub fn render_bootstrapped_kubeconfig(cluster: &ClusterInfo, pem_path: &Path) -> String {
    let mut c = String::from("- cluster:\n");
    match (&cluster.ca_file, &cluster.ca_data) {
        (Some(f), _) => c.push_str(&format!("    certificate-authority: {}\n", yaml_str(f))),
        (None, Some(d)) if !d.is_empty() => c.push_str(&format!(
            "    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(d)
        )),
        _ => {}
    }
    if cluster.insecure_skip_tls_verify {
        c.push_str("    insecure-skip-tls-verify: true\n");
    }
    c.push_str(&format!("    server: {}\n", yaml_str(&cluster.server)));
    if let Some(n) = &cluster.tls_server_name {
        c.push_str(&format!("    tls-server-name: {}\n", yaml_str(n)));
    }
    c.push_str("  name: default-cluster\n");
    let pem = yaml_str(&pem_path.to_string_lossy());
    format!(
        "apiVersion: v1\nclusters:\n{c}contexts:\n- context:\n    cluster: default-cluster\n    namespace: default\n    user: default-auth\n  name: default-context\ncurrent-context: default-context\nkind: Config\npreferences: {{}}\nusers:\n- name: default-auth\n  user:\n    client-certificate: {pem}\n    client-key: {pem}\n"
    )
}

/// Writes the bootstrapped kubeconfig to `kubeconfig_path` (mode 0600,
/// parent directories created).
pub async fn write_kubeconfig_from_bootstrapping(
    cluster: &ClusterInfo,
    kubeconfig_path: &Path,
    pem_path: &Path,
) -> Result<(), ClientError> {
    let yaml = render_bootstrapped_kubeconfig(cluster, pem_path);
    let path = kubeconfig_path.to_path_buf();
    let write = move || -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(yaml.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    tokio::task::spawn_blocking(write)
        .await
        .map_err(|e| ClientError::Io {
            path: kubeconfig_path.to_path_buf(),
            reason: e.to_string(),
        })?
        .map_err(|e| ClientError::Io {
            path: kubeconfig_path.to_path_buf(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::certificate::pem::testing::self_signed;

    fn now_unix() -> i64 {
        SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    fn kubeconfig_with(cert: &str, key: &str) -> String {
        let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    insecure-skip-tls-verify: true\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b(cert),
            b(key)
        )
    }

    #[tokio::test]
    async fn a_byte_order_mark_with_half_a_character_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        // (bytes, refused before decoding)
        let cases: [(&[u8], bool); 4] = [
            (b"\xfe\xff\xff", true),
            (b"\xff\xfe\x00", true),
            (b"\xfe\xff", false),
            (b"apiVersion: v1", false),
        ];
        for (bytes, refused) in cases {
            assert_eq!(truncated_utf16(bytes).is_some(), refused, "{bytes:?}");
            std::fs::write(&path, bytes).unwrap();
            let err = load(&path).await.expect_err("not a kubeconfig").to_string();
            assert!(err.contains("kubeconfig"), "{err}");
        }
        // The fuzz target's crash input: an error, not a panic.
        let mut crash = b"\xfe\xff".to_vec();
        crash.extend_from_slice(b"apiVersion: v1\nkind: Config\n\n");
        std::fs::write(&path, &crash).unwrap();
        let err = load(&path).await.expect_err("odd length").to_string();
        assert!(err.contains("half a character"), "{err}");
    }

    #[tokio::test]
    async fn validity_table() {
        let dir = tempfile::tempdir().unwrap();
        let now = now_unix();
        let (good_c, good_k) = self_signed("system:node:n", "system:nodes", now - 60, 3600);
        let (old_c, old_k) = self_signed("system:node:n", "system:nodes", now - 7200, 3600);
        let token = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc\n".to_string();
        let cases: Vec<(&str, Option<String>, bool)> = vec![
            ("missing", None, false),
            ("valid cert", Some(kubeconfig_with(&good_c, &good_k)), true),
            ("expired cert", Some(kubeconfig_with(&old_c, &old_k)), false),
            ("token only", Some(token), false),
            ("garbage", Some(":::not yaml".into()), false),
        ];
        for (name, content, want) in cases {
            let path = dir.path().join(format!("{}.conf", name.replace(' ', "-")));
            if let Some(c) = content {
                std::fs::write(&path, c).unwrap();
            }
            assert_eq!(
                is_client_config_still_valid(&path).await.unwrap(),
                want,
                "{name}"
            );
        }
    }

    /// What `openssl x509 -req` makes without `-extfile`: X.509 v1.
    const V1_CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBXjCCAQMCFEfqavReYjdAuKAu6jCfzMDfvtpZMAoGCCqGSM49BAMCMDAxFTAT\nBgNVBAoMDHN5c3RlbTpub2RlczEXMBUGA1UEAwwOc3lzdGVtOm5vZGU6bjEwIBcN\nMjYxMTI2MDUzNzAxWhgPMjEyNjExMDIwNTM3MDFaMDAxFTATBgNVBAoMDHN5c3Rl\nbTpub2RlczEXMBUGA1UEAwwOc3lzdGVtOm5vZGU6bjEwWTATBgcqhkjOPQIBBggq\nhkjOPQMBBwNCAAR03F8lpVIRSSXdSq0ud599s7ju8OBmPoaG2/ZSTJ4J7gwIdDWD\nT8cGYKpL+lrlySy6y0qFjSpSHnsQhMQ5hiY+MAoGCCqGSM49BAMCA0kAMEYCIQCU\nQgz+5VzEvkBbTNn/QmLKmmWzg48GLAWlHTfTkEIP2gIhAIh/mt7vp7Me5lonXKLw\n6MA9eXS32zv41pizyvgeUb7z\n-----END CERTIFICATE-----\n";
    const V1_KEY: &str = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIG60kstPqrIn/3ZFdZBKQY9kPWrBhs3eE23NMvO+QtZEoAoGCCqGSM49\nAwEHoUQDQgAEdNxfJaVSEUkl3UqtLneffbO47vDgZj6Ghtv2UkyeCe4MCHQ1g0/H\nBmCqS/pa5cksustKhY0qUh57EITEOYYmPg==\n-----END EC PRIVATE KEY-----\n";

    #[tokio::test]
    async fn a_v1_client_certificate_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let inline = dir.path().join("inline.conf");
        std::fs::write(&inline, kubeconfig_with(V1_CERT, V1_KEY)).unwrap();
        let err = load(&inline).await.unwrap_err().to_string();
        assert!(err.contains("inline.conf"), "{err}");
        assert!(
            err.contains("client-certificate-data: an X.509 v1 certificate"),
            "{err}"
        );
        std::fs::write(dir.path().join("c.crt"), V1_CERT).unwrap();
        std::fs::write(dir.path().join("c.key"), V1_KEY).unwrap();
        let files = dir.path().join("files.conf");
        let body = kubeconfig_with("x", "y")
            .replace("client-certificate-data: eA==", "client-certificate: c.crt")
            .replace("client-key-data: eQ==", "client-key: c.key");
        std::fs::write(&files, body).unwrap();
        let err = load(&files).await.unwrap_err().to_string();
        assert!(err.contains("c.crt: an X.509 v1 certificate"), "{err}");
        // A v3 certificate loads.
        let (c, k) = self_signed("system:node:n", "system:nodes", now_unix() - 60, 3600);
        let good = dir.path().join("good.conf");
        std::fs::write(&good, kubeconfig_with(&c, &k)).unwrap();
        load(&good).await.unwrap();
    }

    #[tokio::test]
    async fn bootstrapped_kubeconfig_round_trips_through_kube() {
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("pki/kubelet-client-current.pem");
        let (c, k) = self_signed("system:node:n", "system:nodes", now_unix() - 60, 3600);
        std::fs::create_dir_all(pem.parent().unwrap()).unwrap();
        std::fs::write(&pem, format!("{c}{k}")).unwrap();
        let cluster = ClusterInfo {
            server: "https://10.0.0.1:6443".into(),
            ca_data: Some(c.clone().into_bytes()),
            ..Default::default()
        };
        let path = dir.path().join("kubelet.conf");
        write_kubeconfig_from_bootstrapping(&cluster, &path, &pem)
            .await
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let loaded = load(&path).await.unwrap();
        assert_eq!(
            loaded.config.cluster_url.to_string(),
            "https://10.0.0.1:6443/"
        );
        assert_eq!(loaded.config.default_namespace, "default");
        let (cf, kf) = loaded.cert_files();
        assert_eq!(cf.as_deref(), Some(pem.as_path()));
        assert_eq!(kf.as_deref(), Some(pem.as_path()));
        assert_eq!(loaded.cluster_info().unwrap().ca_data, cluster.ca_data);
        assert!(is_client_config_still_valid(&path).await.unwrap());
    }
}
