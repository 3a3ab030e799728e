// Generated code works with the user's own `Result`, `Box`, `Option`, `Clone` and primitive names shadowed.
#![allow(non_camel_case_types, dead_code)]

mod data {
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, Default)]
    pub struct Count {
        pub n: u32,
    }
}

mod user {
    use super::data::Count;
    use turnwise::prelude::*;

    type Result<T> = ::core::result::Result<T, TurnError>;
    struct Box;
    struct Option;
    struct Some;
    struct Vec;
    struct String;
    trait Clone {}
    trait Default {}
    trait Debug {}
    trait Send {}
    trait From {}
    trait Into {}
    struct str;
    struct u64;

    #[step]
    async fn double(n: u32) -> Result<u32> {
        Ok(n * 2)
    }

    #[workflow]
    pub(crate) async fn counter(ctx: &mut Turn, state: Count, add: u32) -> Result<Done<Count, u32>> {
        let a = double(ctx, add).await?;
        let _ = ctx.random("r").await?;
        Ok(Done::new(state).reply(a))
    }

    #[workflow]
    async fn explicit(
        ctx: &mut Turn,
        state: Count,
        add: u32,
    ) -> ::std::result::Result<Done<Count, u32>, TurnError> {
        let a = double(ctx, add).await?;
        Ok(Done::new(state).reply(a))
    }
}

fn main() {
    let schema = user::counter.schema();
    assert!(schema.steps.contains_key("double"));
}
