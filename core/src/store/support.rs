//! What every store does the same way: the contract's checks of a write set, the integers of
//! stores that keep signed 64-bit columns, and the decoding of stored records.

use super::*;

/// The contract checks every store makes the same way before writing.
pub fn check_revision(current: Option<u64>, write: &WriteSet) -> Result<(), CommitError> {
    if current != write.expected_revision {
        return Err(CommitError::Conflict);
    }
    check_record(write)
}

/// The checks of a write set's own record (its revision follows the expected one, its address
/// is the write set's), which need no read of the store.
pub fn check_record(write: &WriteSet) -> Result<(), CommitError> {
    if let Some(inst) = &write.instance {
        let want = write.expected_revision.map_or(1, |r| r + 1);
        if inst.revision != want || inst.id != write.id || inst.ns != write.ns {
            return Err(CommitError::Store(StoreError::new(format!(
                "write set for `{}` carries revision {} (expected {want}) or another id",
                write.id, inst.revision
            ))));
        }
    }
    Ok(())
}

/// The checks of a turn a write set rewrites (`old` is the stored one): its message id never
/// changes, and a turn in history is never rewritten, though the same turn written again is
/// fine.
pub fn check_rewrite(id: &str, old: &TurnRecord, new: &TurnRecord) -> Result<(), CommitError> {
    if old.message_id != new.message_id {
        return Err(message_id_changed(new.number));
    }
    if old.is_finished() && old != new {
        return Err(turn_in_history(id, new.number));
    }
    Ok(())
}

/// The refusal of a write set that rewrites turn `turn` of instance `id`, which is in history.
pub fn turn_in_history(id: &str, turn: impl std::fmt::Display) -> CommitError {
    StoreError::new(format!(
        "turn {turn} of `{id}` is in history and cannot be rewritten"
    ))
    .into()
}

/// The refusal of a write set that gives turn `turn` another message id.
pub fn message_id_changed(turn: impl std::fmt::Display) -> CommitError {
    StoreError::new(format!("turn {turn} changed its message id")).into()
}

/// The message-id index's check of the turn at `index` of `turns` (a write set's): refused with
/// [`CommitError::MessageIdTaken`] when another turn has its message id, either the kept turn
/// `kept` (the number of the kept turn with that id, if the caller looked it up) or an earlier
/// turn of the same write set.
pub fn check_message_id(
    turns: &[TurnRecord],
    index: usize,
    kept: Option<u64>,
) -> Result<(), CommitError> {
    let Some((t, earlier)) = turns.get(..=index).and_then(<[TurnRecord]>::split_last) else {
        return Ok(());
    };
    let taken = kept.is_some_and(|n| n != t.number)
        || earlier
            .iter()
            .any(|o| o.message_id == t.message_id && o.number != t.number);
    if taken {
        return Err(CommitError::MessageIdTaken {
            message_id: t.message_id.clone(),
        });
    }
    Ok(())
}

/// The integers of a store that keeps signed 64-bit columns (SQLite, PostgreSQL), named in its
/// messages.
#[derive(Clone, Copy, Debug)]
pub struct Int64Columns(pub &'static str);

impl Int64Columns {
    /// A stored integer from a `u64`.
    pub fn int(self, n: u64, what: &str) -> Result<i64, StoreError> {
        i64::try_from(n)
            .map_err(|_| StoreError::new(format!("{}: {what} {n} is out of range", self.0)))
    }

    /// A stored integer as a `u64`.
    pub fn uint(self, n: i64, what: &str) -> Result<u64, StoreError> {
        u64::try_from(n)
            .map_err(|_| StoreError::new(format!("{}: stored {what} {n} is negative", self.0)))
    }
}

/// A read cursor, count or `LIMIT` as a stored integer: nothing stored is above `i64::MAX`.
pub fn clamp<N: TryInto<i64>>(n: N) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// Decode one stored record, with the reason when it cannot be. Tolerant of depth: a record
/// nesting past serde_json's default recursion limit, as older versions could write them, is
/// decoded again without it ([`crate::protocol::json::from_slice`]).
pub fn decode<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    crate::protocol::json::from_slice(text.as_bytes()).map_err(|e| e.to_string())
}

/// The error every read of a quarantined instance answers: a stored record of instance `id`
/// (namespace `ns`) cannot be decoded, for `reason`.
pub fn unreadable(ns: &str, id: &str, reason: impl Into<String>) -> StoreError {
    StoreError::Unreadable {
        ns: ns.to_owned(),
        id: id.to_owned(),
        reason: reason.into(),
    }
}

/// Decode a stored run summary of the store `store` (named in the error).
pub fn decode_run(store: &str, body: &str) -> Result<WorkflowRun, StoreError> {
    decode(body)
        .map_err(|e| StoreError::new(format!("{store}: a stored run summary cannot be read: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn nested_text(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn records_past_serde_jsons_default_limit_decode() {
        // 200 levels: serde_json's default decoder refuses this, the record decoder does not.
        let text = nested_text(200);
        assert!(serde_json::from_str::<Value>(&text).is_err());
        let v: Value = decode(&text).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), text);
    }

    #[test]
    fn records_past_the_record_limit_are_refused_without_recursing() {
        let e = decode::<Value>(&nested_text(1_000_000)).unwrap_err();
        assert!(e.contains("1000000 levels") && e.contains("256"), "{e}");
        assert!(decode::<Value>("{").is_err());
        assert!(decode::<Value>("[1] 2").is_err());
    }

    #[test]
    fn integers_name_their_store() {
        let ints = Int64Columns("sqlite");
        assert_eq!(ints.int(7, "revision"), Ok(7));
        let e = ints.int(u64::MAX, "revision").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("sqlite: revision {} is out of range", u64::MAX)
        );
        let e = ints.uint(-1, "count").unwrap_err();
        assert_eq!(e.to_string(), "sqlite: stored count -1 is negative");
        assert_eq!(clamp(u64::MAX), i64::MAX);
        assert_eq!(clamp(5usize), 5);
    }
}
