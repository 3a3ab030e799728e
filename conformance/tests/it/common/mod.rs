//! A turnwise server started in-process on 127.0.0.1:0, over an engine whose clock the test
//! holds, and the `Http` backend talking to it.

#![allow(dead_code)]

use std::time::Duration;

use turnwise::clock::ManualClock;
use turnwise::store::{MemoryStore, Store};
use turnwise::{Engine, EngineConfig, Http};
use turnwise_conformance::Fixture;
use turnwise_server::{router, serve, ServerOptions, Shutdown};

/// The bearer token every test server requires.
pub const TOKEN: &str = "test-token";

/// A running server and a client of it. Dropping it stops the server.
pub struct HttpFixture {
    http: Http,
    engine: Engine,
    clock: ManualClock,
    shutdown: Shutdown,
    /// Whatever must outlive the server (a test database schema).
    _guard: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl HttpFixture {
    /// A server over a fresh [`MemoryStore`] with a [`ManualClock`].
    pub async fn memory(config: EngineConfig) -> Self {
        Self::new(MemoryStore::new(), config).await
    }

    /// A server over `store` with a [`ManualClock`], requiring [`TOKEN`].
    pub async fn new(store: impl Store, config: EngineConfig) -> Self {
        let clock = ManualClock::default();
        let engine = Engine::new(store, clock.clone(), config);
        let shutdown = Shutdown::new();
        let options = ServerOptions::default()
            .with_token(TOKEN)
            .with_shutdown(shutdown.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        let app = router(engine.clone(), options);
        let stop = shutdown.clone();
        tokio::spawn(async move { serve(listener, app, stop.wait_owned()).await });
        let http = Http::builder(format!("http://{addr}"))
            .token(Some(TOKEN.to_owned()))
            .retry_delay(Duration::from_millis(10))
            .build()
            .expect("a client of the test server");
        Self {
            http,
            engine,
            clock,
            shutdown,
            _guard: None,
        }
    }

    /// Keep `guard` alive as long as the fixture.
    pub fn keep_alive(mut self, guard: impl std::any::Any + Send + Sync) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// A client of the server (clones share one connection pool).
    pub fn http(&self) -> Http {
        self.http.clone()
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        self.http.base_url()
    }

    /// The engine behind the server, in its default namespace.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The clock the engine runs on.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

impl Fixture for HttpFixture {
    type Backend = Http;

    fn backend(&self) -> Http {
        self.http.clone()
    }

    fn backend_in(&self, namespace: &str) -> Http {
        self.http.with_graph(namespace)
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    fn waiting_claims(&self) -> usize {
        // The engine behind the in-process server: its claims are the server's.
        self.engine.waiting_claims()
    }
}

/// The name the test harness lists test `name` of the module at `module` (its
/// `module_path!()`) under: the path without the binary's crate name, e.g.
/// `accepted_values::values_child`. A test that re-runs this binary as a child selects the
/// child with `--exact <this name> --ignored`.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}
