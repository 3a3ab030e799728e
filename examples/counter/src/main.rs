//! Run with: cargo run -p example-counter [-- <database path>]
//!
//! A counter on the embedded engine over a SQLite file. The app sends four requests; each one
//! is a turn that adds its amount in a step. The third request ends its turn with a
//! continuation: a follow-up message that pays a bonus, appended behind the fourth request that
//! was already queued. By default the database is a fresh file in a temporary directory that
//! is removed when the run ends (also after an error), so every run starts from zero; a path
//! given on the command line is kept.

use std::path::{Path, PathBuf};

use example_counter::{counter, Add};
use turnwise::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Without a path: a temporary directory, removed once `run` has shut its runtime down and
    // with it every handle on the file, also after an error (a panic removes it while
    // unwinding).
    let (path, scratch) = match std::env::args_os().nth(1) {
        Some(path) => (PathBuf::from(path), None),
        None => {
            let dir = tempfile::Builder::new()
                .prefix("turnwise-counter-")
                .tempdir()?;
            (dir.path().join("counter.db"), Some(dir))
        }
    };
    let result = run(&path, scratch.is_some());
    if let Some(dir) = scratch {
        let shown = dir.path().display().to_string();
        if let Err(e) = dir.close() {
            eprintln!("Could not remove the temporary directory {shown}: {e}");
        }
    }
    result
}

#[tokio::main]
async fn run(path: &Path, temporary: bool) -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::open(path).await?;
    let until = if temporary {
        " (a temporary directory, removed when the run ends)"
    } else {
        ""
    };
    println!("The engine keeps its data in {}{until}.", path.display());

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
