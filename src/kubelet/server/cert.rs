//! The kubelet's self-signed serving certificate: when no
//! tlsCertFile/tlsPrivateKeyFile is configured, a CA and a serving
//! certificate for the hostname are generated once and kept in the cert
//! directory as `kubelet.crt` (serving certificate followed by its CA) and
//! `kubelet.key`; later starts reuse them.
//!
//! Differences from the Go kubelet: keys are ECDSA P-256 in PKCS#8 PEM (the
//! ring backend cannot generate RSA keys); validity, names and usages match.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};

use super::tls::TlsError;

/// File name of the self-signed certificate in the cert directory.
pub const SELF_SIGNED_CERT_FILE: &str = "kubelet.crt";
/// File name of its key.
pub const SELF_SIGNED_KEY_FILE: &str = "kubelet.key";

/// Certificates are valid from an hour ago (clock skew) for a year.
const BACKDATE: Duration = Duration::from_secs(3600);
const VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// A PEM certificate chain and its PEM private key.
#[derive(Clone, Debug)]
pub struct CertKeyPem {
    pub cert: String,
    pub key: String,
}

fn gen_err(e: impl std::fmt::Display) -> TlsError {
    TlsError::Generate(e.to_string())
}

/// Generates a CA named `<host>-ca@<unix time>` and a serving certificate
/// `<host>@<unix time>` for `host` (as an IP or DNS name) signed by it.
pub fn generate_self_signed_cert_key(host: &str) -> Result<CertKeyPem, TlsError> {
    let now = SystemTime::now();
    let unix = now.duration_since(UNIX_EPOCH).map_err(gen_err)?;
    let valid_from = unix.saturating_sub(BACKDATE);
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let not_before = epoch + valid_from;
    let not_after = epoch + (valid_from + VALIDITY);

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(gen_err)?;
    ca_params.distinguished_name = rcgen::DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{host}-ca@{}", unix.as_secs()));
    ca_params.serial_number = Some(SerialNumber::from(1u64));
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
    ];
    let ca_key = KeyPair::generate().map_err(gen_err)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(gen_err)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut params = CertificateParams::new(vec![host.to_string()]).map_err(gen_err)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{host}@{}", unix.as_secs()));
    params.serial_number = Some(SerialNumber::from(2u64));
    params.not_before = not_before;
    params.not_after = not_after;
    params.key_usages = vec![
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(gen_err)?;
    let cert = params.signed_by(&key, &issuer).map_err(gen_err)?;

    Ok(CertKeyPem {
        cert: format!("{}{}", cert.pem(), ca_cert.pem()),
        key: key.serialize_pem(),
    })
}

fn can_read(path: &Path) -> bool {
    std::fs::File::open(path).is_ok()
}

/// Whether both files can be read: `Ok(false)` when neither can, an error
/// when only one can (they come as a pair).
pub fn can_read_cert_and_key(cert: &Path, key: &Path) -> Result<bool, TlsError> {
    match (can_read(cert), can_read(key)) {
        (false, false) => Ok(false),
        (false, true) => Err(TlsError::Pair(cert.to_path_buf())),
        (true, false) => Err(TlsError::Pair(key.to_path_buf())),
        (true, true) => Ok(true),
    }
}

fn write_file(path: &Path, data: &str, mode: u32) -> Result<(), TlsError> {
    let io_err = |source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(io_err)?;
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(io_err)?;
    f.write_all(data.as_bytes()).map_err(io_err)
}

/// Writes a certificate file (0644), creating its directory (0755).
pub fn write_cert(path: &Path, pem: &str) -> Result<(), TlsError> {
    write_file(path, pem, 0o644)
}

/// Writes a key file (0600), creating its directory (0755).
pub fn write_key(path: &Path, pem: &str) -> Result<(), TlsError> {
    write_file(path, pem, 0o600)
}

/// Returns the self-signed pair's paths in `cert_dir`, generating and
/// writing the pair for `hostname` unless both files are readable already.
/// Blocking (build phase).
pub fn ensure_self_signed(cert_dir: &Path, hostname: &str) -> Result<(PathBuf, PathBuf), TlsError> {
    let cert = cert_dir.join(SELF_SIGNED_CERT_FILE);
    let key = cert_dir.join(SELF_SIGNED_KEY_FILE);
    if !can_read_cert_and_key(&cert, &key)? {
        let pair = generate_self_signed_cert_key(hostname)?;
        write_cert(&cert, &pair.cert)?;
        write_key(&key, &pair.key)?;
        crate::vlog!(
            4,
            tls_cert_file = %cert.display(),
            tls_private_key_file = %key.display(),
            "Using self-signed cert"
        );
    }
    Ok((cert, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    use std::os::unix::fs::PermissionsExt;
    use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509Certificate};

    fn names(der: &[u8]) -> (String, String, Vec<String>, bool) {
        let (_, c) = X509Certificate::from_der(der).unwrap();
        let cn = c
            .subject()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        let issuer = c
            .issuer()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        let mut sans = Vec::new();
        for ext in c.extensions() {
            if let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() {
                for n in &san.general_names {
                    match n {
                        GeneralName::DNSName(d) => sans.push(d.to_string()),
                        GeneralName::IPAddress(ip) => sans.push(format!("ip:{ip:?}")),
                        _ => {}
                    }
                }
            }
        }
        (cn, issuer, sans, c.is_ca())
    }

    #[test]
    fn generated_pair_matches_go_layout() {
        for (host, want_san) in [("node-a", "node-a"), ("10.0.0.7", "ip:[10, 0, 0, 7]")] {
            let pair = generate_self_signed_cert_key(host).unwrap();
            let certs: Vec<CertificateDer> = CertificateDer::pem_slice_iter(pair.cert.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(certs.len(), 2, "serving certificate then CA");
            let (cn, issuer, sans, is_ca) = names(&certs[0]);
            assert!(cn.starts_with(&format!("{host}@")), "{cn}");
            assert!(issuer.starts_with(&format!("{host}-ca@")), "{issuer}");
            assert_eq!(sans, vec![want_san.to_string()]);
            assert!(!is_ca);
            let (ca_cn, _, _, ca_is_ca) = names(&certs[1]);
            assert_eq!(ca_cn, issuer);
            assert!(ca_is_ca);
            let (_, c) = X509Certificate::from_der(&certs[0]).unwrap();
            let v = c.validity();
            let span = v.not_after.timestamp() - v.not_before.timestamp();
            assert_eq!(span, VALIDITY.as_secs() as i64);
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            assert!((now - v.not_before.timestamp() - 3600).abs() < 60);
            assert!(pair.key.contains("PRIVATE KEY"));
        }
    }

    /// The process umask, read without changing it.
    fn process_umask() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
        u32::from_str_radix(line.trim_start_matches("Umask:").trim(), 8).unwrap()
    }

    #[test]
    fn pair_rules() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("a.crt");
        let key = dir.path().join("a.key");
        assert!(!can_read_cert_and_key(&cert, &key).unwrap());
        std::fs::write(&cert, "x").unwrap();
        let err = can_read_cert_and_key(&cert, &key).unwrap_err();
        assert!(err.to_string().contains("a.key"), "{err}");
        assert!(
            err.to_string().contains("must be supplied as a pair"),
            "{err}"
        );
        std::fs::write(&key, "x").unwrap();
        assert!(can_read_cert_and_key(&cert, &key).unwrap());
    }

    #[test]
    fn ensure_writes_once_then_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let cert_dir = dir.path().join("pki/sub");
        let (cert, key) = ensure_self_signed(&cert_dir, "node-a").unwrap();
        assert_eq!(cert, cert_dir.join("kubelet.crt"));
        assert_eq!(key, cert_dir.join("kubelet.key"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let umask = process_umask();
        assert_eq!(mode(&cert), 0o644 & !umask);
        assert_eq!(mode(&key), 0o600 & !umask);
        assert_eq!(mode(&cert_dir), 0o755 & !umask);
        let before = std::fs::read(&cert).unwrap();
        ensure_self_signed(&cert_dir, "node-a").unwrap();
        assert_eq!(
            std::fs::read(&cert).unwrap(),
            before,
            "reused, not regenerated"
        );
    }
}
