//! The console in a real headless Chromium (through chromedriver): a person creates an
//! instance, fills a generated message form (an enum, a nested object, an array), sees a bad
//! field refused before sending, watches the turn's Running line move, answers the waiting
//! turn's signal form, pauses and resumes; restarts and forks suspended turns (the report
//! beside its version's diagram); checks a workflow's versions against v2 and upgrades them.
//! Screenshots go to `target/console-screenshots/`.
//!
//! Without `chromedriver` on the PATH the test is reported as not run
//! (`turnwise::testing::skip_test`), except under CI, where it fails (`.ci/run` installs
//! `chromium` and `chromium-driver`).

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use turnwise::http::Http;
use turnwise::prelude::*;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Shipped {
    /// Orders shipped.
    orders: u64,
    /// The last order's city.
    last_city: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Priority {
    Low,
    High,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Address {
    city: String,
    zip: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Line {
    sku: String,
    /// How many, 1 to 99.
    #[schemars(range(min = 1, max = 99))]
    qty: u32,
}

/// An order: an enum, a nested object and an array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Order {
    priority: Priority,
    address: Address,
    lines: Vec<Line>,
}

/// The signal a person answers once the order is packed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "confirm")]
struct Confirm {
    ship: bool,
    note: String,
}

/// Pack the order's boxes (with progress), then wait for a person's confirmation.
#[workflow(name = "order", version = "v1", signals(Confirm))]
async fn order(
    ctx: &mut Turn,
    state: Shipped,
    msg: Order,
) -> Result<Done<Shipped, bool>, TurnError> {
    let boxes: u64 = msg.lines.iter().map(|l| u64::from(l.qty)).sum::<u64>() + 8;
    ctx.step("pack", move |step| async move {
        for done in 0..=boxes {
            step.progress("packing", done, Some(boxes), "boxes");
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        Ok(boxes)
    })
    .await?;
    let answer = ctx
        .wait_for_signal::<Confirm>("confirm", Duration::from_secs(600))
        .await?;
    let ship = answer.is_some_and(|c| c.ship);
    Ok(Done::new(Shipped {
        orders: state.orders + u64::from(ship),
        last_city: Some(msg.address.city),
    })
    .reply(ship))
}

/// A chromedriver on a free loopback port, killed when dropped.
struct Driver {
    child: std::process::Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn chromedriver() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("chromedriver"))
            .find(|p| p.is_file())
    })
}

async fn start_driver(path: PathBuf) -> Driver {
    let port = free_port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return driver;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not listen on {port} within 10 s");
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    let binary = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let mut options = json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
        "--disable-dev-shm-usage", "--window-size=1280,1000"]});
    if let Some(b) = binary {
        options["binary"] = json!(b);
    }
    caps.insert("goog:chromeOptions".into(), options);
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a Chromium session")
}

fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(shots().join(format!("{name}.png")), png).unwrap();
}

/// Wait (at most 60 s) until `check` holds, reloading the page between tries when `reload`.
async fn until<F, Fut>(c: &Client, what: &str, reload: bool, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..240 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        if reload {
            c.refresh().await.unwrap();
        }
    }
    let source = c.source().await.unwrap_or_default();
    panic!("timed out waiting for {what}; the page: {source}");
}

async fn text_of(c: &Client, css: &str) -> Option<String> {
    match c.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.ok(),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_operates_a_workflow_in_the_browser() {
    let Some(path) = chromedriver() else {
        turnwise::testing::skip_test(
            "a_person_operates_a_workflow_in_the_browser",
            "no chromedriver on the PATH; install Debian's chromium and chromium-driver, as \
             .ci/run does",
        );
        return;
    };
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.clone();
    let http = Http::connect(base.clone(), None).unwrap();
    // A worker for the test workflow and two of the examples.
    let worker = Worker::new(http.clone())
        .register(order)
        .register(example_counter::counter)
        .register(example_review_draft::review_draft(
            example_review_draft::Review::default(),
        ))
        .claim_wait(Duration::from_millis(100))
        .run_async();
    let api = server.api.scoped("");
    for _ in 0..100 {
        let listed = api.get("/v1/workflows/schemas").await.ok();
        if listed["schemas"].as_array().is_some_and(|s| s.len() == 3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let driver = start_driver(path).await;
    let c = browser(&driver).await;

    // The Workflows page lists the registered types.
    c.goto(&format!("{base}/console")).await.unwrap();
    let table = text_of(&c, "#workflows").await.unwrap();
    for t in ["order", "counter", "review-draft"] {
        assert!(table.contains(t), "{t} in {table}");
    }

    // New instance from a registered type.
    c.goto(&format!("{base}/console/new?type=order&version=v1"))
        .await
        .unwrap();
    let id = c.find(Locator::Css("input[name=id]")).await.unwrap();
    id.clear().await.unwrap();
    id.send_keys("order-1").await.unwrap();
    c.find(Locator::Css("#create-form input[name='v/orders']"))
        .await
        .unwrap()
        .send_keys("0")
        .await
        .unwrap();
    shot(&c, "new-instance").await;
    c.find(Locator::Css("#create-form button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(&c, "the instance page", false, || async {
        c.current_url()
            .await
            .unwrap()
            .as_str()
            .contains("/console/instance?id=order-1")
    })
    .await;

    // The generated message form: an enum (select), a nested object, an array of objects.
    let form = "#message-form";
    c.find(Locator::Css(&format!("{form} select[name='v/priority']")))
        .await
        .unwrap()
        .select_by_label("high")
        .await
        .unwrap();
    c.find(Locator::Css(&format!(
        "{form} input[name='v/address/city']"
    )))
    .await
    .unwrap()
    .send_keys("Lyon")
    .await
    .unwrap();
    c.find(Locator::Css(&format!("{form} button[data-add='v/lines']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.find(Locator::Css(&format!("{form} input[name='v/lines/0/sku']")))
        .await
        .unwrap()
        .send_keys("BOX-7")
        .await
        .unwrap();
    let qty = c
        .find(Locator::Css(&format!("{form} input[name='v/lines/0/qty']")))
        .await
        .unwrap();
    qty.send_keys("500").await.unwrap();
    c.find(Locator::Css(&format!("{form} button[type=submit]")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // Refused before sending: the bound is shown beside the field, nothing was admitted.
    let err = text_of(&c, "[data-err-for='v/lines/0/qty']").await.unwrap();
    assert!(err.contains("maximum of 99"), "{err}");
    assert_eq!(
        qty.attr("class").await.unwrap().as_deref(),
        Some("invalid"),
        "the field is marked"
    );
    shot(&c, "schema-error").await;
    let inbox = api
        .get("/v1/workflows/instances/inbox?id=order-1")
        .await
        .ok();
    assert_eq!(inbox["messages"], json!([]), "nothing was sent: {inbox}");

    qty.clear().await.unwrap();
    qty.send_keys("2").await.unwrap();
    c.find(Locator::Css(&format!("{form} button[type=submit]")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();

    // The turn runs: the Running line appears and moves without a reload.
    until(&c, "the Running line", false, || async {
        text_of(&c, "#running")
            .await
            .is_some_and(|t| t.contains("packing"))
    })
    .await;
    let first = c
        .find(Locator::Css("#running"))
        .await
        .unwrap()
        .attr("data-done")
        .await
        .unwrap()
        .unwrap();
    let line = text_of(&c, "#running").await.unwrap();
    assert!(line.contains("of 10 boxes"), "{line}");
    shot(&c, "running").await;
    until(&c, "the Running line to move", false, || async {
        let now = match c.find(Locator::Css("#running")).await {
            Ok(e) => e.attr("data-done").await.unwrap_or_default(),
            Err(_) => None,
        };
        now.is_some_and(|n| n.parse::<u64>().unwrap() > first.parse::<u64>().unwrap())
    })
    .await;

    // The message the console sent, as the API reads it.
    let turn = api
        .get("/v1/workflows/instances/turn?id=order-1&turn=1")
        .await
        .ok();
    assert_eq!(
        turn["message"],
        json!({"priority": "high", "address": {"city": "Lyon", "zip": null},
               "lines": [{"sku": "BOX-7", "qty": 2}]}),
        "{turn}"
    );
    assert_eq!(turn["origin"]["kind"], "console");

    // The turn waits for `confirm`: answer its form.
    until(&c, "the Respond form", false, || async {
        text_of(&c, "section.signal h2")
            .await
            .is_some_and(|t| t.starts_with("Respond"))
    })
    .await;
    let sig = "form[data-signal=confirm]";
    c.find(Locator::Css(&format!("{sig} input[name='v/ship']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.find(Locator::Css(&format!("{sig} input[name='v/note']")))
        .await
        .unwrap()
        .send_keys("ok to ship")
        .await
        .unwrap();
    shot(&c, "respond").await;
    c.find(Locator::Css(&format!("{sig} button[type=submit]")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(&c, "the finished turn", false, || async {
        c.find(Locator::Css("details.turn[data-turn='1']"))
            .await
            .is_ok()
    })
    .await;
    let state = text_of(&c, "#state").await.unwrap();
    assert!(
        state.contains("\"orders\": 1") && state.contains("Lyon"),
        "{state}"
    );
    c.find(Locator::Css("details.turn[data-turn='1'] summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let timeline = text_of(&c, "details.turn[data-turn='1'] ol.timeline")
        .await
        .unwrap();
    assert!(
        timeline.contains("pack") && timeline.contains("confirm"),
        "{timeline}"
    );
    let runs = text_of(&c, "#runs").await.unwrap();
    assert!(
        runs.contains("order-1") && runs.contains("completed"),
        "the Runs section lists the turn's run from the runs API: {runs}"
    );
    let run_href = c
        .find(Locator::Css("#runs tr.run[data-outcome=completed] a"))
        .await
        .expect("a completed run, linked to its page")
        .attr("href")
        .await
        .unwrap()
        .expect("the run's link");
    c.execute(
        "const d = document.querySelector(\"details.turn[data-turn='1']\"); d.open = true; d.scrollIntoView();",
        vec![],
    )
    .await
    .unwrap();
    let opened = c
        .find(Locator::Css("details.turn[data-turn='1']"))
        .await
        .unwrap()
        .screenshot()
        .await
        .unwrap();
    std::fs::write(shots().join("turn.png"), opened).unwrap();
    shot(&c, "instance").await;

    // Pause and resume, each confirmed.
    c.find(Locator::Css("button[data-action=pause]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.accept_alert().await.unwrap();
    until(&c, "the paused status", false, || async {
        c.find(Locator::Css("#live[data-status=paused]"))
            .await
            .is_ok()
    })
    .await;
    assert_eq!(
        api.get("/v1/workflows/instances/get?id=order-1").await.ok()["status"],
        "paused"
    );
    shot(&c, "paused").await;
    c.find(Locator::Css("button[data-action=resume]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.accept_alert().await.unwrap();
    until(&c, "the idle status", false, || async {
        c.find(Locator::Css("#live[data-status=idle]"))
            .await
            .is_ok()
    })
    .await;

    // The lists and the schemas.
    c.goto(&format!("{base}/console/instances?type=order"))
        .await
        .unwrap();
    let list = text_of(&c, "#instances").await.unwrap();
    assert!(list.contains("order-1"), "{list}");
    shot(&c, "instances").await;
    c.goto(&format!("{base}/console/schemas")).await.unwrap();
    assert!(c
        .find(Locator::Css("section.schema[data-type=order]"))
        .await
        .is_ok());
    shot(&c, "schemas").await;
    c.goto(&format!("{base}/console")).await.unwrap();
    let row = text_of(&c, "#workflows tr[data-type=order]").await.unwrap();
    assert!(row.contains("idle 1"), "the counts by status: {row}");
    let hours = text_of(&c, "#runs-by-hour").await.unwrap();
    assert!(
        hours.contains("1 run in the last 24 hours"),
        "the runs by hour: {hours}"
    );
    shot(&c, "workflows").await;

    // A run's own page, from its row in the Runs section.
    c.goto(&format!("{base}{run_href}")).await.unwrap();
    let run = text_of(&c, "main").await.unwrap();
    assert!(
        run.contains("order-1") && run.contains("pack") && run.contains("confirm"),
        "the run page shows its instance and steps: {run}"
    );
    shot(&c, "run").await;

    c.close().await.unwrap();
    worker.stop().await.unwrap();
    server.shutdown.trigger();
}

/// `parcel` as first deployed: weigh, then wait an hour for the truck.
#[workflow(name = "parcel", version = "v1")]
async fn parcel_before(
    ctx: &mut Turn,
    state: u64,
    weight: u64,
) -> Result<Done<u64, u64>, TurnError> {
    ctx.step("weigh", move |_| async move { Ok(weight) })
        .await?;
    ctx.sleep("wait-for-truck", Duration::from_secs(3600))
        .await?;
    Ok(Done::new(state + 1).reply(weight))
}

/// `parcel` changed under the same version: a label is printed before the wait.
#[workflow(name = "parcel", version = "v1")]
async fn parcel_changed(
    ctx: &mut Turn,
    state: u64,
    weight: u64,
) -> Result<Done<u64, u64>, TurnError> {
    ctx.step("weigh", move |_| async move { Ok(weight) })
        .await?;
    ctx.step("print-label", |_| async { Ok(1u64) }).await?;
    ctx.sleep("wait-for-truck", Duration::from_secs(3600))
        .await?;
    Ok(Done::new(state + 1).reply(weight))
}

/// A person finds two turns suspended by a deploy that changed `parcel` under its version:
/// the instance page shows the report (the saved steps, the call the code made instead and
/// its line), and the person restarts one turn from its last accepted step and forks the other
/// instance, each confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_restarts_and_forks_suspended_turns_in_the_browser() {
    use turnwise::clock::{Clock, ManualClock};
    let Some(path) = chromedriver() else {
        turnwise::testing::skip_test(
            "a_person_restarts_and_forks_suspended_turns_in_the_browser",
            "no chromedriver on the PATH; install Debian's chromium and chromium-driver, as \
             .ci/run does",
        );
        return;
    };
    let clock = ManualClock::default();
    let engine = turnwise::Engine::new(
        turnwise::store::MemoryStore::new(),
        clock.clone(),
        turnwise::EngineConfig::default(),
    );
    let server = common::start(engine, None).await;
    let base = server.api.base.clone();
    let http = Http::connect(base.clone(), None).unwrap();
    let worker = |wf| {
        Worker::new(http.clone())
            .clock(std::sync::Arc::new(clock.clone()) as std::sync::Arc<dyn Clock>)
            .register::<parcel_before>(wf)
    };
    for id in ["parcel-1", "parcel-2"] {
        let h = parcel_before.start(&http, id).await.unwrap();
        h.send(12, "m1").await.unwrap();
        h.send(7, "m2").await.unwrap();
    }
    worker(parcel_before).run_until_idle().await.unwrap();
    clock.advance(Duration::from_secs(3600));
    let changed = Worker::new(http.clone())
        .clock(std::sync::Arc::new(clock.clone()) as std::sync::Arc<dyn Clock>)
        .register(parcel_changed);
    assert_eq!(changed.run_until_idle().await.unwrap(), 2);
    let api = server.api.scoped("");

    let driver = start_driver(path).await;
    let c = browser(&driver).await;
    c.goto(&format!("{base}/console/instance?id=parcel-1"))
        .await
        .unwrap();
    let report = text_of(&c, "#suspension").await.expect("the report");
    assert!(
        report.contains("Turn 1 is suspended by a replay mismatch"),
        "{report}"
    );
    let found = text_of(&c, "#mismatch-found").await.unwrap();
    assert_eq!(found, "step `print-label`");
    let at = text_of(&c, "#mismatch-at").await.unwrap();
    assert!(
        at.starts_with("server/tests/it/console_browser.rs:"),
        "{at}"
    );
    let saved = text_of(&c, "#mismatch-saved").await.unwrap();
    assert!(
        saved.contains("step `weigh`") && saved.contains("sleep `wait-for-truck`"),
        "{saved}"
    );
    assert!(c
        .find(Locator::Css("#live[data-status=suspended]"))
        .await
        .is_ok());
    let diagram = text_of(&c, "#mismatch-diagram")
        .await
        .expect("the version's diagram");
    assert!(
        diagram.contains("weigh") && diagram.contains("replayed"),
        "{diagram}"
    );
    assert!(c
        .find(Locator::Css(
            "#mismatch-diagram .d-call.diverged[data-key=print-label]"
        ))
        .await
        .is_ok());
    shot(&c, "suspended").await;

    c.find(Locator::Css("button[data-action=restart-last_accepted]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.accept_alert().await.unwrap();
    until(&c, "the restarted turn", false, || async {
        c.find(Locator::Css("#live[data-status=queued]"))
            .await
            .is_ok()
    })
    .await;
    assert!(c.find(Locator::Css("#suspension")).await.is_err());
    let events = text_of(&c, "#events").await.unwrap();
    assert!(
        events.contains("restart_turn") && events.contains("console"),
        "{events}"
    );
    shot(&c, "restarted").await;

    c.goto(&format!("{base}/console/instance?id=parcel-2"))
        .await
        .unwrap();
    c.find(Locator::Css("button[data-action=fork]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.accept_alert().await.unwrap();
    until(&c, "the fork's page", false, || async {
        c.current_url()
            .await
            .unwrap()
            .as_str()
            .contains("/console/instance?id=parcel-2-fork")
    })
    .await;
    let queue = text_of(&c, "#queue").await.unwrap();
    assert!(
        queue.contains("fork.m1") && queue.contains("fork.m2"),
        "{queue}"
    );
    shot(&c, "forked").await;

    // The restarted turn and the fork run on the changed code.
    changed.run_until_idle().await.unwrap();
    let t = api
        .get("/v1/workflows/instances/turn?id=parcel-1&turn=1")
        .await
        .ok();
    let keys: Vec<&str> = t["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["weigh", "print-label", "wait-for-truck"], "{t}");
    let original = api
        .get("/v1/workflows/instances/get?id=parcel-2")
        .await
        .ok();
    assert_eq!(original["status"], "suspended", "the original stays");

    c.close().await.unwrap();
    server.shutdown.trigger();
}

/// A person opens the Versions page of `order` (v0, v1 and v2 registered, three instances on
/// v1, one asleep mid-turn and one whose saved steps v2 does not replay), sees each version's
/// diagram, runs the live report against v2, clicks **Upgrade**, and sees the movable
/// instances on v2 and the pinned one left with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_checks_and_upgrades_versions_in_the_browser() {
    let Some(path) = chromedriver() else {
        turnwise::testing::skip_test(
            "a_person_checks_and_upgrades_versions_in_the_browser",
            "no chromedriver on the PATH; install Debian's chromium and chromium-driver, as \
             .ci/run does",
        );
        return;
    };
    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let base = server.api.base.clone();
    let http = Http::connect(base.clone(), None).unwrap();
    turnwise_conformance::versions::register(&http).await;
    crate::console_versions::order_on_v1(&http, "idle", None).await;
    crate::console_versions::order_on_v1(&http, "asleep", Some(false)).await;
    crate::console_versions::order_on_v1(&http, "gift", Some(true)).await;
    crate::console_versions::order_suspended_on_v1(&http, "stuck").await;

    let driver = start_driver(path).await;
    let c = browser(&driver).await;
    c.goto(&format!("{base}/console")).await.unwrap();
    c.find(Locator::Css("a.versions"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let v1 = text_of(&c, "#version-v1").await.expect("the v1 section");
    assert!(
        v1.contains("4 instances on it")
            && v1.contains("reserve")
            && v1.contains("src/order.rs:14"),
        "{v1}"
    );
    assert!(c
        .find(Locator::Css("#version-v1 .d-alt .d-call[data-key=wrap]"))
        .await
        .is_ok());
    shot(&c, "versions").await;

    c.find(Locator::Css("select[name=to]"))
        .await
        .unwrap()
        .select_by_value("v2")
        .await
        .unwrap();
    c.find(Locator::Css("button[data-action=check]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(&c, "the live report", false, || async {
        c.find(Locator::Css("#compat-report[data-to=v2]"))
            .await
            .is_ok()
    })
    .await;
    let counts = text_of(&c, "#verdict-counts").await.unwrap();
    assert!(
        counts.contains("upgradable 1")
            && counts.contains("pinned 1")
            && counts.contains("resumable 1"),
        "{counts}"
    );
    let stuck = text_of(&c, "tr[data-id=stuck]").await.unwrap();
    assert!(stuck.contains("resumable"), "{stuck}");
    let gift = text_of(&c, "tr[data-id=gift]").await.unwrap();
    assert!(
        gift.contains("pinned") && gift.contains("prefix_rejected"),
        "{gift}"
    );
    c.find(Locator::Css("#compat")).await.unwrap();
    shot(&c, "versions-report").await;

    c.find(Locator::Css("button[data-action=upgrade-all]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.accept_alert().await.unwrap();
    until(&c, "the upgrade's answer", false, || async {
        c.find(Locator::Css("#upgrade-results")).await.is_ok()
    })
    .await;
    let results = text_of(&c, "#upgrade-results").await.unwrap();
    assert!(
        results.contains("3 upgraded, 0 unchanged, 1 refused."),
        "{results}"
    );
    // The suspended turn was resumed on v2: the upgrade of a suspended instance.
    assert!(results.contains("stuck: v1 → v2 (resume"), "{results}");
    let stuck = http.get_instance("stuck").await.unwrap();
    assert_eq!(stuck.version, "v2");
    assert_ne!(stuck.status, turnwise::protocol::InstanceStatus::Suspended);
    assert_eq!(
        stuck
            .events
            .last()
            .map(|e| (e.action.as_str(), e.by.as_deref())),
        Some(("resume", Some("console")))
    );
    let v2 = text_of(&c, "#version-v2").await.unwrap();
    assert!(v2.contains("3 instances on it"), "{v2}");
    shot(&c, "versions-upgraded").await;
    c.find(Locator::Css("#version-v2 a.count"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let list = c.source().await.unwrap();
    assert!(
        list.contains("asleep")
            && list.contains("idle")
            && list.contains("stuck")
            && !list.contains(">gift<"),
        "{list}"
    );

    c.close().await.unwrap();
    server.shutdown.trigger();
}
