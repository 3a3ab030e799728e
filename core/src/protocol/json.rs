//! Decoding stored records and the `Http` backend's answers so that a user value the engine
//! accepted can always be read back.
//!
//! Records wrap user values (a turn holds its steps, a step its output, …), so a stored record
//! nests a few levels deeper than the deepest value in it. The engine refuses user values that
//! nest more than [`MAX_DEPTH`](crate::protocol::validate::MAX_DEPTH) levels, which keeps new
//! records far inside serde_json's default recursion limit of 128; but records written before that limit
//! existed, by a Rust caller of the embedded engine or by an older server, may nest deeper. So
//! a record that serde_json refuses is measured by an iterative scan and decoded again without
//! the limit: a record up to [`MAX_RECORD_DEPTH`] levels decodes (the recursion this costs is
//! bounded by that depth), a deeper one is refused as unreadable without recursing into it.

use serde::de::DeserializeOwned;

/// The deepest stored record that is decoded: far above what the engine writes today (a user
/// value of at most 64 levels in a record of at most 8 more), and above what older versions
/// could write over HTTP (a request body of at most 128 levels). The recursion of decoding a
/// record this deep stays within a few hundred KiB of stack in a debug build.
pub const MAX_RECORD_DEPTH: usize = 256;

/// Parse JSON as serde_json does, and if that fails on a text nesting 128 levels or more
/// (serde_json's default recursion limit), parse it again without the limit when it nests at
/// most [`MAX_RECORD_DEPTH`] levels; deeper, refuse it without recursing. The common case is
/// one ordinary parse: the depth is only measured after a parse failed. Used for stored records
/// and for the `Http` backend's answers, so what an older version stored still reads.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    let first = match serde_json::from_slice(bytes) {
        Err(e) => e,
        parsed => return parsed,
    };
    let depth = crate::protocol::validate::text_depth(bytes);
    if depth < 128 {
        return Err(first);
    }
    if depth > MAX_RECORD_DEPTH {
        return Err(serde::de::Error::custom(format_args!(
            "it nests {depth} levels deep, more than the {MAX_RECORD_DEPTH} a stored record may"
        )));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}
