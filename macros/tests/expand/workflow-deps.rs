/// A workflow over its dependencies.
#[workflow(crate = crate::support::turnwise)]
pub(crate) async fn crawler(ctx: &mut Turn, state: Crawled, message: Crawl, site: &Site) -> Result<Done<Crawled, Report>, TurnError> {
    let report = crawl(ctx, site.clone(), message.pages).await?;
    let _ = ctx.now("t0").await?;
    Ok(Done::new(state).reply(report))
}
