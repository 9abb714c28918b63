//! A JSON encoder that writes `v1.Container` (and the parts of it the kubelet
//! stores in CRI annotations) byte for byte as Go's `encoding/json` does for
//! the v1.25 API types:
//!
//! - fields in Go struct order (k8s.io/api core/v1 at v0.25), only the fields
//!   that API version has: newer fields k8s-openapi knows are dropped, as the
//!   Go kubelet drops them when it decodes;
//! - `omitempty` as Go applies it: empty strings, zero numbers, false, nil or
//!   empty slices and maps are left out, nested structs never are (so
//!   `"resources":{}` and a zero `divisor` of `"0"` appear), pointers are
//!   written whenever set, even to a zero value;
//! - map keys sorted, quantities in their canonical form, IntOrString as a
//!   number or a string;
//! - Go's HTML-safe string escaping (`<`, `>`, `&`, U+2028, U+2029 as `\uXXXX`).
//!
//! The container hash depends on this output, so every deviation restarts
//! containers after a swap from the Go kubelet.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::util::quantity;

/// Go's `json.Marshal(container)` for a v1.25 `v1.Container`.
pub fn container_to_go_json(c: &api::Container) -> String {
    let mut w = ObjWriter::new();
    w.str_always("name", &c.name);
    w.opt_str("image", c.image.as_deref());
    w.str_list("command", c.command.as_deref());
    w.str_list("args", c.args.as_deref());
    w.opt_str("workingDir", c.working_dir.as_deref());
    w.list("ports", c.ports.as_deref(), container_port);
    w.list("envFrom", c.env_from.as_deref(), env_from_source);
    w.list("env", c.env.as_deref(), env_var);
    w.raw("resources", &resource_requirements(c.resources.as_ref()));
    w.list("volumeMounts", c.volume_mounts.as_deref(), volume_mount);
    w.list("volumeDevices", c.volume_devices.as_deref(), volume_device);
    w.opt_obj("livenessProbe", c.liveness_probe.as_ref(), probe);
    w.opt_obj("readinessProbe", c.readiness_probe.as_ref(), probe);
    w.opt_obj("startupProbe", c.startup_probe.as_ref(), probe);
    w.opt_obj("lifecycle", c.lifecycle.as_ref(), lifecycle);
    w.opt_str(
        "terminationMessagePath",
        c.termination_message_path.as_deref(),
    );
    w.opt_str(
        "terminationMessagePolicy",
        c.termination_message_policy.as_deref(),
    );
    w.opt_str("imagePullPolicy", c.image_pull_policy.as_deref());
    w.opt_obj(
        "securityContext",
        c.security_context.as_ref(),
        security_context,
    );
    w.opt_bool_omitempty("stdin", c.stdin);
    w.opt_bool_omitempty("stdinOnce", c.stdin_once);
    w.opt_bool_omitempty("tty", c.tty);
    w.finish()
}

/// Go's `json.Marshal` of a `v1.LifecycleHandler` (the preStop annotation).
pub fn lifecycle_handler_to_go_json(h: &api::LifecycleHandler) -> String {
    lifecycle_handler(h)
}

/// Go's `json.Marshal` of a `[]v1.ContainerPort` (the ports annotation).
pub fn container_ports_to_go_json(ports: &[api::ContainerPort]) -> String {
    let items: Vec<String> = ports.iter().map(container_port).collect();
    format!("[{}]", items.join(","))
}

/// Writes `s` as a JSON string literal with Go's escaping rules.
pub fn go_string(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' => {
                let b = ch as u8;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            c if (c as u32) < 0x20 => {
                let b = c as u8;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A quantity as Go marshals it: the canonical form of the parsed value.
/// Text that does not parse (Go would have refused the object) is kept.
fn quantity_json(q: &ApiQuantity) -> String {
    match quantity::parse(q.0.trim()) {
        Ok(parsed) => go_string(&parsed.to_canonical_string()),
        Err(_) => go_string(&q.0),
    }
}

fn int_or_string(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => go_string(s),
    }
}

/// Builds one JSON object, field by field, in the order written.
struct ObjWriter {
    buf: String,
    first: bool,
}

impl ObjWriter {
    fn new() -> Self {
        ObjWriter {
            buf: String::from("{"),
            first: true,
        }
    }

    fn key(&mut self, name: &str) {
        if !self.first {
            self.buf.push(',');
        }
        self.first = false;
        self.buf.push('"');
        self.buf.push_str(name);
        self.buf.push_str("\":");
    }

    fn raw(&mut self, name: &str, value: &str) {
        self.key(name);
        self.buf.push_str(value);
    }

    /// A string field without omitempty.
    fn str_always(&mut self, name: &str, value: &str) {
        self.raw(name, &go_string(value));
    }

    /// A string field with omitempty.
    fn opt_str(&mut self, name: &str, value: Option<&str>) {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            self.raw(name, &go_string(v));
        }
    }

    /// A `*string` field with omitempty: written when set, even if empty.
    fn ptr_str(&mut self, name: &str, value: Option<&str>) {
        if let Some(v) = value {
            self.raw(name, &go_string(v));
        }
    }

    /// A `[]string` with omitempty.
    fn str_list(&mut self, name: &str, value: Option<&[String]>) {
        if let Some(items) = value.filter(|v| !v.is_empty()) {
            let parts: Vec<String> = items.iter().map(|s| go_string(s)).collect();
            self.raw(name, &format!("[{}]", parts.join(",")));
        }
    }

    /// A slice of structs with omitempty.
    fn list<T>(&mut self, name: &str, value: Option<&[T]>, enc: fn(&T) -> String) {
        if let Some(items) = value.filter(|v| !v.is_empty()) {
            let parts: Vec<String> = items.iter().map(enc).collect();
            self.raw(name, &format!("[{}]", parts.join(",")));
        }
    }

    /// A pointer to a struct with omitempty.
    fn opt_obj<T>(&mut self, name: &str, value: Option<&T>, enc: fn(&T) -> String) {
        if let Some(v) = value {
            self.raw(name, &enc(v));
        }
    }

    /// A plain `bool` with omitempty.
    fn opt_bool_omitempty(&mut self, name: &str, value: Option<bool>) {
        if value == Some(true) {
            self.raw(name, "true");
        }
    }

    /// A `*bool` with omitempty: written whenever set.
    fn ptr_bool(&mut self, name: &str, value: Option<bool>) {
        if let Some(v) = value {
            self.raw(name, if v { "true" } else { "false" });
        }
    }

    /// A plain `int32`/`int64` with omitempty.
    fn int_omitempty(&mut self, name: &str, value: Option<i64>) {
        if let Some(v) = value.filter(|v| *v != 0) {
            self.raw(name, &v.to_string());
        }
    }

    /// A plain integer without omitempty.
    fn int_always(&mut self, name: &str, value: i64) {
        self.raw(name, &value.to_string());
    }

    /// A `*int64` with omitempty.
    fn ptr_int(&mut self, name: &str, value: Option<i64>) {
        if let Some(v) = value {
            self.raw(name, &v.to_string());
        }
    }

    fn finish(mut self) -> String {
        self.buf.push('}');
        self.buf
    }
}

fn container_port(p: &api::ContainerPort) -> String {
    let mut w = ObjWriter::new();
    w.opt_str("name", p.name.as_deref());
    w.int_omitempty("hostPort", p.host_port.map(i64::from));
    w.int_always("containerPort", i64::from(p.container_port));
    w.opt_str("protocol", p.protocol.as_deref());
    w.opt_str("hostIP", p.host_ip.as_deref());
    w.finish()
}

fn env_from_source(e: &api::EnvFromSource) -> String {
    let mut w = ObjWriter::new();
    w.opt_str("prefix", e.prefix.as_deref());
    w.opt_obj("configMapRef", e.config_map_ref.as_ref(), |r| {
        let mut w = ObjWriter::new();
        w.opt_str("name", Some(r.name.as_str()));
        w.ptr_bool("optional", r.optional);
        w.finish()
    });
    w.opt_obj("secretRef", e.secret_ref.as_ref(), |r| {
        let mut w = ObjWriter::new();
        w.opt_str("name", Some(r.name.as_str()));
        w.ptr_bool("optional", r.optional);
        w.finish()
    });
    w.finish()
}

fn env_var(e: &api::EnvVar) -> String {
    let mut w = ObjWriter::new();
    w.str_always("name", &e.name);
    w.opt_str("value", e.value.as_deref());
    w.opt_obj("valueFrom", e.value_from.as_ref(), env_var_source);
    w.finish()
}

fn env_var_source(s: &api::EnvVarSource) -> String {
    let mut w = ObjWriter::new();
    w.opt_obj("fieldRef", s.field_ref.as_ref(), |f| {
        let mut w = ObjWriter::new();
        w.opt_str("apiVersion", f.api_version.as_deref());
        w.str_always("fieldPath", &f.field_path);
        w.finish()
    });
    w.opt_obj("resourceFieldRef", s.resource_field_ref.as_ref(), |r| {
        let mut w = ObjWriter::new();
        w.opt_str("containerName", r.container_name.as_deref());
        w.str_always("resource", &r.resource);
        let divisor = match &r.divisor {
            Some(q) => quantity_json(q),
            None => go_string("0"),
        };
        w.raw("divisor", &divisor);
        w.finish()
    });
    w.opt_obj("configMapKeyRef", s.config_map_key_ref.as_ref(), |r| {
        let mut w = ObjWriter::new();
        w.opt_str("name", Some(r.name.as_str()));
        w.str_always("key", &r.key);
        w.ptr_bool("optional", r.optional);
        w.finish()
    });
    w.opt_obj("secretKeyRef", s.secret_key_ref.as_ref(), |r| {
        let mut w = ObjWriter::new();
        w.opt_str("name", Some(r.name.as_str()));
        w.str_always("key", &r.key);
        w.ptr_bool("optional", r.optional);
        w.finish()
    });
    w.finish()
}

fn resource_list(list: &BTreeMap<String, ApiQuantity>) -> String {
    // BTreeMap iterates in byte order of the keys, which is Go's sort order.
    let parts: Vec<String> = list
        .iter()
        .map(|(k, v)| format!("{}:{}", go_string(k), quantity_json(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

fn resource_requirements(r: Option<&api::ResourceRequirements>) -> String {
    let mut w = ObjWriter::new();
    if let Some(r) = r {
        if let Some(l) = r.limits.as_ref().filter(|l| !l.is_empty()) {
            w.raw("limits", &resource_list(l));
        }
        if let Some(q) = r.requests.as_ref().filter(|l| !l.is_empty()) {
            w.raw("requests", &resource_list(q));
        }
    }
    w.finish()
}

fn volume_mount(m: &api::VolumeMount) -> String {
    let mut w = ObjWriter::new();
    w.str_always("name", &m.name);
    w.opt_bool_omitempty("readOnly", m.read_only);
    w.str_always("mountPath", &m.mount_path);
    w.opt_str("subPath", m.sub_path.as_deref());
    w.ptr_str("mountPropagation", m.mount_propagation.as_deref());
    w.opt_str("subPathExpr", m.sub_path_expr.as_deref());
    w.finish()
}

fn volume_device(d: &api::VolumeDevice) -> String {
    let mut w = ObjWriter::new();
    w.str_always("name", &d.name);
    w.str_always("devicePath", &d.device_path);
    w.finish()
}

fn exec_action(e: &api::ExecAction) -> String {
    let mut w = ObjWriter::new();
    w.str_list("command", e.command.as_deref());
    w.finish()
}

fn http_get_action(h: &api::HTTPGetAction) -> String {
    let mut w = ObjWriter::new();
    w.opt_str("path", h.path.as_deref());
    w.raw("port", &int_or_string(&h.port));
    w.opt_str("host", h.host.as_deref());
    w.opt_str("scheme", h.scheme.as_deref());
    w.list("httpHeaders", h.http_headers.as_deref(), |hd| {
        let mut w = ObjWriter::new();
        w.str_always("name", &hd.name);
        w.str_always("value", &hd.value);
        w.finish()
    });
    w.finish()
}

fn tcp_socket_action(t: &api::TCPSocketAction) -> String {
    let mut w = ObjWriter::new();
    w.raw("port", &int_or_string(&t.port));
    w.opt_str("host", t.host.as_deref());
    w.finish()
}

fn grpc_action(g: &api::GRPCAction) -> String {
    let mut w = ObjWriter::new();
    w.int_always("port", i64::from(g.port));
    match &g.service {
        Some(s) => w.str_always("service", s),
        None => w.raw("service", "null"),
    }
    w.finish()
}

fn probe(p: &api::Probe) -> String {
    let mut w = ObjWriter::new();
    w.opt_obj("exec", p.exec.as_ref(), exec_action);
    w.opt_obj("httpGet", p.http_get.as_ref(), http_get_action);
    w.opt_obj("tcpSocket", p.tcp_socket.as_ref(), tcp_socket_action);
    w.opt_obj("grpc", p.grpc.as_ref(), grpc_action);
    w.int_omitempty(
        "initialDelaySeconds",
        p.initial_delay_seconds.map(i64::from),
    );
    w.int_omitempty("timeoutSeconds", p.timeout_seconds.map(i64::from));
    w.int_omitempty("periodSeconds", p.period_seconds.map(i64::from));
    w.int_omitempty("successThreshold", p.success_threshold.map(i64::from));
    w.int_omitempty("failureThreshold", p.failure_threshold.map(i64::from));
    w.ptr_int(
        "terminationGracePeriodSeconds",
        p.termination_grace_period_seconds,
    );
    w.finish()
}

fn lifecycle_handler(h: &api::LifecycleHandler) -> String {
    let mut w = ObjWriter::new();
    w.opt_obj("exec", h.exec.as_ref(), exec_action);
    w.opt_obj("httpGet", h.http_get.as_ref(), http_get_action);
    w.opt_obj("tcpSocket", h.tcp_socket.as_ref(), tcp_socket_action);
    w.finish()
}

fn lifecycle(l: &api::Lifecycle) -> String {
    let mut w = ObjWriter::new();
    w.opt_obj("postStart", l.post_start.as_ref(), lifecycle_handler);
    w.opt_obj("preStop", l.pre_stop.as_ref(), lifecycle_handler);
    w.finish()
}

fn security_context(s: &api::SecurityContext) -> String {
    let mut w = ObjWriter::new();
    w.opt_obj("capabilities", s.capabilities.as_ref(), |c| {
        let mut w = ObjWriter::new();
        w.str_list("add", c.add.as_deref());
        w.str_list("drop", c.drop.as_deref());
        w.finish()
    });
    w.ptr_bool("privileged", s.privileged);
    w.opt_obj("seLinuxOptions", s.se_linux_options.as_ref(), |o| {
        let mut w = ObjWriter::new();
        w.opt_str("user", o.user.as_deref());
        w.opt_str("role", o.role.as_deref());
        w.opt_str("type", o.type_.as_deref());
        w.opt_str("level", o.level.as_deref());
        w.finish()
    });
    w.opt_obj("windowsOptions", s.windows_options.as_ref(), |o| {
        let mut w = ObjWriter::new();
        w.ptr_str(
            "gmsaCredentialSpecName",
            o.gmsa_credential_spec_name.as_deref(),
        );
        w.ptr_str("gmsaCredentialSpec", o.gmsa_credential_spec.as_deref());
        w.ptr_str("runAsUserName", o.run_as_user_name.as_deref());
        w.ptr_bool("hostProcess", o.host_process);
        w.finish()
    });
    w.ptr_int("runAsUser", s.run_as_user);
    w.ptr_int("runAsGroup", s.run_as_group);
    w.ptr_bool("runAsNonRoot", s.run_as_non_root);
    w.ptr_bool("readOnlyRootFilesystem", s.read_only_root_filesystem);
    w.ptr_bool("allowPrivilegeEscalation", s.allow_privilege_escalation);
    w.ptr_str("procMount", s.proc_mount.as_deref());
    w.opt_obj("seccompProfile", s.seccomp_profile.as_ref(), |p| {
        let mut w = ObjWriter::new();
        w.str_always("type", &p.type_);
        w.ptr_str("localhostProfile", p.localhost_profile.as_deref());
        w.finish()
    });
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(json: serde_json::Value) -> api::Container {
        serde_json::from_value(json).expect("valid container")
    }

    #[test]
    fn string_escaping_matches_go() {
        let cases: &[(&str, &str)] = &[
            ("plain", r#""plain""#),
            ("a<b>&c", r#""a\u003cb\u003e\u0026c""#),
            ("quote\"back\\", r#""quote\"back\\""#),
            ("nl\ncr\rtab\t", r#""nl\ncr\rtab\t""#),
            ("\u{8}\u{c}\u{1}", r#""\u0008\u000c\u0001""#),
            ("\u{2028}\u{2029}", r#""\u2028\u2029""#),
            ("é ü \u{7f}", "\"é ü \u{7f}\""),
        ];
        for (input, want) in cases {
            assert_eq!(&go_string(input), want, "input {input:?}");
        }
    }

    #[test]
    fn container_encoding_table() {
        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            (
                "minimal: resources always present",
                serde_json::json!({"name": "c"}),
                r#"{"name":"c","resources":{}}"#,
            ),
            (
                "empty slices and false bools omitted",
                serde_json::json!({"name": "c", "command": [], "args": [], "stdin": false,
                    "image": "", "ports": [], "env": []}),
                r#"{"name":"c","resources":{}}"#,
            ),
            (
                "field order follows the Go struct",
                serde_json::json!({"tty": true, "stdin": true, "imagePullPolicy": "Always",
                    "image": "busybox", "name": "c", "workingDir": "/w", "args": ["a"],
                    "command": ["sh"]}),
                r#"{"name":"c","image":"busybox","command":["sh"],"args":["a"],"workingDir":"/w","resources":{},"imagePullPolicy":"Always","stdin":true,"tty":true}"#,
            ),
            (
                "quantities canonical and keys sorted",
                serde_json::json!({"name": "c", "resources": {
                    "requests": {"memory": "1024Mi", "cpu": "1000m"},
                    "limits": {"memory": "1.5Gi", "cpu": "0.5"}}}),
                r#"{"name":"c","resources":{"limits":{"cpu":"500m","memory":"1536Mi"},"requests":{"cpu":"1","memory":"1Gi"}}}"#,
            ),
            (
                "ports: containerPort always, hostPort omitted when zero",
                serde_json::json!({"name": "c", "ports": [
                    {"containerPort": 80, "protocol": "TCP", "name": "http"},
                    {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "10.0.0.1"}]}),
                r#"{"name":"c","ports":[{"name":"http","containerPort":80,"protocol":"TCP"},{"hostPort":5353,"containerPort":53,"protocol":"UDP","hostIP":"10.0.0.1"}],"resources":{}}"#,
            ),
            (
                "env with every source; divisor defaults to \"0\"",
                serde_json::json!({"name": "c", "env": [
                    {"name": "A", "value": "x<y"},
                    {"name": "B", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                    {"name": "D", "valueFrom": {"resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}},
                    {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k", "optional": false}}},
                    {"name": "F", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                    {"name": "G", "value": ""}]}),
                r#"{"name":"c","env":[{"name":"A","value":"x\u003cy"},{"name":"B","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}},{"name":"C","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"0"}}},{"name":"D","valueFrom":{"resourceFieldRef":{"containerName":"c","resource":"limits.memory","divisor":"1Mi"}}},{"name":"E","valueFrom":{"configMapKeyRef":{"name":"cm","key":"k","optional":false}}},{"name":"F","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}},{"name":"G"}],"resources":{}}"#,
            ),
            (
                "envFrom",
                serde_json::json!({"name": "c", "envFrom": [
                    {"prefix": "P_", "configMapRef": {"name": "cm", "optional": true}},
                    {"secretRef": {"name": "s"}}]}),
                r#"{"name":"c","envFrom":[{"prefix":"P_","configMapRef":{"name":"cm","optional":true}},{"secretRef":{"name":"s"}}],"resources":{}}"#,
            ),
            (
                "volume mounts and devices",
                serde_json::json!({"name": "c",
                    "volumeMounts": [{"name": "v", "mountPath": "/m", "readOnly": true, "subPath": "s",
                        "mountPropagation": "HostToContainer", "subPathExpr": ""}],
                    "volumeDevices": [{"name": "d", "devicePath": "/dev/x"}]}),
                r#"{"name":"c","resources":{},"volumeMounts":[{"name":"v","readOnly":true,"mountPath":"/m","subPath":"s","mountPropagation":"HostToContainer"}],"volumeDevices":[{"name":"d","devicePath":"/dev/x"}]}"#,
            ),
            (
                "probes of every kind",
                serde_json::json!({"name": "c",
                    "livenessProbe": {"httpGet": {"path": "/h", "port": "http", "scheme": "HTTP",
                        "httpHeaders": [{"name": "X", "value": ""}]}, "periodSeconds": 5,
                        "successThreshold": 1, "failureThreshold": 3, "timeoutSeconds": 1,
                        "initialDelaySeconds": 0, "terminationGracePeriodSeconds": 0},
                    "readinessProbe": {"tcpSocket": {"port": 8080, "host": "h"}},
                    "startupProbe": {"grpc": {"port": 9000}}}),
                r#"{"name":"c","resources":{},"livenessProbe":{"httpGet":{"path":"/h","port":"http","scheme":"HTTP","httpHeaders":[{"name":"X","value":""}]},"timeoutSeconds":1,"periodSeconds":5,"successThreshold":1,"failureThreshold":3,"terminationGracePeriodSeconds":0},"readinessProbe":{"tcpSocket":{"port":8080,"host":"h"}},"startupProbe":{"grpc":{"port":9000,"service":null}}}"#,
            ),
            (
                "lifecycle",
                serde_json::json!({"name": "c", "lifecycle": {
                    "preStop": {"exec": {"command": ["sleep", "1"]}},
                    "postStart": {"httpGet": {"port": 80}}}}),
                r#"{"name":"c","resources":{},"lifecycle":{"postStart":{"httpGet":{"port":80}},"preStop":{"exec":{"command":["sleep","1"]}}}}"#,
            ),
            (
                "security context pointers written even when zero",
                serde_json::json!({"name": "c", "securityContext": {
                    "seccompProfile": {"type": "RuntimeDefault"}, "privileged": false,
                    "runAsUser": 0, "capabilities": {"add": ["NET_ADMIN"], "drop": []},
                    "procMount": "Default", "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true, "runAsNonRoot": true, "runAsGroup": 5,
                    "seLinuxOptions": {"level": "s0"}}}),
                r#"{"name":"c","resources":{},"securityContext":{"capabilities":{"add":["NET_ADMIN"]},"privileged":false,"seLinuxOptions":{"level":"s0"},"runAsUser":0,"runAsGroup":5,"runAsNonRoot":true,"readOnlyRootFilesystem":true,"allowPrivilegeEscalation":false,"procMount":"Default","seccompProfile":{"type":"RuntimeDefault"}}}"#,
            ),
            (
                "fields newer than v1.25 are dropped",
                serde_json::json!({"name": "c", "restartPolicy": "Always",
                    "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                    "resources": {"claims": [{"name": "x"}]},
                    "lifecycle": {"preStop": {"sleep": {"seconds": 3}}}}),
                r#"{"name":"c","resources":{},"lifecycle":{"preStop":{}}}"#,
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(container_to_go_json(&container(input)), want, "case {name}");
        }
    }

    #[test]
    fn annotation_encoders() {
        let ports: Vec<api::ContainerPort> = serde_json::from_value(serde_json::json!([
            {"name": "http", "containerPort": 80, "protocol": "TCP"}
        ]))
        .expect("ports");
        assert_eq!(
            container_ports_to_go_json(&ports),
            r#"[{"name":"http","containerPort":80,"protocol":"TCP"}]"#
        );
        let handler: api::LifecycleHandler = serde_json::from_value(serde_json::json!(
            {"exec": {"command": ["/bin/sh", "-c", "sleep 1"]}}
        ))
        .expect("handler");
        assert_eq!(
            lifecycle_handler_to_go_json(&handler),
            r#"{"exec":{"command":["/bin/sh","-c","sleep 1"]}}"#
        );
    }
}
