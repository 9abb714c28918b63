//! The certificate store of `--cert-dir`, as client-go's file store keeps
//! it: each issued pair in `<prefix>-<timestamp>.pem` (certificates, then
//! the key; mode 0600), and `<prefix>-current.pem`, a symlink to the pair in
//! use, replaced atomically through `<prefix>-updated.pem`.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::pem::{KeyPair, encode_pem, parse_certs};
use super::{CertificateError, blocking};

const CURRENT: &str = "current";
const UPDATED: &str = "updated";

/// A cert/key pair store on disk.
#[derive(Debug, Clone)]
pub struct FileStore {
    prefix: String,
    cert_dir: PathBuf,
    key_dir: PathBuf,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
}

fn exists(p: &Path) -> Result<bool, CertificateError> {
    match std::fs::metadata(p) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(CertificateError::io(p, e)),
    }
}

fn is_symlink(p: &Path) -> Result<Option<bool>, CertificateError> {
    match std::fs::symlink_metadata(p) {
        Ok(m) => Ok(Some(m.file_type().is_symlink())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CertificateError::io(p, e)),
    }
}

impl FileStore {
    /// Opens the store, finishing a symlink swap an earlier process left
    /// half done. Blocking.
    pub fn open(
        prefix: &str,
        cert_dir: impl Into<PathBuf>,
        key_dir: impl Into<PathBuf>,
        cert_file: Option<PathBuf>,
        key_file: Option<PathBuf>,
    ) -> Result<Self, CertificateError> {
        let s = FileStore {
            prefix: prefix.to_string(),
            cert_dir: cert_dir.into(),
            key_dir: key_dir.into(),
            cert_file: cert_file.filter(|p| !p.as_os_str().is_empty()),
            key_file: key_file.filter(|p| !p.as_os_str().is_empty()),
        };
        s.recover()?;
        Ok(s)
    }

    fn filename(&self, qualifier: &str) -> String {
        format!("{}-{qualifier}.pem", self.prefix)
    }

    /// `<cert-dir>/<prefix>-current.pem`.
    pub fn current_path(&self) -> PathBuf {
        self.cert_dir.join(self.filename(CURRENT))
    }

    fn recover(&self) -> Result<(), CertificateError> {
        let current = self.current_path();
        if exists(&current)? {
            return Ok(());
        }
        let updated = self.cert_dir.join(self.filename(UPDATED));
        match is_symlink(&updated)? {
            None => Ok(()),
            Some(false) => Err(CertificateError::io(
                &updated,
                "expected a symlink but it is a file",
            )),
            Some(true) => std::fs::rename(&updated, &current)
                .map_err(|e| CertificateError::io(&updated, format!("unable to rename: {e}"))),
        }
    }

    /// The pair in use: the current symlink, else the configured cert and key
    /// files, else `<prefix>.crt`/`<prefix>.key`. Blocking.
    pub fn current(&self) -> Result<KeyPair, CertificateError> {
        let pair = self.current_path();
        if exists(&pair)? {
            tracing::info!(path = %pair.display(), "Loading cert/key pair");
            let pem = std::fs::read(&pair).map_err(|e| CertificateError::io(&pair, e))?;
            return KeyPair::from_combined_pem(&pem).map_err(|e| {
                CertificateError::Parse(format!(
                    "could not convert data from {:?} into cert/key pair: {e}",
                    pair
                ))
            });
        }
        if let (Some(c), Some(k)) = (&self.cert_file, &self.key_file)
            && exists(c)?
            && exists(k)?
        {
            tracing::info!(cert = %c.display(), key = %k.display(), "Loading cert/key pair");
            return load_pair(c, k);
        }
        let c = self.cert_dir.join(format!("{}.crt", self.prefix));
        let k = self.key_dir.join(format!("{}.key", self.prefix));
        if exists(&c)? && exists(&k)? {
            tracing::info!(cert = %c.display(), key = %k.display(), "Loading cert/key pair");
            return load_pair(&c, &k);
        }
        Err(CertificateError::NoCertKey(format!(
            "{:?}, ({:?}, {:?}) or ({:?}, {:?})",
            pair,
            self.cert_file.as_deref().unwrap_or(Path::new("")),
            self.key_file.as_deref().unwrap_or(Path::new("")),
            self.cert_dir,
            self.key_dir
        )))
    }

    /// Writes a new pair file and points the current symlink at it. Blocking.
    pub fn update(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<KeyPair, CertificateError> {
        let ts = jiff::Zoned::now().strftime("%Y-%m-%d-%H-%M-%S").to_string();
        std::fs::create_dir_all(&self.cert_dir).map_err(|e| {
            CertificateError::io(
                &self.cert_dir,
                format!("could not create directory to store certificates: {e}"),
            )
        })?;
        let path = self.cert_dir.join(self.filename(&ts));
        let certs = parse_certs(cert_pem)?;
        let key_block = first_pem_block(key_pem)
            .ok_or_else(|| CertificateError::Parse("invalid key data".into()))?;
        let mut content: String = certs.iter().map(|c| encode_pem("CERTIFICATE", c)).collect();
        content.push_str(&key_block);
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| CertificateError::io(&path, format!("could not open: {e}")))?;
            f.write_all(content.as_bytes())
                .and_then(|()| f.sync_all())
                .map_err(|e| CertificateError::io(&path, e))?;
        }
        let pair = KeyPair::from_combined_pem(content.as_bytes())?;
        self.update_symlink(&path)?;
        Ok(pair)
    }

    fn update_symlink(&self, target: &Path) -> Result<(), CertificateError> {
        let current = self.current_path();
        let current_exists = match is_symlink(&current)? {
            None => false,
            Some(true) => true,
            Some(false) => {
                return Err(CertificateError::io(
                    &current,
                    "expected a symlink but it is a file",
                ));
            }
        };
        let updated = self.cert_dir.join(self.filename(UPDATED));
        match is_symlink(&updated)? {
            None => {}
            Some(true) => {
                std::fs::remove_file(&updated).map_err(|e| CertificateError::io(&updated, e))?
            }
            Some(false) => {
                return Err(CertificateError::io(
                    &updated,
                    "expected a symlink but it is a file",
                ));
            }
        }
        if !exists(target)? {
            return Err(CertificateError::io(
                target,
                "file does not exist so it can not be used as the currently selected cert/key",
            ));
        }
        let abs = if target.is_absolute() {
            target.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| CertificateError::io(target, e))?
                .join(target)
        };
        std::os::unix::fs::symlink(&abs, &updated).map_err(|e| {
            CertificateError::io(&updated, format!("unable to create a symlink: {e}"))
        })?;
        if current_exists {
            std::fs::remove_file(&current).map_err(|e| CertificateError::io(&current, e))?;
        }
        std::fs::rename(&updated, &current)
            .map_err(|e| CertificateError::io(&updated, format!("unable to rename: {e}")))
    }

    /// [`FileStore::current`] off the runtime threads.
    pub async fn current_async(&self) -> Result<KeyPair, CertificateError> {
        let me = self.clone();
        blocking(move || me.current()).await
    }

    /// [`FileStore::update`] off the runtime threads.
    pub async fn update_async(
        &self,
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
    ) -> Result<KeyPair, CertificateError> {
        let me = self.clone();
        blocking(move || me.update(&cert_pem, &key_pem)).await
    }
}

fn load_pair(cert: &Path, key: &Path) -> Result<KeyPair, CertificateError> {
    let c = std::fs::read(cert).map_err(|e| CertificateError::io(cert, e))?;
    let k = std::fs::read(key).map_err(|e| CertificateError::io(key, e))?;
    KeyPair::from_pem(&c, &k)
}

/// The first PEM block of `data` whose label names a private key.
fn first_pem_block(data: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(data).ok()?;
    let start = text.find("-----BEGIN ")?;
    let rest = &text[start..];
    let label_end = rest[11..].find("-----")? + 11;
    let label = &rest[11..label_end];
    if !label.contains("PRIVATE KEY") {
        return None;
    }
    let end_marker = format!("-----END {label}-----");
    let end = rest.find(&end_marker)? + end_marker.len();
    Some(format!("{}\n", &rest[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::certificate::pem::testing::self_signed;

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    #[test]
    fn update_writes_pair_and_moves_the_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open("kubelet-client", dir.path(), dir.path(), None, None).unwrap();
        assert!(matches!(
            store.current(),
            Err(CertificateError::NoCertKey(_))
        ));

        let (c1, k1) = self_signed("system:node:a", "system:nodes", now() - 10, 3600);
        let p1 = store.update(c1.as_bytes(), k1.as_bytes()).unwrap();
        assert_eq!(p1.common_name, "system:node:a");
        let link = dir.path().join("kubelet-client-current.pem");
        let target1 = std::fs::read_link(&link).unwrap();
        assert!(target1.is_absolute());
        let name = target1.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            name.starts_with("kubelet-client-20") && name.ends_with(".pem"),
            "{name}"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&target1).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let text = std::fs::read_to_string(&target1).unwrap();
        assert!(text.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(text.contains("PRIVATE KEY-----"));
        assert_eq!(store.current().unwrap().common_name, "system:node:a");

        // A second pair one second later replaces the link.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let (c2, k2) = self_signed("system:node:b", "system:nodes", now() - 10, 3600);
        store.update(c2.as_bytes(), k2.as_bytes()).unwrap();
        assert_ne!(std::fs::read_link(&link).unwrap(), target1);
        assert_eq!(store.current().unwrap().common_name, "system:node:b");
        assert!(!dir.path().join("kubelet-client-updated.pem").exists());
    }

    #[test]
    fn falls_back_to_configured_files_then_prefix_files() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = self_signed("from-files", "o", now() - 10, 3600);
        let cf = dir.path().join("client.crt");
        let kf = dir.path().join("client.key");
        std::fs::write(&cf, &c).unwrap();
        std::fs::write(&kf, &k).unwrap();
        let store = FileStore::open(
            "kubelet-client",
            dir.path(),
            dir.path(),
            Some(cf.clone()),
            Some(kf.clone()),
        )
        .unwrap();
        assert_eq!(store.current().unwrap().common_name, "from-files");

        let (c2, k2) = self_signed("from-prefix", "o", now() - 10, 3600);
        std::fs::write(dir.path().join("kubelet-client.crt"), &c2).unwrap();
        std::fs::write(dir.path().join("kubelet-client.key"), &k2).unwrap();
        let store = FileStore::open("kubelet-client", dir.path(), dir.path(), None, None).unwrap();
        assert_eq!(store.current().unwrap().common_name, "from-prefix");
    }

    #[test]
    fn recover_finishes_an_interrupted_swap() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = self_signed("x", "o", now() - 10, 3600);
        let pair = dir.path().join("kubelet-client-2020-01-01-00-00-00.pem");
        std::fs::write(&pair, format!("{c}{k}")).unwrap();
        std::os::unix::fs::symlink(&pair, dir.path().join("kubelet-client-updated.pem")).unwrap();
        let store = FileStore::open("kubelet-client", dir.path(), dir.path(), None, None).unwrap();
        assert_eq!(std::fs::read_link(store.current_path()).unwrap(), pair);
    }
}
