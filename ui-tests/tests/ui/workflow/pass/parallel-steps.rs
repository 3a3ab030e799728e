// A parallel group and fan-outs: distinct keys, a fan-out inside a loop with an indexed key,
// members free to read the environment (they are steps), and the budget counting a fan-out
// as a loop.
#![allow(dead_code, unused_imports)]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema, Default)]
struct Count {
    n: u64,
}

#[workflow]
async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let (a, home) = ctx
        .parallel()
        .step("quote", move |_| async move { Ok(add) })
        .step_with("home", StepOptions::default(), |_| async move {
            Ok(std::env::var("HOME").ok())
        })
        .limit(2)
        .await?;
    let sizes: Vec<u64> = ctx
        .fan_out("fetch", vec![1_u64, 2, 3], |s, n| async move {
            s.progress("fetching", n, None, "");
            Ok(n * 2)
        })
        .limit(2)
        .timeout(std::time::Duration::from_secs(30))
        .await?;
    for round in 0..2_u64 {
        let more: Vec<u64> = ctx
            .fan_out(format!("round-{round}"), 0..add, |_, i| async move { Ok(i) })
            .await?;
        let _ = more;
    }
    let _ = home;
    Ok(Done::new(state).reply(a + sizes.iter().sum::<u64>()))
}

fn main() {}
