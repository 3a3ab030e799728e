//! The generated code is warning-free under `clippy::pedantic`: this file applies every macro
//! to representative code under `deny` and is checked by `cargo clippy --all-targets`.
#![deny(warnings, clippy::pedantic, missing_docs, unused_qualifications)]

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

/// The state.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Count {
    /// The count.
    pub n: u64,
}

/// A signal.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
pub struct Approval {
    /// Whether it is approved.
    pub approved: bool,
}

/// Another signal.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "cancel")]
pub enum Cancel {
    /// Cancel now.
    Now,
}

/// A resume cursor.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Cursor {
    /// The next page.
    pub page: u32,
}

/// A step with every argument and a typed cursor.
#[step(kind = "tool", timeout = "5m", heartbeat_timeout = "30s")]
pub async fn crawl(s: Resumable<Cursor>, site: String, pages: u32) -> Result<u32, TurnError> {
    let start = s.checkpoint().map_or(0, |c| c.page);
    for page in start..pages {
        s.progress(&site, u64::from(page), Some(u64::from(pages)), "pages");
        s.heartbeat(Cursor { page: page + 1 }).await?;
    }
    Ok(pages - start)
}

/// A step without a context.
#[step]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}

/// A workflow with signals, options and every kind of durable call.
#[workflow(
    name = "lint",
    version = "v1",
    signals(Approval, Cancel),
    max_attempts = 5,
    lease = "30s",
    on_exhausted = "skip"
)]
pub async fn lint(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let a = double(ctx, add).await?;
    let b = double(ctx, a).key("double-2").await?;
    let pages = crawl(ctx, "site".to_owned(), 3).await?;
    for i in 0..2_u64 {
        ctx.step(format!("item-{i}"), move |_| async move { Ok(i) })
            .await?;
    }
    if let Some(approval) = ctx
        .wait_for_signal::<Approval>("approval", Duration::from_mins(1))
        .await?
    {
        if !approval.approved {
            return Ok(Done::new(state).reply(0));
        }
    }
    ctx.sleep("nap", Duration::from_secs(1)).await?;
    let _ = (ctx.now("t0").await?, ctx.random("r0").await?);
    let next = Count {
        n: state.n + b + u64::from(pages),
    };
    if next.n > 100 {
        return Ok(ctx.continue_(next, 0));
    }
    let total = next.n;
    Ok(Done::new(next).reply(total))
}

/// Dependencies.
#[derive(Clone, Debug)]
pub struct Deps {
    /// A shared factor.
    pub factor: Arc<u64>,
}

/// A workflow with dependencies.
#[workflow]
pub async fn with_deps(
    ctx: &mut Turn,
    state: Count,
    add: u64,
    deps: &Deps,
) -> Result<Done<Count, ()>, TurnError> {
    let a = double(ctx, add * *deps.factor).await?;
    Ok(Done::new(Count { n: state.n + a }))
}

#[test]
fn the_generated_items_are_usable() {
    let schema = lint.schema();
    assert_eq!(schema.signals.len(), 2);
    let deps = with_deps(Deps {
        factor: Arc::new(2),
    });
    assert_eq!(<with_deps as Workflow>::NAME, "with_deps");
    let _ = deps.clone();
}
