//! The console's forms as handlers: login and logout, and each action through the same engine
//! call and schema check as its API route, re-showing the form with the refusal beside its
//! fields.

use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::Extension;
use serde_json::{json, Value};
use turnwise::protocol::*;
use turnwise::Backend;

use super::views::{load_instance, registered, schema_of, InstanceQuery};
use super::{auth, engine, forms, frame, html, pages, see_other, Csrf, Fail, Login, Page};
use super::{LOGIN, PREFIX};
use crate::error::ApiError;
use crate::AppState;

// ---- login ----------------------------------------------------------------------------------

pub(super) async fn login(
    State(state): State<AppState>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let secure = auth::over_tls(&headers, &uri);
    let form = forms::FormData::parse(&body);
    auth::check_csrf(&headers, &form)?;
    let csrf = auth::cookie(&headers, auth::CSRF_COOKIE).unwrap_or_default();
    let given = form.get("token").unwrap_or("");
    match state.options.api_token.as_deref() {
        None => Ok(see_other(PREFIX)),
        Some(expected) => match auth::login_cookie(Some(expected), given, secure) {
            Some(cookie) => {
                let mut res = see_other(PREFIX);
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    res.headers_mut().append(SET_COOKIE, v);
                }
                Ok(res)
            }
            None => Ok((
                StatusCode::UNAUTHORIZED,
                html(pages::login(csrf, Some("That is not this server's token."))),
            )
                .into_response()),
        },
    }
}

pub(super) async fn logout(
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    auth::check_csrf(&headers, &forms::FormData::parse(&body))?;
    let mut res = see_other(LOGIN);
    if let Ok(v) = HeaderValue::from_str(&auth::logout_cookie(auth::over_tls(&headers, &uri))) {
        res.headers_mut().append(SET_COOKIE, v);
    }
    Ok(res)
}

// ---- actions --------------------------------------------------------------------------------

/// The origin of everything the console admits.
fn origin(form: &forms::FormData) -> MessageOrigin {
    let mut o = MessageOrigin::new("console");
    if let Some(note) = form.get("note").filter(|n| !n.trim().is_empty()) {
        o.fields.insert("note".into(), json!(note));
    }
    o
}

/// Read a form's body after the CSRF check.
pub(super) fn read_form(headers: &HeaderMap, body: &[u8]) -> Result<forms::FormData, Fail> {
    let form = forms::FormData::parse(body);
    auth::check_csrf(headers, &form)?;
    Ok(form)
}

pub(super) fn required<'a>(form: &'a forms::FormData, name: &str) -> Result<&'a str, Fail> {
    form.get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
        Fail::new(
            StatusCode::BAD_REQUEST,
            format!("the form has no `{name}`; submit it from the console's page"),
        )
    })
}

fn instance_url(id: &str) -> String {
    let q: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("id", id)
        .finish();
    format!("/console/instance?{q}")
}

/// The errors of a server refusal, by form field: the schema check's `details.errors` mapped to
/// their fields, the message itself at the root.
fn refusal_errors(e: &ApiError, field: &forms::Field, value: &Value) -> forms::Errors {
    let mut errors = forms::Errors::new();
    let listed = e
        .details
        .as_ref()
        .and_then(|d| d.get("errors"))
        .and_then(Value::as_array);
    for item in listed.into_iter().flatten() {
        let at = item["instance_path"].as_str().unwrap_or("");
        let path = forms::path_of(field, forms::ROOT, at, value);
        let message = item["message"]
            .as_str()
            .unwrap_or("does not match the schema");
        errors.entry(path).or_default().push(message.to_owned());
    }
    errors
}

/// Re-show the instance page with a form's refusal beside its fields (`400` or the engine's
/// status).
async fn refused(
    state: &AppState,
    csrf: &Csrf,
    login: &Login,
    id: &str,
    pending: pages::Pending,
    status: StatusCode,
) -> Page {
    let view = load_instance(
        state,
        &InstanceQuery {
            id: id.to_owned(),
            before: None,
            queue: None,
            runs: None,
        },
    )
    .await?;
    let page = pages::instance(&frame(csrf, login), &view, &pending);
    Ok((status, html(page)).into_response())
}

pub(super) async fn message(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    let message_id = required(&form, "message_id")?.to_owned();
    let engine = engine(&state);
    let inst = engine.get_instance(&id).await?;
    let schema = schema_of(&state, &inst.workflow_type, &inst.version).await;
    let field = forms::Field::from_schema(schema.as_ref().map_or(&Value::Null, |d| &d.message));
    let value = match forms::value_of(&field, forms::ROOT, &form) {
        Ok(v) => v,
        Err(errors) => {
            let pending = pages::Pending::message(None, errors, "the form has fields to correct");
            return refused(&state, &csrf, &login, &id, pending, StatusCode::BAD_REQUEST).await;
        }
    };
    // The API route's engine call, which checks the registered schema first.
    let sent = engine
        .send_message(MessageRequest {
            workflow_id: id.clone(),
            id: message_id,
            message: value.clone(),
            origin: Some(origin(&form)),
        })
        .await
        .map_err(ApiError::from);
    match sent {
        Ok(_) => Ok(see_other(&instance_url(&id))),
        Err(e) => {
            let errors = refusal_errors(&e, &field, &value);
            let pending = pages::Pending::message(Some(value), errors, &e.message);
            refused(&state, &csrf, &login, &id, pending, e.status).await
        }
    }
}

pub(super) async fn signal(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    let name = required(&form, "name")?.to_owned();
    let signal_id = required(&form, "signal_id")?.to_owned();
    let turn: u64 = required(&form, "turn")?
        .parse()
        .map_err(|_| Fail::new(StatusCode::BAD_REQUEST, "`turn` is not a turn number"))?;
    let engine = engine(&state);
    let inst = engine.get_instance(&id).await?;
    let schema = schema_of(&state, &inst.workflow_type, &inst.version).await;
    let field = forms::Field::from_schema(
        schema
            .as_ref()
            .and_then(|d| d.signals.get(&name))
            .unwrap_or(&Value::Null),
    );
    let value = match forms::value_of(&field, forms::ROOT, &form) {
        Ok(v) => v,
        Err(errors) => {
            let pending =
                pages::Pending::signal(&name, None, errors, "the form has fields to correct");
            return refused(&state, &csrf, &login, &id, pending, StatusCode::BAD_REQUEST).await;
        }
    };
    // The API route's engine call, which checks the registered schema first.
    let sent = engine
        .signal(SignalRequest {
            workflow_id: id.clone(),
            turn,
            id: signal_id,
            name: name.clone(),
            value: value.clone(),
        })
        .await
        .map_err(ApiError::from);
    match sent {
        Ok(_) => Ok(see_other(&instance_url(&id))),
        Err(e) => {
            let errors = refusal_errors(&e, &field, &value);
            let pending = pages::Pending::signal(&name, Some(value), errors, &e.message);
            refused(&state, &csrf, &login, &id, pending, e.status).await
        }
    }
}

pub(super) async fn create(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(login): Extension<Login>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let workflow_type = required(&form, "workflow_type")?.to_owned();
    let version = required(&form, "version")?.to_owned();
    let id = required(&form, "id")?.to_owned();
    let schema = schema_of(&state, &workflow_type, &version).await;
    let field = forms::Field::from_schema(schema.as_ref().map_or(&Value::Null, |d| &d.state));
    let docs = registered(&state).await;
    let again = |errors: forms::Errors, value: Option<Value>, message: &str, status| {
        let pending = pages::Pending::message(value, errors, message);
        let page = pages::new_instance(
            &frame(&csrf, &login),
            &docs,
            Some((&workflow_type, &version)),
            &pending,
        );
        Ok((status, html(page)).into_response())
    };
    let state_value = match forms::value_of(&field, forms::ROOT, &form) {
        Ok(v) => v,
        Err(errors) => {
            return again(
                errors,
                None,
                "the form has fields to correct",
                StatusCode::BAD_REQUEST,
            )
        }
    };
    let number = |name: &str| form.get(name).and_then(|v| v.trim().parse::<u64>().ok());
    let created = engine(&state)
        .create_instance(CreateInstanceRequest {
            id: id.clone(),
            workflow_type: workflow_type.clone(),
            version: version.clone(),
            state: state_value.clone(),
            lease_ms: number("lease_ms"),
            max_attempts: number("max_attempts").map(|n| n.min(u32::MAX as u64) as u32),
            on_exhausted: match form.get("on_exhausted") {
                Some("skip") => Some(OnExhausted::Skip),
                Some("block") => Some(OnExhausted::Block),
                _ => None,
            },
        })
        .await;
    match created {
        Ok(inst) => Ok(see_other(&instance_url(&inst.id))),
        Err(e) => {
            let e = ApiError::from(e);
            again(
                forms::Errors::new(),
                Some(state_value),
                &e.message,
                e.status,
            )
        }
    }
}

pub(super) async fn control(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    let action: ControlAction =
        choice(required(&form, "action")?, "an action", ControlAction::ALL)?;
    let turn = form.get("turn").and_then(|t| t.parse::<u64>().ok());
    engine(&state)
        .control(ControlRequest {
            workflow_id: id.clone(),
            action,
            turn,
            by: Some(BY.to_owned()),
        })
        .await?;
    Ok(see_other(&instance_url(&id)))
}

/// A form field naming one of a wire enum's values (`all`), as that enum; a 400 saying what
/// `value` is not (`what`) and listing the values otherwise.
fn choice<T: serde::de::DeserializeOwned>(
    value: &str,
    what: &str,
    all: &[&str],
) -> Result<T, Fail> {
    serde_json::from_value(json!(value)).map_err(|_| {
        Fail::new(
            StatusCode::BAD_REQUEST,
            format!("`{value}` is not {what}; use one of {}", all.join(", ")),
        )
    })
}

/// Who the console's operator actions say asked, on the instance's events.
pub(super) const BY: &str = "console";

/// Restart a suspended turn, from its last accepted step or from scratch.
pub(super) async fn restart(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    let turn: u64 = required(&form, "turn")?
        .parse()
        .map_err(|_| Fail::new(StatusCode::BAD_REQUEST, "`turn` is not a turn number"))?;
    let from: RestartFrom = choice(
        required(&form, "from")?,
        "where a turn restarts",
        RestartFrom::ALL,
    )?;
    engine(&state)
        .restart_turn(RestartTurnRequest {
            workflow_id: id.clone(),
            turn,
            from,
            by: Some(BY.to_owned()),
        })
        .await?;
    Ok(see_other(&instance_url(&id)))
}

/// Fork an instance whose head turn is suspended; shows the fork.
pub(super) async fn fork(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    let new_id = required(&form, "new_id")?.trim().to_owned();
    let forked = engine(&state)
        .fork_instance(ForkInstanceRequest {
            workflow_id: id,
            new_id,
            by: Some(BY.to_owned()),
        })
        .await?;
    Ok(see_other(&instance_url(&forked.workflow_id)))
}

pub(super) async fn delete(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Page {
    let form = read_form(&headers, &body)?;
    let id = required(&form, "workflow_id")?.to_owned();
    engine(&state)
        .delete_instance(DeleteRequest { workflow_id: id })
        .await?;
    Ok(see_other("/console/instances"))
}
