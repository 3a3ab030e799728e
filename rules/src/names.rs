//! Reserved names and the kinds of message origin.

/// Workflow types starting with this belong to the server (`403 reserved_workflow_type`).
pub const RESERVED_TYPE_PREFIX: &str = "lbb.";

/// Whether a workflow type is reserved for the server.
pub fn is_reserved_type(workflow_type: &str) -> bool {
    workflow_type.starts_with(RESERVED_TYPE_PREFIX)
}

/// Instance ids the wire reserves (`403 reserved_workflow_id`).
pub const RESERVED_INSTANCE_IDS: [&str; 4] = [
    "model-checks",
    "search-tuning",
    "model-trials",
    "calibration",
];

/// Whether an instance id is reserved.
pub fn is_reserved_instance_id(id: &str) -> bool {
    RESERVED_INSTANCE_IDS.contains(&id)
}

/// Message ids starting with this are made by the server for continuations; a client may not
/// send one.
pub const CONTINUATION_ID_PREFIX: &str = "continue-";

/// The origin kinds a client may send with a message.
pub const ORIGIN_KINDS: [&str; 12] = [
    "app",
    "console",
    "manual",
    "watch",
    "backfill",
    "commit",
    "schema_changed",
    "requeue",
    "migration",
    "schedule",
    "event",
    "signal",
];

/// The origin kind of a continuation's message, made by the server only.
pub const CONTINUATION_ORIGIN_KIND: &str = "continuation";

/// The origin kind of a message a workflow's turn sent to a child instance (a turnwise
/// extension to the wire's kinds). With the fields [`PARENT_ID_FIELD`], [`PARENT_TURN_FIELD`]
/// and [`REPLY_SIGNAL_FIELD`] it asks the engine to deliver the child turn's outcome to that
/// parent turn as a signal.
pub const PARENT_ORIGIN_KIND: &str = "workflow";

/// The origin field naming the parent instance.
pub const PARENT_ID_FIELD: &str = "parent_id";

/// The origin field naming the parent's turn.
pub const PARENT_TURN_FIELD: &str = "parent_turn";

/// The origin field naming the signal the parent turn waits on for the outcome.
pub const REPLY_SIGNAL_FIELD: &str = "reply_signal";

/// Signal names starting with this carry child turns' outcomes to their parents.
pub const CHILD_SIGNAL_PREFIX: &str = "child.";

/// Whether a client may send a message with this origin kind: one of [`ORIGIN_KINDS`] or
/// [`PARENT_ORIGIN_KIND`].
pub fn is_client_origin_kind(kind: &str) -> bool {
    ORIGIN_KINDS.contains(&kind) || kind == PARENT_ORIGIN_KIND
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names() {
        assert!(is_reserved_type("lbb.agent"));
        assert!(!is_reserved_type("lbb") && !is_reserved_type("my.lbb.x"));
        assert!(is_reserved_instance_id("calibration"));
        assert!(!is_reserved_instance_id("calibration-2"));
    }

    #[test]
    fn origin_kinds() {
        assert!(is_client_origin_kind("app") && is_client_origin_kind("schema_changed"));
        assert!(!is_client_origin_kind(CONTINUATION_ORIGIN_KIND));
        assert!(!is_client_origin_kind("") && !is_client_origin_kind("App"));
        assert!(is_client_origin_kind(PARENT_ORIGIN_KIND));
    }
}
