//! An older client reads a newer server: a status or wait reason this version does not know
//! reads as `Unknown` instead of failing the whole answer, and is never sent.

use serde_json::json;
use turnwise::protocol::{InstanceStatus, TurnStatus, TurnWait, WaitReason};

#[test]
fn known_values_read_as_themselves() {
    for (wire, status) in [
        ("queued", TurnStatus::Queued),
        ("running", TurnStatus::Running),
        ("waiting", TurnStatus::Waiting),
        ("completed", TurnStatus::Completed),
        ("failed", TurnStatus::Failed),
        ("cancelled", TurnStatus::Cancelled),
    ] {
        assert_eq!(
            serde_json::from_value::<TurnStatus>(json!(wire)).unwrap(),
            status
        );
        assert_eq!(serde_json::to_value(status).unwrap(), json!(wire));
    }
    assert_eq!(
        serde_json::from_value::<InstanceStatus>(json!("paused")).unwrap(),
        InstanceStatus::Paused
    );
    assert_eq!(
        serde_json::from_value::<WaitReason>(json!("capacity")).unwrap(),
        WaitReason::Capacity
    );
}

#[test]
fn a_value_from_a_newer_server_reads_as_unknown() {
    assert_eq!(
        serde_json::from_value::<TurnStatus>(json!("archived")).unwrap(),
        TurnStatus::Unknown
    );
    assert_eq!(
        serde_json::from_value::<InstanceStatus>(json!("draining")).unwrap(),
        InstanceStatus::Unknown
    );
    assert_eq!(
        serde_json::from_value::<WaitReason>(json!("quota")).unwrap(),
        WaitReason::Unknown
    );
    // Inside an answer, the rest of the answer is still read.
    let wait: TurnWait = serde_json::from_value(json!({
        "since_ms": 1,
        "until_ms": 5,
        "reason": "quota",
    }))
    .unwrap_or_else(|e| panic!("a wait with an unknown reason: {e}"));
    assert_eq!(wait.reason, Some(WaitReason::Unknown));
    assert_eq!(wait.until_ms, 5);
}

#[test]
fn unknown_is_not_offered_as_a_valid_value() {
    assert!(!TurnStatus::ALL.contains(&"unknown"));
    assert!(!InstanceStatus::ALL.contains(&"unknown"));
    assert!(!WaitReason::ALL.contains(&"unknown"));
    assert_eq!(TurnStatus::ALL.len(), 7, "suspended is the seventh");
}
