//! Transactional steps: the database transaction a step's SQL and its checkpoint share.
//!
//! `Turn::transact` begins a transaction on a pooled
//! connection ([`Joined`]), hands the step's closure a [`Transaction`] on it, and then has the
//! engine save the step's output with the transaction *joined*: while the engine's checkpoint
//! runs inside [`Joined::scope`], the store's commits go into that transaction instead of one
//! of their own. The step then commits: the user's writes and the saved output are in the
//! database together, or neither is.

use std::future::Future;
use std::sync::Arc;

use deadpool_postgres::Object;
use tokio::sync::{Mutex, MutexGuard};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use super::{pg, Inner, PostgresStore};
use turnwise_core::store::StoreError;

tokio::task_local! {
    /// The transaction the store's commits join, while a transactional step saves its output.
    static JOINED: Joined;
}

/// The connection of a transactional step, in its transaction.
pub(super) type Conn = Arc<Mutex<Open>>;

/// A pooled connection inside a transaction; `None` once the transaction has ended. Dropped
/// while still open (the step's future was dropped mid-way), its connection is closed, so that
/// the database rolls the transaction back, instead of going back to the pool in it.
pub(super) struct Open(pub(super) Option<Object>);

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(Object::take(client));
        }
    }
}

/// A transactional step's transaction, as the step runs it: begun by
/// [`StepTransactions::begin_joined`], handed to the step's closure as a [`Transaction`],
/// joined by the store's commits inside [`Joined::scope`], then committed or rolled back.
#[derive(Clone)]
pub struct Joined {
    /// The store it belongs to (by address): another store's commits do not join it.
    store: usize,
    conn: Conn,
}

/// The transaction `inner`'s commits must join now, if any.
pub(super) fn joined(inner: &Arc<Inner>) -> Option<Conn> {
    JOINED
        .try_with(|j| (j.store == Arc::as_ptr(inner) as usize).then(|| j.conn.clone()))
        .ok()
        .flatten()
}

/// The capability to run transactional steps (`Turn::transact`): begin a transaction that a
/// step's own SQL and the engine's checkpoint of that step share. A [`PostgresStore`] offers
/// it ([`PostgresStore::step_transactions`]); an engine built over one takes it then and
/// answers it to its workers (`WorkerBackend::step_transactions`). Cheap to clone.
#[derive(Clone)]
pub struct StepTransactions {
    store: PostgresStore,
}

impl std::fmt::Debug for Joined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joined").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for StepTransactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepTransactions").finish_non_exhaustive()
    }
}

impl StepTransactions {
    /// The capability of `store`.
    pub(super) fn new(store: PostgresStore) -> Self {
        Self { store }
    }

    /// Begin a transactional step's transaction.
    pub async fn begin_joined(&self) -> Result<Joined, StoreError> {
        self.store.begin_joined().await
    }
}

impl PostgresStore {
    /// Begin a transactional step's transaction.
    async fn begin_joined(&self) -> Result<Joined, StoreError> {
        let client = self.client().await?;
        client
            .batch_execute("BEGIN")
            .await
            .map_err(pg("begin a transactional step's transaction"))?;
        Ok(Joined {
            store: Arc::as_ptr(&self.inner) as usize,
            conn: Arc::new(Mutex::new(Open(Some(client)))),
        })
    }
}

impl Joined {
    /// The handle the step's closure gets.
    pub fn transaction(&self, effect_id: String) -> Transaction {
        Transaction {
            conn: self.conn.clone(),
            effect_id,
        }
    }

    /// Run `f` (the engine's checkpoint) with this transaction joined by the store's commits.
    pub async fn scope<F: Future>(&self, f: F) -> F::Output {
        JOINED.scope(self.clone(), f).await
    }

    /// Commit, and end the transaction: later uses of a [`Transaction`] are refused.
    pub async fn commit(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.lock().await;
        let Some(client) = conn.0.take() else {
            return Err(StoreError::new(
                "postgres: the step's transaction had already ended",
            ));
        };
        match client.batch_execute("COMMIT").await {
            Ok(()) => Ok(()),
            Err(e) => {
                // Whether it committed is unknown; the connection is not reused.
                drop(Object::take(client));
                Err(pg("commit a transactional step")(e))
            }
        }
    }

    /// Roll back, and end the transaction.
    pub async fn rollback(&self) {
        let mut conn = self.conn.lock().await;
        if let Some(client) = conn.0.take() {
            if client.batch_execute("ROLLBACK").await.is_err() {
                drop(Object::take(client));
            }
        }
    }
}

/// Why a statement of a transactional step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// The database refused the statement, or the connection failed. The step's transaction
    /// is aborted: return the error from the closure (the step's attempt fails and is retried
    /// with nothing of it saved).
    #[error("postgres: {}", describe(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// The transaction was used after its step ended (a clone kept past the closure).
    #[error(
        "the transactional step's transaction has ended: use its Transaction only inside the \
         closure given to transact"
    )]
    Ended,
}

/// The text of a database error: its message and SQLSTATE code (`tokio_postgres` displays only
/// "db error"), or the connection error with its cause.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut text = format!("{} ({})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                text.push_str(&format!("; {detail}"));
            }
            if let Some(hint) = db.hint() {
                text.push_str(&format!("; hint: {hint}"));
            }
            text
        }
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

/// The database transaction of a transactional step: the closure given to
/// `Turn::transact` runs its SQL here, and the step's output
/// is saved in the same transaction, so the SQL's effects and the step's record commit
/// together or not at all.
///
/// Statements are prepared once per connection and cached. Do not `COMMIT` or `ROLLBACK`
/// yourself: the step does, after saving its output (a `SAVEPOINT` of your own is fine).
#[derive(Clone)]
pub struct Transaction {
    conn: Conn,
    effect_id: String,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("effect_id", &self.effect_id)
            .finish_non_exhaustive()
    }
}

impl Transaction {
    /// The step's effect id (`<effect_prefix>/<key>`), the same on every attempt.
    pub fn effect_id(&self) -> &str {
        &self.effect_id
    }

    async fn conn(&self) -> MutexGuard<'_, Open> {
        self.conn.lock().await
    }

    /// Run a statement; answers the number of rows it changed.
    pub async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, TransactionError> {
        let conn = self.conn().await;
        let c = conn.0.as_ref().ok_or(TransactionError::Ended)?;
        let statement = c.prepare_cached(sql).await?;
        Ok(c.execute(&statement, params).await?)
    }

    /// Run a query; answers its rows.
    pub async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, TransactionError> {
        let conn = self.conn().await;
        let c = conn.0.as_ref().ok_or(TransactionError::Ended)?;
        let statement = c.prepare_cached(sql).await?;
        Ok(c.query(&statement, params).await?)
    }

    /// Run a query that answers exactly one row.
    pub async fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, TransactionError> {
        let conn = self.conn().await;
        let c = conn.0.as_ref().ok_or(TransactionError::Ended)?;
        let statement = c.prepare_cached(sql).await?;
        Ok(c.query_one(&statement, params).await?)
    }

    /// Run a query that answers at most one row.
    pub async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, TransactionError> {
        let conn = self.conn().await;
        let c = conn.0.as_ref().ok_or(TransactionError::Ended)?;
        let statement = c.prepare_cached(sql).await?;
        Ok(c.query_opt(&statement, params).await?)
    }

    /// Run statements separated by `;`, without parameters (the simple query protocol).
    pub async fn batch_execute(&self, sql: &str) -> Result<(), TransactionError> {
        let conn = self.conn().await;
        let c = conn.0.as_ref().ok_or(TransactionError::Ended)?;
        Ok(c.batch_execute(sql).await?)
    }
}
