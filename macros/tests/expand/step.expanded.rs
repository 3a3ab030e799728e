/// Crawl a site.
pub fn crawl<'turn, W: ::turnwise::__private::Workflow>(
    ctx: &'turn mut ::turnwise::__private::Turn<W>,
    site: Site,
    pages: u32,
) -> ::turnwise::__private::Step<
    'turn,
    W,
    Report,
    ::turnwise::__private::BoxStepFn<'turn, Report>,
> {
    #[allow(clippy::needless_pass_by_value, clippy::unused_async)]
    async fn crawl(
        s: Resumable<u32>,
        site: Site,
        pages: u32,
    ) -> Result<Report, TurnError> {
        let start = s.checkpoint().unwrap_or(0);
        Ok(site.read(start, pages).await?)
    }
    ::turnwise::__private::Turn::<
        W,
    >::step::<
        Report,
        _,
        _,
    >(
            ctx,
            "crawl",
            ::turnwise::__private::box_step(move |s: ::turnwise::__private::StepCtx| async move {
                ::turnwise::__private::into_turn_result::<
                    _,
                    TurnError,
                >(crawl(::core::convert::From::from(s), site, pages).await)
            }),
        )
        .kind(::turnwise::__private::OperationKind::Tool)
        .timeout(::turnwise::__private::Duration::from_millis(300000u64))
        .heartbeat_timeout(::turnwise::__private::Duration::from_millis(30000u64))
}
#[doc(hidden)]
#[allow(
    non_camel_case_types,
    dead_code,
    unused_qualifications,
    clippy::used_underscore_binding,
)]
const _: () = {
    const _: fn() -> ::turnwise::__private::JsonValue = ::turnwise::__private::step_schema::<
        Report,
    >;
    const _: () = ::turnwise::__private::assert_cursor::<u32>();
};
fn double<'turn, W: ::turnwise::__private::Workflow>(
    ctx: &'turn mut ::turnwise::__private::Turn<W>,
    n: u64,
) -> ::turnwise::__private::Step<
    'turn,
    W,
    u64,
    ::turnwise::__private::BoxStepFn<'turn, u64>,
> {
    #[allow(clippy::needless_pass_by_value, clippy::unused_async)]
    async fn double(n: u64) -> Result<u64, TurnError> {
        Ok(n * 2)
    }
    ::turnwise::__private::Turn::<
        W,
    >::step::<
        u64,
        _,
        _,
    >(
        ctx,
        "double",
        ::turnwise::__private::box_step(move |s: ::turnwise::__private::StepCtx| async move {
            ::turnwise::__private::into_turn_result::<_, TurnError>(double(n).await)
        }),
    )
}
#[doc(hidden)]
#[allow(
    non_camel_case_types,
    dead_code,
    unused_qualifications,
    clippy::used_underscore_binding,
)]
const _: () = {
    const _: fn() -> ::turnwise::__private::JsonValue = ::turnwise::__private::step_schema::<
        u64,
    >;
};
