//! Codecs: how typed values cross into the store, verified on every encode.
//!
//! Every value a workflow hands to turnwise (a step output, the state, a reply, a message, a
//! signal) is encoded to JSON by a [`Codec`] and immediately verified: the encoded JSON must
//! decode back into the type and re-encode to the very same canonical bytes. A value that does
//! not survive its own codec (a `NaN`, a map with non-string keys that collide, a lossy custom
//! `Serialize`, a skipped field that does not come back) fails *where it is produced*, naming
//! the value and the JSON path that changed, instead of failing one crash later on replay.
//!
//! The default codec, [`JsonCodec`], is canonical JSON: object keys sorted, no NaN or
//! infinities, the same value always the same bytes.

use std::fmt::Write as _;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Why a value could not cross its codec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The value could not be encoded at all.
    #[error("{what}: cannot be encoded: {message}")]
    Encode {
        /// The value, e.g. ``step `add` `` or `state`.
        what: String,
        /// The serializer's message.
        message: String,
    },
    /// The JSON could not be decoded into the expected type.
    #[error("{what}: cannot be decoded as {type_name}: {message}")]
    Decode {
        /// The value.
        what: String,
        /// The Rust type it was decoded into.
        type_name: &'static str,
        /// The deserializer's message.
        message: String,
    },
    /// The value did not survive a round trip: decoding its encoding and encoding again gave
    /// different JSON, or a value unequal to the original.
    #[error(
        "{what}: the value does not survive its codec at {path}: encoded as {encoded}, but decodes \
         and re-encodes as {reencoded}; make the type round-trip (e.g. avoid NaN/infinite floats, \
         lossy custom Serialize impls, or fields skipped on one side only)"
    )]
    RoundTrip {
        /// The value.
        what: String,
        /// The first JSON path that differs, e.g. `$.items[2].price`.
        path: String,
        /// The encoded JSON at that path.
        encoded: String,
        /// The re-encoded JSON at that path.
        reencoded: String,
    },
}

/// Turns typed values into JSON and back.
///
/// Implement it to plug in another representation of domain types; the runtime verifies every
/// encode through [`encode_verified`], whatever the codec.
pub trait Codec: Send + Sync + 'static {
    /// Encode a value to JSON.
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Value, String>;
    /// Decode JSON into a value.
    fn decode<T: DeserializeOwned>(&self, value: &Value) -> Result<T, String>;
}

/// An equality function, used to check that a decoded value equals the original.
pub type EqFn<T> = fn(&T, &T) -> bool;

/// Canonical JSON through serde: sorted keys, no NaN or infinities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonCodec;

impl Codec for JsonCodec {
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Value, String> {
        // serde_json writes a non-finite float as `null`: `Some(f64::NAN)` would come back as
        // `None` and a NaN field would fail to decode without a path. Refuse it by path first.
        if let Some(path) = finite::non_finite_path(value) {
            return Err(format!(
                "non-finite number at {path}; JSON has no NaN or infinity"
            ));
        }
        let mut json = serde_json::to_value(value).map_err(|e| e.to_string())?;
        // Keys sorted at every level even when serde_json's `preserve_order` feature is on
        // (any crate of the build can turn it on): then its maps keep the order in which a
        // value wrote its entries, and a `HashMap` would be stored differently each time.
        // Without that feature, maps are always sorted and this does nothing.
        json.sort_all_objects();
        Ok(json)
    }

    fn decode<T: DeserializeOwned>(&self, value: &Value) -> Result<T, String> {
        T::deserialize(value).map_err(|e| e.to_string())
    }
}

/// The canonical bytes of a JSON value: compact, object keys sorted at every level.
pub fn canonical_bytes(value: &Value) -> Vec<u8> {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out.into_bytes()
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Whether two values have the same [`canonical_bytes`], compared in place: objects as sets of
/// keys, arrays in order, numbers as they print (so `-0.0` is not `0.0`, nor `1.0` `1`).
/// The round-trip check runs on every step, so it allocates nothing.
fn same_canonical(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_canonical(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_canonical(v, w))
        }
        (Value::Number(x), Value::Number(y)) => {
            // Equal numbers print alike, except a float's sign of zero.
            x == y
                && match (x.is_f64(), x.as_f64(), y.as_f64()) {
                    (true, Some(f), Some(g)) => f.to_bits() == g.to_bits(),
                    _ => true,
                }
        }
        _ => a == b,
    }
}

/// Encode `value` with `codec` and verify the round trip: the JSON must decode back into `T`
/// and re-encode to the same canonical bytes. `what` names the value in errors (for example
/// ``step `add` ``).
///
/// Returns the encoded JSON and the decoded value, which is what callers hand back to user
/// code, so a first run sees exactly what a replay will see.
///
/// ```
/// use turnwise::codec::{encode_verified, JsonCodec};
///
/// let (json, back): (_, Vec<u32>) = encode_verified(&JsonCodec, "step `pages`", &vec![1, 2]).unwrap();
/// assert_eq!(json, serde_json::json!([1, 2]));
/// assert_eq!(back, vec![1, 2]);
///
/// let err = encode_verified::<_, f64>(&JsonCodec, "step `price`", &f64::NAN).unwrap_err();
/// assert!(err.to_string().contains("step `price`"), "{err}");
/// ```
pub fn encode_verified<C: Codec, T: Serialize + DeserializeOwned>(
    codec: &C,
    what: &str,
    value: &T,
) -> Result<(Value, T), CodecError> {
    let encoded = codec.encode(value).map_err(|message| CodecError::Encode {
        what: what.to_owned(),
        message,
    })?;
    check_floats(what, &encoded)?;
    let decoded: T = decode(codec, what, &encoded)?;
    let again = codec
        .encode(&decoded)
        .map_err(|message| CodecError::Encode {
            what: what.to_owned(),
            message,
        })?;
    if !same_canonical(&encoded, &again) {
        let (path, a, b) = first_difference(&encoded, &again);
        return Err(CodecError::RoundTrip {
            what: what.to_owned(),
            path,
            encoded: a,
            reencoded: b,
        });
    }
    Ok((encoded, decoded))
}

/// Like [`encode_verified`], and also check that the decoded value equals the original.
pub fn encode_verified_eq<C: Codec, T: Serialize + DeserializeOwned + PartialEq>(
    codec: &C,
    what: &str,
    value: &T,
) -> Result<(Value, T), CodecError> {
    encode_checked(codec, what, value, Some(<T as PartialEq>::eq))
}

/// Like [`encode_verified`], and also check the decoded value against the original with `eq`
/// when one is given (a type's `PartialEq`).
pub fn encode_checked<C: Codec, T: Serialize + DeserializeOwned>(
    codec: &C,
    what: &str,
    value: &T,
    eq: Option<EqFn<T>>,
) -> Result<(Value, T), CodecError> {
    let (encoded, decoded) = encode_verified(codec, what, value)?;
    if eq.is_some_and(|eq| !eq(&decoded, value)) {
        return Err(CodecError::RoundTrip {
            what: what.to_owned(),
            path: "$".into(),
            encoded: excerpt(&encoded),
            reencoded: "a value that is not equal to the original (PartialEq)".into(),
        });
    }
    Ok((encoded, decoded))
}

/// Decode JSON into `T`, naming the value in the error.
pub fn decode<C: Codec, T: DeserializeOwned>(
    codec: &C,
    what: &str,
    value: &Value,
) -> Result<T, CodecError> {
    codec.decode(value).map_err(|message| CodecError::Decode {
        what: what.to_owned(),
        type_name: std::any::type_name::<T>(),
        message,
    })
}

/// The kind of a decoding failure, in words that quote no value: for a missing field, its
/// name (the decoding type's own); otherwise only the kind (`unknown variant`, `invalid type`,
/// ..). The decoder's message itself can quote a value (`invalid type: string "abc"`), so it is
/// only looked at, never repeated.
pub(crate) fn failure_kind(e: &CodecError) -> String {
    let CodecError::Decode { message, .. } = e else {
        return "not a value of the expected type".to_owned();
    };
    if let Some(rest) = message.strip_prefix("missing field `") {
        if let Some((field, _)) = rest.split_once('`') {
            let plain = !field.is_empty()
                && field
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if plain {
                return format!("missing field `{field}`");
            }
        }
        return "a missing field".to_owned();
    }
    const KINDS: [(&str, &str); 6] = [
        ("unknown variant", "an unknown variant"),
        ("unknown field", "an unknown field"),
        ("invalid type", "a value of another type"),
        ("invalid value", "an invalid value"),
        ("invalid length", "a sequence of another length"),
        ("duplicate field", "a duplicate field"),
    ];
    KINDS
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or_else(
            || "not a value of the expected type".to_owned(),
            |(_, kind)| (*kind).to_owned(),
        )
}

/// serde_json turns non-finite floats into `null` silently; with arbitrary precision a number
/// is kept as its text, so a `NaN` or `inf` that slipped through a custom serializer shows up
/// here. Either way, refuse it by name.
fn check_floats(what: &str, v: &Value) -> Result<(), CodecError> {
    /// Whether some number might be non-finite (cheap, no allocation): only a number that is
    /// not an integer and does not read as a finite `f64` is looked at by its text below.
    fn suspect(v: &Value) -> bool {
        match v {
            Value::Number(n) => {
                n.as_i64().is_none()
                    && n.as_u64().is_none()
                    && !n.as_f64().is_some_and(f64::is_finite)
            }
            Value::Array(items) => items.iter().any(suspect),
            Value::Object(map) => map.values().any(suspect),
            _ => false,
        }
    }
    if !suspect(v) {
        return Ok(());
    }
    fn walk(v: &Value, path: &mut String) -> Option<String> {
        match v {
            Value::Number(n) => {
                let s = n.to_string();
                (s.contains("NaN") || s.contains("inf")).then(|| path.clone())
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, x)| {
                let len = path.len();
                let _ = write!(path, "[{i}]");
                let r = walk(x, path);
                path.truncate(len);
                r
            }),
            Value::Object(map) => map.iter().find_map(|(k, x)| {
                let len = path.len();
                push_key(path, k);
                let r = walk(x, path);
                path.truncate(len);
                r
            }),
            _ => None,
        }
    }
    match walk(v, &mut "$".to_owned()) {
        Some(path) => Err(CodecError::Encode {
            what: what.to_owned(),
            message: format!("non-finite number at {path}; JSON has no NaN or infinity"),
        }),
        None => Ok(()),
    }
}

/// Finds the first non-finite float a value serializes, by walking it through serde.
mod finite {
    use std::fmt::Write as _;

    use serde::ser::{self, Serialize};

    use super::push_key;

    /// The JSON path of the first NaN or infinite float in `value`, if any.
    pub(super) fn non_finite_path<T: Serialize + ?Sized>(value: &T) -> Option<String> {
        let mut path = "$".to_owned();
        match value.serialize(Walk { path: &mut path }) {
            Err(Stop::Found) => Some(path),
            _ => None,
        }
    }

    /// Why the walk stopped: a non-finite float (the path is left pointing at it), or an
    /// error of the value's own `Serialize`, which the real encode reports.
    #[derive(Debug)]
    enum Stop {
        Found,
        Other,
    }

    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("stopped")
        }
    }

    impl std::error::Error for Stop {}

    impl ser::Error for Stop {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Stop::Other
        }
    }

    struct Walk<'p> {
        path: &'p mut String,
    }

    impl Walk<'_> {
        /// Walk `value` one level down, under `segment`; the path is restored unless found.
        fn child<T: Serialize + ?Sized>(
            &mut self,
            segment: impl FnOnce(&mut String),
            value: &T,
        ) -> Result<(), Stop> {
            let len = self.path.len();
            segment(self.path);
            value.serialize(Walk { path: self.path })?;
            self.path.truncate(len);
            Ok(())
        }

        fn float(self, finite: bool) -> Result<(), Stop> {
            if finite {
                Ok(())
            } else {
                Err(Stop::Found)
            }
        }
    }

    /// A map or struct being walked; `key` is the text of the pending map key.
    struct Compound<'p> {
        walk: Walk<'p>,
        index: usize,
        key: Option<String>,
    }

    impl<'p> Compound<'p> {
        fn new(walk: Walk<'p>) -> Self {
            Self {
                walk,
                index: 0,
                key: None,
            }
        }

        fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
            let i = self.index;
            self.index += 1;
            self.walk.child(
                |p| {
                    let _ = write!(p, "[{i}]");
                },
                value,
            )
        }

        fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Stop> {
            self.walk.child(|p| push_key(p, key), value)
        }
    }

    impl<'p> ser::Serializer for Walk<'p> {
        type Ok = ();
        type Error = Stop;
        type SerializeSeq = Compound<'p>;
        type SerializeTuple = Compound<'p>;
        type SerializeTupleStruct = Compound<'p>;
        type SerializeTupleVariant = Compound<'p>;
        type SerializeMap = Compound<'p>;
        type SerializeStruct = Compound<'p>;
        type SerializeStructVariant = Compound<'p>;

        fn serialize_f32(self, v: f32) -> Result<(), Stop> {
            self.float(v.is_finite())
        }
        fn serialize_f64(self, v: f64) -> Result<(), Stop> {
            self.float(v.is_finite())
        }
        fn serialize_bool(self, _: bool) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_i8(self, _: i8) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_i16(self, _: i16) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_i32(self, _: i32) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_i64(self, _: i64) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_i128(self, _: i128) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_u8(self, _: u8) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_u16(self, _: u16) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_u32(self, _: u32) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_u64(self, _: u64) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_u128(self, _: u128) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_char(self, _: char) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_str(self, _: &str) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_bytes(self, _: &[u8]) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_none(self) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
            value.serialize(self)
        }
        fn serialize_unit(self) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_unit_struct(self, _: &'static str) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_unit_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
        ) -> Result<(), Stop> {
            Ok(())
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            value: &T,
        ) -> Result<(), Stop> {
            value.serialize(self)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            mut self,
            _: &'static str,
            _: u32,
            variant: &'static str,
            value: &T,
        ) -> Result<(), Stop> {
            // JSON writes it as `{"Variant": value}`.
            self.child(|p| push_key(p, variant), value)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'p>, Stop> {
            Ok(Compound::new(self))
        }
        fn serialize_tuple(self, _: usize) -> Result<Compound<'p>, Stop> {
            Ok(Compound::new(self))
        }
        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound<'p>, Stop> {
            Ok(Compound::new(self))
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            variant: &'static str,
            _: usize,
        ) -> Result<Compound<'p>, Stop> {
            push_key(self.path, variant);
            Ok(Compound::new(self))
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Compound<'p>, Stop> {
            Ok(Compound::new(self))
        }
        fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'p>, Stop> {
            Ok(Compound::new(self))
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            variant: &'static str,
            _: usize,
        ) -> Result<Compound<'p>, Stop> {
            push_key(self.path, variant);
            Ok(Compound::new(self))
        }
    }

    impl ser::SerializeSeq for Compound<'_> {
        type Ok = ();
        type Error = Stop;
        fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
            self.element(value)
        }
        fn end(self) -> Result<(), Stop> {
            Ok(())
        }
    }

    impl ser::SerializeTuple for Compound<'_> {
        type Ok = ();
        type Error = Stop;
        fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
            self.element(value)
        }
        fn end(self) -> Result<(), Stop> {
            Ok(())
        }
    }

    impl ser::SerializeTupleStruct for Compound<'_> {
        type Ok = ();
        type Error = Stop;
        fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
            self.element(value)
        }
        fn end(self) -> Result<(), Stop> {
            Ok(())
        }
    }

    impl ser::SerializeTupleVariant for Compound<'_> {
        type Ok = ();
        type Error = Stop;
        fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
            self.element(value)
        }
        fn end(self) -> Result<(), Stop> {
            Ok(())
        }
    }

    impl ser::SerializeMap for Compound<'_> {
        type Ok = ();
        type Error = Stop;
        fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Stop> {
            // JSON object keys are strings; serde_json stringifies numbers and the like.
            self.key = Some(match serde_json::to_value(key) {
                Ok(serde_json::Value::String(s)) => s,
                Ok(other) => other.to_string(),
                Err(_) => return Err(Stop::Other),
            });
            Ok(())
        }
        fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
            let key = self.key.take().unwrap_or_default();
            self.field(&key, value)
        }
        fn end(self) -> Result<(), Stop> {
            Ok(())
        }
    }

    impl ser::SerializeStruct for Compound<'_> {
        type Ok = ();
        type Error = Stop;
        fn serialize_field<T: Serialize + ?Sized>(
            &mut self,
            key: &'static str,
            value: &T,
        ) -> Result<(), Stop> {
            self.field(key, value)
        }
        fn end(self) -> Result<(), Stop> {
            Ok(())
        }
    }

    impl ser::SerializeStructVariant for Compound<'_> {
        type Ok = ();
        type Error = Stop;
        fn serialize_field<T: Serialize + ?Sized>(
            &mut self,
            key: &'static str,
            value: &T,
        ) -> Result<(), Stop> {
            self.field(key, value)
        }
        fn end(self) -> Result<(), Stop> {
            Ok(())
        }
    }
}

fn push_key(path: &mut String, key: &str) {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        path.push('.');
        path.push_str(key);
    } else {
        let _ = write!(path, "[{}]", Value::String(key.to_owned()));
    }
}

fn excerpt(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 80 {
        return s;
    }
    let mut cut: String = s.chars().take(77).collect();
    cut.push_str("...");
    cut
}

/// The first JSON path at which `a` and `b` differ, with excerpts of both sides there.
pub fn first_difference(a: &Value, b: &Value) -> (String, String, String) {
    fn walk(a: &Value, b: &Value, path: &mut String) -> Option<(String, String, String)> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                keys.into_iter().find_map(|k| {
                    let len = path.len();
                    push_key(path, k);
                    let r = match (x.get(k), y.get(k)) {
                        (Some(p), Some(q)) => walk(p, q, path),
                        (p, q) => Some((
                            path.clone(),
                            p.map_or("(absent)".into(), excerpt),
                            q.map_or("(absent)".into(), excerpt),
                        )),
                    };
                    path.truncate(len);
                    r
                })
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                x.iter().zip(y).enumerate().find_map(|(i, (p, q))| {
                    let len = path.len();
                    let _ = write!(path, "[{i}]");
                    let r = walk(p, q, path);
                    path.truncate(len);
                    r
                })
            }
            _ if canonical_bytes(a) == canonical_bytes(b) => None,
            _ => Some((path.clone(), excerpt(a), excerpt(b))),
        }
    }
    walk(a, b, &mut "$".to_owned()).unwrap_or_else(|| ("$".into(), excerpt(a), excerpt(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// The kind of a decoding failure names a missing field but never repeats a value the
    /// decoder's message quotes.
    #[test]
    fn failure_kind_names_the_kind_and_no_value() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Owner {
            n: u64,
            owner: String,
        }
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        enum Msg {
            Pay(u64),
        }
        let owner =
            |v: Value| failure_kind(&decode::<_, Owner>(&JsonCodec, "state", &v).unwrap_err());
        assert_eq!(owner(json!({"n": 31337})), "missing field `owner`");
        assert_eq!(
            owner(json!({"n": "s3cret", "owner": "x"})),
            "a value of another type"
        );
        let msg = failure_kind(
            &decode::<_, Msg>(&JsonCodec, "m", &json!({"Refund": 31337})).unwrap_err(),
        );
        assert_eq!(msg, "an unknown variant");
    }

    #[test]
    fn canonical_sorts_keys_at_every_level() {
        let v = json!({"b": 1, "a": {"d": [1, {"z": 0, "y": 1}], "c": null}});
        assert_eq!(
            String::from_utf8(canonical_bytes(&v)).unwrap(),
            r#"{"a":{"c":null,"d":[1,{"y":1,"z":0}]},"b":1}"#
        );
    }

    #[test]
    fn difference_names_the_path() {
        let a = json!({"items": [{"price": 1}, {"price": 2}, {"price": 3}]});
        let b = json!({"items": [{"price": 1}, {"price": 2}, {"price": 4}]});
        assert_eq!(
            first_difference(&a, &b),
            ("$.items[2].price".into(), "3".into(), "4".into())
        );
        let c = json!({"odd key": 1});
        assert_eq!(first_difference(&c, &json!({})).0, r#"$["odd key"]"#);
    }

    /// A type whose Deserialize does not invert its Serialize.
    #[derive(Debug, PartialEq)]
    struct Lossy(u64);
    impl Serialize for Lossy {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u64(self.0)
        }
    }
    impl<'de> Deserialize<'de> for Lossy {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            Ok(Lossy(u64::deserialize(d)? + 1))
        }
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Cart {
        items: Vec<Item>,
    }
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Item {
        price: Lossy,
    }

    #[test]
    fn lossy_value_fails_with_its_path() {
        let cart = Cart {
            items: vec![
                Item { price: Lossy(2) },
                Item { price: Lossy(4) },
                Item { price: Lossy(6) },
            ],
        };
        let err = encode_verified(&JsonCodec, "step `cart`", &cart).unwrap_err();
        match err {
            CodecError::RoundTrip { path, .. } => assert_eq!(path, "$.items[0].price"),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn nan_is_refused_by_name() {
        let err = encode_verified(&JsonCodec, "state", &json!(null))
            .map(|_| ())
            .and_then(|()| {
                encode_verified::<_, Vec<f64>>(&JsonCodec, "state", &vec![1.0, f64::INFINITY])
                    .map(|_| ())
            });
        let msg = err.unwrap_err().to_string();
        assert!(msg.starts_with("state:"), "{msg}");
    }

    #[test]
    fn the_in_place_comparison_agrees_with_the_canonical_bytes() {
        let values = [
            json!(null),
            json!(1),
            json!(1.0),
            json!(-0.0),
            json!(0.0),
            json!(-1),
            json!(u64::MAX),
            json!(1.5e300),
            json!("1"),
            json!([1, 2]),
            json!([2, 1]),
            json!([1, 2, 3]),
            json!({"a": 1, "b": [true, null]}),
            json!({"b": [true, null], "a": 1}),
            json!({"a": 1, "b": [true, false]}),
            json!({"a": 1}),
            json!({"a": 1, "c": 2}),
            json!({"a": {"x": 1.0}}),
            json!({"a": {"x": 1}}),
        ];
        for a in &values {
            for b in &values {
                assert_eq!(
                    same_canonical(a, b),
                    canonical_bytes(a) == canonical_bytes(b),
                    "{a} against {b}"
                );
            }
        }
    }
}
