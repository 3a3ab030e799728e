//! A user's own JSON keeps working when the user depends on turnwise: serde_json features
//! that turnwise turns on (such as `arbitrary_precision`) would apply to this code too.

use serde::Deserialize;

/// An internally tagged enum holding an `f64`: with `arbitrary_precision` on anywhere in the
/// build, serde_json hands the number to the enum as a map and this fails to parse.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(tag = "kind")]
enum Shape {
    Circle { radius: f64 },
    Square { side: u32 },
}

/// The same through an untagged enum, which buffers its input the same way.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum Amount {
    Exact(f64),
    Named(String),
}

#[test]
fn tagged_enum_with_a_float_parses() {
    let shape: Shape = serde_json::from_str(r#"{"kind": "Circle", "radius": 1.5}"#).unwrap();
    assert_eq!(shape, Shape::Circle { radius: 1.5 });
    let shape: Shape = serde_json::from_str(r#"{"kind": "Square", "side": 3}"#).unwrap();
    assert_eq!(shape, Shape::Square { side: 3 });
}

#[test]
fn untagged_enum_with_a_float_parses() {
    let amount: Amount = serde_json::from_str("2.25").unwrap();
    assert_eq!(amount, Amount::Exact(2.25));
}

#[test]
fn turnwise_is_really_in_the_build() {
    // Use the library, so the test cannot pass by turnwise being left out of the build.
    let v = serde_json::json!({"radius": 1.5});
    assert_eq!(turnwise::validate::depth(&v), 1);
}
