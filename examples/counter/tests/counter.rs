//! The counter workflow in the test environment: replies, state, saved steps and the
//! continuation's place in the inbox.

use example_counter::{counter, Add, Count, BONUS};
use turnwise::protocol::TurnStatus;
use turnwise::testing::TestEnv;

#[tokio::test]
async fn every_third_request_continues_with_a_bonus_at_the_tail(
) -> Result<(), Box<dyn std::error::Error>> {
    let env = TestEnv::new().register(counter);
    let handle = env.start(&counter, "counter-1").await?;
    for (i, amount) in [1, 2, 3, 4].into_iter().enumerate() {
        let turn = handle
            .send(Add::request(amount), format!("request-{}", i + 1))
            .await?;
        assert_eq!(turn.number, i as u64 + 1);
    }
    assert_eq!(
        env.run_until_idle().await?,
        5,
        "four requests and one follow-up"
    );

    assert_eq!(
        handle.state().await?,
        Count {
            count: 10 + BONUS,
            requests: 4
        }
    );
    let replies = [1, 3, 6, 10, 10 + BONUS];
    for (n, want) in (1..).zip(replies) {
        assert_eq!(handle.reply(n).await?, Some(want), "reply of turn {n}");
    }

    // The third request continued with turn 5, behind the fourth request already queued.
    let third = handle.turn(3).await?;
    assert_eq!(third.continued_to, Some(5));
    let follow_up = handle.turn(5).await?;
    assert_eq!(
        serde_json::from_value::<Add>(follow_up.message)?,
        Add::bonus()
    );

    let history = handle.history(None).await?;
    assert_eq!(history.turns.len(), 5);
    for turn in &history.turns {
        assert_eq!(turn.status, TurnStatus::Completed);
        assert_eq!(turn.steps.len(), 1);
        assert_eq!(turn.steps[0].key, "add");
        let message: Add = serde_json::from_value(turn.message.clone())?;
        assert_eq!(turn.steps[0].output, serde_json::json!(message.amount));
        assert_eq!(turn.continued_to.is_some(), turn.number == 3);
    }
    Ok(())
}

#[tokio::test]
async fn a_repeated_message_id_is_admitted_once() -> Result<(), Box<dyn std::error::Error>> {
    let env = TestEnv::new().register(counter);
    let handle = env.start(&counter, "counter-1").await?;
    let first = handle.send(Add::request(5), "request-1").await?;
    let again = handle.send(Add::request(5), "request-1").await?;
    assert_eq!(first.number, again.number);
    env.run_until_idle().await?;
    assert_eq!(
        handle.state().await?,
        Count {
            count: 5,
            requests: 1
        }
    );
    Ok(())
}

/// The workflow's JSON Schemas, compared with the committed `schema.json`.
/// `TURNWISE_BLESS=1 cargo test -p example-counter schema::` rewrites it after a reviewed change.
mod schema {
    use example_counter::counter;

    #[test]
    fn the_schema_matches_its_snapshot() {
        let workflow = counter;
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.json");
        turnwise::testing::assert_snapshot(&workflow.schema().to_json(), path);
    }
}
