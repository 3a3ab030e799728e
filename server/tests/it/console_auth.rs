//! The console's authentication: with a token set, every console page and action is refused
//! without it (and the action does nothing); the login form sets an HttpOnly, SameSite=Strict
//! session cookie that is not the token and then opens the pages; a forged session cookie (the
//! token itself, or any other value) opens nothing; logging out clears the cookie; a form whose
//! CSRF token does not match its cookie is refused. Without a token the console is open, as the
//! API is.

use crate::common;

use reqwest::header::{COOKIE, SET_COOKIE};
use reqwest::{Client, StatusCode};
use serde_json::json;

const TOKEN: &str = "s3cret token";

/// Every page of the console, as a person opens them.
const PAGES: &[&str] = &[
    "/console",
    "/console/instances",
    "/console/instances?status=idle",
    "/console/instance?id=inst-1",
    "/console/instance/live?id=inst-1",
    "/console/instance/payload?id=inst-1&turn=1",
    "/console/run?run=no-such-run",
    "/console/new?type=counter&version=v1",
    "/console/schemas",
    "/console/schemas/download?type=counter&version=v1",
    "/console/assets/console.js",
];

/// Every action of the console, with a form that would work with the token.
fn actions() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    vec![
        (
            "/console/create",
            vec![
                ("workflow_type", "counter"),
                ("version", "v1"),
                ("id", "made-here"),
                ("v", "{}"),
            ],
        ),
        (
            "/console/message",
            vec![
                ("workflow_id", "inst-1"),
                ("message_id", "m-console"),
                ("v", "{\"add\": 1}"),
            ],
        ),
        (
            "/console/signal",
            vec![
                ("workflow_id", "inst-1"),
                ("turn", "1"),
                ("name", "go"),
                ("signal_id", "s1"),
                ("v", "1"),
            ],
        ),
        (
            "/console/control",
            vec![("workflow_id", "inst-1"), ("action", "pause")],
        ),
        ("/console/delete", vec![("workflow_id", "inst-1")]),
        ("/console/logout", vec![]),
    ]
}

fn client() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn form(pairs: &[(&str, &str)], csrf: Option<&str>) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    s.extend_pairs(pairs);
    if let Some(c) = csrf {
        s.append_pair("csrf", c);
    }
    s.finish()
}

/// The `name=value` of a `Set-Cookie` named `name`, with its attributes.
fn set_cookie(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

fn pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

/// With these cookies (`csrf` the CSRF cookie's value), every page answers `401` with the login
/// form and shows nothing, and every action answers `401`.
async fn refused_everywhere(http: &Client, base: &str, cookies: &str, csrf: &str) {
    for page in PAGES {
        let res = http
            .get(format!("{base}{page}"))
            .header(COOKIE, cookies)
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::UNAUTHORIZED,
            "{page} with {cookies}"
        );
        let body = res.text().await.unwrap();
        assert!(
            body.contains(r#"action="/console/login""#) && !body.contains("inst-1"),
            "{page} with {cookies}: {body}"
        );
    }
    for (path, fields) in actions() {
        let res = http
            .post(format!("{base}{path}"))
            .header(COOKIE, cookies)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&fields, Some(csrf)))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::UNAUTHORIZED,
            "{path} with {cookies}"
        );
    }
}

#[tokio::test]
async fn with_a_token_every_page_and_action_needs_it() {
    let server = common::start(turnwise::Engine::in_memory(), Some(TOKEN)).await;
    // The console shows the default namespace: requests without `graph`.
    let api = &server.api.scoped("");
    api.post(
        "/v1/workflows/instances",
        json!({"id": "inst-1", "workflow_type": "counter", "version": "v1", "state": {}}),
    )
    .await
    .ok();
    api.send("inst-1", "m1", json!({"add": 1})).await;
    let base = api.base.clone();
    let http = client();

    // Pages without the token: 401 with the login form, never the page.
    for page in PAGES {
        let res = http.get(format!("{base}{page}")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{page}");
        let csrf = set_cookie(&res, "turnwise_csrf").expect("a CSRF cookie on every answer");
        assert!(
            csrf.contains("HttpOnly") && csrf.contains("SameSite=Strict"),
            "{csrf}"
        );
        let body = res.text().await.unwrap();
        assert!(
            body.contains(r#"action="/console/login""#),
            "{page}: {body}"
        );
        assert!(
            !body.contains("inst-1"),
            "{page} shows nothing of the data: {body}"
        );
    }

    // A CSRF cookie and field that match, but no token: every action refused, nothing done.
    let res = http
        .get(format!("{base}/console/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "the login form is open");
    let csrf_cookie = pair(&set_cookie(&res, "turnwise_csrf").unwrap());
    let csrf = csrf_cookie.split_once('=').unwrap().1.to_owned();
    refused_everywhere(&http, &base, &csrf_cookie, &csrf).await;
    // Forged session cookies: the token itself (as the console once stored it, raw or
    // percent-encoded), a digest-shaped guess, an empty one.
    let encoded: String = form_urlencoded::byte_serialize(TOKEN.as_bytes()).collect();
    for forged in [TOKEN.to_owned(), encoded, "9f".repeat(32), String::new()] {
        let cookies = format!("turnwise_console={forged}; {csrf_cookie}");
        refused_everywhere(&http, &base, &cookies, &csrf).await;
    }
    let inst = api.get("/v1/workflows/instances/get?id=inst-1").await.ok();
    assert_eq!(inst["status"], "queued", "not paused, not deleted: {inst}");
    assert_eq!(inst["pending_messages"], 1, "no message admitted: {inst}");
    api.get("/v1/workflows/instances/get?id=made-here")
        .await
        .err(404, "not_found");

    // A wrong token at the login form: refused, no token cookie.
    let res = http
        .post(format!("{base}/console/login"))
        .header(COOKIE, &csrf_cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("token", "guess")], Some(&csrf)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(set_cookie(&res, "turnwise_console").is_none());

    // The right token: an HttpOnly, SameSite=Strict cookie that opens every page.
    let res = http
        .post(format!("{base}/console/login"))
        .header(COOKIE, &csrf_cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("token", TOKEN)], Some(&csrf)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let login = set_cookie(&res, "turnwise_console").expect("the login sets the session cookie");
    assert!(
        login.contains("HttpOnly") && login.contains("SameSite=Strict"),
        "{login}"
    );
    assert!(
        !login.contains("Secure"),
        "not over plain HTTP, or the browser would drop it: {login}"
    );
    // The cookie is not the token, nor holds it in any form.
    let session = pair(&login).split_once('=').unwrap().1.to_owned();
    let encoded: String = form_urlencoded::byte_serialize(TOKEN.as_bytes()).collect();
    assert!(
        !session.contains("s3cret") && session != encoded && !session.is_empty(),
        "{login}"
    );
    assert_eq!(session.len(), 64, "a SHA-256 in hex: {login}");
    let cookies = format!("{}; {csrf_cookie}", pair(&login));
    for page in PAGES {
        let res = http
            .get(format!("{base}{page}"))
            .header(COOKIE, &cookies)
            .send()
            .await
            .unwrap();
        // Nothing is registered for counter v1, so its download is a 404 page, as is the run
        // page of a run that does not exist; every other page opens.
        let want = if page.contains("download") || page.contains("no-such-run") {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        assert_eq!(res.status(), want, "{page}");
    }
    // The API's bearer header opens the console too.
    let res = http
        .get(format!("{base}/console/instances"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.text().await.unwrap().contains("inst-1"));

    // Logged in, a forged form (no CSRF field, or another one) is refused and does nothing.
    for forged in [None, Some("0123456789abcdef0123456789abcdef")] {
        let res = http
            .post(format!("{base}/console/control"))
            .header(COOKIE, &cookies)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(
                &[("workflow_id", "inst-1"), ("action", "pause")],
                forged,
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{forged:?}");
        assert!(res.text().await.unwrap().contains("CSRF"));
    }
    let inst = api.get("/v1/workflows/instances/get?id=inst-1").await.ok();
    assert_eq!(inst["status"], "queued", "{inst}");

    // The same form with the token and the matching CSRF field goes through the engine.
    let res = http
        .post(format!("{base}/console/control"))
        .header(COOKIE, &cookies)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(
            &[("workflow_id", "inst-1"), ("action", "pause")],
            Some(&csrf),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let inst = api.get("/v1/workflows/instances/get?id=inst-1").await.ok();
    assert_eq!(inst["status"], "paused", "{inst}");

    // A message sent from the console has the origin kind `console`.
    let res = http
        .post(format!("{base}/console/message"))
        .header(COOKIE, &cookies)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(
            &[
                ("workflow_id", "inst-1"),
                ("message_id", "from-console"),
                ("v", "{\"add\": 2}"),
            ],
            Some(&csrf),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let turn = api
        .get("/v1/workflows/instances/turn?id=inst-1&turn=2")
        .await
        .ok();
    assert_eq!(turn["origin"]["kind"], "console", "{turn}");
    assert_eq!(turn["message"], json!({"add": 2}), "{turn}");

    // Log out: a form without the CSRF field is refused and clears nothing.
    let res = http
        .post(format!("{base}/console/logout"))
        .header(COOKIE, &cookies)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[], None))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(set_cookie(&res, "turnwise_console").is_none());
    // With it: back to the login form, the session cookie emptied and expired.
    let res = http
        .post(format!("{base}/console/logout"))
        .header(COOKIE, &cookies)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[], Some(&csrf)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/console/login");
    let cleared = set_cookie(&res, "turnwise_console").expect("logout sets the cookie");
    assert!(
        cleared.starts_with("turnwise_console=;")
            && cleared.contains("Max-Age=0")
            && cleared.contains("Path=/console"),
        "{cleared}"
    );
    // The browser then holds the emptied cookie: every page and action is refused again.
    let after = format!("{}; {csrf_cookie}", pair(&cleared));
    refused_everywhere(&http, &base, &after, &csrf).await;
}

#[tokio::test]
async fn behind_an_https_proxy_the_session_cookie_is_secure() {
    let server = common::start(turnwise::Engine::in_memory(), Some(TOKEN)).await;
    let base = server.api.base.clone();
    let http = client();
    let res = http
        .get(format!("{base}/console/login"))
        .send()
        .await
        .unwrap();
    let csrf_cookie = pair(&set_cookie(&res, "turnwise_csrf").unwrap());
    let csrf = csrf_cookie.split_once('=').unwrap().1.to_owned();
    for (header, value) in [
        ("x-forwarded-proto", "https"),
        ("forwarded", "for=192.0.2.60;proto=https;by=203.0.113.43"),
    ] {
        let res = http
            .post(format!("{base}/console/login"))
            .header(COOKIE, &csrf_cookie)
            .header(header, value)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[("token", TOKEN)], Some(&csrf)))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        let login = set_cookie(&res, "turnwise_console").unwrap();
        assert!(
            login.contains("; Secure") && login.contains("HttpOnly"),
            "{header}: {login}"
        );
        let cookies = format!("{}; {csrf_cookie}", pair(&login));
        let res = http
            .post(format!("{base}/console/logout"))
            .header(COOKIE, &cookies)
            .header(header, value)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[], Some(&csrf)))
            .send()
            .await
            .unwrap();
        let cleared = set_cookie(&res, "turnwise_console").unwrap();
        assert!(cleared.contains("; Secure"), "{header}: {cleared}");
    }
}

#[tokio::test]
async fn without_a_token_the_console_is_open_but_still_checks_csrf() {
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.clone();
    let http = client();
    for page in ["/console", "/console/instances", "/console/schemas"] {
        let res = http.get(format!("{base}{page}")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{page}");
        let body = res.text().await.unwrap();
        assert!(!body.contains("Log out"), "no login to leave: {body}");
    }
    let res = http
        .post(format!("{base}/console/create"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(
            &[("workflow_type", "counter"), ("version", "v1"), ("id", "x")],
            None,
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    server
        .api
        .scoped("")
        .get("/v1/workflows/instances/get?id=x")
        .await
        .err(404, "not_found");
}
