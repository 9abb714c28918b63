//! Projects CRI messages onto the JSON shape containerd recorded them in for
//! the reference fixtures: snake_case proto field names, zero values, empty
//! lists and maps left out, set messages written even when empty, enums as
//! numbers.

use std::collections::HashMap;

use kubelet::cri::api as cri;
use serde_json::{Map, Value};

#[derive(Default)]
struct Obj(Map<String, Value>);

impl Obj {
    fn s(mut self, k: &str, v: &str) -> Self {
        if !v.is_empty() {
            self.0.insert(k.into(), Value::from(v));
        }
        self
    }
    fn i(mut self, k: &str, v: i64) -> Self {
        if v != 0 {
            self.0.insert(k.into(), Value::from(v));
        }
        self
    }
    fn b(mut self, k: &str, v: bool) -> Self {
        if v {
            self.0.insert(k.into(), Value::from(true));
        }
        self
    }
    fn list(mut self, k: &str, v: Vec<Value>) -> Self {
        if !v.is_empty() {
            self.0.insert(k.into(), Value::Array(v));
        }
        self
    }
    fn strs(self, k: &str, v: &[String]) -> Self {
        self.list(k, v.iter().map(|s| Value::from(s.as_str())).collect())
    }
    fn map(mut self, k: &str, v: &HashMap<String, String>) -> Self {
        if !v.is_empty() {
            let m: Map<String, Value> = v
                .iter()
                .map(|(a, b)| (a.clone(), Value::from(b.as_str())))
                .collect();
            self.0.insert(k.into(), Value::Object(m));
        }
        self
    }
    fn msg(mut self, k: &str, v: Option<Value>) -> Self {
        if let Some(v) = v {
            self.0.insert(k.into(), v);
        }
        self
    }
    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

fn int64(v: &cri::Int64Value) -> Value {
    Obj::default().i("value", v.value).done()
}

fn profile(p: &cri::SecurityProfile) -> Value {
    Obj::default()
        .i("profile_type", i64::from(p.profile_type))
        .s("localhost_ref", &p.localhost_ref)
        .done()
}

fn selinux(o: &cri::SeLinuxOption) -> Value {
    Obj::default()
        .s("user", &o.user)
        .s("role", &o.role)
        .s("type", &o.r#type)
        .s("level", &o.level)
        .done()
}

fn namespaces(n: &cri::NamespaceOption) -> Value {
    Obj::default()
        .i("network", i64::from(n.network))
        .i("pid", i64::from(n.pid))
        .i("ipc", i64::from(n.ipc))
        .s("target_id", &n.target_id)
        .msg(
            "userns_options",
            n.userns_options
                .as_ref()
                .map(|u| Obj::default().i("mode", i64::from(u.mode)).done()),
        )
        .done()
}

fn resources(r: &cri::LinuxContainerResources) -> Value {
    Obj::default()
        .i("cpu_period", r.cpu_period)
        .i("cpu_quota", r.cpu_quota)
        .i("cpu_shares", r.cpu_shares)
        .i("memory_limit_in_bytes", r.memory_limit_in_bytes)
        .i("oom_score_adj", r.oom_score_adj)
        .s("cpuset_cpus", &r.cpuset_cpus)
        .s("cpuset_mems", &r.cpuset_mems)
        .list(
            "hugepage_limits",
            r.hugepage_limits
                .iter()
                .map(|h| {
                    Obj::default()
                        .s("page_size", &h.page_size)
                        .i("limit", h.limit as i64)
                        .done()
                })
                .collect(),
        )
        .map("unified", &r.unified)
        .i("memory_swap_limit_in_bytes", r.memory_swap_limit_in_bytes)
        .done()
}

/// A PodSandboxConfig as containerd records it.
pub fn sandbox(c: &cri::PodSandboxConfig) -> Value {
    #[allow(deprecated)]
    let linux = c.linux.as_ref().map(|l| {
        let sc = l.security_context.as_ref().map(|s| {
            Obj::default()
                .msg(
                    "namespace_options",
                    s.namespace_options.as_ref().map(namespaces),
                )
                .msg("selinux_options", s.selinux_options.as_ref().map(selinux))
                .msg("run_as_user", s.run_as_user.as_ref().map(int64))
                .msg("run_as_group", s.run_as_group.as_ref().map(int64))
                .b("readonly_rootfs", s.readonly_rootfs)
                .list(
                    "supplemental_groups",
                    s.supplemental_groups
                        .iter()
                        .map(|g| Value::from(*g))
                        .collect(),
                )
                .b("privileged", s.privileged)
                .msg("seccomp", s.seccomp.as_ref().map(profile))
                .msg("apparmor", s.apparmor.as_ref().map(profile))
                .s("seccomp_profile_path", &s.seccomp_profile_path)
                .done()
        });
        Obj::default()
            .s("cgroup_parent", &l.cgroup_parent)
            .msg("security_context", sc)
            .map("sysctls", &l.sysctls)
            .msg("overhead", l.overhead.as_ref().map(resources))
            .msg("resources", l.resources.as_ref().map(resources))
            .done()
    });
    Obj::default()
        .msg(
            "metadata",
            c.metadata.as_ref().map(|m| {
                Obj::default()
                    .s("name", &m.name)
                    .s("uid", &m.uid)
                    .s("namespace", &m.namespace)
                    .i("attempt", i64::from(m.attempt))
                    .done()
            }),
        )
        .s("hostname", &c.hostname)
        .s("log_directory", &c.log_directory)
        .msg(
            "dns_config",
            c.dns_config.as_ref().map(|d| {
                Obj::default()
                    .strs("servers", &d.servers)
                    .strs("searches", &d.searches)
                    .strs("options", &d.options)
                    .done()
            }),
        )
        .list(
            "port_mappings",
            c.port_mappings
                .iter()
                .map(|p| {
                    Obj::default()
                        .i("protocol", i64::from(p.protocol))
                        .i("container_port", i64::from(p.container_port))
                        .i("host_port", i64::from(p.host_port))
                        .s("host_ip", &p.host_ip)
                        .done()
                })
                .collect(),
        )
        .map("labels", &c.labels)
        .map("annotations", &c.annotations)
        .msg("linux", linux)
        .done()
}

/// A ContainerConfig as containerd records it.
pub fn container(c: &cri::ContainerConfig) -> Value {
    #[allow(deprecated)]
    let linux = c.linux.as_ref().map(|l| {
        let sc = l.security_context.as_ref().map(|s| {
            Obj::default()
                .msg(
                    "capabilities",
                    s.capabilities.as_ref().map(|c| {
                        Obj::default()
                            .strs("add_capabilities", &c.add_capabilities)
                            .strs("drop_capabilities", &c.drop_capabilities)
                            .strs("add_ambient_capabilities", &c.add_ambient_capabilities)
                            .done()
                    }),
                )
                .b("privileged", s.privileged)
                .msg(
                    "namespace_options",
                    s.namespace_options.as_ref().map(namespaces),
                )
                .msg("selinux_options", s.selinux_options.as_ref().map(selinux))
                .msg("run_as_user", s.run_as_user.as_ref().map(int64))
                .msg("run_as_group", s.run_as_group.as_ref().map(int64))
                .s("run_as_username", &s.run_as_username)
                .b("readonly_rootfs", s.readonly_rootfs)
                .list(
                    "supplemental_groups",
                    s.supplemental_groups
                        .iter()
                        .map(|g| Value::from(*g))
                        .collect(),
                )
                .b("no_new_privs", s.no_new_privs)
                .strs("masked_paths", &s.masked_paths)
                .strs("readonly_paths", &s.readonly_paths)
                .msg("seccomp", s.seccomp.as_ref().map(profile))
                .msg("apparmor", s.apparmor.as_ref().map(profile))
                .s("apparmor_profile", &s.apparmor_profile)
                .s("seccomp_profile_path", &s.seccomp_profile_path)
                .done()
        });
        Obj::default()
            .msg("resources", l.resources.as_ref().map(resources))
            .msg("security_context", sc)
            .done()
    });
    Obj::default()
        .msg(
            "metadata",
            c.metadata.as_ref().map(|m| {
                Obj::default()
                    .s("name", &m.name)
                    .i("attempt", i64::from(m.attempt))
                    .done()
            }),
        )
        .msg(
            "image",
            c.image.as_ref().map(|i| {
                Obj::default()
                    .s("image", &i.image)
                    .map("annotations", &i.annotations)
                    .done()
            }),
        )
        .strs("command", &c.command)
        .strs("args", &c.args)
        .s("working_dir", &c.working_dir)
        .list(
            "envs",
            c.envs
                .iter()
                .map(|e| Obj::default().s("key", &e.key).s("value", &e.value).done())
                .collect(),
        )
        .list(
            "mounts",
            c.mounts
                .iter()
                .map(|m| {
                    Obj::default()
                        .s("container_path", &m.container_path)
                        .s("host_path", &m.host_path)
                        .b("readonly", m.readonly)
                        .b("selinux_relabel", m.selinux_relabel)
                        .i("propagation", i64::from(m.propagation))
                        .done()
                })
                .collect(),
        )
        .list(
            "devices",
            c.devices
                .iter()
                .map(|d| {
                    Obj::default()
                        .s("container_path", &d.container_path)
                        .s("host_path", &d.host_path)
                        .s("permissions", &d.permissions)
                        .done()
                })
                .collect(),
        )
        .map("labels", &c.labels)
        .map("annotations", &c.annotations)
        .s("log_path", &c.log_path)
        .b("stdin", c.stdin)
        .b("stdin_once", c.stdin_once)
        .b("tty", c.tty)
        .msg("linux", linux)
        .done()
}
