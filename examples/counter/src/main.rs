//! Run with: cargo run -p example-counter [-- <database path>]
//!
//! A counter on the embedded engine over a SQLite file. The app sends four requests; each one
//! is a turn that adds its amount in a step. The third request ends its turn with a
//! continuation: a follow-up message that pays a bonus, appended behind the fourth request that
//! was already queued. By default the database is a fresh file in a temporary directory, so
//! every run starts from zero.

use std::path::PathBuf;

use example_counter::{counter, Add};
use turnwise::prelude::*;

fn database_path() -> std::io::Result<PathBuf> {
    if let Some(path) = std::env::args().nth(1) {
        return Ok(PathBuf::from(path));
    }
    let dir = std::env::temp_dir().join(format!("turnwise-counter-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join("counter.db"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = database_path()?;
    let engine = Engine::open(&path).await?;
    println!("The engine keeps its data in {}.", path.display());

    let handle = counter.start(&engine, "counter-1").await?;
    println!("Started the workflow instance `{}`.", handle.id());

    for (i, amount) in [1, 2, 3, 4].into_iter().enumerate() {
        let id = format!("request-{}", i + 1);
        let turn = handle.send(Add::request(amount), id.as_str()).await?;
        println!(
            "Sent {id} (add {amount}); the inbox admitted it as turn {}.",
            turn.number
        );
    }

    let worker = Worker::new(engine.clone()).register(counter);
    let attempts = worker.run_until_idle().await?;
    println!("A worker ran {attempts} turns until the inbox was empty:");

    let history = handle.history(None).await?;
    for turn in &history.turns {
        let message: Add = serde_json::from_value(turn.message.clone())?;
        let what = if message.follow_up {
            format!("the follow-up (bonus of {})", message.amount)
        } else {
            format!("{} (add {})", turn.message_id, message.amount)
        };
        let steps: Vec<&str> = turn.steps.iter().map(|s| s.key.as_str()).collect();
        print!(
            "  turn {}: {what}, saved steps {steps:?}, count now {}",
            turn.number, turn.result
        );
        match turn.continued_to {
            Some(next) => println!(", and it continued with turn {next}."),
            None => println!("."),
        }
    }

    let state = handle.state().await?;
    println!(
        "The final count is {} after {} requests from the app.",
        state.count, state.requests
    );
    Ok(())
}
