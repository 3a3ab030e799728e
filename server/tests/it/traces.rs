//! One trace id from `Handle::send` over HTTP, through the server's request span, to the
//! worker's turn and step spans: the `Http` backend sends `traceparent` (a new trace per call
//! outside any, the current one's inside `TraceContext::scope`), the server continues it and
//! keeps it with the admitted turn, and the worker runs the turn in it. Spans are captured
//! in-process by a `tracing` layer, installed for the whole test binary (a per-thread
//! subscriber loses spans to the callsite cache when other tests run at once), keeping only
//! the spans made on this test's single thread (the server, the client and the worker all run
//! on it).

use crate::common;

use std::collections::HashMap;
#[cfg(feature = "otel")]
use std::sync::Arc;
use std::sync::{Mutex, OnceLock};
use std::thread::ThreadId;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;
use turnwise::http::Http;
use turnwise::prelude::*;
use turnwise::trace::TraceContext;

/// A span as captured: its name and fields (as text).
#[derive(Clone, Debug)]
struct Captured {
    name: &'static str,
    fields: HashMap<String, String>,
}

/// The spans made on one thread.
#[derive(Default)]
struct Capture {
    thread: Mutex<Option<ThreadId>>,
    /// The spans in creation order, and where each live span id is (the registry reuses the
    /// ids of closed spans).
    spans: Mutex<(Vec<Captured>, HashMap<u64, usize>)>,
}

impl Capture {
    /// The process's capture, watching the calling thread from now on.
    fn install() -> &'static Capture {
        static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
        let capture = *CAPTURE.get_or_init(|| {
            let capture: &'static Capture = Box::leak(Box::default());
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(Forward(capture)),
            )
            .expect("no other test installs a global subscriber");
            capture
        });
        *capture.thread.lock().unwrap() = Some(std::thread::current().id());
        capture
    }

    fn watched(&self) -> bool {
        *self.thread.lock().unwrap() == Some(std::thread::current().id())
    }

    fn take(&self) -> Vec<Captured> {
        let mut spans = self.spans.lock().unwrap();
        spans.1.clear();
        std::mem::take(&mut spans.0)
    }
}

/// The layer, over the process's [`Capture`].
struct Forward(&'static Capture);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Forward {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if !self.0.watched() {
            return;
        }
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name();
        let mut spans = self.0.spans.lock().unwrap();
        let at = spans.0.len();
        spans.0.push(Captured { name, fields });
        spans.1.insert(id.into_u64(), at);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if !self.0.watched() {
            return;
        }
        let mut spans = self.0.spans.lock().unwrap();
        if let Some(&at) = spans.1.get(&id.into_u64()) {
            values.record(&mut Fields(&mut spans.0[at].fields));
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
struct Ping {
    n: u64,
}

#[workflow(name = "traced", version = "v1")]
async fn traced(ctx: &mut Turn, state: u64, ping: Ping) -> Result<Done<u64, u64>, TurnError> {
    let n = ctx.step("work", move |_| async move { Ok(ping.n) }).await?;
    Ok(Done::new(state + n).reply(state + n))
}

/// The trace ids of the captured spans named `name` whose `field` is `value`.
fn trace_ids(spans: &[Captured], name: &str, field: &str, value: &str) -> Vec<String> {
    spans
        .iter()
        .filter(|s| s.name == name && s.fields.get(field).is_some_and(|v| v == value))
        .map(|s| s.fields.get("trace_id").cloned().unwrap_or_default())
        .collect()
}

fn all_named(spans: &[Captured], name: &str) -> Vec<String> {
    spans
        .iter()
        .filter(|s| s.name == name)
        .map(|s| s.fields.get("trace_id").cloned().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn one_trace_from_send_over_http_to_the_step_that_handled_it() {
    let capture = Capture::install();

    let server = common::start(turnwise::Engine::in_memory(), None).await;
    let http = Http::connect(server.api.base.clone(), None).unwrap();
    let handle = traced.start(&http, "traced-1").await.unwrap();
    let worker = Worker::new(http.clone()).register(traced);
    capture.take();

    // Outside any trace: the send starts one of its own.
    let turn = handle.send(Ping { n: 2 }, "m1").await.unwrap();
    assert_eq!(worker.run_until_idle().await.unwrap(), 1);
    let spans = capture.take();
    let admitted = trace_ids(
        &spans,
        "request",
        "route",
        "/v1/workflows/instances/message",
    );
    assert_eq!(admitted.len(), 1, "{spans:#?}");
    let trace = &admitted[0];
    assert_eq!(trace.len(), 32, "{trace}");
    // The admitted turn keeps the server's context of that trace.
    let kept = handle.turn(turn.number).await.unwrap().traceparent.unwrap();
    assert_eq!(TraceContext::parse(&kept).unwrap().trace_id(), *trace);
    assert_eq!(all_named(&spans, "turn"), [trace.as_str()], "{spans:#?}");
    assert_eq!(all_named(&spans, "step"), [trace.as_str()], "{spans:#?}");
    // The worker's calls inside the turn continue it; its claim, outside any turn, does not.
    let completed = trace_ids(&spans, "request", "route", "/v1/workflows/turns/complete");
    assert_eq!(completed, [trace.as_str()]);
    let claims = trace_ids(&spans, "request", "route", "/v1/workflows/turns/claim");
    assert!(
        !claims.is_empty() && claims.iter().all(|c| c != trace),
        "{claims:?}"
    );

    // A second send outside any trace: a new trace.
    handle.send(Ping { n: 3 }, "m2").await.unwrap();
    worker.run_until_idle().await.unwrap();
    let spans = capture.take();
    let second = trace_ids(
        &spans,
        "request",
        "route",
        "/v1/workflows/instances/message",
    );
    assert_eq!(second.len(), 1);
    assert_ne!(second[0], *trace, "a new trace per call");
    assert_eq!(all_named(&spans, "step"), second);

    // Inside the application's trace: that trace, from the send to the step.
    let incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let ctx = TraceContext::parse(incoming).unwrap();
    ctx.scope(handle.send(Ping { n: 4 }, "m3")).await.unwrap();
    worker.run_until_idle().await.unwrap();
    let spans = capture.take();
    let want = "0af7651916cd43dd8448eb211c80319c".to_owned();
    assert_eq!(
        trace_ids(
            &spans,
            "request",
            "route",
            "/v1/workflows/instances/message"
        ),
        [want.as_str()]
    );
    assert_eq!(all_named(&spans, "turn"), [want.as_str()]);
    assert_eq!(all_named(&spans, "step"), [want]);

    // The request span names the method, the route template and the status.
    let request = spans
        .iter()
        .find(|s| s.name == "request" && s.fields["route"] == "/v1/workflows/turns/complete")
        .unwrap();
    assert_eq!(request.fields["method"], "POST");
    assert_eq!(request.fields["status"], "200");
    assert!(request.fields["request_id"].starts_with("req_"));
    server.shutdown.trigger();
}

/// With the `otel` feature (`cargo test -p turnwise-server --features otel --test it otel`):
/// the binary exports its request spans over OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`, in
/// the trace of the request's `traceparent`. The collector is a route of this test that keeps
/// what it is sent; the export is flushed when the server stops on SIGTERM.
#[cfg(feature = "otel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_otel_feature_exports_request_spans_in_the_callers_trace() {
    use std::process::{Command, Stdio};
    use std::time::Duration;

    let received: Arc<Mutex<Vec<u8>>> = Arc::default();
    let keep = received.clone();
    let collector = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| async move {
            keep.lock().unwrap().extend_from_slice(&body);
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, collector).await });

    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnwise"))
        .args(["serve", "--db"])
        .arg(dir.path().join("otel.db"))
        .args(["--bind", "127.0.0.1:0"])
        .env_remove("TURNWISE_API_TOKEN")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{at}"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let addr = loop {
        let line = lines.next().expect("the server's first line").unwrap();
        if let Some(addr) = line.strip_prefix("turnwise listening on http://") {
            break addr.to_owned();
        }
    };
    let mut server = common::ServerProcess(child);

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let answer = reqwest::Client::new()
        .get(format!("http://{addr}/v1/workflows/status"))
        .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let term = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    // Waited for off the runtime: the collector answers the export meanwhile.
    let exited = tokio::task::spawn_blocking(move || {
        common::wait_exit(&mut server.0, Duration::from_secs(30))
    })
    .await
    .unwrap();
    assert!(exited.is_some(), "the server exits after SIGTERM");

    // The trace id travels as its 16 bytes in the protobuf body.
    let want: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&trace[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let body = received.lock().unwrap().clone();
    assert!(!body.is_empty(), "the collector received nothing");
    assert!(
        body.windows(16).any(|w| w == want),
        "no span of trace {trace} among the {} bytes exported",
        body.len()
    );
}
