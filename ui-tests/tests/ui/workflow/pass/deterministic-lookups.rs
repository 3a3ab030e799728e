// What the nondeterminism checks must let through: a `File` type named but not opened in the
// body (the file is opened inside a step), and a `HashMap` used only for lookups.
use std::collections::HashMap;
use std::fs::File;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[step]
async fn file_size(path: String) -> Result<u64, TurnError> {
    let file: Option<File> = File::open(&path).ok();
    Ok(file.and_then(|f| f.metadata().ok()).map_or(0, |m| m.len()))
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    use std::collections::HashMap as Map;

    let no_file: Option<File> = None;
    let prices: HashMap<&str, u64> = HashMap::from([("small", 1), ("large", 3)]);
    let mut seen: Map<u64, bool> = Map::new();
    seen.insert(add, true);
    let price = prices.get("large").copied().unwrap_or_default();
    let size = file_size(ctx, "config.toml".to_owned()).await?;
    let known = seen.contains_key(&add) && no_file.is_none();
    Ok(Done::new(state).reply(price + size + u64::from(known)))
}

fn main() {}
