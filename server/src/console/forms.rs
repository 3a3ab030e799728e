//! Forms generated from JSON Schemas: schema → [`Field`] (the form model) → HTML, and the
//! submitted form data → a JSON value.
//!
//! Pure: no I/O, no engine. The model covers what the workflow macros generate (through
//! schemars): objects and nested objects, arrays, string enums (a select), integers and
//! numbers with their bounds, booleans, optional and nullable fields, and `oneOf` enums whose
//! variants are structs (a select of the variant, then its fields). Anything else (tuples,
//! maps, several types at once, a recursion deeper than [`MAX_DEPTH`]) is a JSON text area, so
//! every schema gives a usable form.
//!
//! # Field names
//!
//! Each input is named by its path, a JSON Pointer below the form's root name ([`ROOT`]):
//! `v/address/city`, `v/items/0/name`. The path of a field is therefore the instance path the
//! server's schema check reports (`/address/city`) after the root name, which is how a server
//! refusal is shown beside its field. Markers that are not values use characters a pointer
//! segment never holds unescaped here: `{path}[]` lists an array's item indices, `{path}#` is a
//! `oneOf`'s selected variant (its fields under `{path}#{i}`), `{path}?` includes an optional
//! object.

use std::collections::{BTreeMap, HashMap};

use maud::{html, Markup};
use serde_json::{Map, Number, Value};

/// The name every generated form's root field has.
pub const ROOT: &str = "v";

/// How deep `$ref`s and nesting are followed before a field falls back to a JSON text area.
pub const MAX_DEPTH: usize = 12;

/// One field of a form: what the value is, and how it is described.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The schema's `title`.
    pub title: Option<String>,
    /// The schema's `description`.
    pub description: Option<String>,
    /// Whether `null` is a valid value (`Option<T>` in Rust).
    pub nullable: bool,
    /// The value's kind.
    pub kind: Kind,
}

/// The kind of a field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A string, with its length bounds and pattern.
    Text {
        /// `minLength`.
        min_len: Option<u64>,
        /// `maxLength`.
        max_len: Option<u64>,
        /// `pattern` (a regular expression the string must contain a match of).
        pattern: Option<String>,
    },
    /// An integer (`type: integer`), with its bounds.
    Integer(Bounds),
    /// A number (`type: number`), with its bounds.
    Number(Bounds),
    /// `true` or `false`.
    Bool,
    /// One of a list of values (`enum`): a select.
    Choice(Vec<Value>),
    /// Exactly this value (`const`, or one value of an enum of structs).
    Const(Value),
    /// An object with named properties.
    Object(Vec<Prop>),
    /// A list of items of one kind.
    Array {
        /// The items' field.
        items: Box<Field>,
        /// `minItems`: how many item rows a new form starts with.
        min_items: u64,
    },
    /// One of several shapes (`oneOf`/`anyOf`): a select of the variant, then its fields.
    OneOf(Vec<Variant>),
    /// Any JSON, typed as text.
    Json,
}

/// Numeric bounds (`minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bounds {
    /// `minimum`.
    pub min: Option<f64>,
    /// `maximum`.
    pub max: Option<f64>,
    /// `exclusiveMinimum`.
    pub xmin: Option<f64>,
    /// `exclusiveMaximum`.
    pub xmax: Option<f64>,
}

/// A property of an object field.
#[derive(Clone, Debug, PartialEq)]
pub struct Prop {
    /// The property name.
    pub name: String,
    /// Whether the object must have it.
    pub required: bool,
    /// Its field.
    pub field: Field,
}

/// One variant of a [`Kind::OneOf`].
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// What the select shows.
    pub label: String,
    /// The variant's field.
    pub field: Field,
}

impl Field {
    fn of(kind: Kind) -> Self {
        Field {
            title: None,
            description: None,
            nullable: false,
            kind,
        }
    }

    /// The form model of a JSON Schema (`$ref`s resolved against the schema itself). `null`
    /// (no schema) is a JSON text area.
    pub fn from_schema(schema: &Value) -> Field {
        build(schema, schema, 0)
    }
}

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> Option<&'a Value> {
    let r = schema.get("$ref")?.as_str()?;
    let pointer = r.strip_prefix('#')?;
    root.pointer(pointer)
}

fn build(root: &Value, schema: &Value, depth: usize) -> Field {
    let mut field = build_kind(root, schema, depth);
    if let Some(obj) = schema.as_object() {
        if field.title.is_none() {
            field.title = obj.get("title").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(d) = obj.get("description").and_then(Value::as_str) {
            field.description = Some(d.to_owned());
        }
    }
    field
}

fn build_kind(root: &Value, schema: &Value, depth: usize) -> Field {
    let Some(obj) = schema.as_object() else {
        return Field::of(Kind::Json);
    };
    if depth > MAX_DEPTH {
        return Field::of(Kind::Json);
    }
    if let Some(target) = resolve(root, schema) {
        return build(root, target, depth + 1);
    }
    if let Some(c) = obj.get("const") {
        return Field::of(Kind::Const(c.clone()));
    }
    if let Some(values) = obj.get("enum").and_then(Value::as_array) {
        return choice(values);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(list) = obj.get(key).and_then(Value::as_array) {
            return alternatives(root, list, depth);
        }
    }
    if let Some(all) = obj.get("allOf").and_then(Value::as_array) {
        if all.len() == 1 {
            return build(root, &all[0], depth + 1);
        }
        return Field::of(Kind::Json);
    }
    let (types, nullable) = json_types(obj);
    Field {
        title: None,
        description: None,
        nullable,
        kind: typed_kind(root, obj, &types, nullable, depth),
    }
}

/// An `enum`: a choice among its scalar values (`null` among them makes the field nullable);
/// an enum of objects or arrays, or of `null` alone, is edited as JSON.
fn choice(values: &[Value]) -> Field {
    let nullable = values.iter().any(Value::is_null);
    let values: Vec<Value> = values.iter().filter(|v| !v.is_null()).cloned().collect();
    if values.iter().all(|v| !v.is_object() && !v.is_array()) && !values.is_empty() {
        let mut f = Field::of(Kind::Choice(values));
        f.nullable = nullable;
        return f;
    }
    Field::of(Kind::Json)
}

/// The schema's `type`, without `null`, and whether `null` was among it (an object with
/// `properties` and no `type` is an object).
fn json_types(obj: &serde_json::Map<String, Value>) -> (Vec<&str>, bool) {
    match obj.get("type") {
        Some(Value::String(t)) => (vec![t.as_str()], false),
        Some(Value::Array(ts)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            let nullable = names.contains(&"null");
            (
                names.into_iter().filter(|t| *t != "null").collect(),
                nullable,
            )
        }
        _ if obj.contains_key("properties") => (vec!["object"], false),
        _ => (vec![], false),
    }
}

/// The kind of field a schema of the JSON types `types` is edited with.
fn typed_kind(
    root: &Value,
    obj: &serde_json::Map<String, Value>,
    types: &[&str],
    nullable: bool,
    depth: usize,
) -> Kind {
    match types {
        ["string"] => Kind::Text {
            min_len: obj.get("minLength").and_then(Value::as_u64),
            max_len: obj.get("maxLength").and_then(Value::as_u64),
            pattern: obj
                .get("pattern")
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        ["integer"] | ["number"] => {
            let bounds = Bounds {
                min: num(obj.get("minimum")),
                max: num(obj.get("maximum")),
                xmin: num(obj.get("exclusiveMinimum")),
                xmax: num(obj.get("exclusiveMaximum")),
            };
            if types[0] == "integer" {
                Kind::Integer(bounds)
            } else {
                Kind::Number(bounds)
            }
        }
        ["boolean"] => Kind::Bool,
        ["null"] => Kind::Const(Value::Null),
        [] if nullable => Kind::Const(Value::Null),
        ["object"] => object_kind(root, obj, depth),
        ["array"] => match obj.get("items") {
            Some(items) if items.is_object() && !obj.contains_key("prefixItems") => Kind::Array {
                items: Box::new(build(root, items, depth + 1)),
                min_items: obj.get("minItems").and_then(Value::as_u64).unwrap_or(0),
            },
            _ => Kind::Json,
        },
        _ => Kind::Json,
    }
}

/// An object with properties, one field each; a map (`additionalProperties`) or an object
/// that allows anything is edited as JSON.
fn object_kind(root: &Value, obj: &serde_json::Map<String, Value>, depth: usize) -> Kind {
    match obj.get("properties").and_then(Value::as_object) {
        Some(props) if !props.is_empty() => {
            let required: Vec<&str> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Kind::Object(
                props
                    .iter()
                    .map(|(name, s)| Prop {
                        name: name.clone(),
                        required: required.contains(&name.as_str()),
                        field: build(root, s, depth + 1),
                    })
                    .collect(),
            )
        }
        _ => Kind::Json,
    }
}

/// A `oneOf`/`anyOf`: `null` alternatives make the field nullable; a single other alternative
/// is that field; string enums among them become one variant per value.
fn alternatives(root: &Value, list: &[Value], depth: usize) -> Field {
    let built: Vec<Field> = list.iter().map(|s| build(root, s, depth + 1)).collect();
    let nullable = built.iter().any(|f| f.kind == Kind::Const(Value::Null));
    let mut rest: Vec<Field> = built
        .into_iter()
        .filter(|f| f.kind != Kind::Const(Value::Null))
        .collect();
    if rest.len() == 1 {
        let mut only = rest.remove(0);
        only.nullable |= nullable;
        return only;
    }
    if rest.is_empty() {
        return Field::of(Kind::Const(Value::Null));
    }
    let mut variants = Vec::new();
    for (i, f) in rest.into_iter().enumerate() {
        match &f.kind {
            Kind::Choice(values) => {
                for v in values {
                    variants.push(Variant {
                        label: scalar_label(v),
                        field: Field::of(Kind::Const(v.clone())),
                    });
                }
            }
            Kind::Const(v) => variants.push(Variant {
                label: scalar_label(v),
                field: f.clone(),
            }),
            Kind::Object(props) if props.len() == 1 && props[0].required => {
                // An externally tagged enum variant: `{"published": …}`.
                variants.push(Variant {
                    label: props[0].name.clone(),
                    field: f.clone(),
                })
            }
            _ => variants.push(Variant {
                label: f
                    .title
                    .clone()
                    .unwrap_or_else(|| format!("option {}", i + 1)),
                field: f,
            }),
        }
    }
    Field {
        title: None,
        description: None,
        nullable,
        kind: Kind::OneOf(variants),
    }
}

fn scalar_label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The path of property `name` below `path` (escaped as a JSON Pointer segment).
pub fn child(path: &str, name: &str) -> String {
    format!("{path}/{}", name.replace('~', "~0").replace('/', "~1"))
}

// ---- HTML -----------------------------------------------------------------------------------

/// Messages to show beside fields, by field path (`v/items/0/name`).
pub type Errors = HashMap<String, Vec<String>>;

/// The inputs of a form for `field` named `name` (normally [`ROOT`]) and shown as `label`,
/// filled with `value` when given, with `errors` beside their fields.
pub fn render(
    field: &Field,
    name: &str,
    label: &str,
    value: Option<&Value>,
    errors: &Errors,
) -> Markup {
    render_field(field, name, label, true, value, errors, 0)
}

fn error_list(path: &str, errors: &Errors) -> Markup {
    let list = errors.get(path).map(Vec::as_slice).unwrap_or(&[]);
    html! {
        span.err data-err-for=(path) { @for (i, e) in list.iter().enumerate() { @if i > 0 { "; " } (e) } }
    }
}

fn bounds_attrs(
    b: &Bounds,
) -> (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
) {
    let f = |x: Option<f64>| x.map(|v| format!("{v}"));
    (f(b.min), f(b.max), f(b.xmin), f(b.xmax))
}

fn render_field(
    field: &Field,
    path: &str,
    label: &str,
    required: bool,
    value: Option<&Value>,
    errors: &Errors,
    arrays: usize,
) -> Markup {
    let optional = !required;
    let help = field.description.as_deref().unwrap_or("");
    let req = required && !field.nullable;
    html! {
        @match &field.kind {
            Kind::Object(props) => {
                fieldset.object data-path=(path) {
                    legend {
                        (label)
                        @if optional {
                            " " label.include {
                                input type="checkbox" name=(format!("{path}?")) value="1"
                                    checked[value.is_some_and(|v| !v.is_null())];
                                " include"
                            }
                        }
                    }
                    @if !help.is_empty() { p.help { (help) } }
                    (error_list(path, errors))
                    @for p in props {
                        (render_field(&p.field, &child(path, &p.name), &p.name, p.required,
                            value.and_then(|v| v.get(&p.name)), errors, arrays))
                    }
                }
            }
            Kind::Array { items, min_items } => {
                @let placeholder = format!("__{arrays}__");
                @let rows: Vec<&Value> = value.and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
                @let count = if value.is_some() { rows.len() } else { *min_items as usize };
                fieldset.array data-path=(path) data-placeholder=(placeholder) data-next=(count) {
                    legend { (label) @if optional { span.opt { " (optional)" } } }
                    @if !help.is_empty() { p.help { (help) } }
                    (error_list(path, errors))
                    div.items {
                        @for i in 0..count {
                            (array_item(items, path, &i.to_string(), rows.get(i).copied(), errors, arrays))
                        }
                    }
                    template { (array_item(items, path, &placeholder, None, errors, arrays + 1)) }
                    button.add type="button" data-add=(path) { "Add " (label) " item" }
                }
            }
            Kind::OneOf(variants) => {
                @let chosen = value.and_then(|v| variants.iter().position(|x| variant_matches(&x.field, v)));
                div.field.oneof data-path=(path) {
                    label for=(path) { (label) @if optional || field.nullable { span.opt { " (optional)" } } }
                    select id=(path) name=(format!("{path}#")) data-kind="variant" data-required=[req.then_some("1")] {
                        @if optional || field.nullable || chosen.is_none() {
                            option value="" selected[chosen.is_none()] { "—" }
                        }
                        @for (i, v) in variants.iter().enumerate() {
                            option value=(i) selected[chosen == Some(i)] { (v.label) }
                        }
                    }
                    (error_list(path, errors))
                    @if !help.is_empty() { p.help { (help) } }
                    @for (i, v) in variants.iter().enumerate() {
                        @if !matches!(v.field.kind, Kind::Const(_)) {
                            div.variant data-variant=(i) hidden[chosen != Some(i)] {
                                (render_field(&v.field, &format!("{path}#{i}"), &v.label, true,
                                    if chosen == Some(i) { value } else { None }, errors, arrays))
                            }
                        }
                    }
                }
            }
            Kind::Const(v) => {
                div.field.const data-path=(path) {
                    span.label { (label) } " " code { (v.to_string()) }
                }
            }
            _ => (scalar(field, path, label, required, value, errors)),
        }
    }
}

fn array_item(
    items: &Field,
    path: &str,
    index: &str,
    value: Option<&Value>,
    errors: &Errors,
    arrays: usize,
) -> Markup {
    html! {
        div.item {
            input type="hidden" name=(format!("{path}[]")) value=(index);
            (render_field(items, &format!("{path}/{index}"), &format!("#{index}"), true, value, errors, arrays))
            button.remove type="button" data-remove="1" { "Remove" }
        }
    }
}

fn variant_matches(field: &Field, v: &Value) -> bool {
    match &field.kind {
        Kind::Const(c) => c == v,
        Kind::Object(props) => {
            v.is_object()
                && props
                    .iter()
                    .filter(|p| p.required)
                    .all(|p| v.get(&p.name).is_some())
        }
        Kind::Text { .. } => v.is_string(),
        Kind::Integer(_) | Kind::Number(_) => v.is_number(),
        Kind::Bool => v.is_boolean(),
        Kind::Array { .. } => v.is_array(),
        _ => false,
    }
}

fn scalar(
    field: &Field,
    path: &str,
    label: &str,
    required: bool,
    value: Option<&Value>,
    errors: &Errors,
) -> Markup {
    let optional = !required || field.nullable;
    let req = (!optional).then_some("1");
    let help = field.description.as_deref().unwrap_or("");
    let text = value.filter(|v| !v.is_null()).map(|v| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    html! {
        div.field data-path=(path) {
            label for=(path) { (label) @if optional { span.opt { " (optional)" } } }
            @match &field.kind {
                Kind::Text { min_len, max_len, pattern } => {
                    input id=(path) name=(path) type="text" data-kind="text" data-required=[req]
                        data-minlength=[min_len.map(|n| n.to_string())]
                        data-maxlength=[max_len.map(|n| n.to_string())]
                        data-pattern=[pattern.as_deref()] value=[text.as_deref()];
                }
                Kind::Integer(b) | Kind::Number(b) => {
                    @let (min, max, xmin, xmax) = bounds_attrs(b);
                    @let kind = if matches!(field.kind, Kind::Integer(_)) { "integer" } else { "number" };
                    input id=(path) name=(path) type="text" inputmode="decimal" data-kind=(kind)
                        data-required=[req] data-min=[min] data-max=[max] data-xmin=[xmin]
                        data-xmax=[xmax] value=[text.as_deref()];
                }
                Kind::Bool => {
                    @if optional {
                        select id=(path) name=(path) data-kind="bool" {
                            option value="" selected[text.is_none()] { "—" }
                            option value="true" selected[text.as_deref() == Some("true")] { "true" }
                            option value="false" selected[text.as_deref() == Some("false")] { "false" }
                        }
                    } @else {
                        input id=(path) name=(path) type="checkbox" value="true" data-kind="bool"
                            checked[text.as_deref() == Some("true")];
                    }
                }
                Kind::Choice(values) => {
                    @let chosen = value.and_then(|v| values.iter().position(|x| x == v));
                    select id=(path) name=(path) data-kind="choice" data-required=[req] {
                        @if optional || chosen.is_none() {
                            option value="" selected[chosen.is_none()] { "—" }
                        }
                        @for (i, v) in values.iter().enumerate() {
                            option value=(i) selected[chosen == Some(i)] { (scalar_label(v)) }
                        }
                    }
                }
                _ => {
                    @let json = value.map(|v| serde_json::to_string_pretty(v).unwrap_or_default());
                    textarea id=(path) name=(path) data-kind="json" data-required=[req] rows="4"
                        placeholder="JSON" { (json.unwrap_or_default()) }
                }
            }
            (error_list(path, errors))
            @if !help.is_empty() { p.help { (help) } }
        }
    }
}

// ---- form data → JSON -----------------------------------------------------------------------

/// Submitted form data: every value of each name, in order.
#[derive(Clone, Debug, Default)]
pub struct FormData(BTreeMap<String, Vec<String>>);

impl FormData {
    /// Read `application/x-www-form-urlencoded` bytes.
    pub fn parse(body: &[u8]) -> Self {
        let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in form_urlencoded::parse(body) {
            map.entry(k.into_owned()).or_default().push(v.into_owned());
        }
        FormData(map)
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.first()).map(String::as_str)
    }

    fn all(&self, name: &str) -> &[String] {
        self.0.get(name).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// The JSON value `data` holds for `field` at `name` (normally [`ROOT`]), or the messages of
/// every field that cannot be read, by path. An empty optional root is `null`.
pub fn value_of(field: &Field, name: &str, data: &FormData) -> Result<Value, Errors> {
    let mut errors = Errors::new();
    let v = read(field, name, true, data, &mut errors);
    if errors.is_empty() {
        Ok(v.unwrap_or(Value::Null))
    } else {
        Err(errors)
    }
}

fn err(errors: &mut Errors, path: &str, message: impl Into<String>) {
    errors
        .entry(path.to_owned())
        .or_default()
        .push(message.into());
}

/// Nothing entered: `None` for an optional field, `null` for a nullable one, an error for a
/// required one.
fn empty(field: &Field, path: &str, required: bool, errors: &mut Errors) -> Option<Value> {
    if field.nullable {
        Some(Value::Null)
    } else if !required {
        None
    } else {
        err(errors, path, "required: enter a value");
        None
    }
}

/// The value of `field` at `path` in the submitted form, or `None` (with the reason in
/// `errors` when there is one) when it has none.
fn read(
    field: &Field,
    path: &str,
    required: bool,
    data: &FormData,
    errors: &mut Errors,
) -> Option<Value> {
    let raw = data.get(path).map(str::trim);
    match &field.kind {
        Kind::Text { .. } => match raw {
            Some(s) if !s.is_empty() => Some(Value::String(data.get(path)?.to_owned())),
            _ if required && !field.nullable => Some(Value::String(String::new())),
            _ => empty(field, path, required, errors),
        },
        Kind::Integer(_) | Kind::Number(_) => match raw {
            Some(s) if !s.is_empty() => {
                read_number(s, matches!(field.kind, Kind::Integer(_)), path, errors)
            }
            _ => empty(field, path, required, errors),
        },
        Kind::Bool => match raw {
            Some("true") => Some(Value::Bool(true)),
            Some("false") => Some(Value::Bool(false)),
            Some(s) if !s.is_empty() => {
                err(errors, path, format!("{s:?} is not true or false"));
                None
            }
            // An unchecked checkbox sends nothing.
            _ if required && !field.nullable => Some(Value::Bool(false)),
            _ => empty(field, path, required, errors),
        },
        Kind::Choice(values) => match raw {
            Some(s) if !s.is_empty() => match s.parse::<usize>().ok().and_then(|i| values.get(i)) {
                Some(v) => Some(v.clone()),
                None => {
                    err(errors, path, format!("{s:?} is not one of the choices"));
                    None
                }
            },
            _ => empty(field, path, required, errors),
        },
        Kind::Const(v) => Some(v.clone()),
        Kind::Json => match raw {
            Some(s) if !s.is_empty() => match serde_json::from_str::<Value>(s) {
                Ok(v) => Some(v),
                Err(e) => {
                    err(errors, path, format!("not valid JSON: {e}"));
                    None
                }
            },
            _ => empty(field, path, required, errors),
        },
        Kind::Object(props) => read_object(field, props, path, required, data, errors),
        Kind::Array { items, .. } => read_array(field, items, path, required, data, errors),
        Kind::OneOf(variants) => read_variant(field, variants, path, required, data, errors),
    }
}

/// A number typed into the form: a whole one for an integer field.
fn read_number(s: &str, integer: bool, path: &str, errors: &mut Errors) -> Option<Value> {
    match s.parse::<Number>() {
        Ok(n) if !integer || is_integer_text(s) => Some(Value::Number(n)),
        _ => {
            let what = if integer {
                "a whole number"
            } else {
                "a number"
            };
            err(errors, path, format!("{s:?} is not {what}"));
            None
        }
    }
}

/// An object's properties, each read at its own path; an optional object left out of the form
/// is none (or `null`).
fn read_object(
    field: &Field,
    props: &[Prop],
    path: &str,
    required: bool,
    data: &FormData,
    errors: &mut Errors,
) -> Option<Value> {
    if !required && data.get(&format!("{path}?")).is_none() {
        return if field.nullable {
            Some(Value::Null)
        } else {
            None
        };
    }
    let mut out = Map::new();
    for p in props {
        if let Some(v) = read(&p.field, &child(path, &p.name), p.required, data, errors) {
            out.insert(p.name.clone(), v);
        }
    }
    Some(Value::Object(out))
}

/// An array's items, in the order of their indices in the form.
fn read_array(
    field: &Field,
    items: &Field,
    path: &str,
    required: bool,
    data: &FormData,
    errors: &mut Errors,
) -> Option<Value> {
    let mut indices: Vec<usize> = data
        .all(&format!("{path}[]"))
        .iter()
        .filter_map(|i| i.parse().ok())
        .collect();
    indices.sort_unstable();
    indices.dedup();
    if indices.is_empty() && !required {
        return if field.nullable {
            Some(Value::Null)
        } else {
            None
        };
    }
    let list = indices
        .into_iter()
        .map(|i| read(items, &format!("{path}/{i}"), true, data, errors).unwrap_or(Value::Null))
        .collect();
    Some(Value::Array(list))
}

/// The chosen variant of a `oneOf`, read at its own path.
fn read_variant(
    field: &Field,
    variants: &[Variant],
    path: &str,
    required: bool,
    data: &FormData,
    errors: &mut Errors,
) -> Option<Value> {
    let chosen = data.get(&format!("{path}#")).unwrap_or("");
    if chosen.is_empty() {
        return empty(field, path, required, errors);
    }
    match chosen
        .parse::<usize>()
        .ok()
        .and_then(|i| variants.get(i).map(|v| (i, v)))
    {
        Some((i, v)) => read(&v.field, &format!("{path}#{i}"), true, data, errors),
        None => {
            err(
                errors,
                path,
                format!("{chosen:?} is not one of the variants"),
            );
            None
        }
    }
}

fn is_integer_text(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The field path of a schema check's instance path (a JSON Pointer into the value), for a
/// form rooted at `name`: the same pointer below the root, except inside `oneOf` variants,
/// whose fields carry the variant's index.
pub fn path_of(field: &Field, name: &str, instance_path: &str, value: &Value) -> String {
    let mut path = name.to_owned();
    let mut field = field;
    let mut value = value;
    let segments: Vec<String> = instance_path
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let mut rest = segments.as_slice();
    loop {
        if let Kind::OneOf(variants) = &field.kind {
            match variants
                .iter()
                .position(|x| variant_matches(&x.field, value))
            {
                Some(i) => {
                    path = format!("{path}#{i}");
                    field = &variants[i].field;
                    continue;
                }
                None => return path,
            }
        }
        let Some((seg, tail)) = rest.split_first() else {
            return path;
        };
        let next = match &field.kind {
            Kind::Object(props) => props.iter().find(|p| &p.name == seg).map(|p| &p.field),
            Kind::Array { items, .. } => Some(items.as_ref()),
            _ => None,
        };
        let Some(next) = next else { return path };
        path = child(&path, seg);
        value = value
            .get(seg.as_str())
            .or_else(|| seg.parse::<usize>().ok().and_then(|i| value.get(i)))
            .unwrap_or(&Value::Null);
        field = next;
        rest = tail;
    }
}

#[cfg(test)]
mod tests;
