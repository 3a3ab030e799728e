//! [`Engine::connect`]: a store chosen by the scheme of an address, from a table of drivers.
//!
//! Each driver is one row: its schemes and the feature that builds it. The one place a
//! feature decides anything is each driver's own opener, which without its feature answers
//! the error that names the feature.

use std::path::Path;

use super::{Engine, EngineConfig};

use crate::protocol::error::{Error, Result};

/// The stores [`Engine::connect`] chooses from, by an address's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Driver {
    /// SQLite (the `turnwise-sqlite` crate, feature `sqlite`): a file path, or
    /// `sqlite://PATH`.
    Sqlite,
    /// PostgreSQL (the `turnwise-postgres` crate, feature `postgres`): a `postgres://` or
    /// `postgresql://` URL.
    Postgres,
}

/// Every driver, with the schemes it takes.
const DRIVERS: [(Driver, &[&str]); 2] = [
    (Driver::Sqlite, &["sqlite"]),
    (Driver::Postgres, &["postgres", "postgresql"]),
];

impl Driver {
    /// The driver for `address`: the one that takes its scheme (`scheme://…`, any case), or
    /// SQLite for an address without one (a file path). An unknown scheme is refused, naming
    /// the ones there are.
    ///
    /// ```
    /// use turnwise::engine::Driver;
    ///
    /// assert_eq!(Driver::of("workflows.db")?, Driver::Sqlite);
    /// assert_eq!(Driver::of("postgres://turnwise@127.0.0.1/turnwise")?, Driver::Postgres);
    /// assert!(Driver::of("mysql://127.0.0.1/turnwise").is_err());
    /// # Ok::<(), turnwise::Error>(())
    /// ```
    pub fn of(address: &str) -> Result<Driver> {
        let Some((scheme, _)) = address.split_once("://") else {
            return Ok(Driver::Sqlite);
        };
        DRIVERS
            .iter()
            .find(|(_, schemes)| schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)))
            .map(|(driver, _)| *driver)
            .ok_or_else(|| {
                Error::invalid(
                    "address",
                    format!(
                        "`{scheme}://` is not a store turnwise knows: use a postgres:// (or \
                         postgresql://) URL for PostgreSQL, or a file path (or sqlite://PATH) \
                         for SQLite"
                    ),
                )
            })
    }

    /// The cargo feature of `turnwise` that builds this driver.
    pub fn feature(self) -> &'static str {
        match self {
            Driver::Sqlite => "sqlite",
            Driver::Postgres => "postgres",
        }
    }

    /// The file a SQLite address names: the address itself, or what follows its `sqlite://`.
    ///
    /// ```
    /// use std::path::Path;
    /// use turnwise::engine::Driver;
    ///
    /// assert_eq!(Driver::sqlite_file("sqlite://data/app.db"), Path::new("data/app.db"));
    /// assert_eq!(Driver::sqlite_file("app.db"), Path::new("app.db"));
    /// ```
    pub fn sqlite_file(address: &str) -> &Path {
        Path::new(address.split_once("://").map_or(address, |(_, path)| path))
    }

    /// The engine over this driver's store at `address`.
    async fn connect(self, address: &str, config: EngineConfig) -> Result<Engine> {
        match self {
            Driver::Sqlite => sqlite(address, config).await,
            Driver::Postgres => postgres(address, config).await,
        }
    }

    /// Refuse `address`: this build has not got the driver.
    #[allow(
        dead_code,
        reason = "called by the openers of the drivers a build leaves out"
    )]
    fn missing(self, address: &str) -> Error {
        let feature = self.feature();
        Error::invalid(
            "address",
            format!(
                "`{address}` needs turnwise's `{feature}` feature, which this build leaves \
                 out; turn it on in Cargo.toml (features = [\"{feature}\"])"
            ),
        )
    }
}

impl Engine {
    /// The engine for the store at `address`, chosen by its scheme ([`Driver::of`]): a
    /// `postgres://` or `postgresql://` URL connects to PostgreSQL (the `postgres` feature;
    /// see [`PostgresStore`](crate::store::PostgresStore)), which any number of processes may
    /// share, and an engine over it offers transactional steps; a file path (or
    /// `sqlite://PATH`) opens a SQLite file (created if missing), as [`Engine::open`] does.
    /// System clock, default settings.
    ///
    /// ```no_run
    /// # async fn demo() -> turnwise::Result<()> {
    /// let local = turnwise::Engine::connect("workflows.db").await?;
    /// let shared = turnwise::Engine::connect("postgres://turnwise@127.0.0.1/turnwise").await?;
    /// # let _ = (local, shared); Ok(()) }
    /// # let _ = demo;
    /// ```
    pub async fn connect(address: &str) -> Result<Self> {
        Self::connect_with(address, EngineConfig::default()).await
    }

    /// [`Engine::connect`] with `config` instead of the default settings: the same addresses,
    /// the system clock, and `config`'s limits, history retention and timings.
    ///
    /// ```no_run
    /// # async fn demo() -> turnwise::Result<()> {
    /// let mut config = turnwise::EngineConfig::default();
    /// config.retention.keep_turns = 16;
    /// let engine = turnwise::Engine::connect_with("workflows.db", config).await?;
    /// # let _ = engine; Ok(()) }
    /// # let _ = demo;
    /// ```
    pub async fn connect_with(address: &str, config: EngineConfig) -> Result<Self> {
        Driver::of(address)?.connect(address, config).await
    }

    /// The embedded default: an engine over the SQLite file at `path` (created if missing),
    /// with the system clock and default settings.
    #[cfg(feature = "sqlite")]
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let store = crate::store::SqliteStore::open(path.as_ref()).await?;
        Ok(Self::new(
            store,
            crate::clock::SystemClock,
            EngineConfig::default(),
        ))
    }
}

#[cfg(feature = "sqlite")]
async fn sqlite(address: &str, config: EngineConfig) -> Result<Engine> {
    let store = crate::store::SqliteStore::open(Driver::sqlite_file(address)).await?;
    Ok(Engine::new(store, crate::clock::SystemClock, config))
}

#[cfg(not(feature = "sqlite"))]
async fn sqlite(address: &str, _: EngineConfig) -> Result<Engine> {
    Err(Driver::Sqlite.missing(address))
}

#[cfg(feature = "postgres")]
async fn postgres(address: &str, config: EngineConfig) -> Result<Engine> {
    let store = crate::store::PostgresStore::connect(address).await?;
    Ok(Engine::postgres(store, crate::clock::SystemClock, config))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(address: &str, _: EngineConfig) -> Result<Engine> {
    Err(Driver::Postgres.missing(address))
}
