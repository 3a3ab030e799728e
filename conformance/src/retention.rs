//! History retention: finished turns neither among the newest `keep_turns` nor finished within
//! `keep_for` are pruned; either setting at zero keeps everything.

use std::time::Duration;

use serde_json::json;
use turnwise::protocol::*;
use turnwise::{Backend, EngineConfig, RetentionPolicy};

use crate::support::*;
use crate::{advance_ms, Fixture};

/// The default engine configuration with this retention policy.
pub fn config(keep_turns: u64, keep_for: Duration) -> EngineConfig {
    let mut config = EngineConfig::default();
    config.retention = RetentionPolicy {
        keep_turns,
        keep_for,
    };
    config
}

async fn finish_turns<B: Backend + ?Sized>(b: &B, ids: &[&str]) {
    for id in ids {
        send(b, "inst-1", id, json!({"id": id})).await;
        run_next(b, json!({"last": id})).await;
    }
}

/// With `keep_turns = 2, keep_for = 1 s`: turns finished within the last second are kept even
/// beyond the newest two; once older, all but the newest two are pruned,
/// `history_pruned_through` says how far, pruned turns read 404, and a pruned message id is
/// admitted as a new turn.
pub async fn prunes_old_turns(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    finish_turns(&b, &["m1", "m2", "m3"]).await;
    assert_eq!(
        numbers(&history(&b, "inst-1").await),
        vec![1, 2, 3],
        "turns finished within keep_for are kept even beyond keep_turns"
    );
    assert_eq!(instance(&b, "inst-1").await.history_pruned_through, Some(0));

    advance_ms(&f, 2_000);
    finish_turns(&b, &["m4"]).await;
    assert_eq!(
        numbers(&history(&b, "inst-1").await),
        vec![3, 4],
        "turns older than keep_for and outside the newest keep_turns are pruned"
    );
    let inst = instance(&b, "inst-1").await;
    assert_eq!(
        inst.history_pruned_through,
        Some(2),
        "history_pruned_through is the newest pruned turn"
    );
    assert_eq!(inst.history_through, 4);
    assert_eq!(
        inst.completed_turns, 4,
        "pruned turns still count as finished"
    );
    for pruned in [1, 2] {
        expect_not_found(
            b.turn(TurnQuery {
                id: "inst-1".into(),
                turn: pruned,
            })
            .await,
            &format!("reading pruned turn {pruned}"),
        );
    }
    assert_eq!(
        turn(&b, "inst-1", 3).await.status,
        TurnStatus::Completed,
        "turn 3 is among the newest two and kept"
    );

    let kept = send(&b, "inst-1", "m3", json!({"id": "m3"})).await;
    assert_eq!(kept.number, 3, "a kept message id is still deduplicated");
    let fresh = send(&b, "inst-1", "m1", json!({"id": "m1"})).await;
    assert_eq!(
        fresh.number, 5,
        "a pruned message id is admitted as a new turn"
    );
    assert_eq!(fresh.status, TurnStatus::Queued);
    let changed = send(&b, "inst-1", "m2", json!("another payload")).await;
    assert_eq!(
        changed.number, 6,
        "a pruned id takes any payload: it is new"
    );
}

/// With `keep_turns = 0` nothing is pruned, however old.
pub async fn zero_keep_turns_keeps_all(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    finish_turns(&b, &["m1", "m2", "m3"]).await;
    advance_ms(&f, 5_000);
    finish_turns(&b, &["m4"]).await;
    assert_eq!(numbers(&history(&b, "inst-1").await), vec![1, 2, 3, 4]);
    assert_eq!(instance(&b, "inst-1").await.history_pruned_through, Some(0));
}

/// With `keep_for = 0` nothing is pruned, however many.
pub async fn zero_keep_for_keeps_all(f: impl Fixture) {
    let b = f.backend();
    create(&b, "inst-1").await;
    finish_turns(&b, &["m1", "m2"]).await;
    advance_ms(&f, 5_000);
    finish_turns(&b, &["m3", "m4"]).await;
    assert_eq!(numbers(&history(&b, "inst-1").await), vec![1, 2, 3, 4]);
    assert_eq!(instance(&b, "inst-1").await.history_pruned_through, Some(0));
}
