use std::sync::Mutex;

use http_body_util::BodyExt;

use super::*;
use crate::kubelet::container_logs::LogStreamer;
use crate::kubelet::kuberuntime::logs::LogsError;
use crate::kubelet::server::router::request_body;

#[test]
fn query_table() {
    let ok = |f: fn(&mut PodLogOptions)| {
        let mut o = PodLogOptions::default();
        f(&mut o);
        Ok(o)
    };
    let t = |s: &str| s.parse::<Timestamp>().unwrap();
    let cases: Vec<(&str, Result<PodLogOptions, &str>)> = vec![
        ("", ok(|_| {})),
        (
            "follow=true&timestamps=1&previous",
            ok(|o| {
                o.follow = true;
                o.timestamps = true;
                o.previous = true
            }),
        ),
        ("follow=false&timestamps=0&previous=FALSE", ok(|_| {})),
        ("tailLines=10", ok(|o| o.tail_lines = Some(10))),
        ("tail=5&tailLines=10", ok(|o| o.tail_lines = Some(5))),
        ("tail=all&tailLines=10", ok(|_| {})),
        (
            "limitBytes=100&sinceSeconds=30",
            ok(|o| {
                o.limit_bytes = Some(100);
                o.since_seconds = Some(30)
            }),
        ),
        ("tailLines=x", Err("decode")),
        ("tailLines=", Err("decode")),
        ("sinceTime=yesterday", Err("decode")),
        ("tailLines=-1", Err("invalid")),
        ("limitBytes=0", Err("invalid")),
        ("sinceSeconds=0", Err("invalid")),
        (
            "sinceSeconds=5&sinceTime=2026-11-22T08:00:00Z",
            Err("invalid"),
        ),
    ];
    for (q, want) in cases {
        let got = decode_log_options(Some(q)).map_err(|e| match e {
            QueryError::Decode(_) => "decode",
            QueryError::Invalid(_) => "invalid",
        });
        assert_eq!(got, want, "{q}");
    }
    let o = decode_log_options(Some("sinceTime=2026-11-22T08%3A00%3A00%2B01%3A00")).unwrap();
    assert_eq!(o.since_time, Some(t("2026-11-22T07:00:00Z")));
}

/// Knows pod ns/p with container c, whose log is "a\nb\n".
#[derive(Default)]
struct OnePod {
    asked: Mutex<Vec<PodLogOptions>>,
}

#[async_trait::async_trait]
impl ContainerLogs for OnePod {
    async fn container_logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        opts: PodLogOptions,
    ) -> Result<LogStreamer, ContainerLogsError> {
        self.asked.lock().unwrap().push(opts);
        if (namespace, pod) != ("ns", "p") {
            return Err(ContainerLogsError::PodNotFound(pod.into()));
        }
        if container == "waiting" {
            return Err(ContainerLogsError::NoLogsYet {
                pod: pod.into(),
                container: container.into(),
            });
        }
        if container != "c" {
            return Err(ContainerLogsError::ContainerNotFound {
                pod: pod.into(),
                container: container.into(),
            });
        }
        Ok(Box::new(|sink| {
            Box::pin(async move {
                for line in ["a\n", "b\n"] {
                    let _ = sink.send(Bytes::from(line)).await;
                }
                Err(LogsError::Read {
                    path: "/var/log/pods/ns_p_u/c/0.log".into(),
                    source: std::io::Error::other("unexpected EOF"),
                })
            })
        }))
    }
}

async fn get(h: &Arc<dyn Handler>, method: Method, uri: &str) -> (u16, String) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(request_body(""))
        .unwrap();
    let resp = h.call(req).await;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn answers_table() {
    let logs = Arc::new(OnePod::default());
    let h = container_logs_handler(logs.clone());
    let cases: &[(Method, &str, u16, &str)] = &[
        (
            Method::GET,
            "/containerLogs/ns/p/c",
            200,
            "a\nb\nfailed to read log file \"/var/log/pods/ns_p_u/c/0.log\": unexpected EOF",
        ),
        (
            Method::GET,
            "/containerLogs/ns/p/c?tailLines=1&follow=1",
            200,
            "a\nb\nfailed to read log file \"/var/log/pods/ns_p_u/c/0.log\": unexpected EOF",
        ),
        (
            Method::GET,
            "/containerLogs/ns/p",
            404,
            "404: Page Not Found",
        ),
        (
            Method::GET,
            "/containerLogs/ns/p/c/x",
            404,
            "404: Page Not Found",
        ),
        (
            Method::GET,
            "/containerLogs/ns/p/",
            400,
            r#"{"message": "Missing container name."}"#,
        ),
        (
            Method::GET,
            "/containerLogs/ns/p/c?tailLines=z",
            400,
            r#"{"message": "Unable to decode query."}"#,
        ),
        (
            Method::GET,
            "/containerLogs/ns/p/c?limitBytes=0",
            422,
            r#"{"message": "Invalid request."}"#,
        ),
        (
            Method::GET,
            "/containerLogs/ns/q/c",
            404,
            "pod \"q\" does not exist",
        ),
        (
            Method::GET,
            "/containerLogs/ns/p/d",
            404,
            "container \"d\" not found in pod \"p\"",
        ),
        (
            Method::GET,
            "/containerLogs/ns/p/waiting",
            400,
            "container \"waiting\" in pod \"p\" is waiting to start - no logs yet",
        ),
        (
            Method::POST,
            "/containerLogs/ns/p/c",
            405,
            "405: Method Not Allowed",
        ),
    ];
    for (method, uri, status, body) in cases {
        assert_eq!(
            get(&h, method.clone(), uri).await,
            (*status, body.to_string()),
            "{method} {uri}"
        );
    }
    let asked = logs.asked.lock().unwrap();
    assert_eq!(asked[1].tail_lines, Some(1));
    assert!(asked[1].follow);
}
