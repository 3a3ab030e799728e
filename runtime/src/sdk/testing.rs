//! A test environment: an in-memory engine with a virtual clock and a worker, so a test runs
//! workflows over messages and signals, skips through sleeps and timeouts instantly, and
//! asserts state, replies, saved steps and effect ids, with no server and no real waiting.
//!
//! ```
//! # use turnwise::prelude::*;
//! # use serde::{Deserialize, Serialize};
//! # use std::time::Duration;
//! # #[derive(Serialize, Deserialize, Default)] struct Count { count: u64 }
//! # struct Counter;
//! # impl Workflow for Counter {
//! #     type State = Count; type Message = u64; type Reply = u64; type Codec = turnwise::codec::JsonCodec;
//! #     const NAME: &'static str = "counter"; const VERSION: &'static str = "v1";
//! #     async fn run(&self, ctx: &mut Turn<Self>, state: Count, add: u64) -> TurnResult<Self> {
//! #         let add = ctx.step("add", |_s| async move { Ok(add) }).await?;
//! #         ctx.sleep("cool-down", Duration::from_secs(3600)).await?;
//! #         Ok(Done::new(Count { count: state.count + add }).reply(state.count + add))
//! #     }
//! # }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), turnwise::Error> {
//! use turnwise::testing::TestEnv;
//!
//! let env = TestEnv::new().register(Counter);
//! let counter = env.start(&Counter, "counter-1").await?;
//! counter.send(2, "m1").await?;
//! env.run_until_idle().await?;                 // runs the step, then sleeps an hour
//! assert_eq!(counter.state().await?.count, 0);
//! env.advance(Duration::from_secs(3600)).await?; // an hour passes instantly
//! assert_eq!(counter.state().await?.count, 2);
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "engine")]
pub use super::test_env::TestEnv;
pub use turnwise_core::testing::{in_ci, skip_test};
#[cfg(feature = "postgres")]
pub use turnwise_postgres::TestPostgres;

/// Compare `actual` (a workflow's JSON Schema, say) with the snapshot committed at `path`,
/// so that a change to what a workflow accepts on the wire is never made unreviewed. With
/// `TURNWISE_BLESS` set in the environment the snapshot is first rewritten from `actual`.
/// A trailing newline is added to `actual` if it has none.
///
/// ```no_run
/// // In `tests/schema.rs`; bless with `TURNWISE_BLESS=1 cargo test --test schema`.
/// # let my_workflow_schema_json = String::from("{}");
/// let json = my_workflow_schema_json; // e.g. `my_workflow.schema().to_json()`
/// turnwise::testing::assert_snapshot(&json, concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json"));
/// ```
///
/// # Panics
///
/// When `actual` differs from the snapshot or the snapshot is missing (the message names the
/// file and how to bless it), and when blessing cannot write the file. It is an assertion.
#[track_caller]
pub fn assert_snapshot(actual: &str, path: impl AsRef<std::path::Path>) {
    let path = path.as_ref();
    let mut actual = actual.to_owned();
    if !actual.ends_with('\n') {
        actual.push('\n');
    }
    if std::env::var_os("TURNWISE_BLESS").is_some() {
        if let Err(e) = std::fs::write(path, &actual) {
            panic!("TURNWISE_BLESS: cannot write {}: {e}", path.display());
        }
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        actual == want,
        "{} does not match: review the change, then rerun with TURNWISE_BLESS=1 to rewrite it\n\
         --- snapshot\n{want}\n--- actual\n{actual}",
        path.display()
    );
}
