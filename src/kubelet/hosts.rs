//! The `/etc/hosts` file the kubelet writes for each pod
//! (`<pod dir>/etc-hosts`) and mounts into every container that does not
//! mount something else there. Off the host network the file is generated:
//! localhost entries, one line per pod IP with the hostname (and FQDN with a
//! subdomain), then the pod's hostAliases. On the host network it is the
//! node's own file with the hostAliases appended.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::HostAlias;

use crate::cri::api::MountPropagation;
use crate::kubelet::container::{EtcHostsFile, Mount};

/// Where the file goes in the container.
pub const ETC_HOSTS_PATH: &str = "/etc/hosts";
/// The file name under the pod directory.
pub const ETC_HOSTS_FILE_NAME: &str = "etc-hosts";
/// The mount name the kubelet uses.
pub const ETC_HOSTS_MOUNT_NAME: &str = "k8s-managed-etc-hosts";

const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
const MANAGED_HEADER_HOST_NETWORK: &str = "# Kubernetes-managed hosts file (host network).\n";

/// The kubelet mounts a hosts file only once the pod has an IP.
pub fn should_mount_hosts_file(pod_ips: &[String]) -> bool {
    !pod_ips.is_empty()
}

fn host_aliases_section(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for a in aliases {
        let names = a.hostnames.as_deref().unwrap_or(&[]).join("\t");
        out.push_str(&format!("{}\t{names}\n", a.ip));
    }
    out
}

/// The generated hosts file of a pod off the host network.
pub fn managed_hosts_file_content(
    pod_ips: &[String],
    hostname: &str,
    domain: &str,
    aliases: &[HostAlias],
) -> String {
    let mut out = String::from(MANAGED_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        if domain.is_empty() {
            out.push_str(&format!("{ip}\t{hostname}\n"));
        } else {
            out.push_str(&format!("{ip}\t{hostname}.{domain}\t{hostname}\n"));
        }
    }
    out.push_str(&host_aliases_section(aliases));
    out
}

/// The hosts file of a host-network pod: the node's file (its content
/// given) under a header, with the hostAliases appended.
pub fn node_hosts_file_content(node_hosts: &str, aliases: &[HostAlias]) -> String {
    let mut out = String::from(MANAGED_HEADER_HOST_NETWORK);
    out.push_str(node_hosts);
    out.push_str(&host_aliases_section(aliases));
    out
}

/// The hosts file to write for a pod, and the mount for it.
///
/// `node_hosts` is the node's `/etc/hosts` content, needed (and only read)
/// for host-network pods; `None` there is an error the caller reports.
pub fn make_hosts_mount(
    pod_dir: &Path,
    pod_ips: &[String],
    hostname: &str,
    domain: &str,
    aliases: &[HostAlias],
    host_network: bool,
    node_hosts: Option<&str>,
) -> Result<(EtcHostsFile, Mount), HostsError> {
    let path: PathBuf = pod_dir.join(ETC_HOSTS_FILE_NAME);
    let content = if host_network {
        let node = node_hosts.ok_or(HostsError::NodeHostsUnavailable)?;
        node_hosts_file_content(node, aliases)
    } else {
        managed_hosts_file_content(pod_ips, hostname, domain, aliases)
    };
    let mount = Mount {
        name: ETC_HOSTS_MOUNT_NAME.to_string(),
        container_path: ETC_HOSTS_PATH.to_string(),
        host_path: path.display().to_string(),
        read_only: false,
        selinux_relabel: true,
        propagation: MountPropagation::PropagationPrivate,
        sub_path: None,
    };
    Ok((EtcHostsFile { path, content }, mount))
}

/// Writes the file with mode 0644. Blocking: call from `spawn_blocking`.
pub fn write_hosts_file(file: &EtcHostsFile) -> Result<(), HostsError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&file.path, &file.content).map_err(|source| HostsError::Write {
        path: file.path.clone(),
        source,
    })?;
    std::fs::set_permissions(&file.path, std::fs::Permissions::from_mode(0o644)).map_err(|source| {
        HostsError::Write {
            path: file.path.clone(),
            source,
        }
    })
}

/// Errors preparing the hosts file.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error("the node's {ETC_HOSTS_PATH} is needed for a host-network pod but was not read")]
    NodeHostsUnavailable,
    #[error("writing hosts file {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    fn aliases() -> Vec<HostAlias> {
        serde_json::from_value(serde_json::json!([
            {"ip": "123.45.67.89", "hostnames": ["foo", "bar", "baz"]},
            {"ip": "456.78.90.123", "hostnames": ["park", "doo", "boo"]}
        ]))
        .expect("aliases")
    }

    const LOCALHOST: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

    #[test]
    fn managed_content_table() {
        let ips = vec!["10.88.0.5".to_string(), "fd00::5".to_string()];
        let cases: Vec<(&str, Vec<String>, &str, Vec<HostAlias>, String)> = vec![
            (
                "hostname only",
                ips[..1].to_vec(),
                "",
                vec![],
                format!("{LOCALHOST}10.88.0.5\tweb\n"),
            ),
            (
                "with domain, dual stack",
                ips.clone(),
                "sub.ns.svc.cluster.local",
                vec![],
                format!(
                    "{LOCALHOST}10.88.0.5\tweb.sub.ns.svc.cluster.local\tweb\nfd00::5\tweb.sub.ns.svc.cluster.local\tweb\n"
                ),
            ),
            (
                "host aliases",
                ips[..1].to_vec(),
                "",
                aliases(),
                format!(
                    "{LOCALHOST}10.88.0.5\tweb\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"
                ),
            ),
            ("no IPs", vec![], "", vec![], LOCALHOST.to_string()),
        ];
        for (name, ips, domain, al, want) in cases {
            assert_eq!(
                managed_hosts_file_content(&ips, "web", domain, &al),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn host_network_content() {
        let node = "127.0.0.1 localhost\n10.0.0.1 node1\n";
        assert_eq!(
            node_hosts_file_content(node, &[]),
            format!("# Kubernetes-managed hosts file (host network).\n{node}")
        );
        assert!(node_hosts_file_content(node, &aliases())
            .ends_with("\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n"));
    }

    #[test]
    fn mount_and_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (file, mount) =
            make_hosts_mount(dir.path(), &["10.0.0.2".into()], "p", "", &[], false, None)
                .expect("hosts");
        assert_eq!(file.path, dir.path().join("etc-hosts"));
        assert_eq!(mount.container_path, "/etc/hosts");
        assert_eq!(
            mount.host_path,
            dir.path().join("etc-hosts").display().to_string()
        );
        assert!(!mount.read_only && mount.selinux_relabel);
        write_hosts_file(&file).expect("write");
        let written = std::fs::read_to_string(&file.path).expect("read");
        assert!(written.ends_with("10.0.0.2\tp\n"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file.path)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);

        assert!(matches!(
            make_hosts_mount(dir.path(), &[], "p", "", &[], true, None),
            Err(HostsError::NodeHostsUnavailable)
        ));
        assert!(should_mount_hosts_file(&["1.2.3.4".into()]));
        assert!(!should_mount_hosts_file(&[]));
    }
}
