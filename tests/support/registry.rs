//! A private image registry on loopback for tests: Debian's
//! `docker-registry` (distribution v2) with htpasswd basic auth, its storage
//! under a temp dir, stopped on drop. Images get there from a test
//! containerd with `ctr images push`; the containerd is told to reach it
//! over plain HTTP through its `certs.d` hosts file.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::containerd::Containerd;

pub struct Registry {
    child: Child,
    dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub host: String,
    pub user: String,
    pub password: String,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Registry {
    /// Starts the registry requiring `user`/`password`; `None` (after a
    /// SKIPPED line) when the package is missing outside CI.
    pub fn start(test: &str, user: &str, password: &str) -> Option<Registry> {
        if Command::new("docker-registry")
            .arg("--version")
            .output()
            .is_err()
        {
            super::skip(
                test,
                "docker-registry is not installed (deploy/rig/install.sh)",
            );
            return None;
        }
        let dir = tempfile::tempdir().expect("registry dir");
        let htpasswd = dir.path().join("htpasswd");
        let out = Command::new("htpasswd")
            .args(["-Bbn", user, password])
            .output()
            .expect("htpasswd (apache2-utils)");
        assert!(out.status.success(), "htpasswd: {out:?}");
        std::fs::write(&htpasswd, &out.stdout).expect("write htpasswd");
        let host = format!("127.0.0.1:{}", free_port());
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\nauth:\n  htpasswd:\n    realm: kubelet-rs-test\n    path: {}\n",
                dir.path().join("data").display(),
                htpasswd.display()
            ),
        )
        .expect("write registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log file");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn docker-registry");
        let registry = Registry {
            child,
            dir,
            host,
            user: user.to_string(),
            password: password.to_string(),
        };
        registry.wait_ready();
        Some(registry)
    }

    fn wait_ready(&self) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if std::net::TcpStream::connect(&self.host).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("registry did not listen on {}:\n{}", self.host, self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Lets `rig`'s containerd reach this registry over plain HTTP.
    pub fn trust_from(&self, rig: &Containerd) {
        let hosts = rig.dir().join("certs.d").join(&self.host);
        std::fs::create_dir_all(&hosts).expect("certs.d dir");
        std::fs::write(
            hosts.join("hosts.toml"),
            format!(
                "server = \"http://{h}\"\n\n[host.\"http://{h}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
                h = self.host
            ),
        )
        .expect("write hosts.toml");
    }

    /// Copies the image `local` of `rig` here as `repo:tag` (returned as a
    /// full reference), then forgets the copy's local name so a pull must
    /// reach the registry.
    pub fn push_from(&self, rig: &Containerd, local: &str, repo_tag: &str) -> String {
        let remote = format!("{}/{repo_tag}", self.host);
        let ctr = |args: &[&str]| {
            let out = Command::new("ctr")
                .arg("--address")
                .arg(rig.socket())
                .args(["--namespace", "k8s.io"])
                .args(args)
                .output()
                .expect("run ctr");
            assert!(
                out.status.success(),
                "ctr {args:?}: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.log()
            );
        };
        ctr(&["images", "tag", "--force", local, &remote]);
        let creds = format!("{}:{}", self.user, self.password);
        ctr(&[
            "images",
            "push",
            "--plain-http",
            "--user",
            &creds,
            &remote,
            local,
        ]);
        ctr(&["images", "rm", &remote]);
        remote
    }

    /// A `kubernetes.io/dockerconfigjson` Secret's data for this registry.
    pub fn docker_config_json(&self) -> String {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.user, self.password));
        serde_json::json!({"auths": {self.host.clone(): {
            "username": self.user, "password": self.password, "auth": auth}}})
        .to_string()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}
