/// A workflow over its dependencies.
#[allow(non_camel_case_types)]
pub(crate) struct crawler(
    /// The workflow's dependencies, lent to every turn.
    pub(crate) Site,
);
#[doc(hidden)]
#[allow(
    non_camel_case_types,
    dead_code,
    unused_qualifications,
    clippy::used_underscore_binding,
)]
const _: () = {
    #[automatically_derived]
    impl crate::support::turnwise::__private::Workflow for crawler {
        type State = Crawled;
        type Message = Crawl;
        type Reply = Report;
        type Codec = crate::support::turnwise::__private::JsonCodec;
        const NAME: &'static ::core::primitive::str = "crawler";
        const VERSION: &'static ::core::primitive::str = "v1";
        const SIGNALS: &'static [&'static ::core::primitive::str] = &[];
        fn schema(
            &self,
        ) -> crate::support::turnwise::__private::Option<
            crate::support::turnwise::__private::WorkflowSchema,
        > {
            crate::support::turnwise::__private::Option::Some(crawler::schema(self))
        }
        fn manifest(
            &self,
        ) -> crate::support::turnwise::__private::Option<
            crate::support::turnwise::__private::manifest::Manifest,
        > {
            crate::support::turnwise::__private::Option::Some(crawler::manifest(self))
        }
        fn state_eq() -> crate::support::turnwise::__private::Option<
            crate::support::turnwise::__private::EqFn<Crawled>,
        > {
            #[allow(unused_imports)]
            use crate::support::turnwise::__private::{
                NoPartialEq as _, ViaPartialEq as _,
            };
            (&&crate::support::turnwise::__private::EqProbe::<Crawled>::NEW).eq_fn()
        }
        fn reply_eq() -> crate::support::turnwise::__private::Option<
            crate::support::turnwise::__private::EqFn<Report>,
        > {
            #[allow(unused_imports)]
            use crate::support::turnwise::__private::{
                NoPartialEq as _, ViaPartialEq as _,
            };
            (&&crate::support::turnwise::__private::EqProbe::<Report>::NEW).eq_fn()
        }
        fn message_eq() -> crate::support::turnwise::__private::Option<
            crate::support::turnwise::__private::EqFn<Crawl>,
        > {
            #[allow(unused_imports)]
            use crate::support::turnwise::__private::{
                NoPartialEq as _, ViaPartialEq as _,
            };
            (&&crate::support::turnwise::__private::EqProbe::<Crawl>::NEW).eq_fn()
        }
        async fn run(
            &self,
            turn: &mut crate::support::turnwise::__private::Turn<Self>,
            state: Crawled,
            message: Crawl,
        ) -> crate::support::turnwise::__private::TurnResult<Self> {
            #[allow(clippy::needless_pass_by_value, clippy::unused_async)]
            async fn crawler(
                ctx: &mut crate::support::turnwise::__private::Turn<crawler>,
                state: Crawled,
                message: Crawl,
                site: &Site,
            ) -> Result<Done<Crawled, Report, Crawl>, TurnError> {
                let report = crawl(ctx, site.clone(), message.pages).await?;
                let _ = ctx.now("t0").await?;
                Ok(Done::new(state).reply(report))
            }
            crate::support::turnwise::__private::into_turn_result::<
                _,
                TurnError,
            >(crawler(turn, state, message, &self.0).await)
        }
    }
    const _: () = crate::support::turnwise::__private::assert_deps::<Site>();
    #[automatically_derived]
    impl ::core::clone::Clone for crawler {
        fn clone(&self) -> Self {
            Self(::core::clone::Clone::clone(&self.0))
        }
    }
    #[automatically_derived]
    impl ::core::fmt::Debug for crawler {
        fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
            f.debug_tuple(::core::stringify!(crawler)).finish_non_exhaustive()
        }
    }
    impl crawler {
        /// The JSON Schemas of the `crawler` workflow: its message, state and reply, each accepted signal by name and each step output known at compile time, by key.
        #[must_use]
        pub(crate) fn schema(
            &self,
        ) -> crate::support::turnwise::__private::WorkflowSchema {
            crate::support::turnwise::__private::workflow_schema(
                "crawler",
                "v1",
                crate::support::turnwise::__private::message_schema::<Crawl>(),
                crate::support::turnwise::__private::state_schema::<Crawled>(),
                crate::support::turnwise::__private::reply_schema::<Report>(),
                [],
                [
                    (
                        "crawl",
                        {
                            #[allow(unused_imports)]
                            use crate::support::turnwise::__private::{
                                OutputSchemaKnown as _, OutputSchemaUnknown as _,
                            };
                            (&&crate::support::turnwise::__private::step_output_of::<
                                Self,
                                _,
                                _,
                                _,
                            >(&crawl))
                                .output_schema()
                        },
                    ),
                    (
                        "t0",
                        crate::support::turnwise::__private::step_schema::<
                            crate::support::turnwise::__private::Millis,
                        >(),
                    ),
                ],
            )
        }
        /// The replay manifest of `crawler` `v1`: the grammar of its durable calls, its shape hash and its schemas.
        #[must_use]
        pub(crate) fn manifest(
            &self,
        ) -> crate::support::turnwise::__private::manifest::Manifest {
            crate::support::turnwise::__private::workflow_manifest(
                crawler::schema(self),
                "7448f0fbb8564d58ea5cd67f511b454e818700403099a1ba175f792011a46ebb",
                crate::support::turnwise::__private::manifest::Node::Seq(
                    crate::support::turnwise::__private::vec![
                        crate ::support::turnwise::__private::manifest::Node::Call(crate
                        ::support::turnwise::__private::manifest::Call::new(crate
                        ::support::turnwise::__private::manifest::CallKind::Step,
                        "crawl", "").call("step_fn").input("f0f3e3cd50025b93")), crate
                        ::support::turnwise::__private::manifest::Node::Call(crate
                        ::support::turnwise::__private::manifest::Call::new(crate
                        ::support::turnwise::__private::manifest::CallKind::Step, "t0",
                        "").call("now").input(""))
                    ],
                ),
                [],
            )
        }
    }
};
