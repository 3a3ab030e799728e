//! Property tests of the verified codec (`codec::encode_verified`, `encode_verified_eq`):
//! values of every common serde shape survive it unchanged, the encoding is canonical, and what
//! JSON cannot hold (non-finite floats, `Some(None)`, fields skipped on one side) is refused.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turnwise::codec::{
    canonical_bytes, encode_verified, encode_verified_eq, CodecError, JsonCodec,
};

/// `value` survives both checks, decodes equal to itself, and its encoding is canonical: the
/// decoded value encodes to the very same bytes.
fn survives<T>(value: &T) -> Result<Value, TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let (json, back) = encode_verified_eq(&JsonCodec, "value", value)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, value);
    let (again, _) = encode_verified(&JsonCodec, "value", &back)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(canonical_bytes(&json), canonical_bytes(&again));
    Ok(json)
}

/// A float that JSON can hold.
fn finite_f64() -> impl Strategy<Value = f64> {
    prop::num::f64::ANY.prop_filter("finite", |f| f.is_finite())
}

fn non_finite_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-f64::NAN)
    ]
}

fn key() -> impl Strategy<Value = String> {
    // Any text, including keys that need quoting in a path and the empty key.
    prop_oneof!["[a-z_]{1,8}", ".{0,6}"]
}

// ---------------------------------------------------------------------------------------------
// Enums in every serde representation.

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Inner {
    id: u64,
    score: f64,
    note: Option<String>,
}

/// Any `u128` with `exact-numbers`; without it serde_json holds integers only up to 64 bits,
/// so only those (see `integers_beyond_64_bits_are_refused_without_exact_numbers`).
fn wide_u128() -> BoxedStrategy<u128> {
    if cfg!(feature = "exact-numbers") {
        any::<u128>().boxed()
    } else {
        any::<u64>().prop_map(u128::from).boxed()
    }
}

/// Any `i128` with `exact-numbers`, the `i64` range without it.
fn wide_i128() -> BoxedStrategy<i128> {
    if cfg!(feature = "exact-numbers") {
        any::<i128>().boxed()
    } else {
        any::<i64>().prop_map(i128::from).boxed()
    }
}

fn inner() -> impl Strategy<Value = Inner> {
    (any::<u64>(), finite_f64(), any::<Option<String>>()).prop_map(|(id, score, note)| Inner {
        id,
        score,
        note,
    })
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
enum External {
    Unit,
    Newtype(i64),
    Tuple(u8, String),
    Struct { big: u128, inner: Inner },
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type")]
enum Internal {
    Unit,
    Newtype(Inner),
    Struct {
        small: i64,
        ratio: f64,
        tags: Vec<String>,
    },
}

/// serde buffers the content of internally tagged (and untagged) enums in a form without
/// 128-bit integers, so this does not decode; see `a_128_bit_integer_in_a_buffered_enum_is_refused`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type")]
enum InternalWide {
    Struct { wide: u128 },
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "t", content = "c")]
enum Adjacent {
    Unit,
    Newtype(u64),
    Tuple(i32, f64),
    Struct { inner: Inner, flag: bool },
}

/// Variants told apart by their shape, as an untagged enum must be.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
enum Untagged {
    Flag(bool),
    Number(i64),
    Text(String),
    List(Vec<u32>),
    Record { inner: Inner },
}

fn external() -> impl Strategy<Value = External> {
    prop_oneof![
        Just(External::Unit),
        any::<i64>().prop_map(External::Newtype),
        (any::<u8>(), any::<String>()).prop_map(|(a, b)| External::Tuple(a, b)),
        (wide_u128(), inner()).prop_map(|(big, inner)| External::Struct { big, inner }),
    ]
}

fn internal() -> impl Strategy<Value = Internal> {
    prop_oneof![
        Just(Internal::Unit),
        inner().prop_map(Internal::Newtype),
        (
            any::<i64>(),
            finite_f64(),
            prop::collection::vec(any::<String>(), 0..4)
        )
            .prop_map(|(small, ratio, tags)| Internal::Struct { small, ratio, tags }),
    ]
}

fn adjacent() -> impl Strategy<Value = Adjacent> {
    prop_oneof![
        Just(Adjacent::Unit),
        any::<u64>().prop_map(Adjacent::Newtype),
        (any::<i32>(), finite_f64()).prop_map(|(a, b)| Adjacent::Tuple(a, b)),
        (inner(), any::<bool>()).prop_map(|(inner, flag)| Adjacent::Struct { inner, flag }),
    ]
}

fn untagged() -> impl Strategy<Value = Untagged> {
    prop_oneof![
        any::<bool>().prop_map(Untagged::Flag),
        any::<i64>().prop_map(Untagged::Number),
        any::<String>().prop_map(Untagged::Text),
        prop::collection::vec(any::<u32>(), 0..5).prop_map(Untagged::List),
        inner().prop_map(|inner| Untagged::Record { inner }),
    ]
}

// ---------------------------------------------------------------------------------------------
// Optional and skipped fields.

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Sparse {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    maybe: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    items: Vec<i16>,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    label: String,
    #[serde(default)]
    count: u64,
    nested: Option<Option<Inner>>,
}

fn sparse() -> impl Strategy<Value = Sparse> {
    (
        any::<Option<u32>>(),
        prop::collection::vec(any::<i16>(), 0..3),
        "[a-z]{0,3}",
        any::<u64>(),
        // `Some(None)` has no JSON of its own; see `some_none_is_refused_by_the_eq_check`.
        prop::option::of(inner().prop_map(Some)),
    )
        .prop_map(|(maybe, items, label, count, nested)| Sparse {
            maybe,
            items,
            label,
            count,
            nested,
        })
}

/// A field skipped when empty but required on the way back: it does not survive when empty.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct OneSided {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    items: Vec<u8>,
}

/// A field never serialized: the value comes back with the default.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Forgetful {
    kept: u8,
    #[serde(skip_serializing, default)]
    lost: u8,
}

/// A map that writes its entries in the order they were inserted, as an `IndexMap` or
/// serde_json's own `Map` (under its `preserve_order` feature) do.
#[derive(Clone, Debug, PartialEq)]
struct Ordered(Vec<(String, f64)>);

impl Serialize for Ordered {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// Ordered maps at several depths.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Nest {
    top: Ordered,
    list: Vec<Ordered>,
    inner: Option<Box<Nest>>,
}

impl Nest {
    fn of(map: &Ordered) -> Self {
        Nest {
            top: map.clone(),
            list: vec![map.clone(), map.clone()],
            inner: Some(Box::new(Nest {
                top: map.clone(),
                list: vec![],
                inner: None,
            })),
        }
    }
}

/// The text a store writes for an encoded value: serde_json's (the stores write their records,
/// which hold the value, with `serde_json::to_string`).
fn stored(value: &Value) -> String {
    serde_json::to_string(value).unwrap()
}

proptest! {
    #[test]
    fn btree_maps_round_trip(m in prop::collection::btree_map(key(), any::<i64>(), 0..8)) {
        survives(&m)?;
    }

    #[test]
    fn hash_maps_round_trip(m in prop::collection::hash_map(key(), finite_f64(), 0..8)) {
        survives(&m)?;
    }

    #[test]
    fn maps_are_stored_as_the_same_bytes_in_any_insertion_order(
        entries in prop::collection::vec((key(), finite_f64()), 0..8),
    ) {
        let unique: Vec<(String, f64)> = entries.into_iter().collect::<BTreeMap<_, _>>().into_iter().collect();
        let forward = Ordered(unique.clone());
        let backward = Ordered(unique.iter().rev().cloned().collect());
        // The inputs really write their entries in different orders.
        if unique.len() > 1 {
            prop_assert_ne!(serde_json::to_string(&forward).unwrap(), serde_json::to_string(&backward).unwrap());
        }
        // Maps in a struct's field, in a list and one struct deeper. Whatever order the
        // entries (and the struct's fields) are written in, what is stored is the same text:
        // the canonical one, keys sorted at every level.
        let (a, _) = encode_verified(&JsonCodec, "forward", &Nest::of(&forward))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (b, _) = encode_verified(&JsonCodec, "backward", &Nest::of(&backward))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let stored_a = stored(&a);
        prop_assert_eq!(&stored_a, &stored(&b));
        prop_assert_eq!(stored_a, String::from_utf8(canonical_bytes(&a)).unwrap());

        // Hash maps iterate in their own random order each.
        let forward: HashMap<String, f64> = unique.iter().cloned().collect();
        let backward: HashMap<String, f64> = unique.iter().rev().cloned().collect();
        let (a, _) = encode_verified(&JsonCodec, "forward", &forward)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (b, _) = encode_verified(&JsonCodec, "backward", &backward)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(stored(&a), stored(&b));
    }

    #[test]
    fn maps_with_non_string_keys_round_trip(m in prop::collection::btree_map(any::<i32>(), any::<bool>(), 0..8)) {
        survives(&m)?;
    }

    #[test]
    fn finite_floats_round_trip_bit_for_bit(f in finite_f64(), g in prop::num::f32::ANY.prop_filter("finite", |g| g.is_finite())) {
        let (_, back) = encode_verified(&JsonCodec, "f", &f).unwrap();
        prop_assert_eq!(back.to_bits(), f.to_bits());
        let (_, back) = encode_verified(&JsonCodec, "g", &g).unwrap();
        prop_assert_eq!(back.to_bits(), g.to_bits());
        survives(&vec![f, -f, f / 3.0])?;
    }

    #[test]
    fn large_integers_round_trip(a in any::<u64>(), b in any::<i64>(), c in wide_u128(), d in wide_i128()) {
        let json = survives(&(a, b, c, d))?;
        // Written as exact integers, never through a float.
        prop_assert_eq!(json[2].to_string(), c.to_string());
        prop_assert_eq!(json[3].to_string(), d.to_string());
    }

    #[test]
    fn externally_tagged_enums_round_trip(v in external()) {
        survives(&v)?;
    }

    #[test]
    fn internally_tagged_enums_round_trip(v in internal()) {
        let json = survives(&v)?;
        prop_assert!(json.get("type").is_some_and(Value::is_string), "{}", json);
    }

    #[test]
    fn adjacently_tagged_enums_round_trip(v in adjacent()) {
        let json = survives(&v)?;
        prop_assert!(json.get("t").is_some_and(Value::is_string), "{}", json);
    }

    #[test]
    fn untagged_enums_round_trip(v in untagged()) {
        survives(&v)?;
    }

    #[test]
    fn options_round_trip(a in any::<Option<u64>>(), b in prop::option::of(finite_f64()), c in prop::option::of(external())) {
        survives(&(a, b, c))?;
    }

    #[test]
    fn skipped_and_defaulted_fields_round_trip(v in sparse()) {
        let json = survives(&v)?;
        prop_assert_eq!(json.get("maybe").is_some(), v.maybe.is_some());
        prop_assert_eq!(json.get("items").is_some(), !v.items.is_empty());
    }

    #[test]
    fn a_field_skipped_on_one_side_only_is_refused_when_skipped(items in prop::collection::vec(any::<u8>(), 0..3)) {
        let r = encode_verified(&JsonCodec, "step `one`", &OneSided { items: items.clone() });
        if items.is_empty() {
            let err = r.unwrap_err();
            prop_assert!(matches!(err, CodecError::Decode { .. }), "{:?}", err);
            prop_assert!(err.to_string().starts_with("step `one`:"), "{}", err);
        } else {
            prop_assert!(r.is_ok());
        }
    }

    #[test]
    fn a_value_lost_by_skip_serializing_is_refused_by_the_eq_check(kept in any::<u8>(), lost in 1u8..) {
        let v = Forgetful { kept, lost };
        // The JSON round-trips (the plain check passes), but the value does not come back.
        prop_assert!(encode_verified(&JsonCodec, "v", &v).is_ok());
        let err = encode_verified_eq(&JsonCodec, "v", &v).unwrap_err();
        prop_assert!(matches!(err, CodecError::RoundTrip { .. }), "{:?}", err);
    }

    #[test]
    fn non_finite_floats_are_refused_with_their_path(
        mut values in prop::collection::vec(finite_f64(), 1..6),
        at in any::<prop::sample::Index>(),
        bad in non_finite_f64(),
        name in "[a-z]{1,6}",
    ) {
        let i = at.index(values.len());
        values[i] = bad;
        let err = encode_verified(&JsonCodec, "step `floats`", &values).unwrap_err();
        prop_assert!(matches!(err, CodecError::Encode { .. }), "{:?}", err);
        let text = err.to_string();
        prop_assert!(text.starts_with("step `floats`:"), "{}", text);
        prop_assert!(text.contains(&format!("at $[{i}]")), "{}", text);

        // Hidden in an option, a map, a struct or an enum, it is refused all the same.
        prop_assert!(encode_verified(&JsonCodec, "o", &Some(bad)).is_err());
        let map = BTreeMap::from([(name.clone(), bad)]);
        let text = encode_verified(&JsonCodec, "m", &map).unwrap_err().to_string();
        prop_assert!(text.contains(&format!("at $.{name}")), "{}", text);
        let inner = Inner { id: 1, score: bad, note: None };
        let text = encode_verified(&JsonCodec, "s", &Adjacent::Struct { inner, flag: true }).unwrap_err().to_string();
        prop_assert!(text.contains("at $.c.inner.score"), "{}", text);
        prop_assert!(encode_verified(&JsonCodec, "f32", &(bad as f32)).is_err());
    }
}

#[test]
fn integer_extremes_round_trip() {
    survives(&(u64::MAX, i64::MIN, i64::MAX)).unwrap();
    #[cfg(feature = "exact-numbers")]
    survives(&(u128::MAX, i128::MIN)).unwrap();
    survives(&(f64::MAX, f64::MIN, f64::MIN_POSITIVE, f64::EPSILON, -0.0f64)).unwrap();
}

#[cfg(not(feature = "exact-numbers"))]
#[test]
fn integers_beyond_64_bits_are_refused_without_exact_numbers() {
    // 128-bit integers that fit in 64 bits are fine; wider ones are refused where they are
    // produced, by name, rather than rounded.
    survives(&(u128::from(u64::MAX), i128::from(i64::MIN))).unwrap();
    for (what, err) in [
        (
            "u128",
            encode_verified(&JsonCodec, "step `wide`", &u128::MAX).unwrap_err(),
        ),
        (
            "i128",
            encode_verified(&JsonCodec, "step `wide`", &i128::MIN).unwrap_err(),
        ),
    ] {
        assert!(matches!(err, CodecError::Encode { .. }), "{what}: {err:?}");
        assert!(
            err.to_string()
                .starts_with("step `wide`: cannot be encoded"),
            "{what}: {err}"
        );
    }
}

#[test]
fn some_none_is_refused_by_the_eq_check() {
    // `Some(None)` and `None` are both `null`: the JSON round-trips, the value does not.
    let v: Option<Option<u8>> = Some(None);
    let (json, back) = encode_verified(&JsonCodec, "v", &v).unwrap();
    assert_eq!((json, back), (Value::Null, None));
    let err = encode_verified_eq(&JsonCodec, "v", &v).unwrap_err();
    assert!(
        matches!(err, CodecError::RoundTrip { ref path, .. } if path == "$"),
        "{err:?}"
    );
}

#[test]
fn a_128_bit_integer_in_a_buffered_enum_is_refused_where_it_is_produced() {
    // A serde limitation, caught by the verification instead of on the next replay.
    let err =
        encode_verified(&JsonCodec, "step `wide`", &InternalWide::Struct { wide: 1 }).unwrap_err();
    assert!(matches!(err, CodecError::Decode { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("step `wide`: cannot be decoded"),
        "{err}"
    );
}
