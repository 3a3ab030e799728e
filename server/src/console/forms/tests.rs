//! The form generator over every example's schemas and the ui-tests' schema snapshots, and
//! over a schema with each construct the generator models.

use std::sync::Arc;

use serde_json::json;

use super::*;

/// Every schema of every example workflow: (where it is from, the schema).
fn example_schemas() -> Vec<(String, Value)> {
    let docs = [
        example_counter::counter.schema(),
        example_crawler::crawler(example_crawler::Site::new()).schema(),
        example_effect_id::checkout(example_effect_id::Services::new(
            example_effect_id::Payments::new(),
        ))
        .schema(),
        example_invoice::invoicing(Arc::new(turnwise::clock::SystemClock)).schema(),
        example_ledger::account.schema(),
        example_pages::pages(example_pages::Paging::default()).schema(),
        example_review_draft::review_draft(example_review_draft::Review::default()).schema(),
    ];
    let mut out = Vec::new();
    for doc in docs {
        let doc = doc.document();
        let name = format!("{} {}", doc.workflow_type, doc.version);
        out.push((format!("{name} message"), doc.message.clone()));
        out.push((format!("{name} state"), doc.state.clone()));
        out.push((format!("{name} reply"), doc.reply.clone()));
        for (signal, s) in &doc.signals {
            out.push((format!("{name} signal {signal}"), s.clone()));
        }
    }
    assert_eq!(out.len(), 7 * 3 + 1, "seven examples, one signal");
    out
}

/// The ui-tests' committed schema snapshots (the macros' output for their test workflows).
fn snapshot_schemas() -> Vec<(String, Value)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../ui-tests/tests/schemas");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the ui-tests' schema snapshots")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        // A manifest holds several documents; a single document is one.
        let docs = match doc.get("workflows").and_then(Value::as_array) {
            Some(list) => list.clone(),
            None => vec![doc],
        };
        for d in docs {
            for key in ["message", "state", "reply"] {
                if let Some(s) = d.get(key) {
                    out.push((format!("{file} {key}"), s.clone()));
                }
            }
            for (name, s) in d
                .get("signals")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                out.push((format!("{file} signal {name}"), s.clone()));
            }
            for (name, s) in d
                .get("steps")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                out.push((format!("{file} step {name}"), s.clone()));
            }
        }
    }
    assert!(out.len() >= 6, "the snapshots hold schemas: {out:?}");
    out
}

/// Form data a person could enter into `field`'s form: every field filled with a value its
/// bounds allow, `variant` picking the variant of each `oneOf`, one row per array.
fn fill(field: &Field, path: &str, variant: usize, data: &mut Vec<(String, String)>) {
    let mut put = |k: String, v: String| data.push((k, v));
    match &field.kind {
        Kind::Text { min_len, .. } => put(
            path.into(),
            "x".repeat(min_len.unwrap_or(1).max(1) as usize),
        ),
        Kind::Integer(b) | Kind::Number(b) => {
            let low = b.min.or(b.xmin.map(|x| x.floor() + 1.0)).unwrap_or(1.0);
            let high = b.max.or(b.xmax.map(|x| x.ceil() - 1.0)).unwrap_or(f64::MAX);
            put(
                path.into(),
                format!("{}", low.max(1.0).min(high).ceil() as i64),
            )
        }
        Kind::Bool => put(path.into(), "true".into()),
        Kind::Choice(_) => put(path.into(), "0".into()),
        Kind::Const(_) => {}
        Kind::Json => put(path.into(), "{}".into()),
        Kind::Object(props) => {
            put(format!("{path}?"), "1".into());
            for p in props {
                fill(&p.field, &child(path, &p.name), variant, data);
            }
        }
        Kind::Array { items, .. } => {
            put(format!("{path}[]"), "0".into());
            fill(items, &format!("{path}/0"), variant, data);
        }
        Kind::OneOf(variants) => {
            let i = variant.min(variants.len() - 1);
            put(format!("{path}#"), i.to_string());
            fill(&variants[i].field, &format!("{path}#{i}"), variant, data);
        }
    }
}

fn form_data(pairs: &[(String, String)]) -> FormData {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    FormData::parse(body.as_bytes())
}

/// Every schema gives a form whose every input is named, and a filled form reads back as a
/// value the schema accepts (first and last variant of each `oneOf`).
#[test]
fn every_example_and_snapshot_schema_gives_a_form_that_makes_valid_values() {
    let all: Vec<_> = example_schemas()
        .into_iter()
        .chain(snapshot_schemas())
        .collect();
    let mut structured = 0;
    for (what, schema) in &all {
        let field = Field::from_schema(schema);
        if !matches!(field.kind, Kind::Json) {
            structured += 1;
        }
        let html = render(&field, ROOT, "Message", None, &Errors::new()).into_string();
        assert!(
            html.contains("name=\"v"),
            "{what}: the form has named inputs: {html}"
        );
        for variant in [0, usize::MAX] {
            let mut pairs = Vec::new();
            fill(&field, ROOT, variant, &mut pairs);
            let value = value_of(&field, ROOT, &form_data(&pairs))
                .unwrap_or_else(|e| panic!("{what}: {pairs:?} reads back: {e:?}"));
            let violations = turnwise::protocol::schema_check::violations(schema, &value).unwrap();
            assert!(
                violations.is_empty(),
                "{what}: the form made {value} from {pairs:?}, which the schema refuses: \
                 {violations:?}"
            );
        }
    }
    assert!(
        structured * 10 >= all.len() * 9,
        "nearly every schema is a structured form, not a JSON text area ({structured} of {})",
        all.len()
    );
}

/// A schema with each construct: enum, nested object, array of objects, bounded integer,
/// number, boolean, optional and nullable fields, and a `oneOf` enum of structs.
fn order_schema() -> Value {
    json!({
        "type": "object",
        "$defs": {
            "Line": {"type": "object", "properties": {
                "sku": {"type": "string", "minLength": 1},
                "qty": {"type": "integer", "minimum": 1, "maximum": 99}
            }, "required": ["sku", "qty"]},
            "Shipping": {"oneOf": [
                {"type": "string", "enum": ["pickup"]},
                {"type": "object", "properties": {"courier": {"type": "object", "properties": {
                    "name": {"type": "string"}}, "required": ["name"]}},
                 "required": ["courier"], "additionalProperties": false}
            ]}
        },
        "properties": {
            "priority": {"type": "string", "enum": ["low", "high"]},
            "address": {"type": "object", "properties": {
                "city": {"type": "string"}, "zip": {"type": ["string", "null"]}
            }, "required": ["city", "zip"]},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
            "weight": {"type": "number", "exclusiveMinimum": 0},
            "gift": {"type": "boolean"},
            "note": {"type": "string"},
            "shipping": {"$ref": "#/$defs/Shipping"}
        },
        "required": ["priority", "address", "lines", "weight", "gift", "shipping"]
    })
}

#[test]
fn the_model_has_each_construct() {
    let field = Field::from_schema(&order_schema());
    let Kind::Object(props) = &field.kind else {
        panic!("an object: {field:?}")
    };
    let kind = |name: &str| &props.iter().find(|p| p.name == name).unwrap().field;
    assert_eq!(
        kind("priority").kind,
        Kind::Choice(vec![json!("low"), json!("high")])
    );
    assert!(matches!(kind("address").kind, Kind::Object(_)));
    let Kind::Array { items, .. } = &kind("lines").kind else {
        panic!()
    };
    let Kind::Object(line) = &items.kind else {
        panic!()
    };
    assert_eq!(
        line.iter().find(|p| p.name == "qty").unwrap().field.kind,
        Kind::Integer(Bounds {
            min: Some(1.0),
            max: Some(99.0),
            ..Bounds::default()
        })
    );
    assert_eq!(kind("gift").kind, Kind::Bool);
    assert!(!props.iter().find(|p| p.name == "note").unwrap().required);
    let Kind::OneOf(variants) = &kind("shipping").kind else {
        panic!()
    };
    let labels: Vec<_> = variants.iter().map(|v| v.label.as_str()).collect();
    assert_eq!(labels, ["pickup", "courier"]);
}

fn pairs(list: &[(&str, &str)]) -> FormData {
    let owned: Vec<(String, String)> = list
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    form_data(&owned)
}

#[test]
fn form_data_reads_as_the_typed_value() {
    let field = Field::from_schema(&order_schema());
    let data = pairs(&[
        ("v/priority", "1"),
        ("v/address/city", "Lyon"),
        ("v/address/zip", ""),
        ("v/lines[]", "0"),
        ("v/lines/0/sku", "A-1"),
        ("v/lines/0/qty", "3"),
        ("v/lines[]", "2"),
        ("v/lines/2/sku", "B-2"),
        ("v/lines/2/qty", "12345678901234567890"),
        ("v/weight", "0.25"),
        ("v/note", ""),
        ("v/shipping#", "1"),
        ("v/shipping#1/courier/name", "Kite"),
    ]);
    let value = value_of(&field, ROOT, &data).unwrap();
    assert_eq!(
        value,
        json!({
            "priority": "high",
            "address": {"city": "Lyon", "zip": null},
            "lines": [{"sku": "A-1", "qty": 3}, {"sku": "B-2", "qty": 12345678901234567890u64}],
            "weight": 0.25,
            "gift": false,
            "shipping": {"courier": {"name": "Kite"}}
        })
    );
    // Past the bound: the form reads it, the schema check refuses it at the field's path.
    let violations = turnwise::protocol::schema_check::violations(&order_schema(), &value).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(
        path_of(&field, ROOT, &violations[0].instance_path, &value),
        "v/lines/1/qty"
    );
    let pickup = pairs(&[("v/priority", "0"), ("v/shipping#", "0"), ("v/weight", "2")]);
    assert_eq!(
        value_of(&field, ROOT, &pickup).unwrap()["shipping"],
        json!("pickup")
    );
}

#[test]
fn what_cannot_be_read_is_named_by_its_field() {
    let field = Field::from_schema(&order_schema());
    let data = pairs(&[
        ("v/lines[]", "0"),
        ("v/lines/0/qty", "three"),
        ("v/weight", "1e"),
        ("v/shipping#", "7"),
    ]);
    let errors = value_of(&field, ROOT, &data).unwrap_err();
    let mut paths: Vec<&str> = errors.keys().map(String::as_str).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        ["v/lines/0/qty", "v/priority", "v/shipping", "v/weight"],
        "{errors:?}"
    );
    assert!(
        errors["v/lines/0/qty"][0].contains("whole number"),
        "{errors:?}"
    );
    assert!(errors["v/priority"][0].contains("required"), "{errors:?}");
}

#[test]
fn the_html_has_selects_bounds_templates_and_errors() {
    let field = Field::from_schema(&order_schema());
    let mut errors = Errors::new();
    errors.insert("v/weight".into(), vec!["must be more than 0".into()]);
    let value = json!({"priority": "high", "lines": [{"sku": "A", "qty": 2}],
                       "shipping": {"courier": {"name": "Kite"}}});
    let html = render(&field, ROOT, "Order", Some(&value), &errors).into_string();
    for needle in [
        r#"<select id="v/priority" name="v/priority" data-kind="choice" data-required="1">"#,
        r#"<option value="1" selected>high</option>"#,
        r#"data-kind="integer" data-required="1" data-min="1" data-max="99""#,
        r#"<input type="hidden" name="v/lines[]" value="0">"#,
        r#"value="A""#,
        "<template>",
        r#"name="v/lines/__0__/sku""#,
        r#"data-xmin="0""#,
        r#"<span class="err" data-err-for="v/weight">must be more than 0</span>"#,
        r#"<option value="1" selected>courier</option>"#,
        r#"name="v/shipping#1/courier/name""#,
    ] {
        assert!(html.contains(needle), "{needle} in {html}");
    }
    // A form over no schema: one JSON text area.
    let any = render(
        &Field::from_schema(&Value::Null),
        ROOT,
        "Message",
        None,
        &Errors::new(),
    )
    .into_string();
    assert!(
        any.contains(r#"<textarea id="v" name="v" data-kind="json""#),
        "{any}"
    );
}
