/// The counter: one step per message.
#[allow(non_camel_case_types)]
#[derive(
    ::core::clone::Clone,
    ::core::marker::Copy,
    ::core::fmt::Debug,
    ::core::default::Default,
)]
pub struct counter;
#[doc(hidden)]
#[allow(
    non_camel_case_types,
    dead_code,
    unused_qualifications,
    clippy::used_underscore_binding,
)]
const _: () = {
    #[automatically_derived]
    impl ::turnwise::__private::Workflow for counter {
        type State = Count;
        type Message = u64;
        type Reply = u64;
        type Codec = ::turnwise::__private::JsonCodec;
        const NAME: &'static ::core::primitive::str = "counter";
        const VERSION: &'static ::core::primitive::str = "v1";
        const SIGNALS: &'static [&'static ::core::primitive::str] = &[
            <Approval as ::turnwise::__private::Signal>::NAME,
        ];
        fn options(&self) -> ::turnwise::__private::WorkflowOptions {
            <::turnwise::__private::WorkflowOptions as ::core::default::Default>::default()
                .max_attempts(5)
                .lease(::turnwise::__private::Duration::from_millis(60000u64))
                .on_exhausted(::turnwise::__private::OnExhausted::Skip)
        }
        fn on_mismatch(&self) -> ::turnwise::__private::OnMismatch {
            ::turnwise::__private::OnMismatch::Fail
        }
        fn schema(
            &self,
        ) -> ::turnwise::__private::Option<::turnwise::__private::WorkflowSchema> {
            ::turnwise::__private::Option::Some(counter::schema(self))
        }
        fn manifest(
            &self,
        ) -> ::turnwise::__private::Option<::turnwise::__private::manifest::Manifest> {
            ::turnwise::__private::Option::Some(counter::manifest(self))
        }
        fn state_eq() -> ::turnwise::__private::Option<
            ::turnwise::__private::EqFn<Count>,
        > {
            #[allow(unused_imports)]
            use ::turnwise::__private::{NoPartialEq as _, ViaPartialEq as _};
            (&&::turnwise::__private::EqProbe::<Count>::NEW).eq_fn()
        }
        fn reply_eq() -> ::turnwise::__private::Option<
            ::turnwise::__private::EqFn<u64>,
        > {
            #[allow(unused_imports)]
            use ::turnwise::__private::{NoPartialEq as _, ViaPartialEq as _};
            (&&::turnwise::__private::EqProbe::<u64>::NEW).eq_fn()
        }
        fn message_eq() -> ::turnwise::__private::Option<
            ::turnwise::__private::EqFn<u64>,
        > {
            #[allow(unused_imports)]
            use ::turnwise::__private::{NoPartialEq as _, ViaPartialEq as _};
            (&&::turnwise::__private::EqProbe::<u64>::NEW).eq_fn()
        }
        async fn run(
            &self,
            turn: &mut ::turnwise::__private::Turn<Self>,
            state: Count,
            message: u64,
        ) -> ::turnwise::__private::TurnResult<Self> {
            #[allow(clippy::needless_pass_by_value, clippy::unused_async)]
            async fn counter(
                ctx: &mut ::turnwise::__private::Turn<counter>,
                state: Count,
                add: u64,
            ) -> Result<Done<Count, u64, u64>, TurnError> {
                let added = double(ctx, add).await?;
                let again = double(ctx, added).key("double-2").await?;
                let _ = ctx
                    .wait_for_signal::<Approval>("review", Duration::from_secs(60))
                    .await?;
                Ok(Done::new(Count { n: state.n + again }).reply(again))
            }
            ::turnwise::__private::into_turn_result::<
                _,
                TurnError,
            >(counter(turn, state, message).await)
        }
    }
    #[automatically_derived]
    impl ::turnwise::__private::Accepts<Approval> for counter {}
    impl counter {
        /// The JSON Schemas of the `counter` workflow: its message, state and reply, each accepted signal by name and each step output known at compile time, by key.
        #[must_use]
        pub fn schema(&self) -> ::turnwise::__private::WorkflowSchema {
            ::turnwise::__private::workflow_schema(
                "counter",
                "v1",
                ::turnwise::__private::message_schema::<u64>(),
                ::turnwise::__private::state_schema::<Count>(),
                ::turnwise::__private::reply_schema::<u64>(),
                [
                    (
                        <Approval as ::turnwise::__private::Signal>::NAME,
                        ::turnwise::__private::signal_schema::<Approval>(),
                    ),
                ],
                [
                    (
                        "double",
                        {
                            #[allow(unused_imports)]
                            use ::turnwise::__private::{
                                OutputSchemaKnown as _, OutputSchemaUnknown as _,
                            };
                            (&&::turnwise::__private::step_output_of::<
                                Self,
                                _,
                                _,
                                _,
                            >(&double))
                                .output_schema()
                        },
                    ),
                    (
                        "double-2",
                        {
                            #[allow(unused_imports)]
                            use ::turnwise::__private::{
                                OutputSchemaKnown as _, OutputSchemaUnknown as _,
                            };
                            (&&::turnwise::__private::step_output_of::<
                                Self,
                                _,
                                _,
                                _,
                            >(&double))
                                .output_schema()
                        },
                    ),
                ],
            )
        }
        /// The replay manifest of `counter` `v1`: the grammar of its durable calls, its shape hash and its schemas.
        #[must_use]
        pub fn manifest(&self) -> ::turnwise::__private::manifest::Manifest {
            ::turnwise::__private::workflow_manifest(
                counter::schema(self),
                "a4fda297803d6387d8e74f1061fce6f421d2524b15f25630611b47a65f4b99ff",
                ::turnwise::__private::manifest::Node::Seq(
                    ::turnwise::__private::vec![
                        ::turnwise::__private::manifest::Node::Call(::turnwise::__private::manifest::Call::new(::turnwise::__private::manifest::CallKind::Step,
                        "double", "").call("step_fn").input("228b07c3b745b8da")),
                        ::turnwise::__private::manifest::Node::Call(::turnwise::__private::manifest::Call::new(::turnwise::__private::manifest::CallKind::Step,
                        "double-2", "").call("step_fn").input("91d8771649e58133")),
                        ::turnwise::__private::manifest::Node::Call(::turnwise::__private::manifest::Call::new(::turnwise::__private::manifest::CallKind::Signal,
                        "review", "").call("wait_for_signal").input("fc62ca56ca50cc25")
                        .signal(< Approval as ::turnwise::__private::Signal > ::NAME))
                    ],
                ),
                [],
            )
        }
    }
};
