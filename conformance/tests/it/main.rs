//! The conformance suite's runs and the runtime-over-HTTP tests, one module per subject, linked
//! into one test binary (`cargo test -p turnwise-conformance --test it`); run one with a filter
//! on its module, e.g. `cargo test -p turnwise-conformance --test it embedded_sqlite::`.
//!
//! `accepted_values` re-runs this binary as a child process and selects the child by its full
//! name, module included ([`common::test_name`]).

mod common;

mod accepted_values;
mod embedded_memory;
mod embedded_postgres;
mod embedded_sqlite;
mod http;
mod http_postgres;
mod http_runtime;
mod http_worker_errors;
