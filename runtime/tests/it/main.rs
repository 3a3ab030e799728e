//! The runtime's integration tests, one module per subject, linked into one test binary
//! (`cargo test -p turnwise --test it`). One binary links the crate and its dependencies once
//! instead of once per file; run one subject with a filter on its module, e.g.
//! `cargo test -p turnwise --test it store_contract::`.
//!
//! Tests that re-run this binary as a child process (`crash`, `store_files`, `store_journal`,
//! `worker_process`) select the child by its full name, module included
//! ([`common::test_name`]).

mod common;

mod backend_routes;
#[cfg(feature = "test-util")]
mod child_crash;
mod claim_wakeups;
mod compat_fixtures;
mod connect;
mod crash;
mod embedded_schemas;
mod http_retry;
mod http_tls;
mod parallel_crash;
mod protocol_unknown_values;
mod schedule_crash;
mod schedule_nodes;
mod snapshot;
mod sqlite_stats;
mod store_contract;
mod store_differential;
mod store_files;
mod store_journal;
mod store_unreadable;
mod test_call;
mod test_children;
mod test_codec_eq;
mod test_codec_props;
mod test_deferred_steps;
mod test_errors;
mod test_handles;
mod test_manifest;
mod test_parallel;
mod test_replay;
mod test_saved_turns;
mod test_schedules;
mod test_signals;
mod test_steps;
mod test_suspend;
mod test_transact;
mod test_upgrade;
mod test_versions;
mod test_worker;
mod worker_errors;
mod worker_process;
