//! Run with: cargo run -p example-crawler [-- <database path>]
//!
//! A long step reads five pages of a (fake) site, saving the next page to read as a resume
//! cursor after each one. The site drops the connection at page 2 on the first attempt. The
//! turn fails that attempt and backs off for a second; the retry reads the cursor and resumes
//! at page 2 instead of starting over. By default the database is a fresh file in a
//! temporary directory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use example_crawler::{crawler, Crawl, Site};
use turnwise::prelude::*;

fn database_path() -> std::io::Result<PathBuf> {
    if let Some(path) = std::env::args().nth(1) {
        return Ok(PathBuf::from(path));
    }
    let dir = std::env::temp_dir().join(format!("turnwise-crawler-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join("crawler.db"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = database_path()?;
    let engine = Engine::open(&path).await?;
    println!("The engine keeps its data in {}.", path.display());

    let site = Site::new()
        .fail_once_at(2)
        .latency(Duration::from_millis(100));
    let workflow = crawler(site.clone());
    let handle = workflow.start(&engine, "crawler-1").await?;
    let turn = handle.send(Crawl { pages: 5 }, "crawl-1").await?.number;
    println!("Asked `{}` to crawl 5 pages (turn {turn}).", handle.id());

    let worker = Worker::new(engine.clone()).register(workflow.clone());
    worker.run_until_idle().await?;
    let t = handle.turn(turn).await?;
    println!(
        "Attempt {} read pages {:?}, then failed: {}.",
        t.attempt,
        site.pages_read(),
        t.error.unwrap_or_default()
    );
    if let Some(p) = &t.progress {
        println!(
            "Its last progress report was \"{}\", {} of {} {}; its last heartbeat saved the cursor: the next page to read.",
            p.phase,
            p.done,
            p.total.unwrap_or_default(),
            p.unit.as_deref().unwrap_or_default()
        );
    }
    println!(
        "The turn is {} and backs off for 1 s before its next attempt.",
        t.status
    );

    let before = site.pages_read().len();
    let started = Instant::now();
    let report = loop {
        if let Some(report) = handle.reply(turn).await? {
            break report;
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err("the crawl did not finish within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        worker.run_until_idle().await?;
    };
    let t = handle.turn(turn).await?;
    println!(
        "Attempt {} resumed at page {} and read pages {:?}.",
        t.attempt,
        report.resumed_from,
        &site.pages_read()[before..]
    );
    println!(
        "The turn is {}: {} pages read, each exactly once: {:?}.",
        t.status,
        report.pages,
        site.pages_read()
    );
    Ok(())
}
