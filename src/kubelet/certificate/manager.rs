//! The client certificate manager (client-go's certificate manager as the
//! kubelet configures it): holds the current client pair, renews it at a
//! jittered 70–90% of its lifetime (at once when there is none, when it was
//! handed bootstrap data, or when it no longer matches the template), with
//! exponential backoff and then a 32 s poll on failure. The API clients
//! present [`CertificateManager::current`] on every new TLS connection.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;

use super::CertificateError;
use super::csr::{self, CsrRequest, CsrSubject};
use super::pem::KeyPair;
use super::store::FileStore;
use crate::util::clock::Clock;
use crate::util::lifecycle::TaskSet;

/// How long a rotation waits for its request to be issued.
pub const CERTIFICATE_WAIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The clients a rotation requests certificates with: the one that presents
/// the current certificate, and the bootstrap credentials for when there is
/// no valid certificate. Handed to [`CertificateManager::start`]: the API
/// clients present the manager's certificate, so they are built after it.
#[derive(Clone)]
pub struct CsrClients {
    pub with_current: kube::Client,
    pub bootstrap: Option<kube::Client>,
}

/// What the manager requests: a fixed subject (the client certificate), or
/// one read anew each time (the serving certificate, whose names follow the
/// Node's addresses; `None` while there is nothing to ask for).
#[derive(Clone)]
pub enum Template {
    Fixed(CsrSubject),
    Dynamic(Arc<dyn Fn() -> Option<CsrSubject> + Send + Sync>),
}

impl Template {
    fn get(&self) -> Option<CsrSubject> {
        match self {
            Template::Fixed(s) => Some(s.clone()),
            Template::Dynamic(f) => f(),
        }
    }
}

/// What the manager is built from.
/// Which of the kubelet's certificate families a manager feeds (Go
/// registers them for its client and serving managers only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exported {
    /// `kubelet_certificate_manager_client_*`.
    Client,
    /// `kubelet_certificate_manager_server_*`, `kubelet_server_expiration_renew_errors`.
    Server,
}

pub struct ManagerConfig {
    pub template: Template,
    pub signer_name: String,
    pub usages: Vec<String>,
    pub store: FileStore,
    /// Credentials handed in the kubeconfig (kubeadm's initial pair): used
    /// until the first rotation, which happens at once.
    pub bootstrap_pair: Option<(Vec<u8>, Vec<u8>)>,
    pub clock: Arc<dyn Clock>,
    /// The metric families this manager feeds, if any.
    pub exported: Option<Exported>,
}

/// The kubelet's client certificate manager.
pub struct CertificateManager {
    template: Template,
    /// The subject of the last request made (Go's lastRequestTemplate).
    last_requested: Mutex<Option<CsrSubject>>,
    signer_name: String,
    usages: Vec<String>,
    store: FileStore,
    clock: Arc<dyn Clock>,
    cert: RwLock<Option<Arc<KeyPair>>>,
    server_healthy: std::sync::atomic::AtomicBool,
    force_rotation: std::sync::atomic::AtomicBool,
    rotations: Mutex<u64>,
    exported: Option<Exported>,
}

impl std::fmt::Debug for CertificateManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateManager")
            .field("signer_name", &self.signer_name)
            .finish_non_exhaustive()
    }
}

/// Go's jitter of the rotation deadline: uniformly within 70%–90% of the
/// certificate's lifetime after notBefore. `r` is in [0, 1).
pub fn jittery_deadline(not_before: SystemTime, not_after: SystemTime, r: f64) -> SystemTime {
    let total = not_after
        .duration_since(not_before)
        .unwrap_or_default()
        .as_secs_f64();
    not_before + Duration::from_secs_f64(total * (0.7 + 0.2 * r))
}

impl CertificateManager {
    /// Loads the current pair from the store, or the bootstrap pair (written
    /// to the store, and rotated at once), or none (rotated at once).
    pub async fn new(config: ManagerConfig) -> Result<Arc<Self>, CertificateError> {
        let now = config.clock.now();
        let (cert, force) = match config.store.current_async().await {
            Ok(pair) if now < pair.not_after => (Some(Arc::new(pair)), false),
            Ok(_) => (None, true),
            Err(CertificateError::NoCertKey(_)) => (None, true),
            Err(e) => return Err(e),
        };
        let (cert, force) = match (cert, &config.bootstrap_pair) {
            (Some(c), _) => (Some(c), force),
            (None, Some((c, k))) => {
                let pair = KeyPair::from_pem(c, k)?;
                if let Err(e) = config.store.update_async(c.clone(), k.clone()).await {
                    tracing::error!(error = %e, "Unable to set the cert/key pair to the bootstrap certificate");
                }
                (Some(Arc::new(pair)), true)
            }
            (None, None) => (None, true),
        };
        let exported = config.exported;
        let manager = Arc::new(CertificateManager {
            template: config.template,
            last_requested: Mutex::new(None),
            signer_name: config.signer_name,
            usages: config.usages,
            store: config.store,
            clock: config.clock,
            cert: RwLock::new(cert),
            server_healthy: std::sync::atomic::AtomicBool::new(false),
            force_rotation: std::sync::atomic::AtomicBool::new(force),
            rotations: Mutex::new(0),
            exported,
        });
        if let Some(kind) = exported {
            manager.export_ttl(kind);
        }
        Ok(manager)
    }

    /// Registers the time-to-live gauge of `kind` over this manager's
    /// current certificate, read at each scrape.
    fn export_ttl(self: &Arc<Self>, kind: Exported) {
        use crate::metrics::kubelet_certificates as m;
        let weak = Arc::downgrade(self);
        let expiry: m::Expiry = Arc::new(move || weak.upgrade()?.current().map(|c| c.not_after));
        let clock = self.clock.clone();
        let now = Arc::new(move || clock.now());
        match kind {
            Exported::Client => m::register_client_ttl(expiry, now),
            Exported::Server => m::register_server_ttl(expiry, now),
        }
        // The renewal error counters show from the start, at 0.
        self.count_renew_error(0.0);
    }

    fn count_renew_error(&self, n: f64) {
        use crate::metrics::kubelet_certificates as m;
        match self.exported {
            Some(Exported::Client) => m::client_renew_errors().add(&[], n),
            Some(Exported::Server) => m::server_renew_errors().add(&[], n),
            None => {}
        }
    }

    /// The current pair; `None` when there is none or it has expired.
    pub fn current(&self) -> Option<Arc<KeyPair>> {
        let cert = self
            .cert
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        if self.clock.now() > cert.not_after {
            crate::vlog!(2, signer = %self.signer_name, "Current certificate is expired");
            return None;
        }
        Some(cert)
    }

    /// Whether the last request reached a responsive API server.
    pub fn server_healthy(&self) -> bool {
        self.server_healthy
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many rotations succeeded.
    pub fn rotations(&self) -> u64 {
        *self.rotations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `cert` has everything the template asks (true when there is
    /// no template yet: nothing to compare with).
    fn satisfies_template(&self, cert: &KeyPair) -> bool {
        let Some(subject) = self.template.get() else {
            return true;
        };
        if cert.common_name != subject.common_name {
            crate::vlog!(2, current = %cert.common_name, requested = %subject.common_name,
                "Current certificate CN does not match requested CN");
            return false;
        }
        let missing: Vec<&String> = subject
            .organizations
            .iter()
            .filter(|o| !cert.organizations.contains(o))
            .collect();
        if !missing.is_empty() {
            crate::vlog!(2, missing = ?missing, "Current certificate is missing requested orgs");
            return false;
        }
        let missing: Vec<&String> = subject
            .dns_names
            .iter()
            .filter(|d| !cert.dns_names.contains(d))
            .collect();
        if !missing.is_empty() {
            crate::vlog!(2, missing = ?missing, "Current certificate is missing requested DNS names");
            return false;
        }
        let missing: Vec<&std::net::IpAddr> = subject
            .ip_addresses
            .iter()
            .filter(|ip| !cert.ip_addresses.contains(ip))
            .collect();
        if !missing.is_empty() {
            crate::vlog!(2, missing = ?missing, "Current certificate is missing requested IP addresses");
            return false;
        }
        true
    }

    /// Whether the template asks for something the current certificate
    /// lacks and that was not the last request.
    fn template_changed(&self) -> bool {
        let satisfied = self
            .cert
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .is_some_and(|c| self.satisfies_template(&c));
        !satisfied
            && *self
                .last_requested
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                != self.template.get()
    }

    /// When the next rotation is due.
    pub fn next_rotation_deadline(&self) -> SystemTime {
        let now = self.clock.now();
        if self
            .force_rotation
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return now;
        }
        let cert = self.cert.read().unwrap_or_else(|p| p.into_inner()).clone();
        match cert {
            Some(c) if self.satisfies_template(&c) => {
                let deadline = jittery_deadline(c.not_before, c.not_after, rand::random::<f64>());
                crate::vlog!(2,
                    expiration = %fmt_time(c.not_after),
                    deadline = %fmt_time(deadline),
                    "Certificate expiration and rotation deadline");
                deadline
            }
            _ => now,
        }
    }

    /// The bootstrap client while there is no valid certificate, else the
    /// one presenting the current certificate.
    fn csr_client(&self, clients: &CsrClients) -> kube::Client {
        match (self.current(), &clients.bootstrap) {
            (None, Some(b)) => b.clone(),
            _ => clients.with_current.clone(),
        }
    }

    /// Go's reading of a failed request: an answer of 401, 403 or 404
    /// comes from a responsive server; 5xx and transport errors do not.
    fn note_server_error(&self, e: &CertificateError) {
        let healthy = matches!(
            e,
            CertificateError::CreateStatus {
                code: 401 | 403 | 404,
                ..
            }
        );
        self.server_healthy
            .store(healthy, std::sync::atomic::Ordering::SeqCst);
    }

    /// One rotation over `clients`: new key, CSR, wait for the certificate,
    /// store it, use it. `false` when it did not succeed (logged, and
    /// counted as a renewal error).
    pub async fn rotate_certs(&self, clients: &CsrClients) -> bool {
        let rotated = self.try_rotate(clients).await;
        if !rotated {
            self.count_renew_error(1.0);
        }
        rotated
    }

    async fn try_rotate(&self, clients: &CsrClients) -> bool {
        crate::vlog!(2, signer = %self.signer_name, "Rotating certificates");
        let Some(subject) = self.template.get() else {
            tracing::error!(signer = %self.signer_name, "Unable to create a csr, no template available");
            return false;
        };
        let key_pem = match csr::generate_key_pem() {
            Ok(k) => k,
            Err(e) => {
                tracing::error!(error = %e, "Unable to generate a certificate signing request");
                return false;
            }
        };
        *self
            .last_requested
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(subject.clone());
        let csr_pem = match csr::make_csr(&key_pem, &subject) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "Unable to generate a certificate signing request");
                return false;
            }
        };
        let client = self.csr_client(clients);
        let req = CsrRequest {
            name: String::new(),
            csr_pem,
            key_pem: key_pem.clone(),
            signer_name: self.signer_name.clone(),
            usages: self.usages.clone(),
            expiration_seconds: None,
        };
        let (name, uid) = match csr::request_certificate(&client, &req).await {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "Failed while requesting a signed certificate from the control plane");
                self.note_server_error(&e);
                return false;
            }
        };
        let cert_pem =
            match csr::wait_for_certificate(&client, &name, &uid, CERTIFICATE_WAIT_TIMEOUT).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, csr = %name, "Certificate request was not signed");
                    return false;
                }
            };
        let pair = match self
            .store
            .update_async(cert_pem, key_pem.into_bytes())
            .await
        {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "Unable to store the new cert/key pair");
                return false;
            }
        };
        self.server_healthy
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let old = self
            .cert
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .replace(Arc::new(pair));
        if let (Some(old), Some(Exported::Server)) = (old, self.exported) {
            let lived = self
                .clock
                .now()
                .duration_since(old.not_before)
                .unwrap_or_default();
            crate::metrics::kubelet_certificates::server_rotation()
                .observe(&[], lived.as_secs_f64());
        }
        *self.rotations.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        true
    }

    /// Spawns the rotation loop, requesting certificates over `clients`.
    pub fn start(self: &Arc<Self>, tasks: &TaskSet, clients: CsrClients) {
        crate::vlog!(2, signer = %self.signer_name, "Certificate rotation is enabled");
        let me = self.clone();
        let token = tasks.token();
        let name = if self.signer_name == csr::KUBELET_SERVING_SIGNER {
            "serving-certificate-rotation"
        } else {
            "client-certificate-rotation"
        };
        tasks.spawn(name, async move {
            loop {
                let deadline = me.next_rotation_deadline();
                let wait = deadline.duration_since(me.clock.now()).unwrap_or_default();
                if !wait.is_zero() {
                    crate::vlog!(2, wait = ?wait, "Waiting for next certificate rotation");
                    tokio::select! {
                        _ = token.cancelled() => return,
                        _ = tokio::time::sleep(wait) => {}
                        _ = me.until_template_changed() => {
                            crate::vlog!(2, signer = %me.signer_name, "Certificate template changed, rotating");
                        }
                    }
                }
                // Nothing to ask for yet (a serving certificate before the
                // Node has addresses): look again in a second, no backoff.
                if me.template.get().is_none() {
                    tokio::select! {
                        _ = token.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                    continue;
                }
                let rotate = me.rotate_with_backoff(&clients);
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = rotate => {}
                }
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
    }

    /// Resolves once a dynamic template asks for what the certificate lacks
    /// (checked every second, as Go's); never for a fixed one.
    async fn until_template_changed(&self) {
        if matches!(self.template, Template::Fixed(_)) {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if self.template_changed() {
                return;
            }
        }
    }

    /// Exponential backoff (2 s doubling, 10% jitter, 5 tries), then a poll
    /// every 32 s until a rotation succeeds.
    async fn rotate_with_backoff(&self, clients: &CsrClients) {
        let mut delay = Duration::from_secs(2);
        for attempt in 0..5 {
            if self.rotate_certs(clients).await {
                return;
            }
            if attempt < 4 {
                let jitter = delay.mul_f64(0.1 * rand::random::<f64>());
                tokio::time::sleep(delay + jitter).await;
                delay *= 2;
            }
        }
        tracing::error!(signer = %self.signer_name, "Reached backoff limit, still unable to rotate certs");
        loop {
            tokio::time::sleep(Duration::from_secs(32)).await;
            if self.rotate_certs(clients).await {
                return;
            }
        }
    }

    /// A rustls client certificate resolver presenting the current pair.
    pub fn resolver(self: &Arc<Self>) -> Arc<dyn ResolvesClientCert> {
        Arc::new(CurrentCertResolver(self.clone()))
    }

    /// A rustls server certificate resolver serving the current pair; with
    /// none, the handshake fails (Go: no serving certificate available).
    pub fn server_resolver(self: &Arc<Self>) -> Arc<dyn rustls::server::ResolvesServerCert> {
        Arc::new(CurrentCertResolver(self.clone()))
    }
}

fn fmt_time(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

#[derive(Debug)]
struct CurrentCertResolver(Arc<CertificateManager>);

impl ResolvesClientCert for CurrentCertResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        // No certificate: the handshake goes on without one, as Go's
        // GetClientCertificate returning an empty certificate.
        self.0.current().map(|p| p.certified.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl rustls::server::ResolvesServerCert for CurrentCertResolver {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let current = self.0.current();
        if current.is_none() {
            tracing::warn!("No serving certificate available for the kubelet");
        }
        current.map(|p| p.certified.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::certificate::pem::testing::self_signed;
    use crate::util::clock::RealClock;

    #[test]
    fn deadline_falls_between_70_and_90_percent() {
        let nb = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let na = nb + Duration::from_secs(1000);
        let cases = [(0.0, 700), (0.5, 800), (0.999_999, 899)];
        for (r, want) in cases {
            let d = jittery_deadline(nb, na, r);
            assert_eq!(d.duration_since(nb).unwrap().as_secs(), want, "r={r}");
        }
    }

    fn now_unix() -> i64 {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    async fn manager(
        dir: &std::path::Path,
        bootstrap: Option<(String, String)>,
    ) -> Arc<CertificateManager> {
        let store = FileStore::open("kubelet-client", dir, dir, None, None).unwrap();
        CertificateManager::new(ManagerConfig {
            template: Template::Fixed(CsrSubject::node("n1")),
            signer_name: csr::KUBELET_CLIENT_SIGNER.into(),
            usages: csr::kubelet_client_usages(),
            store,
            bootstrap_pair: bootstrap.map(|(c, k)| (c.into_bytes(), k.into_bytes())),
            clock: Arc::new(RealClock),
            exported: None,
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn initial_state_table() {
        let now = now_unix();
        // (stored pair, bootstrap pair, want current CN, want forced rotation)
        let good = self_signed("system:node:n1", "system:nodes", now - 100, 1000);
        let expired = self_signed("system:node:n1", "system:nodes", now - 2000, 1000);
        let admin = self_signed("kubernetes-admin", "system:masters", now - 100, 1000);
        let cases = vec![
            ("nothing", None, None, None, true),
            (
                "stored",
                Some(good.clone()),
                None,
                Some("system:node:n1"),
                false,
            ),
            ("stored expired", Some(expired.clone()), None, None, true),
            (
                "bootstrap data",
                None,
                Some(admin.clone()),
                Some("kubernetes-admin"),
                true,
            ),
            (
                "stored wins over bootstrap",
                Some(good.clone()),
                Some(admin.clone()),
                Some("system:node:n1"),
                false,
            ),
        ];
        for (name, stored, bootstrap, want_cn, want_forced) in cases {
            let dir = tempfile::tempdir().unwrap();
            if let Some((c, k)) = &stored {
                let s =
                    FileStore::open("kubelet-client", dir.path(), dir.path(), None, None).unwrap();
                s.update(c.as_bytes(), k.as_bytes()).unwrap();
            }
            let m = manager(dir.path(), bootstrap).await;
            assert_eq!(
                m.current().map(|c| c.common_name.clone()).as_deref(),
                want_cn,
                "{name}"
            );
            let deadline = m.next_rotation_deadline();
            let forced = deadline <= SystemTime::now();
            assert_eq!(forced, want_forced, "{name}");
        }
    }

    #[tokio::test]
    async fn a_certificate_for_another_subject_is_rotated_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let now = now_unix();
        let (c, k) = self_signed("system:node:other", "system:nodes", now - 10, 100_000);
        let s = FileStore::open("kubelet-client", dir.path(), dir.path(), None, None).unwrap();
        s.update(c.as_bytes(), k.as_bytes()).unwrap();
        let m = manager(dir.path(), None).await;
        assert!(m.current().is_some());
        assert!(m.next_rotation_deadline() <= SystemTime::now());
    }
}
