//! Probes and lifecycle handlers: exactly one handler, exec commands, HTTP
//! paths, ports and schemes, non-negative timings.

use k8s_openapi::api::core::v1::{HTTPGetAction, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::field::{ErrorList, FieldError};
use super::names::{is_http_header_name, is_valid_port_name, is_valid_port_num};

pub fn validate_probe(probe: Option<&Probe>, path: &str, errs: &mut ErrorList) {
    let Some(p) = probe else { return };
    let mut handlers = 0;
    let mut one = |name: &str, set: bool, errs: &mut ErrorList| -> bool {
        if !set {
            return false;
        }
        if handlers > 0 {
            errs.push(FieldError::forbidden(
                format!("{path}.{name}"),
                "may not specify more than 1 handler type",
            ));
            false
        } else {
            handlers += 1;
            true
        }
    };
    if one("exec", p.exec.is_some(), errs) {
        validate_exec(
            p.exec.as_ref().and_then(|e| e.command.as_ref()),
            &format!("{path}.exec"),
            errs,
        );
    }
    if one("httpGet", p.http_get.is_some(), errs)
        && let Some(h) = &p.http_get
    {
        validate_http_get(h, &format!("{path}.httpGet"), errs);
    }
    if one("tcpSocket", p.tcp_socket.is_some(), errs)
        && let Some(t) = &p.tcp_socket
    {
        validate_port_num_or_name(&t.port, &format!("{path}.tcpSocket.port"), errs);
    }
    if one("grpc", p.grpc.is_some(), errs)
        && let Some(g) = &p.grpc
    {
        for m in is_valid_port_num(g.port.into()) {
            errs.push(FieldError::invalid(format!("{path}.grpc.port"), g.port, m));
        }
    }
    if handlers == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
    for (field, value) in [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errs.push(FieldError::invalid(
                format!("{path}.{field}"),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    if let Some(grace) = p.termination_grace_period_seconds.filter(|g| *g <= 0) {
        errs.push(FieldError::invalid(
            format!("{path}.terminationGracePeriodSeconds"),
            grace,
            "must be greater than 0",
        ));
    }
}

pub fn validate_lifecycle_handler(h: &LifecycleHandler, path: &str, errs: &mut ErrorList) {
    let mut handlers = 0;
    for (name, set) in [
        ("exec", h.exec.is_some()),
        ("httpGet", h.http_get.is_some()),
        ("tcpSocket", h.tcp_socket.is_some()),
    ] {
        if !set {
            continue;
        }
        if handlers > 0 {
            errs.push(FieldError::forbidden(
                format!("{path}.{name}"),
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        handlers += 1;
        match name {
            "exec" => validate_exec(
                h.exec.as_ref().and_then(|e| e.command.as_ref()),
                &format!("{path}.exec"),
                errs,
            ),
            "httpGet" => {
                if let Some(g) = &h.http_get {
                    validate_http_get(g, &format!("{path}.httpGet"), errs);
                }
            }
            _ => {
                if let Some(t) = &h.tcp_socket {
                    validate_port_num_or_name(&t.port, &format!("{path}.tcpSocket.port"), errs);
                }
            }
        }
    }
    if handlers == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
}

fn validate_exec(command: Option<&Vec<String>>, path: &str, errs: &mut ErrorList) {
    if command.is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(format!("{path}.command"), ""));
    }
}

fn validate_http_get(h: &HTTPGetAction, path: &str, errs: &mut ErrorList) {
    if h.path.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required(format!("{path}.path"), ""));
    }
    validate_port_num_or_name(&h.port, &format!("{path}.port"), errs);
    let scheme = h.scheme.as_deref().unwrap_or("");
    if scheme != "HTTP" && scheme != "HTTPS" {
        errs.push(FieldError::not_supported(
            format!("{path}.scheme"),
            scheme,
            &["HTTP", "HTTPS"],
        ));
    }
    for header in h.http_headers.iter().flatten() {
        errs.invalid_each(
            &format!("{path}.httpHeaders"),
            &header.name,
            is_http_header_name(&header.name),
        );
    }
}

fn validate_port_num_or_name(port: &IntOrString, path: &str, errs: &mut ErrorList) {
    match port {
        IntOrString::Int(n) => {
            for m in is_valid_port_num((*n).into()) {
                errs.push(FieldError::invalid(path, *n, m));
            }
        }
        IntOrString::String(s) => errs.invalid_each(path, s, is_valid_port_name(s)),
    }
}
