//! Directional compatibility of JSON Schemas: can every value one version of a type wrote be
//! decoded by another version's code?
//!
//! [`reads`] compares the schema of the type that *reads* (the new code) with the schema of the
//! type that *wrote* (the values saved before) and answers [`SchemaCompat::Reads`],
//! [`SchemaCompat::Breaks`] with where and why, or [`SchemaCompat::Unknown`] naming the keyword
//! a person has to judge. It is exact for what `schemars` 1.x emits for serde types (draft
//! 2020-12) and conservative elsewhere: it answers `Reads` only when it can tell.
//!
//! ```
//! use serde_json::json;
//! use turnwise_manifest::schema::{reads, SchemaCompat};
//!
//! let written = json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]});
//! let read = json!({
//!     "type": "object",
//!     "properties": {"id": {"type": "integer"}, "qty": {"type": "integer"}},
//!     "required": ["id", "qty"]
//! });
//! assert_eq!(
//!     reads(&read, &written),
//!     SchemaCompat::Breaks {
//!         at: "/qty".into(),
//!         why: "required property `qty` is missing from values written before".into(),
//!     }
//! );
//! // The other way round, the reader ignores the field it does not know.
//! assert_eq!(reads(&written, &read), SchemaCompat::Reads);
//! ```
//!
//! The rules, in the order they apply:
//!
//! - A `null` schema on either side means "not known" and is not checked. A `true` (or
//!   annotation-only) reader accepts everything; a `false` writer wrote nothing.
//! - Annotations never matter: `$schema`, `$id`, `$anchor`, `$comment`, `$defs`, `definitions`,
//!   `title`, `description`, `default`, `examples`, `deprecated`, `readOnly`, `writeOnly`.
//! - `$ref` (`#`, `#/$defs/..`, `#/definitions/..`, any `#/` pointer) resolves against the
//!   root of its own schema. The writer's `$ref` and `allOf` are merged into one schema; the
//!   reader's are checked one part at a time. A pair of schemas already under comparison is
//!   assumed compatible (coinduction), so recursive types terminate.
//! - The writer's alternatives (`oneOf`/`anyOf` branches, `enum` values, the types of a type
//!   list) are checked one by one: each must be read. The reader's `oneOf`/`anyOf` reads an
//!   alternative when one of its branches does (`oneOf` is read as `anyOf`: the branches
//!   `schemars` emits for serde enums exclude each other). A written variant no reader branch
//!   takes is named: the `const`/`enum` value, the `const` tag property of an internally or
//!   adjacently tagged variant, or the single property of an externally tagged one.
//! - `type`: every written type must be accepted (`integer` is a `number`).
//! - `enum`/`const` in the reader: the written value must be one of them.
//! - Objects: a property the reader requires must be required by the writer; a property both
//!   list is compared; a written property the reader does not list breaks only under
//!   `additionalProperties: false`, else serde ignores it; a map's `additionalProperties`
//!   schema is compared. A writer that lists `properties` or declares a `type`, without
//!   `additionalProperties`, is a serde struct and writes no other property.
//! - Arrays: `items`, `prefixItems` (or draft-07 `items` arrays with `additionalItems`) index by
//!   index, and `minItems`/`maxItems`.
//! - Numbers: the written range (from the integer `format`s such as `uint8`..`uint64`, `int32`,
//!   and `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`) must lie within the
//!   reader's.
//! - Anything else the reader constrains is [`SchemaCompat::Unknown`] unless the writer has the
//!   identical keyword value at the same place: a string's `pattern`, `minLength`,
//!   `maxLength` or `format`, a number `format` other than `double` and the integer formats
//!   (`float` loses precision), `uniqueItems` (a set deduplicates what a list wrote), `not`,
//!   `if`/`then`/`else`, `patternProperties`, `propertyNames`, `dependentRequired`,
//!   `dependentSchemas`, `contains`, `multipleOf`, `minProperties`, `unevaluatedProperties`,
//!   unknown keywords. A malformed schema is `Unknown` too, naming the keyword whose value is
//!   wrong, or `(not a schema)`; so is a comparison past the limits, `(depth limit)` or
//!   `(size limit)`.
//!
//! Locations are JSON Pointers into the value: a property adds `/name`, an array item its
//! index (the items after a tuple's prefix, and every item of a list, are reported at the first
//! index they apply to: `/0` for a list), a map value `/*`.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;

use serde_json::{json, Map, Number, Value};

/// The answer of [`reads`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaCompat {
    /// Every value the writer allows, the reader accepts.
    Reads,
    /// Some value the writer allows is refused by the reader.
    Breaks {
        /// Where, as a JSON Pointer into the value (`"/items/0/qty"`, `""` for the root).
        at: String,
        /// Why, in words a user understands (`"type changed from integer to string"`).
        why: String,
    },
    /// A keyword this check does not model decides it: to be reviewed by a person, never
    /// silently compatible.
    Unknown {
        /// Where, as a JSON Pointer into the value.
        at: String,
        /// The keyword (`pattern`, `not`, `x-custom`, ..).
        keyword: String,
    },
}

/// Whether every JSON value valid under `writer` can be decoded by code whose type has the
/// schema `reader`. See the [module documentation](self) for the rules.
#[must_use]
pub fn reads(reader: &Value, writer: &Value) -> SchemaCompat {
    if reader.is_null() || writer.is_null() {
        return SchemaCompat::Reads;
    }
    if nesting(reader) > MAX_NESTING || nesting(writer) > MAX_NESTING {
        return unknown("", "(depth limit)");
    }
    match Checker::new(reader, writer).check(reader, writer, "") {
        Ok(()) => SchemaCompat::Reads,
        Err(answer) => answer,
    }
}

/// `Ok` when the reader reads; else the [`SchemaCompat::Breaks`] or [`SchemaCompat::Unknown`].
type Outcome = Result<(), SchemaCompat>;

/// Keywords that never change which values are valid.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Keywords this check models (the others in a reader are [`SchemaCompat::Unknown`]).
const MODELLED: &[&str] = &[
    "$ref",
    "allOf",
    "anyOf",
    "oneOf",
    "type",
    "nullable",
    "enum",
    "const",
    "format",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "pattern",
    "minLength",
    "maxLength",
];

/// How deeply the JSON of a schema may nest (copying, comparing and printing JSON recurse).
const MAX_NESTING: usize = 512;
/// How many comparisons deep a check may nest.
const MAX_DEPTH: usize = 256;
/// How many comparisons a check may make.
const MAX_STEPS: usize = 200_000;
/// How many schemas merging one writer's `$ref`/`allOf` may visit, and how many `$ref`s
/// naming a reader's branch may follow.
const MAX_MERGED: usize = 256;

/// The `true` schema: anything.
static ANY: Value = Value::Bool(true);

fn breaks(at: &str, why: impl Into<String>) -> SchemaCompat {
    SchemaCompat::Breaks {
        at: at.to_owned(),
        why: why.into(),
    }
}

fn unknown(at: &str, keyword: &str) -> SchemaCompat {
    SchemaCompat::Unknown {
        at: at.to_owned(),
        keyword: keyword.to_owned(),
    }
}

/// How deeply `value` nests, counted without recursion.
fn nesting(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 1)];
    while let Some((value, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        match value {
            Value::Array(items) => pending.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => pending.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// `at` followed by the reference token `token` (RFC 6901 escapes).
fn pointer(at: &str, token: &str) -> String {
    format!("{at}/{}", token.replace('~', "~0").replace('/', "~1"))
}

fn is_annotation(keyword: &str) -> bool {
    ANNOTATIONS.contains(&keyword)
}

fn has_ref(schema: &Value) -> bool {
    schema.get("$ref").is_some()
}

/// Whether `schema` accepts every value: `true`, or nothing but annotations.
fn is_trivial(schema: &Value) -> bool {
    *schema == ANY
        || schema
            .as_object()
            .is_some_and(|map| map.keys().all(|k| is_annotation(k)))
}

/// The keywords of `schema` but its annotations and `except`.
fn core(schema: &Value, except: &[&str]) -> Map<String, Value> {
    let entries = schema.as_object().into_iter().flatten();
    entries
        .filter(|(k, _)| !is_annotation(k) && !except.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A value as a user reads it: strings bare, the rest as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Whether two JSON values are equal, `1` and `1.0` alike.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            x.as_f64() == y.as_f64()
        }
        _ => a == b,
    }
}

/// A key identifying a schema for the comparisons under way (its root's `$defs` left out).
fn identity(schema: &Value) -> String {
    match schema.as_object() {
        Some(map) => map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "$defs" | "definitions"))
            .map(|(k, v)| format!("{}:{v},", Value::String(k.clone())))
            .collect(),
        None => schema.to_string(),
    }
}

/// The target of `reference` in `root`: `#` or a `#/` JSON Pointer, percent-decoded.
fn follow<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return Some(root);
    }
    root.pointer(&percent_decoded(fragment)?)
}

fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(byte);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A set of JSON Schema types. The `number` bit stands for every number, integers included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Types(u8);

const TYPE_NAMES: [(&str, u8); 7] = [
    ("null", 1),
    ("boolean", 2),
    ("object", 4),
    ("array", 8),
    ("number", 16),
    ("string", 32),
    ("integer", 64),
];

impl Types {
    const NONE: Types = Types(0);
    const ALL: Types = Types(127);
    const NULL: Types = Types(1);
    const BOOLEAN: Types = Types(2);
    const OBJECT: Types = Types(4);
    const ARRAY: Types = Types(8);
    const NUMBER: Types = Types(16);
    const STRING: Types = Types(32);
    const INTEGER: Types = Types(64);

    fn named(name: &str) -> Option<Types> {
        TYPE_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, bit)| Types(*bit))
    }

    /// The value of a `type` keyword: a name or a list of names.
    fn of_keyword(value: &Value) -> Option<Types> {
        match value {
            Value::String(name) => Types::named(name),
            Value::Array(names) => names.iter().try_fold(Types::NONE, |all, name| {
                Some(all.union(Types::named(name.as_str()?)?))
            }),
            _ => None,
        }
    }

    /// The type of one value; a number with a fraction is `number` alone.
    fn of_value(value: &Value) -> Types {
        match value {
            Value::Null => Types::NULL,
            Value::Bool(_) => Types::BOOLEAN,
            Value::Number(n) if n.is_f64() && n.as_f64().is_some_and(|f| f.fract() != 0.0) => {
                Types::NUMBER
            }
            Value::Number(_) => Types::INTEGER,
            Value::String(_) => Types::STRING,
            Value::Array(_) => Types::ARRAY,
            Value::Object(_) => Types::OBJECT,
        }
    }

    fn union(self, other: Types) -> Types {
        Types(self.0 | other.0)
    }

    /// With `integer` when it has `number`.
    fn widened(self) -> Types {
        if self.has(Types::NUMBER) {
            self.union(Types::INTEGER)
        } else {
            self
        }
    }

    fn meet(self, other: Types) -> Types {
        Types(self.widened().0 & other.widened().0)
    }

    fn has(self, other: Types) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether a reader accepting `self` accepts every value of the types `written`.
    fn covers(self, written: Types) -> bool {
        written.0 & !self.widened().0 == 0
    }

    fn names(self) -> Vec<&'static str> {
        let bits = if self.has(Types::NUMBER) {
            self.0 & !Types::INTEGER.0
        } else {
            self.0
        };
        let present = TYPE_NAMES.iter().filter(|(_, bit)| bits & bit != 0);
        present.map(|(name, _)| *name).collect()
    }

    fn describe(self) -> String {
        match self {
            Types::NONE => "nothing".into(),
            t if t.widened() == Types::ALL => "any type".into(),
            t => t.names().join(" or "),
        }
    }
}

/// The types `schema` declares (`type`, OpenAPI's `nullable`); all when it declares none.
fn declared_types(schema: &Value) -> Option<Types> {
    let declared = match schema.get("type") {
        None => Types::ALL,
        Some(keyword) => Types::of_keyword(keyword)?,
    };
    let nullable = schema.get("nullable") == Some(&Value::Bool(true));
    Some(if nullable {
        declared.union(Types::NULL)
    } else {
        declared
    })
}

/// The one value a writer schema allows (`const`, or an `enum` of one), if it is one.
fn writer_value(schema: &Value) -> Option<&Value> {
    schema.get("const").or_else(|| match schema.get("enum") {
        Some(Value::Array(values)) if values.len() == 1 => values.first(),
        _ => None,
    })
}

/// The types of the values a writer schema allows.
fn writer_types(schema: &Value) -> Option<Types> {
    let declared = declared_types(schema)?;
    Some(match writer_value(schema) {
        Some(value) if declared.covers(Types::of_value(value)) => Types::of_value(value),
        Some(_) => Types::NONE,
        None => declared,
    })
}

/// The variant names a schema stands for: its `const` or `enum` values, or the tag of a
/// tagged variant.
fn variant_names(schema: &Value) -> Vec<String> {
    if let Some(value) = schema.get("const") {
        return vec![shown(value)];
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        return values.iter().map(shown).collect();
    }
    tag(schema).into_iter().collect()
}

/// The variant name of one writer alternative, if it has exactly one.
fn single_name(schema: &Value) -> Option<String> {
    let mut names = variant_names(schema);
    if names.len() == 1 {
        names.pop()
    } else {
        None
    }
}

/// The tag of a tagged variant: the `const` of a required property (internally and adjacently
/// tagged), or the single property of a closed object (externally tagged).
fn tag(schema: &Value) -> Option<String> {
    let required = schema.get("required")?.as_array()?;
    let properties = schema.get("properties")?;
    let constant = required
        .iter()
        .filter_map(Value::as_str)
        .find_map(|name| properties.get(name)?.get("const"));
    if let Some(value) = constant {
        return Some(shown(value));
    }
    match required.as_slice() {
        [Value::String(name)]
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) =>
        {
            Some(name.clone())
        }
        _ => None,
    }
}

/// Merge the keywords of `from` into `into` (a conjunction of writer schemas, over-approximated:
/// `properties` and `required` unite, `type` intersects). False when two keywords conflict.
fn merge(into: &mut Map<String, Value>, from: &Map<String, Value>) -> bool {
    for (keyword, value) in from {
        if is_annotation(keyword) || keyword == "$ref" || keyword == "allOf" {
            continue;
        }
        let joined = match into.get(keyword) {
            None => value.clone(),
            Some(old) if old == value => continue,
            Some(old) => match joined_keyword(keyword, old, value) {
                Some(joined) => joined,
                None => return false,
            },
        };
        into.insert(keyword.clone(), joined);
    }
    true
}

/// Two different values of one keyword, as one; `None` when this check cannot join them.
fn joined_keyword(keyword: &str, old: &Value, new: &Value) -> Option<Value> {
    match keyword {
        "properties" => {
            let mut all = old.as_object()?.clone();
            for (name, schema) in new.as_object()? {
                let joined = match all.get(name) {
                    Some(prev) if prev != schema => json!({ "allOf": [prev, schema] }),
                    _ => schema.clone(),
                };
                all.insert(name.clone(), joined);
            }
            Some(Value::Object(all))
        }
        "required" => {
            let mut all = old.as_array()?.clone();
            let added: Vec<Value> = new
                .as_array()?
                .iter()
                .filter(|n| !all.contains(n))
                .cloned()
                .collect();
            all.extend(added);
            Some(Value::Array(all))
        }
        "type" => {
            let both = Types::of_keyword(old)?.meet(Types::of_keyword(new)?);
            Some(Value::Array(
                both.names().into_iter().map(Value::from).collect(),
            ))
        }
        _ => None,
    }
}

/// `branch` under the keywords `base` shares with its siblings.
fn with_base(base: &Map<String, Value>, branch: &Value) -> Value {
    if base.is_empty() {
        branch.clone()
    } else {
        json!({ "allOf": [Value::Object(base.clone()), branch] })
    }
}

fn with_keyword(base: &Map<String, Value>, keyword: &str, value: Value) -> Value {
    let mut schema = base.clone();
    schema.insert(keyword.to_owned(), value);
    Value::Object(schema)
}

/// The alternatives of a writer schema, each to be read on its own: its `oneOf` or `anyOf`
/// branches, its `enum` values, or the types of its type list. `None` when it is one.
fn alternatives(w: &Value, at: &str) -> Result<Option<Vec<Value>>, SchemaCompat> {
    for keyword in ["oneOf", "anyOf"] {
        if let Some(branches) = w.get(keyword) {
            let branches = branches.as_array().ok_or_else(|| unknown(at, keyword))?;
            let base = core(w, &[keyword]);
            return Ok(Some(branches.iter().map(|b| with_base(&base, b)).collect()));
        }
    }
    if let Some(values) = w.get("enum") {
        let values = values.as_array().ok_or_else(|| unknown(at, "enum"))?;
        if values.len() == 1 {
            return Ok(None);
        }
        let base = core(w, &["enum"]);
        let each = values
            .iter()
            .map(|v| with_keyword(&base, "const", v.clone()));
        return Ok(Some(each.collect()));
    }
    let types = declared_types(w).ok_or_else(|| unknown(at, "type"))?;
    if w.get("const").is_some() || types == Types::ALL || types.names().len() < 2 {
        return Ok(None);
    }
    let base = core(w, &["type", "nullable"]);
    let each = types.names().into_iter();
    Ok(Some(
        each.map(|name| with_keyword(&base, "type", name.into()))
            .collect(),
    ))
}

/// A writer's conjunction being merged into one schema ([`Checker::flatten`]).
struct Merging {
    merged: Map<String, Value>,
    /// The `$ref`s merged already.
    followed: HashSet<String>,
    /// How many more schemas it may visit.
    budget: usize,
}

/// Which schema a `$ref` resolves against.
#[derive(Clone, Copy)]
enum Side {
    Reader,
    Writer,
}

/// One comparison of a reader's schema with a writer's.
struct Checker<'a> {
    reader: &'a Value,
    writer: &'a Value,
    /// The pairs under comparison, outermost first.
    stack: Vec<(String, String)>,
    /// The pairs found compatible without assuming any pair still under comparison.
    proven: HashSet<(String, String)>,
    /// The lowest index of `stack` whose pair was assumed compatible since it was reset.
    lowest_assumed: usize,
    depth: usize,
    steps: usize,
}

impl<'a> Checker<'a> {
    fn new(reader: &'a Value, writer: &'a Value) -> Self {
        Checker {
            reader,
            writer,
            stack: Vec::new(),
            proven: HashSet::new(),
            lowest_assumed: usize::MAX,
            depth: 0,
            steps: 0,
        }
    }

    /// The target of the `$ref` value `reference` in `side`'s schema.
    fn lookup(&self, side: Side, reference: &Value, at: &str) -> Result<&'a Value, SchemaCompat> {
        let root = match side {
            Side::Reader => self.reader,
            Side::Writer => self.writer,
        };
        let target = reference.as_str().and_then(|r| follow(root, r));
        target.ok_or_else(|| unknown(at, "$ref"))
    }

    /// `schema` with its `$ref`s followed (siblings left aside), for naming and typing a
    /// reader's branch.
    fn resolved<'v>(&self, side: Side, schema: &'v Value) -> &'v Value
    where
        'a: 'v,
    {
        let mut current = schema;
        for _ in 0..MAX_MERGED {
            match current.get("$ref").map(|r| self.lookup(side, r, "")) {
                Some(Ok(target)) => current = target,
                _ => break,
            }
        }
        current
    }

    /// Whether every value `w` allows is accepted by `r`: the entry of every comparison.
    fn check(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(unknown(at, "(size limit)"));
        }
        if self.depth >= MAX_DEPTH {
            return Err(unknown(at, "(depth limit)"));
        }
        self.depth += 1;
        let outcome = if has_ref(r) || has_ref(w) {
            self.check_pair(r, w, at)
        } else {
            self.dispatch(r, w, at)
        };
        self.depth -= 1;
        outcome
    }

    /// [`check`](Self::check) of a pair that follows a `$ref`: a pair already under comparison
    /// is assumed compatible, a pair proven compatible is not compared again.
    fn check_pair(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        let key = (identity(r), identity(w));
        if self.proven.contains(&key) {
            return Ok(());
        }
        if let Some(index) = self.stack.iter().position(|k| *k == key) {
            self.lowest_assumed = self.lowest_assumed.min(index);
            return Ok(());
        }
        let level = self.stack.len();
        let outer = std::mem::replace(&mut self.lowest_assumed, usize::MAX);
        self.stack.push(key);
        let outcome = self.dispatch(r, w, at);
        let key = self.stack.pop();
        let self_contained = self.lowest_assumed >= level;
        if let (Ok(()), Some(key), true) = (&outcome, key, self_contained) {
            self.proven.insert(key);
        }
        let inner = if self_contained {
            usize::MAX
        } else {
            self.lowest_assumed
        };
        self.lowest_assumed = outer.min(inner);
        outcome
    }

    /// The trivial cases, then the writer's and the reader's structure.
    fn dispatch(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        if is_trivial(r) || *w == Value::Bool(false) {
            return Ok(());
        }
        if *r == Value::Bool(false) {
            return Err(breaks(at, "no value is accepted here any more"));
        }
        if !r.is_object() || !(w.is_object() || *w == ANY) {
            return Err(unknown(at, "(not a schema)"));
        }
        self.writer_step(r, w, at)
    }

    /// The writer's `$ref`/`allOf` merged, its alternatives split, before the reader's turn.
    fn writer_step(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        if has_ref(w) || w.get("allOf").is_some() {
            return match self.flatten(w, at)? {
                Some(merged) => self.check(r, &merged, at),
                None => Ok(()),
            };
        }
        if let Some(alternatives) = alternatives(w, at)? {
            return alternatives
                .iter()
                .try_for_each(|alt| self.check(r, alt, at));
        }
        self.reader_step(r, w, at)
    }

    /// The writer's conjunction (`$ref` and its siblings, `allOf`) as one schema; `None` when it
    /// allows nothing.
    fn flatten(&self, w: &Value, at: &str) -> Result<Option<Value>, SchemaCompat> {
        let mut merging = Merging {
            merged: Map::new(),
            followed: HashSet::new(),
            budget: MAX_MERGED,
        };
        let allows = self.absorb(&mut merging, w, at)?;
        Ok(allows.then_some(Value::Object(merging.merged)))
    }

    /// Merge `part` into the conjunction, following its `$ref` (once each: A and A is A) and
    /// `allOf`; false when `part` allows nothing.
    fn absorb(&self, merging: &mut Merging, part: &Value, at: &str) -> Result<bool, SchemaCompat> {
        merging.budget = merging
            .budget
            .checked_sub(1)
            .ok_or_else(|| unknown(at, "allOf"))?;
        let map = match part {
            Value::Bool(allows) => return Ok(*allows),
            Value::Object(map) => map,
            _ => return Err(unknown(at, "allOf")),
        };
        if !merge(&mut merging.merged, map) {
            return Err(unknown(at, "allOf"));
        }
        let mut parts = Vec::new();
        if let Some(reference) = map.get("$ref") {
            if merging.followed.insert(reference.to_string()) {
                parts.push(self.lookup(Side::Writer, reference, at)?);
            }
        }
        if let Some(all) = map.get("allOf") {
            parts.extend(all.as_array().ok_or_else(|| unknown(at, "allOf"))?);
        }
        for part in parts {
            if !self.absorb(merging, part, at)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The reader's `$ref` and `allOf` part by part, its `oneOf`/`anyOf`, then the keywords.
    fn reader_step(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        if let Some(reference) = r.get("$ref") {
            let target = self.lookup(Side::Reader, reference, at)?;
            self.check(target, w, at)?;
            return self.check(&Value::Object(core(r, &["$ref"])), w, at);
        }
        if let Some(parts) = r.get("allOf") {
            let parts = parts.as_array().ok_or_else(|| unknown(at, "allOf"))?;
            parts.iter().try_for_each(|part| self.check(part, w, at))?;
            return self.check(&Value::Object(core(r, &["allOf"])), w, at);
        }
        if r.get("oneOf").is_some() || r.get("anyOf").is_some() {
            return self.reader_choices(r, w, at);
        }
        self.compare(r, w, at)
    }

    /// A reader with `oneOf`/`anyOf`: its other keywords, then one branch of each.
    fn reader_choices(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        self.check(&Value::Object(core(r, &["oneOf", "anyOf"])), w, at)?;
        for keyword in ["oneOf", "anyOf"] {
            if let Some(branches) = r.get(keyword) {
                let branches = branches.as_array().ok_or_else(|| unknown(at, keyword))?;
                self.some_branch(branches, w, at)?;
            }
        }
        Ok(())
    }

    /// Whether one of the reader's `branches` reads the writer's alternative `w`.
    fn some_branch(&mut self, branches: &[Value], w: &Value, at: &str) -> Outcome {
        let mut refusals = Vec::with_capacity(branches.len());
        for branch in branches {
            match self.check(branch, w, at) {
                Ok(()) => return Ok(()),
                Err(refusal) => refusals.push(refusal),
            }
        }
        Err(self.no_branch(branches, &refusals, w, at))
    }

    /// The variant names of a reader's branch: its own, else those of its `$ref`'s target
    /// (an internally tagged newtype variant is the tag property beside a `$ref`).
    fn branch_names(&self, branch: &Value) -> Vec<String> {
        let own = variant_names(branch);
        if own.is_empty() {
            variant_names(self.resolved(Side::Reader, branch))
        } else {
            own
        }
    }

    /// Why no branch reads `w`: the refusal of the branch of the same variant, an `Unknown`,
    /// the variant that is gone, or the refusal of the one branch of the same type.
    fn no_branch(
        &self,
        branches: &[Value],
        refusals: &[SchemaCompat],
        w: &Value,
        at: &str,
    ) -> SchemaCompat {
        let name = single_name(w);
        if let Some(name) = &name {
            let same = branches
                .iter()
                .position(|b| self.branch_names(b).contains(name));
            if let Some(refusal) = same.and_then(|i| refusals.get(i)) {
                return refusal.clone();
            }
        }
        if let Some(refusal) = refusals
            .iter()
            .find(|r| matches!(r, SchemaCompat::Unknown { .. }))
        {
            return refusal.clone();
        }
        if let Some(name) = name {
            return breaks(at, format!("variant `{name}` is no longer accepted"));
        }
        let written = writer_types(w).unwrap_or(Types::ALL);
        let typed =
            |b: &Value| declared_types(self.resolved(Side::Reader, b)).unwrap_or(Types::ALL);
        let mut near = branches
            .iter()
            .zip(refusals)
            .filter(|(b, _)| typed(b).meet(written) != Types::NONE);
        match (near.next(), near.next()) {
            (Some((_, refusal)), None) => refusal.clone(),
            _ => breaks(
                at,
                format!(
                    "a value of type {} written before matches none of the reader's alternatives",
                    written.describe()
                ),
            ),
        }
    }

    /// One writer alternative against a reader without alternatives, keyword by keyword.
    fn compare(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        let accepted = declared_types(r).ok_or_else(|| unknown(at, "type"))?;
        let written = writer_types(w).ok_or_else(|| unknown(at, "type"))?;
        if written == Types::NONE {
            return Ok(());
        }
        if !accepted.covers(written) {
            return Err(type_changed(accepted, written, at));
        }
        values_kept(r, w, at)?;
        if written.has(Types::OBJECT) {
            self.compare_objects(r, w, at)?;
        }
        if written.has(Types::ARRAY) {
            self.compare_arrays(r, w, at)?;
        }
        if written.has(Types::NUMBER.union(Types::INTEGER)) {
            compare_numbers(r, w, at)?;
        }
        if written.has(Types::STRING) {
            compare_strings(r, w, at)?;
        }
        unmodelled(r, w, at)
    }

    fn compare_objects(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        required_kept(r, w, at)?;
        self.listed_properties(r, w, at)?;
        self.unlisted_properties(r, w, at)
    }

    /// Each property the writer lists, against the reader's schema for it.
    fn listed_properties(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        let Some(written) = properties_of(w, at)? else {
            return Ok(());
        };
        let listed = properties_of(r, at)?;
        let others = r.get("additionalProperties");
        for (name, schema) in written {
            if *schema == Value::Bool(false) {
                continue;
            }
            let here = pointer(at, name);
            let accepted = match (listed.and_then(|l| l.get(name)), others) {
                (Some(accepted), _) => accepted,
                (None, Some(Value::Bool(false))) => {
                    let why = format!(
                        "property `{name}` was written before and the reader denies unknown fields"
                    );
                    return Err(breaks(&here, why));
                }
                (None, Some(accepted)) => accepted,
                (None, None) => continue,
            };
            self.check(accepted, schema, &here)?;
        }
        Ok(())
    }

    /// The properties a map-like writer writes without listing them.
    fn unlisted_properties(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        let Some(extra) = written_extra(w) else {
            return Ok(());
        };
        let written = properties_of(w, at)?;
        for (name, accepted) in properties_of(r, at)?.into_iter().flatten() {
            if !written.is_some_and(|p| p.contains_key(name)) {
                self.check(accepted, extra, &pointer(at, name))?;
            }
        }
        match r.get("additionalProperties") {
            Some(Value::Bool(false)) => Err(breaks(
                at,
                "properties of any name were written before and the reader denies unknown fields",
            )),
            Some(accepted) => self.check(accepted, extra, &pointer(at, "*")),
            None => Ok(()),
        }
    }

    fn compare_arrays(&mut self, r: &Value, w: &Value, at: &str) -> Outcome {
        let accepted = Shape::of(r, at)?;
        let written = Shape::of(w, at)?;
        lengths_kept(&accepted, &written, at)?;
        uniqueness_kept(r, w, at)?;
        let last = accepted.prefix.len().max(written.prefix.len());
        for index in 0..=last {
            if !written.reaches(index) {
                break;
            }
            let here = pointer(at, &index.to_string());
            self.check(accepted.item(index), written.item(index), &here)?;
        }
        Ok(())
    }
}

fn type_changed(accepted: Types, written: Types, at: &str) -> SchemaCompat {
    let lost = Types(written.0 & !accepted.widened().0);
    if lost == Types::NULL {
        breaks(
            at,
            "null was written before and is no longer accepted (the value is no longer optional)",
        )
    } else if written.widened() == Types::ALL {
        breaks(
            at,
            format!(
                "values of any type were written before; the reader accepts only {}",
                accepted.describe()
            ),
        )
    } else {
        breaks(
            at,
            format!(
                "type changed from {} to {}",
                written.describe(),
                accepted.describe()
            ),
        )
    }
}

/// The reader's `const` and `enum`: the written value must be one of theirs.
fn values_kept(r: &Value, w: &Value, at: &str) -> Outcome {
    if let Some(expected) = r.get("const") {
        value_listed(std::slice::from_ref(expected), w, at, "value")?;
    }
    if let Some(values) = r.get("enum") {
        let values = values.as_array().ok_or_else(|| unknown(at, "enum"))?;
        value_listed(values, w, at, "variant")?;
    }
    Ok(())
}

fn value_listed(allowed: &[Value], w: &Value, at: &str, what: &str) -> Outcome {
    match writer_value(w) {
        Some(value) if allowed.iter().any(|a| same_value(a, value)) => Ok(()),
        Some(value) => Err(breaks(
            at,
            format!("{what} `{}` is no longer accepted", shown(value)),
        )),
        None => {
            let list: Vec<String> = allowed.iter().map(|v| format!("`{}`", shown(v))).collect();
            let written = writer_types(w).unwrap_or(Types::ALL).describe();
            let why = format!(
                "any {written} was written before; the reader accepts only {}",
                list.join(", ")
            );
            Err(breaks(at, why))
        }
    }
}

/// The `properties` of a schema, if it has them.
fn properties_of<'v>(
    schema: &'v Value,
    at: &str,
) -> Result<Option<&'v Map<String, Value>>, SchemaCompat> {
    match schema.get("properties") {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(unknown(at, "properties")),
    }
}

/// The strings of a list keyword (`required`), none when it is absent.
fn names_in<'v>(schema: &'v Value, keyword: &str, at: &str) -> Result<Vec<&'v str>, SchemaCompat> {
    match schema.get(keyword) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().ok_or_else(|| unknown(at, keyword)))
            .collect(),
        Some(_) => Err(unknown(at, keyword)),
    }
}

/// Every property the reader requires, the writer required.
fn required_kept(r: &Value, w: &Value, at: &str) -> Outcome {
    let written = names_in(w, "required", at)?;
    for name in names_in(r, "required", at)? {
        if !written.contains(&name) {
            let why = format!("required property `{name}` is missing from values written before");
            return Err(breaks(&pointer(at, name), why));
        }
    }
    Ok(())
}

/// The schema of the properties a writer writes without listing them: its
/// `additionalProperties`; nothing for a serde struct (it lists `properties` or declares a
/// `type`); anything for a schema that says nothing of objects.
fn written_extra(w: &Value) -> Option<&Value> {
    match w.get("additionalProperties") {
        Some(Value::Bool(false)) => None,
        Some(extra) => Some(extra),
        None if w.get("type").is_none() && w.get("properties").is_none() => Some(&ANY),
        None => None,
    }
}

/// What an array schema says of its items and length.
struct Shape<'v> {
    prefix: &'v [Value],
    rest: &'v Value,
    min: u64,
    max: Option<u64>,
}

impl<'v> Shape<'v> {
    fn of(schema: &'v Value, at: &str) -> Result<Self, SchemaCompat> {
        let (prefix, rest): (&[Value], _) = match (schema.get("prefixItems"), schema.get("items")) {
            (Some(p), rest) => (
                p.as_array().ok_or_else(|| unknown(at, "prefixItems"))?,
                rest,
            ),
            (None, Some(Value::Array(p))) => (p, schema.get("additionalItems")),
            (None, rest) => (&[], rest),
        };
        let rest = rest.unwrap_or(&ANY);
        let min = count(schema, "minItems", at)?.unwrap_or(0);
        let mut max = count(schema, "maxItems", at)?;
        if *rest == Value::Bool(false) {
            let fixed = u64::try_from(prefix.len()).unwrap_or(u64::MAX);
            max = Some(max.map_or(fixed, |m| m.min(fixed)));
        }
        Ok(Shape {
            prefix,
            rest,
            min,
            max,
        })
    }

    /// The schema of the item at `index`.
    fn item(&self, index: usize) -> &'v Value {
        self.prefix.get(index).unwrap_or(self.rest)
    }

    /// Whether an array may have an item at `index`.
    fn reaches(&self, index: usize) -> bool {
        let within = self
            .max
            .is_none_or(|max| u64::try_from(index).is_ok_and(|i| i < max));
        within && *self.item(index) != Value::Bool(false)
    }
}

fn count(schema: &Value, keyword: &str, at: &str) -> Result<Option<u64>, SchemaCompat> {
    match schema.get(keyword) {
        None => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or_else(|| unknown(at, keyword)),
    }
}

fn lengths_kept(accepted: &Shape, written: &Shape, at: &str) -> Outcome {
    if accepted.min > written.min {
        let why = format!(
            "arrays of {} items were written before; the reader needs at least {}",
            written.min, accepted.min
        );
        return Err(breaks(at, why));
    }
    match (accepted.max, written.max) {
        (Some(limit), Some(longest)) if longest <= limit => Ok(()),
        (Some(limit), longest) => {
            let longest = longest.map_or("any length".to_owned(), |n| format!("{n} items"));
            let why = format!(
                "arrays of {longest} were written before; the reader accepts at most {limit} items"
            );
            Err(breaks(at, why))
        }
        (None, _) => Ok(()),
    }
}

/// A reader's `uniqueItems: true` is read only from a writer that promised it too.
fn uniqueness_kept(r: &Value, w: &Value, at: &str) -> Outcome {
    match r.get("uniqueItems") {
        None | Some(Value::Bool(false)) => Ok(()),
        Some(unique) if w.get("uniqueItems") == Some(unique) => Ok(()),
        Some(_) => Err(unknown(at, "uniqueItems")),
    }
}

/// A bound of a number range: an exact integer when it is one.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn of(number: &Number) -> Option<Num> {
        let int = number
            .as_i64()
            .map(i128::from)
            .or_else(|| number.as_u64().map(i128::from));
        int.map(Num::Int)
            .or_else(|| number.as_f64().map(Num::Float))
    }

    fn to_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn compare(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            _ => self.to_f64().partial_cmp(&other.to_f64()),
        }
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => write!(f, "{x}"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Bound {
    num: Num,
    exclusive: bool,
}

impl Bound {
    fn inclusive(num: Num) -> Self {
        Bound {
            num,
            exclusive: false,
        }
    }
}

/// The lowest and highest number a schema allows (`None`: unbounded).
#[derive(Default)]
struct Range {
    low: Option<Bound>,
    high: Option<Bound>,
}

impl Range {
    fn of(schema: &Value, at: &str) -> Result<Range, SchemaCompat> {
        let mut range = Range::default();
        if let Some((low, high)) = schema
            .get("format")
            .and_then(Value::as_str)
            .and_then(integer_format)
        {
            range.low = Some(Bound::inclusive(low));
            range.high = Some(Bound::inclusive(high));
        }
        for (keyword, exclusive, low) in [
            ("minimum", false, true),
            ("exclusiveMinimum", true, true),
            ("maximum", false, false),
            ("exclusiveMaximum", true, false),
        ] {
            let Some(value) = schema.get(keyword) else {
                continue;
            };
            let num = value
                .as_number()
                .and_then(Num::of)
                .ok_or_else(|| unknown(at, keyword))?;
            let bound = Bound { num, exclusive };
            if low {
                range.low = Some(tighter(range.low, bound, Ordering::Greater));
            } else {
                range.high = Some(tighter(range.high, bound, Ordering::Less));
            }
        }
        Ok(range)
    }

    /// The range of a writer: its one value, or its keywords.
    fn written(w: &Value, at: &str) -> Result<Range, SchemaCompat> {
        match writer_value(w) {
            Some(Value::Number(n)) => {
                let exact = Num::of(n).map(Bound::inclusive);
                Ok(Range {
                    low: exact,
                    high: exact,
                })
            }
            _ => Range::of(w, at),
        }
    }
}

/// The range of an integer `format`.
fn integer_format(format: &str) -> Option<(Num, Num)> {
    let (low, high): (i128, i128) = match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "int128" => (i128::MIN, i128::MAX),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        "uint128" => return Some((Num::Int(0), Num::Float(u128::MAX as f64))),
        _ => return None,
    };
    Some((Num::Int(low), Num::Int(high)))
}

/// The tighter of `current` and `new`: the one further `inward` (`Greater` for lower bounds).
fn tighter(current: Option<Bound>, new: Bound, inward: Ordering) -> Bound {
    let Some(current) = current else { return new };
    match new.num.compare(current.num) {
        Some(Ordering::Equal) => Bound {
            num: new.num,
            exclusive: new.exclusive || current.exclusive,
        },
        Some(order) if order == inward => new,
        _ => current,
    }
}

/// Whether the reader's bound `accepted` lets through everything within the writer's
/// `written`; `inward` is `Greater` for lower bounds, `Less` for upper ones.
fn bound_covers(accepted: Option<Bound>, written: Option<Bound>, inward: Ordering) -> bool {
    let Some(accepted) = accepted else {
        return true;
    };
    let Some(written) = written else { return false };
    match written.num.compare(accepted.num) {
        Some(Ordering::Equal) => !accepted.exclusive || written.exclusive,
        Some(order) => order == inward,
        None => false,
    }
}

fn shown_bound(bound: Option<Bound>) -> String {
    match bound {
        None => "none".into(),
        Some(Bound {
            num,
            exclusive: true,
        }) => format!("{num} (exclusive)"),
        Some(Bound { num, .. }) => num.to_string(),
    }
}

fn compare_numbers(r: &Value, w: &Value, at: &str) -> Outcome {
    number_format_kept(r, w, at)?;
    let accepted = Range::of(r, at)?;
    let written = Range::written(w, at)?;
    if !bound_covers(accepted.low, written.low, Ordering::Greater) {
        let (from, to) = (shown_bound(written.low), shown_bound(accepted.low));
        return Err(breaks(
            at,
            format!("minimum raised from {from} to {to}: smaller numbers were written before"),
        ));
    }
    if !bound_covers(accepted.high, written.high, Ordering::Less) {
        let (from, to) = (shown_bound(written.high), shown_bound(accepted.high));
        return Err(breaks(
            at,
            format!("maximum lowered from {from} to {to}: larger numbers were written before"),
        ));
    }
    Ok(())
}

/// A reader's number `format`: the integer formats are ranges (compared as such), `double`
/// reads any number; any other (`float`) is for a person to judge.
fn number_format_kept(r: &Value, w: &Value, at: &str) -> Outcome {
    let Some(format) = r.get("format") else {
        return Ok(());
    };
    if w.get("format") == Some(format) {
        return Ok(());
    }
    match format.as_str() {
        Some(name) if name == "double" || integer_format(name).is_some() => Ok(()),
        _ => Err(unknown(at, "format")),
    }
}

/// A reader's string constraints must be the writer's own.
fn compare_strings(r: &Value, w: &Value, at: &str) -> Outcome {
    for keyword in ["pattern", "minLength", "maxLength", "format"] {
        if let Some(value) = r.get(keyword) {
            if w.get(keyword) != Some(value) {
                return Err(unknown(at, keyword));
            }
        }
    }
    Ok(())
}

/// A reader keyword this check does not model decides unless the writer has the same.
fn unmodelled(r: &Value, w: &Value, at: &str) -> Outcome {
    let entries = r.as_object().into_iter().flatten();
    for (keyword, value) in entries {
        let known = is_annotation(keyword) || MODELLED.contains(&keyword.as_str());
        if !known && w.get(keyword) != Some(value) {
            return Err(unknown(at, keyword));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    use super::*;

    fn schema<T: JsonSchema>() -> Value {
        serde_json::to_value(schemars::schema_for!(T)).unwrap()
    }

    /// Whether code reading `R` reads the values `W` wrote.
    fn check<R: JsonSchema, W: JsonSchema>() -> SchemaCompat {
        reads(&schema::<R>(), &schema::<W>())
    }

    #[track_caller]
    fn assert_breaks(answer: SchemaCompat, at: &str, named: &str) {
        match answer {
            SchemaCompat::Breaks { at: found, why } => {
                assert_eq!(found, at, "at, for: {why}");
                assert!(why.contains(named), "`{named}` not in: {why}");
            }
            other => panic!("expected Breaks at {at:?}, got {other:?}"),
        }
    }

    #[track_caller]
    fn assert_unknown(answer: SchemaCompat, at: &str, keyword: &str) {
        let expected = SchemaCompat::Unknown {
            at: at.into(),
            keyword: keyword.into(),
        };
        assert_eq!(answer, expected);
    }

    // Fields.

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Base {
        id: u32,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct WithOptional {
        id: u32,
        #[serde(default)]
        note: Option<String>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct WithRequired {
        id: u32,
        qty: u32,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Strict {
        id: u32,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct IdString {
        id: String,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct IdU64 {
        id: u64,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct IdI32 {
        id: i32,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct NoteText {
        id: u32,
        #[serde(default)]
        note: String,
    }

    #[test]
    fn identical_types_read() {
        assert_eq!(check::<Base, Base>(), SchemaCompat::Reads);
        assert_eq!(check::<WithOptional, WithOptional>(), SchemaCompat::Reads);
        assert_eq!(check::<Order, Order>(), SchemaCompat::Reads);
        assert_eq!(check::<Shape3, Shape3>(), SchemaCompat::Reads);
        assert_eq!(check::<Payment3, Payment3>(), SchemaCompat::Reads);
        assert_eq!(check::<FlatPayment3, FlatPayment3>(), SchemaCompat::Reads);
        assert_eq!(check::<Expr, Expr>(), SchemaCompat::Reads);
        assert_eq!(check::<Kinds, Kinds>(), SchemaCompat::Reads);
    }

    #[test]
    fn an_added_optional_field_reads() {
        assert_eq!(check::<WithOptional, Base>(), SchemaCompat::Reads);
    }

    #[test]
    fn an_added_required_field_breaks() {
        let answer = check::<WithRequired, Base>();
        assert_eq!(
            answer,
            SchemaCompat::Breaks {
                at: "/qty".into(),
                why: "required property `qty` is missing from values written before".into(),
            }
        );
    }

    #[test]
    fn a_removed_field_reads_unless_unknown_fields_are_denied() {
        assert_eq!(check::<Base, WithRequired>(), SchemaCompat::Reads);
        assert_eq!(check::<Base, WithOptional>(), SchemaCompat::Reads);
        assert_breaks(check::<Strict, WithRequired>(), "/qty", "`qty`");
        assert_breaks(check::<Strict, WithOptional>(), "/note", "`note`");
        assert_eq!(check::<Strict, Base>(), SchemaCompat::Reads);
    }

    #[test]
    fn a_changed_field_type_breaks() {
        let answer = check::<IdString, Base>();
        assert_breaks(answer, "/id", "type changed from integer to string");
    }

    #[test]
    fn integers_widen_but_do_not_narrow() {
        assert_eq!(check::<IdU64, Base>(), SchemaCompat::Reads);
        assert_breaks(check::<Base, IdU64>(), "/id", "maximum lowered");
        assert_breaks(
            check::<Base, IdI32>(),
            "/id",
            "minimum raised from -2147483648 to 0",
        );
        assert_breaks(check::<IdI32, Base>(), "/id", "maximum lowered");
        assert_eq!(check::<u64, u8>(), SchemaCompat::Reads);
        assert_eq!(check::<i16, u8>(), SchemaCompat::Reads);
        assert_breaks(
            check::<u8, u64>(),
            "",
            "maximum lowered from 18446744073709551615 to 255",
        );
        assert_eq!(check::<f64, u32>(), SchemaCompat::Reads);
        assert_breaks(
            check::<u32, f64>(),
            "",
            "type changed from number to integer",
        );
        assert_eq!(check::<f64, f32>(), SchemaCompat::Reads);
        assert_unknown(check::<f32, f64>(), "", "format");
    }

    // Enums.

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum Status3 {
        Open,
        Paid,
        Refunded,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum Status2 {
        Open,
        Paid,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum Documented {
        /// Still open.
        Open,
        Paid,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum Shape3 {
        Point,
        Circle(f64),
        Rect { w: f64, h: f64 },
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum ShapeNoRect {
        Point,
        Circle(f64),
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum ShapeNoCircle {
        Point,
        Rect { w: f64, h: f64 },
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum ShapeNoPoint {
        Circle(f64),
        Rect { w: f64, h: f64 },
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum ShapeTallRect {
        Point,
        Circle(f64),
        Rect { w: f64, h: f64, depth: f64 },
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "type")]
    enum Payment3 {
        Paid { amount: u64 },
        Refunded { amount: u64 },
        Voided,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "type")]
    enum Payment2 {
        Paid { amount: u64 },
        Voided,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "type")]
    enum PaymentText {
        Paid { amount: String },
        Refunded { amount: u64 },
        Voided,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "t", content = "c")]
    enum Adjacent {
        X(u32),
        Y,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "t", content = "c")]
    enum AdjacentText {
        X(String),
        Y,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(untagged)]
    enum Loose {
        Number(u32),
        Text(String),
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(untagged)]
    enum LooseText {
        Text(String),
        Flag(bool),
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Ticket3 {
        status: Status3,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Ticket2 {
        status: Status2,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct FlatPayment3 {
        id: u32,
        #[serde(flatten)]
        payment: Payment3,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct FlatPayment2 {
        id: u32,
        #[serde(flatten)]
        payment: Payment2,
    }

    #[test]
    fn a_removed_unit_variant_breaks_by_name() {
        assert_breaks(
            check::<Status2, Status3>(),
            "",
            "variant `Refunded` is no longer accepted",
        );
        assert_breaks(check::<Ticket2, Ticket3>(), "/status", "variant `Refunded`");
        assert_breaks(check::<ShapeNoPoint, Shape3>(), "", "variant `Point`");
        assert_breaks(check::<Documented, Status3>(), "", "variant `Refunded`");
    }

    #[test]
    fn a_removed_tuple_or_struct_variant_breaks_by_name() {
        assert_breaks(
            check::<ShapeNoRect, Shape3>(),
            "",
            "variant `Rect` is no longer accepted",
        );
        assert_breaks(
            check::<ShapeNoCircle, Shape3>(),
            "",
            "variant `Circle` is no longer accepted",
        );
    }

    #[test]
    fn a_removed_internally_tagged_variant_breaks_by_name() {
        let answer = check::<Payment2, Payment3>();
        assert_breaks(answer, "", "variant `Refunded` is no longer accepted");
        let answer = check::<FlatPayment2, FlatPayment3>();
        assert_breaks(answer, "", "variant `Refunded` is no longer accepted");
    }

    #[test]
    fn a_changed_variant_is_reported_inside_it() {
        let answer = check::<ShapeTallRect, Shape3>();
        assert_breaks(answer, "/Rect/depth", "required property `depth`");
        let answer = check::<PaymentText, Payment3>();
        assert_breaks(answer, "/amount", "type changed from integer to string");
        let answer = check::<AdjacentText, Adjacent>();
        assert_breaks(answer, "/c", "type changed from integer to string");
        let answer = check::<LooseText, Loose>();
        assert_breaks(
            answer,
            "",
            "a value of type integer written before matches none",
        );
    }

    #[test]
    fn an_added_variant_reads() {
        assert_eq!(check::<Status3, Status2>(), SchemaCompat::Reads);
        assert_eq!(check::<Status3, Documented>(), SchemaCompat::Reads);
        assert_eq!(check::<Shape3, ShapeNoRect>(), SchemaCompat::Reads);
        assert_eq!(check::<Shape3, ShapeNoCircle>(), SchemaCompat::Reads);
        assert_eq!(check::<Payment3, Payment2>(), SchemaCompat::Reads);
        assert_eq!(check::<FlatPayment3, FlatPayment2>(), SchemaCompat::Reads);
        assert_eq!(check::<Ticket3, Ticket2>(), SchemaCompat::Reads);
        assert_eq!(check::<Loose, Loose>(), SchemaCompat::Reads);
    }

    // Options.

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Line {
        sku: String,
        qty: u32,
    }

    #[test]
    fn an_option_written_and_a_plain_value_read_breaks() {
        let answer = check::<u32, Option<u32>>();
        assert_breaks(
            answer,
            "",
            "null was written before and is no longer accepted",
        );
        assert_breaks(check::<Line, Option<Line>>(), "", "null was written before");
        assert_breaks(
            check::<Status3, Option<Status3>>(),
            "",
            "null was written before",
        );
        assert_breaks(
            check::<NoteText, WithOptional>(),
            "/note",
            "null was written before",
        );
    }

    #[test]
    fn a_plain_value_written_and_an_option_read_reads() {
        assert_eq!(check::<Option<u32>, u32>(), SchemaCompat::Reads);
        assert_eq!(check::<Option<Line>, Line>(), SchemaCompat::Reads);
        assert_eq!(check::<Option<Status3>, Status3>(), SchemaCompat::Reads);
        assert_eq!(check::<Option<Status3>, Status2>(), SchemaCompat::Reads);
        assert_eq!(check::<WithOptional, NoteText>(), SchemaCompat::Reads);
    }

    // Nesting through `$defs`, recursion, collections.

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct LineText {
        sku: String,
        qty: String,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Order {
        id: u32,
        first: Line,
        items: Vec<Line>,
        by_sku: HashMap<String, Line>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct OrderFirstText {
        id: u32,
        first: LineText,
        items: Vec<Line>,
        by_sku: HashMap<String, Line>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct OrderItemsText {
        id: u32,
        first: Line,
        items: Vec<LineText>,
        by_sku: HashMap<String, Line>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct OrderMapText {
        id: u32,
        first: Line,
        items: Vec<Line>,
        by_sku: HashMap<String, LineText>,
    }

    #[test]
    fn a_nested_change_through_refs_is_located() {
        let answer = check::<OrderFirstText, Order>();
        assert_breaks(answer, "/first/qty", "type changed from integer to string");
        let answer = check::<OrderItemsText, Order>();
        assert_breaks(
            answer,
            "/items/0/qty",
            "type changed from integer to string",
        );
        let answer = check::<OrderMapText, Order>();
        assert_breaks(
            answer,
            "/by_sku/*/qty",
            "type changed from integer to string",
        );
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Tree {
        label: String,
        children: Vec<Tree>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct TreeWeighted {
        label: String,
        children: Vec<TreeWeighted>,
        weight: u32,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Forest {
        trees: Vec<Tree>,
        best: Option<Box<Tree>>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct ForestWeighted {
        trees: Vec<TreeWeighted>,
        best: Option<Box<TreeWeighted>>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Grove {
        trees: Vec<Tree>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct GroveWeighted {
        trees: Vec<TreeWeighted>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum Expr {
        Lit(i64),
        Neg(Box<Expr>),
        Add(Box<Expr>, Box<Expr>),
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum ExprText {
        Lit(String),
        Neg(Box<ExprText>),
        Add(Box<ExprText>, Box<ExprText>),
    }

    #[test]
    fn recursive_types_terminate() {
        assert_eq!(check::<Tree, Tree>(), SchemaCompat::Reads);
        assert_eq!(check::<Forest, Forest>(), SchemaCompat::Reads);
        assert_eq!(check::<Tree, TreeWeighted>(), SchemaCompat::Reads);
        assert_breaks(check::<TreeWeighted, Tree>(), "/weight", "`weight`");
        // Properties are compared in order: `best` comes first.
        assert_breaks(
            check::<ForestWeighted, Forest>(),
            "/best/weight",
            "`weight`",
        );
        assert_breaks(
            check::<GroveWeighted, Grove>(),
            "/trees/0/weight",
            "`weight`",
        );
        assert_eq!(check::<Expr, Expr>(), SchemaCompat::Reads);
        let answer = check::<ExprText, Expr>();
        assert_breaks(answer, "/Lit", "type changed from integer to string");
    }

    #[test]
    fn collections_compare_their_items() {
        assert_breaks(
            check::<Vec<String>, Vec<u32>>(),
            "/0",
            "type changed from integer to string",
        );
        assert_eq!(check::<Vec<u64>, Vec<u32>>(), SchemaCompat::Reads);
        let answer = check::<HashMap<String, String>, HashMap<String, u32>>();
        assert_breaks(answer, "/*", "type changed from integer to string");
        assert_eq!(
            check::<HashMap<String, u64>, HashMap<String, u8>>(),
            SchemaCompat::Reads
        );
        assert_unknown(check::<HashSet<String>, Vec<String>>(), "", "uniqueItems");
        assert_eq!(check::<Vec<String>, HashSet<String>>(), SchemaCompat::Reads);
    }

    #[test]
    fn tuples_compare_index_by_index_and_length() {
        assert_eq!(check::<(u16, String), (u8, String)>(), SchemaCompat::Reads);
        assert_breaks(
            check::<(u8, u8), (u8, String)>(),
            "/1",
            "type changed from string to integer",
        );
        assert_breaks(
            check::<(u8, String), (u8,)>(),
            "",
            "the reader needs at least 2",
        );
        assert_breaks(
            check::<(u8,), (u8, String)>(),
            "",
            "the reader accepts at most 1 items",
        );
    }

    // Keywords this check does not model, and odd schemas.

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Kinds {
        letter: char,
        text: String,
        nonzero: std::num::NonZeroI32,
        any: Value,
        map: Map<String, Value>,
        tuple: (u8, bool),
        unit: (),
    }

    #[test]
    fn a_different_pattern_is_unknown() {
        let written = schema::<Line>();
        let mut read = written.clone();
        read["properties"]["sku"]["pattern"] = json!("^[A-Z]+$");
        assert_unknown(reads(&read, &written), "/sku", "pattern");
        let mut both = written.clone();
        both["properties"]["sku"]["pattern"] = json!("^[A-Z]+$");
        assert_eq!(reads(&read, &both), SchemaCompat::Reads);
        assert_eq!(reads(&written, &read), SchemaCompat::Reads);
    }

    #[test]
    fn string_lengths_and_formats() {
        assert_eq!(check::<String, char>(), SchemaCompat::Reads);
        assert_unknown(check::<char, String>(), "", "minLength");
        let written = json!({"type": "string", "format": "uuid"});
        assert_eq!(
            reads(&json!({"type": "string"}), &written),
            SchemaCompat::Reads
        );
        let read = json!({"type": "string", "format": "date-time"});
        assert_unknown(reads(&read, &written), "", "format");
    }

    #[test]
    fn an_unknown_keyword_is_unknown_unless_the_writer_has_it_too() {
        let written = schema::<Line>();
        let mut read = written.clone();
        read["x-custom"] = json!({"a": 1});
        assert_unknown(reads(&read, &written), "", "x-custom");
        assert_eq!(reads(&read, &read), SchemaCompat::Reads);
        assert_eq!(reads(&written, &read), SchemaCompat::Reads);
        assert_unknown(check::<std::num::NonZeroI32, i32>(), "", "not");
        let read = json!({"type": "integer", "if": {"minimum": 3}, "then": {"maximum": 5}});
        assert_unknown(reads(&read, &json!({"type": "integer"})), "", "if");
    }

    #[test]
    fn null_schemas_are_not_checked() {
        assert_eq!(reads(&Value::Null, &schema::<Line>()), SchemaCompat::Reads);
        assert_eq!(reads(&schema::<Line>(), &Value::Null), SchemaCompat::Reads);
        assert_eq!(reads(&Value::Null, &Value::Null), SchemaCompat::Reads);
    }

    #[test]
    fn boolean_schemas() {
        let line = schema::<Line>();
        assert_eq!(reads(&json!(true), &line), SchemaCompat::Reads);
        assert_eq!(reads(&line, &json!(false)), SchemaCompat::Reads);
        assert_breaks(
            reads(&line, &json!(true)),
            "",
            "values of any type were written before",
        );
        assert_breaks(reads(&json!(false), &line), "", "no value is accepted");
        let read = json!({"properties": {"a": {"type": "integer"}}});
        assert_breaks(reads(&read, &json!(true)), "/a", "values of any type");
        assert_eq!(check::<Value, Line>(), SchemaCompat::Reads);
        assert_breaks(check::<Line, Value>(), "", "values of any type");
    }

    #[test]
    fn malformed_schemas_are_unknown_and_never_panic() {
        let line = schema::<Line>();
        assert_unknown(reads(&json!({"type": 5}), &line), "", "type");
        assert_unknown(reads(&json!({"$ref": "#/$defs/Gone"}), &line), "", "$ref");
        assert_unknown(reads(&json!({"$ref": "other.json#/x"}), &line), "", "$ref");
        assert_unknown(reads(&json!("text"), &line), "", "(not a schema)");
        assert_unknown(reads(&line, &json!({"$ref": "#/%zz"})), "", "$ref");
        let read = json!({"type": "object", "required": "qty"});
        assert_unknown(reads(&read, &json!({"type": "object"})), "", "required");
        let odd = [
            json!(1),
            json!([]),
            json!({"oneOf": 3}),
            json!({"allOf": [1]}),
            json!({"properties": []}),
            json!({"items": 3, "type": "array"}),
            json!({"minimum": "low", "type": "integer"}),
            json!({"enum": {}}),
            json!({"$ref": "#", "anyOf": [{"$ref": "#"}]}),
            json!({"allOf": [{"$ref": "#"}]}),
        ];
        for a in &odd {
            for b in &odd {
                let _ = reads(a, b);
            }
            let _ = reads(a, &line);
            let _ = reads(&line, a);
        }
    }

    #[test]
    fn self_referencing_refs_terminate() {
        let loops = json!({"$ref": "#"});
        assert_eq!(reads(&loops, &loops), SchemaCompat::Reads);
        let chain = json!({
            "$ref": "#/$defs/a",
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}
        });
        assert_eq!(reads(&chain, &chain), SchemaCompat::Reads);
        let merged = json!({"allOf": [{"$ref": "#"}, {"$ref": "#"}]});
        assert_eq!(reads(&merged, &merged), SchemaCompat::Reads);
        // A writer constrained by nothing but itself may write anything.
        let answer = reads(&json!({"type": "string"}), &merged);
        assert_breaks(answer, "", "values of any type were written before");
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    enum Wrapped3 {
        A(Line),
        B(Line),
        C { x: u8 },
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    enum WrappedNoB {
        A(Line),
        C { x: u8 },
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    enum WrappedText {
        A(LineText),
        B(Line),
        C { x: u8 },
    }

    #[test]
    fn internally_tagged_newtype_variants_merge_their_ref() {
        assert_eq!(check::<Wrapped3, Wrapped3>(), SchemaCompat::Reads);
        assert_eq!(check::<Wrapped3, WrappedNoB>(), SchemaCompat::Reads);
        assert_breaks(
            check::<WrappedNoB, Wrapped3>(),
            "",
            "variant `B` is no longer accepted",
        );
        let answer = check::<WrappedText, Wrapped3>();
        assert_breaks(answer, "/qty", "type changed from integer to string");
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct FlatMap {
        id: u32,
        #[serde(flatten)]
        line: Line,
        #[serde(flatten)]
        extra: HashMap<String, u32>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct FlatMapText {
        id: u32,
        #[serde(flatten)]
        line: Line,
        #[serde(flatten)]
        extra: HashMap<String, String>,
    }

    #[test]
    fn flattened_maps_compare_their_values() {
        assert_eq!(check::<FlatMap, FlatMap>(), SchemaCompat::Reads);
        assert_eq!(
            check::<FlatMap, Line>(),
            SchemaCompat::Breaks {
                at: "/id".into(),
                why: "required property `id` is missing from values written before".into(),
            }
        );
        let answer = check::<FlatMapText, FlatMap>();
        assert_breaks(answer, "/*", "type changed from integer to string");
        // A struct's fields land in a flattened map of the reader: each is checked against it.
        assert_breaks(
            check::<HashMap<String, String>, Line>(),
            "/qty",
            "type changed",
        );
    }

    fn nested(levels: usize) -> Value {
        let mut deep = json!({"type": "integer"});
        for _ in 0..levels {
            deep = json!({"type": "array", "items": deep});
        }
        deep
    }

    #[test]
    fn deep_schemas_stop_at_the_depth_limit() {
        assert_eq!(reads(&nested(200), &nested(200)), SchemaCompat::Reads);
        // Under the nesting limit, over the limit of comparisons deep.
        match reads(&nested(300), &nested(300)) {
            SchemaCompat::Unknown { at, keyword } => {
                assert_eq!(keyword, "(depth limit)");
                assert!(at.starts_with("/0/0/0"), "{at}");
            }
            other => panic!("{other:?}"),
        }
        // Over the nesting limit (601 levels of JSON): refused before any comparison.
        assert_unknown(reads(&nested(600), &nested(600)), "", "(depth limit)");
    }

    #[test]
    fn shared_definitions_are_compared_once() {
        let mut defs = Map::new();
        for i in 0..40 {
            let next = json!({ "$ref": format!("#/$defs/D{}", i + 1) });
            let def = json!({
                "type": "object",
                "properties": {"a": next, "b": next},
                "required": ["a", "b"]
            });
            defs.insert(format!("D{i}"), def);
        }
        defs.insert("D40".into(), json!({"type": "integer"}));
        let root = json!({"$ref": "#/$defs/D0", "$defs": defs});
        assert_eq!(reads(&root, &root), SchemaCompat::Reads);
        let mut changed = root.clone();
        changed["$defs"]["D40"] = json!({"type": "string"});
        let answer = reads(&changed, &root);
        let at = "/a".repeat(40);
        assert_breaks(answer, &at, "type changed from integer to string");
    }

    #[test]
    fn annotations_do_not_matter() {
        let written = json!({"type": "integer", "title": "a", "description": "b", "default": 1});
        let read = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "x", "$comment": "c", "type": "integer", "title": "z", "examples": [2],
            "deprecated": true, "readOnly": true, "writeOnly": false
        });
        assert_eq!(reads(&read, &written), SchemaCompat::Reads);
    }

    #[test]
    fn draft_07_definitions_and_tuples_resolve() {
        let written = json!({
            "definitions": {"n": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255}},
            "type": "array", "items": [{"$ref": "#/definitions/n"}], "additionalItems": false
        });
        let read = json!({
            "definitions": {"n": {"type": "integer", "format": "uint16", "minimum": 0, "maximum": 65535}},
            "type": "array", "items": [{"$ref": "#/definitions/n"}], "maxItems": 1
        });
        assert_eq!(reads(&read, &written), SchemaCompat::Reads);
        assert_breaks(
            reads(&written, &read),
            "/0",
            "maximum lowered from 65535 to 255",
        );
    }

    #[test]
    fn exclusive_bounds_and_constants() {
        let read = json!({"type": "integer", "exclusiveMinimum": 0});
        let answer = reads(&read, &json!({"type": "integer", "minimum": 0}));
        assert_breaks(answer, "", "minimum raised from 0 to 0 (exclusive)");
        assert_eq!(
            reads(&read, &json!({"type": "integer", "minimum": 1})),
            SchemaCompat::Reads
        );
        assert_eq!(reads(&read, &json!({"const": 3})), SchemaCompat::Reads);
        assert_breaks(reads(&read, &json!({"const": -3})), "", "minimum raised");
        let read = json!({"const": "a"});
        assert_breaks(
            reads(&read, &json!({"const": "b"})),
            "",
            "value `b` is no longer accepted",
        );
        assert_breaks(
            reads(&read, &json!({"type": "string"})),
            "",
            "the reader accepts only `a`",
        );
        assert_eq!(
            reads(&json!({"enum": [1.0, 2]}), &json!({"const": 1})),
            SchemaCompat::Reads
        );
    }
}
