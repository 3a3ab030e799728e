//! Request extractors that refuse bad input with the protocol's error envelope.
//!
//! - [`Body`] reads a JSON object body whatever the `content-type`, within the body limit
//!   (`413 payload_too_large` past it), and names the field at fault when a value has the
//!   wrong type or is missing (`400 invalid_request`, `param` = the field's path).
//! - [`Query`] does the same for query strings.
//! - [`Ns`] is the engine addressing the request's namespace, from `graph` and `stack`.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use turnwise::Engine;

use crate::error::ApiError;
use crate::AppState;

/// A JSON request body.
pub struct Body<T>(pub T);

impl<T, S> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if timed_out(&e) {
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "request_timeout",
                    "the request body did not arrive within the body-read timeout; send the \
                     whole body at once",
                )
            } else if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    "the request body is larger than this server accepts; keep large data \
                     elsewhere and send a reference",
                )
            } else {
                ApiError::invalid(None, format!("could not read the request body: {e}"))
            }
        })?;
        parse_json(&bytes).map(Body)
    }
}

/// Whether reading the body failed on its read deadline ([`crate::conn::BodyTimedOut`]).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<crate::conn::BodyTimedOut>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Parse a JSON object into `T`, naming the field at fault on failure.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        None => {
            return Err(ApiError::invalid(
                None,
                "the request body is empty; send a JSON object",
            ))
        }
        Some(b'{') => {}
        Some(_) => {
            // Tell malformed JSON apart from well-formed JSON of the wrong shape.
            let what = match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Ok(_) => "the request body must be a JSON object".to_owned(),
                Err(e) => return Err(syntax_error(bytes, &e)),
            };
            return Err(ApiError::invalid(None, what));
        }
    }
    // The common case, a body of the right shape, in one plain pass. Only a body that fails
    // pays for the second pass below, which tracks the path of the field at fault; both read
    // the same value, so a body is accepted or refused exactly as before.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let inner = e.inner();
        if inner.is_syntax() || inner.is_eof() {
            return syntax_error(bytes, inner);
        }
        let path = e.path().to_string();
        if path == "." {
            // serde loses the path inside flattened fields; the only flattened part of the
            // protocol's requests is the lease triple, so look there.
            let mut de = serde_json::Deserializer::from_slice(bytes);
            if let Err(e) =
                serde_path_to_error::deserialize::<_, turnwise::protocol::Lease>(&mut de)
            {
                let path = e.path().to_string();
                if path != "." && !e.inner().to_string().starts_with("missing field") {
                    return field_error(&path, &e.inner().to_string());
                }
            }
        }
        field_error(&path, &inner.to_string())
    })?;
    de.end()
        .map_err(|e| ApiError::invalid(None, format!("the request body is not valid JSON: {e}")))?;
    Ok(value)
}

/// How many arrays and objects the JSON parser accepts inside one another: serde_json refuses
/// the 128th level.
pub const PARSER_MAX_DEPTH: usize = 127;

/// The `400` for a body that does not parse: one that nests past the parser's limit says so,
/// anything else quotes the parser.
fn syntax_error(bytes: &[u8], e: &serde_json::Error) -> ApiError {
    if turnwise::validate::text_depth(bytes) > PARSER_MAX_DEPTH {
        return ApiError::invalid(
            None,
            format!(
                "the request body nests more than {PARSER_MAX_DEPTH} arrays/objects deep, past \
                 what this server parses; user values may nest at most {} levels",
                turnwise::validate::MAX_DEPTH
            ),
        );
    }
    ApiError::invalid(None, format!("the request body is not valid JSON: {e}"))
}

/// A `400` naming the field a deserialization error is about.
fn field_error(path: &str, message: &str) -> ApiError {
    // serde reports a missing field at the enclosing path: name the field itself.
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    let param = match (path, missing) {
        (".", Some(field)) => field.to_owned(),
        (p, Some(field)) => format!("{p}.{field}"),
        (".", None) => String::new(),
        (p, None) => p.to_owned(),
    };
    // Drop serde_json's position suffix: it refers to the body, not the field.
    let message = match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    };
    if param.is_empty() {
        return ApiError::invalid(None, format!("the request is malformed: {message}"));
    }
    ApiError::invalid(Some(param.clone()), format!("invalid `{param}`: {message}"))
}

/// A query string.
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded(query));
        serde_path_to_error::deserialize(de)
            .map(Query)
            .map_err(|e| field_error(&e.path().to_string(), &e.inner().to_string()))
    }
}

fn form_urlencoded(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}

/// The engine addressing the request's namespace: `graph` (default `default`), with
/// `@<stack>` appended when `stack` is given.
pub struct Ns(pub Engine);

impl FromRequestParts<AppState> for Ns {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        if !names_scope(query) {
            // Neither `graph` nor `stack`: the default namespace, addressed once at start.
            return Ok(Ns(state.default_ns.clone()));
        }
        let ns = namespace(query)?;
        Ok(Ns(state.engine.namespace(ns)))
    }
}

/// Whether a query string has a `graph` or a `stack` parameter, however encoded. Errs on the
/// side of `true`: any `%` or `+` in a key sends the query through [`namespace`].
fn names_scope(query: &str) -> bool {
    query.split('&').any(|pair| {
        let key = pair.split('=').next().unwrap_or("");
        key == "graph" || key == "stack" || key.contains(['%', '+'])
    })
}

/// The namespace a query string addresses. A repeated parameter takes its last value, as the
/// client's per-call parameters override its defaults.
pub fn namespace(query: &str) -> Result<String, ApiError> {
    let mut graph = None;
    let mut stack = None;
    for (k, v) in form_urlencoded(query) {
        match &*k {
            "graph" => graph = Some(v.into_owned()),
            "stack" => stack = Some(v.into_owned()),
            _ => {}
        }
    }
    let graph = graph.unwrap_or_else(|| turnwise::engine::DEFAULT_NAMESPACE.to_owned());
    turnwise::validate::identifier("graph", &graph)?;
    match stack {
        None => Ok(graph),
        Some(stack) => {
            turnwise::validate::identifier("stack", &stack)?;
            Ok(format!("{graph}@{stack}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_without_graph_or_stack_addresses_the_default_namespace() {
        for query in ["", "id=w", "id=w&after=3", "graphs=x", "x=graph", "&&", "="] {
            assert!(!names_scope(query), "{query}");
            assert_eq!(
                namespace(query).unwrap(),
                turnwise::engine::DEFAULT_NAMESPACE,
                "{query}"
            );
        }
        for query in [
            "graph=main",
            "id=w&stack=dev",
            "gr%61ph=main",
            "graph",
            "a+b=c",
        ] {
            assert!(names_scope(query), "{query}");
        }
        assert_eq!(namespace("gr%61ph=main&stack=dev").unwrap(), "main@dev");
    }
}
