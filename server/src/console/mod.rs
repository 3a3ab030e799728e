//! The console: server-rendered pages at `/console` to see and operate the workflows of the
//! default namespace in a browser (`docs/console.md`).
//!
//! Reading goes through the engine, as the API's reads do; every action goes through the same
//! engine call and the same schema check as its API route, with the message origin kind
//! `console`. The pages are HTML made with maud; a little script of our own (served from the
//! binary) adds the live parts (a poll of the Running line and status), the array and variant
//! controls of the generated forms, and the check of a form against its schema's bounds before
//! it is sent. Without the script every page still reads.
//!
//! `routes` is the route table (behind the guard of `auth`) with the assets; `views` holds the
//! pages' handlers (read through the engine, then render), `actions` the forms' handlers, and
//! `pages` the templates they render with; `forms` generates a form from a schema; `versions`
//! is the Versions page and the upgrade action, and `diagram` draws a version's manifest.

mod actions;
mod auth;
mod diagram;
pub mod forms;
mod pages;
mod routes;
mod versions;
mod views;

use axum::http::header::LOCATION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use turnwise::Engine;

use crate::error::ApiError;
use crate::AppState;

pub(crate) use auth::{Csrf, Login};
pub(crate) use routes::routes;

/// Where the console is mounted.
pub(crate) const PREFIX: &str = "/console";
pub(crate) const LOGIN: &str = "/console/login";
pub(crate) const CSS: &str = "/console/assets/console.css";
pub(crate) const JS: &str = "/console/assets/console.js";
/// The live part of an instance page, polled every second by its script.
pub(crate) const LIVE: &str = "/console/instance/live";

/// A refusal shown as a page (the console's counterpart of the API's error envelope).
#[derive(Debug)]
pub struct Fail {
    status: StatusCode,
    message: String,
}

impl Fail {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Fail {
            status,
            message: message.into(),
        }
    }
}

impl From<ApiError> for Fail {
    fn from(e: ApiError) -> Self {
        Fail::new(e.status, e.message.clone())
    }
}

impl From<turnwise::Error> for Fail {
    fn from(e: turnwise::Error) -> Self {
        ApiError::from(e).into()
    }
}

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        (
            self.status,
            html(pages::failure(self.status, &self.message)),
        )
            .into_response()
    }
}

type Page = Result<Response, Fail>;

fn html(markup: maud::Markup) -> Response {
    Html(markup.into_string()).into_response()
}

fn see_other(to: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        res.headers_mut().insert(LOCATION, v);
    }
    res
}

/// What every page's frame needs: the CSRF token for its forms, whether to offer logout.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    pub(crate) csrf: String,
    pub(crate) login: bool,
}

fn frame(csrf: &Csrf, login: &Login) -> Frame {
    Frame {
        csrf: csrf.0.clone(),
        login: login.required,
    }
}

/// The console reads and writes the default namespace.
fn engine(state: &AppState) -> &Engine {
    &state.default_ns
}

fn now_ms(state: &AppState) -> i64 {
    engine(state).clock().now_ms()
}
