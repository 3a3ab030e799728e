//! The `crawler` workflow: one long step that reads a site page by page. After each page it
//! saves a resume cursor with a heartbeat (the next page to read) and reports progress in the
//! `{phase, done, total, unit}` convention. If an attempt fails midway, the next attempt of
//! the step reads the cursor back with `checkpoint` and carries on from there instead of
//! reading every page again.
//!
//! The site is a stand-in for a real one: it serves numbered pages, records which pages were
//! read, and can be told to drop the connection once, at a given page, on the first attempt.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use turnwise::prelude::*;

/// A failed page read.
#[derive(Debug)]
pub struct SiteError(pub String);

impl std::fmt::Display for SiteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SiteError {}

/// A fake site. Clones share the log and the injected fault.
#[derive(Clone, Debug, Default)]
pub struct Site {
    read: Arc<Mutex<Vec<u32>>>,
    fail_at: Option<u32>,
    failed_once: Arc<AtomicBool>,
    latency: Duration,
}

impl Site {
    /// A site that always answers at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drop the connection at `page` the first time it is read, and only then.
    pub fn fail_once_at(mut self, page: u32) -> Self {
        self.fail_at = Some(page);
        self
    }

    /// Take this long to serve each page.
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Read one page, returning its size in bytes.
    pub async fn read(&self, page: u32) -> Result<u64, SiteError> {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        if self.fail_at == Some(page) && !self.failed_once.swap(true, Ordering::SeqCst) {
            return Err(SiteError(format!(
                "the connection dropped while reading page {page}"
            )));
        }
        self.read
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(page);
        Ok(1000 + u64::from(page))
    }

    /// The pages read successfully, in order, over all attempts.
    pub fn pages_read(&self) -> Vec<u32> {
        self.read.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the injected fault has fired.
    pub fn fault_fired(&self) -> bool {
        self.failed_once.load(Ordering::SeqCst)
    }
}

/// A message: how many pages to read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Crawl {
    /// The number of pages.
    pub pages: u32,
}

/// What the crawl step returns (and the turn replies).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CrawlReport {
    /// Pages read in all.
    pub pages: u32,
    /// The page the last attempt of the step started from (0 on a first attempt).
    pub resumed_from: u32,
}

/// The saved state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Crawled {
    /// Crawls finished.
    pub crawls: u64,
    /// Pages read over all crawls.
    pub pages: u64,
}

/// The long step: read `pages` pages of `site`, saving the next page to read as a typed resume
/// cursor after each one, so a later attempt of the step resumes there.
#[step(kind = "tool", heartbeat_timeout = "30s")]
async fn crawl(s: Resumable<u32>, site: Site, pages: u32) -> Result<CrawlReport, TurnError> {
    // The cursor is the next page to read; an earlier attempt may have saved one.
    let start = s.checkpoint().unwrap_or(0);
    for page in start..pages {
        s.progress(
            "reading pages",
            u64::from(page),
            Some(u64::from(pages)),
            "pages",
        );
        site.read(page).await?;
        s.heartbeat(page + 1).await?;
    }
    Ok(CrawlReport {
        pages,
        resumed_from: start,
    })
}

/// The `crawler` workflow, over its site: one long step per message.
#[workflow(name = "crawler", version = "v1")]
pub async fn crawler(
    ctx: &mut Turn,
    state: Crawled,
    message: Crawl,
    site: &Site,
) -> Result<Done<Crawled, CrawlReport>, TurnError> {
    let report = crawl(ctx, site.clone(), message.pages).await?;
    let next = Crawled {
        crawls: state.crawls + 1,
        pages: state.pages + u64::from(report.pages),
    };
    Ok(Done::new(next).reply(report))
}
