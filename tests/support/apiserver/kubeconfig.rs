//! Kubeconfig files for the double (or a real server) and kube clients
//! built from them exactly as the kubelet builds its own.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::pki::IssuedCert;

/// Whose credentials a kubeconfig carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeUser {
    /// kubernetes-admin in system:masters (client certificate).
    Admin,
    /// system:node:<name> in system:nodes (client certificate).
    Node(String),
    /// The double's bootstrap token (system:bootstrap:<id>).
    Bootstrap,
    /// Any bearer token.
    Token(String),
    /// A client certificate for any user and groups.
    Cert { user: String, groups: Vec<String> },
    /// No credentials.
    Anonymous,
}

impl KubeUser {
    pub fn node(name: &str) -> Self {
        KubeUser::Node(name.to_string())
    }

    pub fn context_name(&self) -> &str {
        match self {
            KubeUser::Admin => "admin",
            KubeUser::Node(_) => "node",
            KubeUser::Bootstrap => "tls-bootstrap",
            KubeUser::Token(_) => "token",
            KubeUser::Cert { .. } => "cert",
            KubeUser::Anonymous => "anonymous",
        }
    }
}

/// The credential part of a kubeconfig.
#[derive(Debug, Clone)]
pub enum Creds {
    Cert(IssuedCert),
    Token(String),
    None,
}

/// Kubeconfig YAML with inline CA, certificate and key data.
pub fn render(server: &str, ca_pem: &str, user: &str, creds: &Creds) -> String {
    let b = |s: &str| STANDARD.encode(s.as_bytes());
    let user_entry = match creds {
        Creds::Cert(c) => format!(
            "- name: {user}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b(&c.cert_pem),
            b(&c.key_pem)
        ),
        Creds::Token(t) => format!("- name: {user}\n  user:\n    token: {t}\n"),
        Creds::None => format!("- name: {user}\n  user: {{}}\n"),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: default-cluster\n  cluster:\n    certificate-authority-data: {}\n    server: \"{server}\"\ncontexts:\n- name: default-context\n  context:\n    cluster: default-cluster\n    namespace: default\n    user: {user}\ncurrent-context: default-context\npreferences: {{}}\nusers:\n{user_entry}",
        b(ca_pem)
    )
}

/// Writes `yaml` to `path` (mode 0600, parents created).
pub fn write(path: &std::path::Path, yaml: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, yaml)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

/// A kube client from kubeconfig YAML.
pub async fn client_from_yaml(yaml: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(yaml)
        .unwrap_or_else(|e| panic!("parsing a kubeconfig the double wrote: {e}"));
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("loading a kubeconfig the double wrote: {e}"));
    kube::Client::try_from(cfg).unwrap_or_else(|e| panic!("building a kube client: {e}"))
}

/// A kube client from a kubeconfig file.
pub async fn client_from_file(path: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("reading kubeconfig {}: {e}", path.display()));
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("loading kubeconfig {}: {e}", path.display()));
    kube::Client::try_from(cfg).unwrap_or_else(|e| panic!("building a kube client: {e}"))
}
