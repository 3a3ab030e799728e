//! The console's route table, behind its guard, and its assets (the stylesheet and the script,
//! compiled into the binary).

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use super::actions::{control, create, delete, fork, login, logout, message, restart, signal};
use super::versions::{upgrade, versions_page};
use super::views::{
    instance_live, instance_page, instances_page, login_page, new_page, payload, run_page,
    schema_download, schemas_page, workflows_page,
};
use super::{auth, CSS, JS, LIVE, LOGIN, PREFIX};
use crate::AppState;

/// The console's routes, behind its guard (token and CSRF cookie, [`auth::guard`]).
pub(crate) fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route(PREFIX, get(workflows_page))
        .route("/console/", get(workflows_page))
        .route("/console/instances", get(instances_page))
        .route("/console/instance", get(instance_page))
        .route(LIVE, get(instance_live))
        .route("/console/run", get(run_page))
        .route("/console/instance/payload", get(payload))
        .route("/console/new", get(new_page))
        .route("/console/schemas", get(schemas_page))
        .route("/console/versions", get(versions_page))
        .route("/console/upgrade", post(upgrade))
        .route("/console/schemas/download", get(schema_download))
        .route(LOGIN, get(login_page).post(login))
        .route("/console/logout", post(logout))
        .route("/console/create", post(create))
        .route("/console/message", post(message))
        .route("/console/signal", post(signal))
        .route("/console/control", post(control))
        .route("/console/restart", post(restart))
        .route("/console/fork", post(fork))
        .route("/console/delete", post(delete))
        .route(CSS, get(css))
        .route(JS, get(js))
        .route_layer(middleware::from_fn_with_state(state, auth::guard))
}

// ---- assets ---------------------------------------------------------------------------------

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/console.js"),
    )
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [(CONTENT_TYPE, kind), (CACHE_CONTROL, "public, max-age=300")],
        body,
    )
        .into_response()
}
