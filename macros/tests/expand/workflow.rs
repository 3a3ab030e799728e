/// The counter: one step per message.
#[workflow(name = "counter", version = "v1", signals(Approval), max_attempts = 5, lease = "60s", on_exhausted = "skip", on_mismatch = "fail")]
pub async fn counter(ctx: &mut Turn, state: Count, add: u64) -> Result<Done<Count, u64>, TurnError> {
    let added = double(ctx, add).await?;
    let again = double(ctx, added).key("double-2").await?;
    let _ = ctx.wait_for_signal::<Approval>("review", Duration::from_secs(60)).await?;
    Ok(Done::new(Count { n: state.n + again }).reply(again))
}
