//! The access log: every request's line (with the error's code when it was refused), its
//! metrics, and the `status` of its span.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

use super::envelope::Enveloped;
use super::request_id::RequestId;
use super::{is_probe, route_label};
use crate::console;

/// Log the request once it is answered, in its span.
pub(super) async fn log_request(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    // A clone of the URI shares its bytes with the request: no copy of the path.
    let uri = req.uri().clone();
    let path = uri.path();
    let route = route_label(&req);
    let id = RequestId::of(&req).to_owned();
    let mut res = next.run(req).await;
    let status = res.status().as_u16();
    tracing::Span::current().record("status", status);
    crate::metrics::http_request(&method, route, status, started.elapsed());
    let latency_ms = started.elapsed().as_millis() as u64;
    let probe = is_probe(path);
    if let Some(Enveloped(error)) = res.extensions_mut().remove::<Enveloped>() {
        if probe {
            // A load balancer probes every few seconds; what makes the server unready (a store
            // that cannot write, a shutdown) is logged once where it happens.
            tracing::debug!(
                target: "turnwise_server::http",
                %method, %path, status, code = %error.code,
                latency_ms, request_id = %id, message = %error.message,
                "probe refused"
            );
        } else if status >= 500 {
            tracing::warn!(
                target: "turnwise_server::http",
                %method, %path, status, code = %error.code,
                latency_ms, request_id = %id, message = %error.message,
                "request failed"
            );
        } else {
            tracing::info!(
                target: "turnwise_server::http",
                %method, %path, status, code = %error.code,
                latency_ms, request_id = %id,
                "request refused"
            );
        }
    } else if probe || path == console::LIVE {
        // Probed every few seconds by a load balancer, or polled every second by an open
        // console page: kept out of the `info` log.
        tracing::debug!(
            target: "turnwise_server::http",
            %method, %path, status, latency_ms, request_id = %id,
            "request"
        );
    } else {
        tracing::info!(
            target: "turnwise_server::http",
            %method, %path, status, latency_ms, request_id = %id,
            "request"
        );
    }
    res
}
