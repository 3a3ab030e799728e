//! The server's integration tests, one module per subject, linked into one test binary
//! (`cargo test -p turnwise-server --test it`); run one subject with a filter on its module,
//! e.g. `cargo test -p turnwise-server --test it http_connections::`. Tests that need the
//! `turnwise` binary start it from `CARGO_BIN_EXE_turnwise`.

mod common;

mod accepted_values;
mod backup;
mod cli;
mod compat_cli;
mod config;
mod console_auth;
mod console_browser;
mod console_pages;
mod console_versions;
mod health;
mod http_await_turn;
mod http_bad_input;
mod http_connections;
mod http_runs;
mod http_shapes;
mod http_strict_input;
mod lbb_interop;
mod metrics;
mod multi_node;
mod restart;
mod schema_registration;
mod store_faults;
mod traces;
mod upgrade_cli;
