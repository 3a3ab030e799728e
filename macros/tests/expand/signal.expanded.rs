/// The reviewer's answer.
#[derive(Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "approval")]
pub struct Approval {
    pub approved: bool,
}
#[doc(hidden)]
#[allow(
    non_camel_case_types,
    dead_code,
    unused_qualifications,
    clippy::used_underscore_binding,
)]
const _: () = {
    #[automatically_derived]
    impl ::turnwise::__private::Signal for Approval {
        const NAME: &'static ::core::primitive::str = "approval";
    }
    const _: () = ::turnwise::__private::assert_signal_data::<Approval>();
};
