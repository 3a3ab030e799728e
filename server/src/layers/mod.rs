//! The layers every request goes through, one job each, outermost first:
//!
//! 1. [`request_id`]: a new id for the request, answered in `x-request-id`;
//! 2. [`span`]: the `request` span and the trace the request continues or starts;
//! 3. [`access_log`]: the span's status, the request's metrics and its log line;
//! 4. [`envelope`]: error answers rewritten in the wire's JSON envelope;
//! 5. [`bearer`]: the refusal of a request without the configured bearer token (`401`);
//! 6. [`limits`]: the refusal of a request over a size limit, before its body is read;
//! 7. the panic guard and the body limit of the extractors, then the routes.
//!
//! The bearer check comes before the limits: a client without the token learns nothing more
//! than that it needs one.

mod access_log;
mod bearer;
mod envelope;
mod limits;
pub(crate) mod request_id;
mod span;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;

pub(crate) use self::bearer::constant_time_eq;
use crate::{console, routes, ApiError, AppState};

/// `routes` with the limits, the panic guard and the request context every request goes
/// through (in the order of this module's documentation).
pub(crate) fn apply(routes: Router<AppState>, state: AppState) -> Router {
    let options = state.options.clone();
    routes
        .layer(DefaultBodyLimit::max(options.body_limit))
        .layer(CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn_with_state(
            options.clone(),
            limits::refuse_too_large,
        ))
        .layer(middleware::from_fn_with_state(
            options,
            bearer::refuse_unauthenticated,
        ))
        .layer(middleware::from_fn(envelope::wrap_errors))
        .layer(middleware::from_fn(access_log::log_request))
        .layer(middleware::from_fn(span::request_span))
        .layer(middleware::from_fn(request_id::assign))
        .with_state(state)
}

/// A handler panicked: answer `500 internal_error` instead of dropping the connection.
fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal_error",
        "the server failed while handling this request; nothing was acknowledged",
    )
    .into_response()
}

/// Whether `path` is one of the two probes (`GET /healthz`, `GET /readyz`), the only routes
/// served without the bearer token: they say whether the server is up, nothing about its data.
fn is_probe(path: &str) -> bool {
    path == routes::HEALTHZ || path == routes::READYZ
}

/// Whether `path` is the console's (`/console` and below): pages and forms, with their own
/// authentication (`console::auth`) and HTML refusals.
fn is_console(path: &str) -> bool {
    path == console::PREFIX || path.starts_with("/console/")
}

/// The route label of a request: its matched path template (the table's own `&'static str`
/// when it is one of the protocol's routes), or `unmatched`; never the raw path.
fn route_label(req: &Request) -> ::metrics::SharedString {
    let Some(matched) = req.extensions().get::<MatchedPath>() else {
        return "unmatched".into();
    };
    let matched = matched.as_str();
    let known = turnwise_rules::Route::ALL
        .iter()
        .map(|r| r.path())
        .chain([routes::HEALTHZ, routes::READYZ, routes::METRICS])
        .find(|p| *p == matched);
    match known {
        Some(path) => path.into(),
        None => matched.to_owned().into(),
    }
}
