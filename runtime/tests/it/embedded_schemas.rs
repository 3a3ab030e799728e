//! The embedded engine checks what a handle admits against the schemas its worker registered,
//! as a server does: a message or signal that does not match is refused with
//! `Error::SchemaValidation` naming the path, and nothing is written. The documents are kept in
//! the store, so a reopened store still checks with them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnwise::prelude::*;
use turnwise::protocol::InstanceStatus;
use turnwise::testing::TestEnv;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
struct Order {
    /// 1 to 10 pieces: the schema says so, the Rust type cannot.
    #[schemars(range(min = 1, max = 10))]
    pieces: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, Signal)]
#[signal(name = "rating")]
struct Rating {
    #[schemars(range(max = 5))]
    stars: u8,
}

#[workflow(name = "orders", version = "v1", signals(Rating))]
async fn orders(ctx: &mut Turn, state: u64, order: Order) -> Result<Done<u64, u64>, TurnError> {
    let rated = ctx
        .wait_for_signal::<Rating>("rate", std::time::Duration::from_secs(60))
        .await?;
    let total = state + order.pieces + rated.map_or(0, |r| u64::from(r.stars));
    Ok(Done::new(total).reply(total))
}

#[tokio::test]
async fn an_embedded_handle_is_refused_what_does_not_match_and_nothing_is_written() {
    let env = TestEnv::new().register(orders);
    let h = env.start(&orders, "o-1").await.unwrap();

    let e = h.send(Order { pieces: 50 }, "too-many").await.unwrap_err();
    assert!(
        matches!(&e, turnwise::Error::SchemaValidation { param, errors, .. }
            if param == "message/pieces" && errors.len() == 1),
        "{e:?}"
    );
    assert_eq!((e.status(), e.code()), (400, "schema_validation_failed"));
    assert!(e.to_string().contains("nothing was written"), "{e}");
    let inst = h.instance().await.unwrap();
    assert_eq!(
        (inst.pending_messages, inst.status),
        (0, InstanceStatus::Idle),
        "nothing was written"
    );
    assert!(h.inbox().await.unwrap().messages.is_empty());

    let turn = h.send(Order { pieces: 3 }, "ok").await.unwrap().number;
    env.run_until_idle().await.unwrap();
    let e = h
        .signal(turn, Rating { stars: 9 }, "r-1")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, turnwise::Error::SchemaValidation { param, .. } if param == "value/stars"),
        "{e:?}"
    );
    assert!(
        h.turn(turn).await.unwrap().signals.is_none(),
        "the refused signal was not delivered"
    );
    h.signal(turn, Rating { stars: 4 }, "r-2").await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(h.reply(turn).await.unwrap(), Some(7));
}

#[tokio::test]
async fn schemas_kept_in_a_sqlite_store_check_after_it_is_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("schemas.db");
    {
        let engine = Engine::open(&path).await.unwrap();
        let worker = Worker::new(engine.clone()).register(orders);
        assert_eq!(worker.register_schemas().await.unwrap(), 1);
        orders.start(&engine, "o-1").await.unwrap();
    }
    // Reopen until the first store has let go of the file (its writer closes it on drop).
    let mut engine = None;
    for _ in 0..200 {
        match Engine::open(&path).await {
            Ok(e) => {
                engine = Some(e);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
    let engine = engine.expect("the store reopens");
    let docs = engine.schema_documents(Some("orders"), None).await.unwrap();
    assert_eq!(docs.len(), 1, "the document is kept: {docs:?}");
    let h = orders.handle(&engine, "o-1");
    let e = h.send(Order { pieces: 0 }, "none").await.unwrap_err();
    assert_eq!(e.code(), "schema_validation_failed", "{e}");
    assert_eq!(h.instance().await.unwrap().pending_messages, 0);
}
