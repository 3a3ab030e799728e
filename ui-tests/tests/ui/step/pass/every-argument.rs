// Every `#[step]` argument, a typed resume cursor, and a step without a context.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Cursor {
    page: u32,
}

/// Crawl a site.
#[step(kind = "tool", timeout = "5m", heartbeat_timeout = "30s", crate = ::turnwise)]
pub async fn crawl(s: Resumable<Cursor>, site: String, pages: u32) -> Result<u32, TurnError> {
    let start = s.checkpoint().map_or(0, |c| c.page);
    for page in start..pages {
        s.progress("reading", u64::from(page), Some(u64::from(pages)), "pages");
        s.heartbeat(Cursor { page: page + 1 }).await?;
    }
    let _ = (site, s.effect_id());
    Ok(pages)
}

#[step(kind = "model", timeout = "250ms")]
async fn think(s: StepCtx, mut prompt: String) -> Result<String, TurnError> {
    prompt.push_str(s.key());
    Ok(prompt)
}

#[step(kind = "step")]
async fn pair((a, b): (u64, u64)) -> Result<u64, TurnError> {
    Ok(a + b)
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let pages = crawl(ctx, "example".into(), 3).await?;
    let _ = think(ctx, "hello".into()).await?;
    let n = pair(ctx, (add, u64::from(pages))).await?;
    Ok(Done::new(state).reply(n))
}

fn main() {
    let schema = counter.schema();
    let keys: Vec<&str> = schema.steps.keys().map(String::as_str).collect();
    assert_eq!(keys, ["crawl", "pair", "think"]);
}
