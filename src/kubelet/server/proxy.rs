//! Proxying an upgraded stream to the runtime's streaming server, as the
//! Go kubelet's upgrade-aware proxy does for exec, attach and port-forward:
//! the client's request goes to the runtime's URL; a 101 from the runtime
//! upgrades both connections and bytes are copied both ways until either
//! side closes; any other answer is passed back as it is.

use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;

use super::router::{BoxError, RequestBody, ResponseBody, empty, http_error};

/// Whether the request asks for a connection upgrade (a `Connection`
/// header naming `upgrade`).
pub fn is_upgrade_request<B>(req: &Request<B>) -> bool {
    req.headers()
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Whether the request is a WebSocket upgrade.
pub fn is_websocket_request<B>(req: &Request<B>) -> bool {
    is_upgrade_request(req)
        && req
            .headers()
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

fn proxy_error(msg: &str) -> Response<ResponseBody> {
    tracing::error!(error = msg, "Error while proxying request");
    http_error(StatusCode::INTERNAL_SERVER_ERROR, msg)
}

/// Proxies the upgrade request `req` to `location` (the runtime's
/// streaming URL).
pub async fn proxy_stream(mut req: Request<RequestBody>, location: &str) -> Response<ResponseBody> {
    if !is_upgrade_request(&req) {
        return proxy_error("Upgrade request required");
    }
    let uri: http::Uri = match location.parse() {
        Ok(u) => u,
        Err(e) => return proxy_error(&format!("invalid streaming URL {location:?}: {e}")),
    };
    if uri.scheme_str() != Some("http") {
        return proxy_error(&format!("unsupported streaming URL scheme in {location:?}"));
    }
    let Some(authority) = uri.authority().cloned() else {
        return proxy_error(&format!("no host in streaming URL {location:?}"));
    };
    let addr = match authority.port_u16() {
        Some(_) => authority.to_string(),
        None => format!("{}:80", authority.host()),
    };
    let tcp = match tokio::net::TcpStream::connect(&addr).await {
        Ok(s) => s,
        Err(e) => return proxy_error(&format!("error dialing backend: {e}")),
    };
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await {
        Ok(pair) => pair,
        Err(e) => return proxy_error(&format!("error dialing backend: {e}")),
    };
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            crate::vlog!(4, error = %e, "Streaming backend connection ended with an error");
        }
    });

    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut backend_req = Request::builder()
        .method(req.method().clone())
        .uri(path)
        .body(empty())
        .unwrap_or_default();
    for (name, value) in req.headers() {
        if name != header::HOST {
            backend_req
                .headers_mut()
                .append(name.clone(), value.clone());
        }
    }
    if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
        backend_req.headers_mut().insert(header::HOST, host);
    }
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut backend_resp = match sender.send_request(backend_req).await {
        Ok(r) => r,
        Err(e) => return proxy_error(&format!("error proxying to the runtime: {e}")),
    };
    if backend_resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        // The runtime refused: its answer goes back unchanged.
        let (parts, body) = backend_resp.into_parts();
        return Response::from_parts(parts, body.map_err(|e| Box::new(e) as BoxError).boxed());
    }
    let backend_upgrade = hyper::upgrade::on(&mut backend_resp);
    let mut resp = Response::new(empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *resp.headers_mut() = backend_resp.headers().clone();
    tokio::spawn(async move {
        match tokio::try_join!(client_upgrade, backend_upgrade) {
            Ok((client, backend)) => {
                let (mut c, mut b) = (TokioIo::new(client), TokioIo::new(backend));
                if let Err(e) = tokio::io::copy_bidirectional(&mut c, &mut b).await {
                    crate::vlog!(4, error = %e, "Stream proxy ended with an error");
                }
            }
            Err(e) => tracing::error!(error = %e, "Error upgrading a streaming connection"),
        }
    });
    resp
}
