//! The workspace's Markdown documents as rustdoc modules, so that `cargo test -p turnwise-docs`
//! compiles (and, unless marked `no_run`, runs) every Rust snippet in `docs/*.md` and in
//! `README.md`. A snippet that stops compiling fails the test suite.
//!
//! Each document is one empty module whose rustdoc is the document itself. The list is checked
//! against the `docs/` directory by `tests/coverage.rs`, so a new document cannot be left out.

// The documents are written for GitHub: their links are relative file links, and their prose
// names types in angle brackets. Neither is rustdoc markup, so rustdoc's link and HTML checks
// do not apply to them.
#![allow(
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls
)]

macro_rules! documents {
    ($($(#[$attr:meta])* $name:ident => $path:literal,)*) => {
        $(
            #[doc = include_str!($path)]
            $(#[$attr])*
            pub mod $name {}
        )*

        /// Every document included above, as a path relative to the workspace root.
        pub const DOCUMENTS: &[&str] = &[$($path),*];
    };
}

documents! {
    readme => "../../README.md",
    architecture => "../../docs/architecture.md",
    console => "../../docs/console.md",
    guide => "../../docs/guide.md",
    http => "../../docs/http.md",
    http_client => "../../docs/http-client.md",
    macros => "../../docs/macros.md",
    operations => "../../docs/operations.md",
    performance => "../../docs/performance.md",
    postgres => "../../docs/postgres.md",
    protocol => "../../docs/protocol.md",
    testing => "../../docs/testing.md",
    versions => "../../docs/versions.md",
}

/// What the documents' snippets share, so that a snippet can use a workflow an earlier snippet
/// defined without repeating it: the counter of `docs/guide.md` §2, as the guide shows it.
pub mod support {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use turnwise::prelude::*;

    /// The saved state: a new instance starts from `Count::default()`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct Count {
        /// The running total.
        pub count: u64,
    }

    /// A message of the inbox.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct Add {
        /// What to add.
        pub amount: u64,
    }

    /// A step: its output is saved, and a later attempt of the turn replays it.
    #[step]
    async fn add(amount: u64) -> Result<u64, TurnError> {
        Ok(amount)
    }

    /// The workflow: adds each message's amount and replies with the new total.
    #[workflow(name = "counter", version = "v1")]
    pub async fn counter(
        ctx: &mut Turn,
        state: Count,
        msg: Add,
    ) -> Result<Done<Count, u64>, TurnError> {
        let added = add(ctx, msg.amount).await?;
        let total = state.count + added;
        Ok(Done::new(Count { count: total }).reply(total))
    }
}
