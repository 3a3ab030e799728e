//! The `request` span (method, route, status, request id and trace id) and the trace context
//! the request runs in: its `traceparent`'s, continued, or a new trace.
//!
//! `tower_http::trace` does not do this job: its spans carry other fields, and it knows nothing
//! of the engine's [`TraceContext`], which the handlers' calls carry on.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;
use turnwise::trace::TraceContext;

use super::request_id::RequestId;
use super::route_label;

/// The W3C trace context header.
const TRACEPARENT: &str = "traceparent";

/// Run the request in its span and its trace. The span's `status` is recorded by the access
/// log, before its line.
pub(super) async fn request_span(req: Request, next: Next) -> Response {
    let incoming = req
        .headers()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(TraceContext::parse);
    let trace = incoming.map_or_else(TraceContext::new_root, |c| c.child());
    let span = tracing::info_span!(
        target: "turnwise_server::http",
        "request",
        method = %req.method(),
        route = %route_label(&req),
        status = tracing::field::Empty,
        request_id = %RequestId::of(&req),
        trace_id = %trace.trace_id(),
    );
    #[cfg(feature = "otel")]
    otel_parent(&span, &incoming.unwrap_or(trace));
    trace.scope(next.run(req)).instrument(span).await
}

/// With the `otel` feature: make the request span's OpenTelemetry parent the caller's span
/// (or, for a request without `traceparent`, a parent in the trace the span records), so that
/// the exported trace id is the `trace_id` field's.
#[cfg(feature = "otel")]
fn otel_parent(span: &tracing::Span, parent: &TraceContext) {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(&parent.trace_id()),
        SpanId::from_hex(&parent.span_id()),
    ) else {
        return;
    };
    let flags = if parent.sampled() {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let remote = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
}
