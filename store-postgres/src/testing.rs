//! [`TestPostgres`]: a schema of its own in a PostgreSQL database, for one test.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio_postgres::NoTls;

use super::{PostgresOptions, PostgresStore};

/// A fresh schema in a PostgreSQL database for one test, dropped (with everything in it) when
/// this value drops. Tests that share one database this way do not see each other's instances
/// or wake each other's claims.
///
/// The database is the one [`TestPostgres::ENV`] names, or [`TestPostgres::DEFAULT_URL`].
/// When it cannot be reached, [`TestPostgres::start`] reports the test as not run
/// ([`skip_test`](turnwise_core::testing::skip_test): one numbered line on standard error) and answers
/// `None`, so that the test can return early, except under CI
/// ([`in_ci`](turnwise_core::testing::in_ci)): there it panics, so that a CI run that lost its database
/// fails instead of passing untested.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn demo() {
/// use turnwise::testing::TestPostgres;
///
/// let Some(db) = TestPostgres::start("my_test").await else { return };
/// let engine = turnwise::Engine::connect(&db.url()).await.unwrap();
/// # let _ = engine; }
/// ```
#[derive(Debug)]
pub struct TestPostgres {
    base_url: String,
    schema: String,
}

impl TestPostgres {
    /// The environment variable naming the test database.
    pub const ENV: &'static str = "TURNWISE_TEST_POSTGRES";
    /// The test database when [`TestPostgres::ENV`] is not set: trust authentication on
    /// loopback, database `test`.
    pub const DEFAULT_URL: &'static str = "postgres://postgres@127.0.0.1:5432/test";

    /// Create a fresh schema for the test called `test` (see the type's docs for what happens
    /// when the database cannot be reached).
    pub async fn start(test: &str) -> Option<Self> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let base_url = std::env::var(Self::ENV).unwrap_or_else(|_| Self::DEFAULT_URL.to_owned());
        let label: String = test
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(32)
            .collect();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let schema = format!(
            "tw_{label}_{}_{}_{nanos:x}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        match run(&base_url, &format!("CREATE SCHEMA \"{schema}\"")).await {
            Ok(()) => Some(Self { base_url, schema }),
            Err(e) => {
                turnwise_core::testing::skip_test(
                    test,
                    &format!(
                        "no PostgreSQL at {base_url}: {e}; set {} to the test database to run it",
                        Self::ENV
                    ),
                );
                None
            }
        }
    }

    /// The schema's name.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The database's address with the schema as its `search_path`: what `turnwise serve --db`
    /// and `Engine::connect` take.
    pub fn url(&self) -> String {
        let path = format!("-csearch_path%3D{}", self.schema);
        if self.base_url.contains("://") {
            let sep = if self.base_url.contains('?') {
                '&'
            } else {
                '?'
            };
            format!("{}{sep}options={path}", self.base_url)
        } else {
            format!("{} options='-c search_path={}'", self.base_url, self.schema)
        }
    }

    /// Options that keep a store in the schema.
    pub fn options(&self) -> PostgresOptions {
        PostgresOptions::default().with_schema(&self.schema)
    }

    /// A store in the schema.
    ///
    /// # Panics
    ///
    /// When it cannot connect: this is a test helper.
    pub async fn store(&self) -> PostgresStore {
        match PostgresStore::connect_with(&self.base_url, self.options()).await {
            Ok(store) => store,
            Err(e) => panic!("connect to the test schema {}: {e}", self.schema),
        }
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        let url = self.base_url.clone();
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.schema);
        // Drop may run inside an async runtime, which cannot be blocked on: a thread of its own.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(run(&url, &sql))
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("could not drop the test schema {}: {e}", self.schema);
        }
    }
}

/// Run one statement on a connection of its own.
async fn run(url: &str, sql: &str) -> Result<(), String> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
    config.connect_timeout(std::time::Duration::from_secs(5));
    let (client, connection) = config.connect(NoTls).await.map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let done = client.batch_execute(sql).await.map_err(|e| e.to_string());
    drop(client);
    let _ = driver.await;
    done
}
