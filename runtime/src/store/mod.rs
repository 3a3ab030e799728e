//! Durable stores: the contract the engine relies on, and its implementations.
//!
//! The contract ([`Store`], its records and checks) is `turnwise-core`'s `store` module,
//! re-exported here. The stores:
//!
//! - [`MemoryStore`]: in this crate, the short reference of the contract, for tests and
//!   examples;
//! - `SqliteStore` (feature `sqlite`, the `turnwise-sqlite` crate): the embedded default;
//! - `PostgresStore` (feature `postgres`, the `turnwise-postgres` crate): several processes on
//!   one database, and transactional steps.
//!
//! The contract has its own test suite (`runtime/tests/it/store_contract.rs`) that every store
//! runs.

#[cfg(feature = "engine")]
mod memory;

#[cfg(feature = "engine")]
pub use memory::MemoryStore;
pub use turnwise_core::store::*;
#[cfg(feature = "postgres")]
pub use turnwise_postgres::{
    Joined, PostgresOptions, PostgresStats, PostgresStore, StepTransactions, Transaction,
    TransactionError,
};
#[cfg(feature = "sqlite")]
pub use turnwise_sqlite::{
    Backup, BackupError, SqliteOptions, SqliteStats, SqliteStore, Synchronous,
};
