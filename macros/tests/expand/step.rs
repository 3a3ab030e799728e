/// Crawl a site.
#[step(kind = "tool", timeout = "5m", heartbeat_timeout = "30s")]
pub async fn crawl(s: Resumable<u32>, site: Site, pages: u32) -> Result<Report, TurnError> {
    let start = s.checkpoint().unwrap_or(0);
    Ok(site.read(start, pages).await?)
}

#[step]
async fn double(n: u64) -> Result<u64, TurnError> {
    Ok(n * 2)
}
