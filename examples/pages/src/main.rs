//! Run with: cargo run -p example-pages [-- <database path>]
//!
//! One message carries 130 documents to count words in, one step per document. A turn holds
//! at most 64 steps, so the workflow takes a page of 50 documents per turn and continues with
//! the rest as a follow-up message: three turns of 50, 50 and 30 steps. By default the
//! database is a fresh file in a temporary directory.

use std::path::PathBuf;

use example_pages::{pages, Batch, Paging};
use turnwise::context::MAX_STEPS;
use turnwise::prelude::*;

fn database_path() -> std::io::Result<PathBuf> {
    if let Some(path) = std::env::args().nth(1) {
        return Ok(PathBuf::from(path));
    }
    let dir = std::env::temp_dir().join(format!("turnwise-pages-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join("pages.db"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = database_path()?;
    let engine = Engine::open(&path).await?;
    println!("The engine keeps its data in {}.", path.display());

    let paging = Paging { page_size: 50 };
    let workflow = pages(paging);
    let handle = workflow.start(&engine, "pages-1").await?;
    let items: Vec<String> = (1..=130)
        .map(|n| format!("document {n} has {} words", "many ".repeat(n % 5)))
        .collect();
    handle.send(Batch { items }, "batch-1").await?;
    println!(
        "Sent one message with 130 documents; a turn holds at most {MAX_STEPS} steps, so the workflow takes {} per turn.",
        paging.page_size
    );

    let worker = Worker::new(engine.clone()).register(workflow.clone());
    let attempts = worker.run_until_idle().await?;
    println!("A worker ran {attempts} turns until the inbox was empty:");
    for turn in handle.history(None).await?.turns {
        let done: example_pages::PageDone = serde_json::from_value(turn.result.clone())?;
        print!(
            "  turn {} ({}): {} steps saved, {} documents left",
            turn.number,
            turn.message_id,
            turn.steps.len(),
            done.remaining
        );
        match turn.continued_to {
            Some(next) => println!(", handed on to turn {next}."),
            None => println!("; nothing to hand on."),
        }
    }
    let totals = handle.state().await?;
    println!(
        "Totals: {} documents, {} words, over {} turns.",
        totals.items, totals.words, totals.pages
    );
    Ok(())
}
