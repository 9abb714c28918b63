use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::cri::CriError;
use crate::kubelet::server::router::request_body;

#[test]
fn targets() {
    let t = |ns: &str, pod: &str, uid: &str, c: &str| {
        Some(Target {
            namespace: ns.into(),
            pod: pod.into(),
            uid: uid.into(),
            container: c.into(),
        })
    };
    let cases = [
        (Verb::Exec, "ns/p/c", t("ns", "p", "", "c")),
        (Verb::Attach, "ns/p/u1/c", t("ns", "p", "u1", "c")),
        (Verb::Run, "ns/p%20x/c", t("ns", "p x", "", "c")),
        (Verb::Exec, "ns/p", None),
        (Verb::Exec, "ns/p/u/c/x", None),
        (Verb::PortForward, "ns/p", t("ns", "p", "", "")),
        (Verb::PortForward, "ns/p/u1", t("ns", "p", "u1", "")),
        (Verb::PortForward, "ns/p/u1/c", None),
    ];
    for (verb, rest, want) in cases {
        assert_eq!(parse_target(verb, rest), want, "{verb:?} {rest}");
    }
}

#[test]
fn stream_options_table() {
    let o = |stdin, stdout, stderr, tty| {
        Ok(StreamOptions {
            stdin,
            stdout,
            stderr,
            tty,
        })
    };
    let none = Err(QueryError::NoStreams);
    let cases = [
        ("output=1&error=1", o(false, true, true, false)),
        ("input=1&output=1&tty=1&error=1", o(true, true, false, true)),
        ("output=true", none.clone()),
        ("", none.clone()),
        ("tty=1&error=1", none),
    ];
    for (q, want) in cases {
        assert_eq!(stream_options(Some(q)), want, "{q}");
    }
}

#[test]
fn port_forward_ports_table() {
    type Case = (&'static str, bool, Result<Vec<i32>, &'static str>);
    let cases: [Case; 7] = [
        ("", false, Ok(vec![])),
        ("port=80", true, Ok(vec![80])),
        ("port=80,8080&port=9090", true, Ok(vec![80, 8080, 9090])),
        ("", true, Err("query parameter \"port\" is required")),
        (
            "port=",
            true,
            Err("query parameter \"port\" cannot be empty"),
        ),
        ("port=0", true, Err("port \"0\" must be > 0")),
        ("port=http", true, Err("unable to parse \"http\" as a port")),
    ];
    for (q, ws, want) in cases {
        let got = port_forward_ports(Some(q), ws);
        match want {
            Ok(ports) => assert_eq!(got, Ok(ports), "{q}"),
            Err(msg) => assert!(got.unwrap_err().to_string().starts_with(msg), "{q}"),
        }
    }
}

/// Knows pod ns/p; its runtime refuses container "gone" as not found and
/// is busy for "busy".
struct Host;

fn err_for(container: &str) -> StreamingError {
    match container {
        "gone" => StreamingError::Runtime(CriError::NotFound {
            endpoint: "fake".into(),
            rpc: "Exec",
            message: "container gone".into(),
        }),
        "busy" => StreamingError::Runtime(CriError::Rpc {
            endpoint: "fake".into(),
            rpc: "Attach",
            code: tonic::Code::ResourceExhausted,
            message: "too many streams".into(),
        }),
        c => StreamingError::ContainerNotFound(c.to_string()),
    }
}

#[async_trait::async_trait]
impl StreamingHost for Host {
    fn get_pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        ((namespace, name) == ("ns", "p")).then(|| {
            Arc::new(Pod {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    uid: Some("u1".into()),
                    ..Default::default()
                },
                ..Default::default()
            })
        })
    }
    async fn get_exec(
        &self,
        _: &Pod,
        _: &str,
        container: &str,
        _: Vec<String>,
        _: StreamOptions,
    ) -> Result<String, StreamingError> {
        Err(err_for(container))
    }
    async fn get_attach(
        &self,
        _: &Pod,
        _: &str,
        container: &str,
        _: StreamOptions,
    ) -> Result<String, StreamingError> {
        Err(err_for(container))
    }
    async fn get_port_forward(&self, _: &Pod, _: Vec<i32>) -> Result<String, StreamingError> {
        Ok("http://127.0.0.1:1/portforward/x".into())
    }
    async fn run_in_container(
        &self,
        _: &Pod,
        _: &str,
        container: &str,
        cmd: Vec<String>,
    ) -> Result<Vec<u8>, StreamingError> {
        if container == "c" {
            Ok(format!("{cmd:?}").into_bytes())
        } else {
            Err(StreamingError::Run(CriError::ExitCode {
                container: container.to_string(),
                cmd: "false".into(),
                code: 1,
                stdout: Vec::new(),
                stderr: Vec::new(),
            }))
        }
    }
}

#[tokio::test]
async fn refusals_and_run() {
    let cases: &[(Verb, Method, &str, u16, &str)] = &[
        (
            Verb::Exec,
            Method::GET,
            "/exec/ns/p/c",
            400,
            "you must specify at least 1 of stdin, stdout, stderr",
        ),
        (
            Verb::Exec,
            Method::GET,
            "/exec/ns/q/c?output=1",
            404,
            "pod does not exist",
        ),
        (
            Verb::Exec,
            Method::GET,
            "/exec/ns/p/x?output=1",
            500,
            "container not found (\"x\")",
        ),
        (
            Verb::Exec,
            Method::POST,
            "/exec/ns/p/gone?output=1",
            404,
            "Exec on fake: rpc error: code = NotFound desc = container gone",
        ),
        (
            Verb::Attach,
            Method::GET,
            "/attach/ns/p/busy?output=1",
            429,
            "Attach on fake: rpc error: code = ResourceExhausted desc = too many streams",
        ),
        (
            Verb::Exec,
            Method::PUT,
            "/exec/ns/p/c?output=1",
            405,
            "405: Method Not Allowed",
        ),
        (
            Verb::Exec,
            Method::GET,
            "/exec/ns/p",
            404,
            "404: Page Not Found",
        ),
        (
            Verb::PortForward,
            Method::GET,
            "/portForward/ns/p/u2",
            404,
            "pod not found",
        ),
        // A plain GET cannot be upgraded.
        (
            Verb::PortForward,
            Method::GET,
            "/portForward/ns/p",
            500,
            "Upgrade request required\n",
        ),
        (
            Verb::Run,
            Method::GET,
            "/run/ns/p/c?cmd=ls",
            405,
            "405: Method Not Allowed",
        ),
        (
            Verb::Run,
            Method::POST,
            "/run/ns/p/c?cmd=echo%20a%20%20b",
            200,
            "[\"echo\", \"a\", \"\", \"b\"]",
        ),
        (
            Verb::Run,
            Method::POST,
            "/run/ns/p/d?cmd=false",
            500,
            "command 'false' exited with 1: ",
        ),
    ];
    for (verb, method, uri, status, body) in cases {
        let h = streaming_handler(*verb, Arc::new(Host));
        let req = Request::builder()
            .method(method.clone())
            .uri(*uri)
            .body(request_body(""))
            .unwrap();
        let resp = h.call(req).await;
        let got_status = resp.status().as_u16();
        if got_status == 429 {
            assert_eq!(resp.headers()[header::RETRY_AFTER], "60");
        }
        let got = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            (got_status, String::from_utf8_lossy(&got).into_owned()),
            (*status, body.to_string()),
            "{method} {uri}"
        );
    }
}

#[test]
fn streaming_errors_answer_as_go() {
    let not_found = || CriError::NotFound {
        endpoint: "e".into(),
        rpc: "Exec",
        message: "m".into(),
    };
    let cases = [
        (
            StreamingError::Runtime(not_found()),
            StreamingFailure::NotFound,
        ),
        // /run answers 500 whatever the runtime's code.
        (StreamingError::Run(not_found()), StreamingFailure::Internal),
        (
            StreamingError::Runtime(CriError::Unavailable {
                endpoint: "e".into(),
                rpc: "Exec",
                message: "m".into(),
            }),
            StreamingFailure::Internal,
        ),
        (
            StreamingError::NoSandbox("p_ns".into()),
            StreamingFailure::Internal,
        ),
        (
            StreamingError::ContainerNotInPod {
                container: "c".into(),
                pod: "p_ns".into(),
            },
            StreamingFailure::Internal,
        ),
    ];
    for (e, want) in cases {
        assert_eq!(e.status(), want, "{e}");
    }
    assert_eq!(
        StreamingError::NoSandbox("p_ns".into()).to_string(),
        "failed to find sandboxID for pod p_ns"
    );
}
