//! The compatibility check's fixture suite: pairs of small workflows, each an old version as
//! deployed and a changed one, with the class `turnwise::manifest::compat::compare` must give
//! the change. A misclassification fails the test, naming the fixture.
//!
//! Every fixture is real `#[workflow]` code, in `fixtures`; the shape they share is
//! `step a` → `sleep nap` → `step b` (or close to it), so that a turn asleep at `nap` is the
//! turn in flight each change meets. `TURNWISE_SHOW_FIXTURES=1` prints every report
//! (`cargo test -p turnwise --test it compat_fixtures -- --nocapture`).

mod fixtures;
mod runs;

use turnwise::manifest::compat::{compare, Class, Comparison};
use turnwise::manifest::Manifest;
use turnwise::prelude::Workflow;

use fixtures::*;

fn manifest<W: Workflow>(w: &W) -> Manifest {
    w.manifest().expect("#[workflow] generates a manifest")
}

/// One fixture: its name, the old and the new manifest, and the class it must get.
struct Case {
    name: &'static str,
    old: Manifest,
    new: Manifest,
    class: Class,
}

fn case<O: Workflow, N: Workflow>(name: &'static str, old: &O, new: &N, class: Class) -> Case {
    Case {
        name,
        old: manifest(old),
        new: manifest(new),
        class,
    }
}

fn cases() -> Vec<Case> {
    use Class::*;
    vec![
        case("comments and layout only", &base::f, &layout::f, Safe),
        case("rename a saved step", &base::f, &rename::f, NeedsPatch),
        case(
            "insert before the saved steps",
            &base::f,
            &insert_before::f,
            NeedsPatch,
        ),
        case(
            "insert between saved steps",
            &base::f,
            &insert_between::f,
            NeedsPatch,
        ),
        case(
            "insert after the saved steps",
            &base::f,
            &insert_after::f,
            Safe,
        ),
        case("reorder", &base::f, &reorder::f, NeedsPatch),
        case(
            "remove the last step",
            &base::f,
            &remove_last::f,
            NeedsPatch,
        ),
        case(
            "a key reused with another kind",
            &base::f,
            &kind_change::f,
            Breaks,
        ),
        case("a new branch", &base::f, &new_branch::f, Safe),
        case("an else arm added", &branchy::f, &else_added::f, Safe),
        case(
            "a condition changed",
            &branchy::f,
            &condition_changed::f,
            Review,
        ),
        case("a step input changed", &base::f, &input_changed::f, Review),
        case(
            "a loop's key changed",
            &looped::f,
            &loop_key_changed::f,
            NeedsPatch,
        ),
        case(
            "a parallel member added",
            &grouped::f,
            &member_added::f,
            NeedsPatch,
        ),
        case(
            "an optional state field added",
            &base::f,
            &optional_field::f,
            Safe,
        ),
        case(
            "a required state field added",
            &base::f,
            &required_field::f,
            Breaks,
        ),
        case(
            "a message variant removed",
            &enum_message::f,
            &variant_removed::f,
            Breaks,
        ),
        case(
            "a message variant added",
            &enum_message::f,
            &variant_added::f,
            Review,
        ),
        case(
            "a signal's type changed",
            &waiting::f,
            &signal_changed::f,
            Breaks,
        ),
        case(
            "a signal accepted in addition",
            &waiting::f,
            &signal_added::f,
            Safe,
        ),
        case(
            "a step output's type changed",
            &typed::f,
            &output_changed::f,
            Breaks,
        ),
        case("a patch added", &base::f, &patch_added::f, Safe),
        case(
            "a patch removed",
            &patch_added::f,
            &patch_removed::f,
            NeedsPatch,
        ),
        case(
            "a new version beside the old one",
            &base::f,
            &next_version::f,
            Safe,
        ),
    ]
}

fn show(c: &Comparison) -> String {
    turnwise::manifest::compat::render_text(c)
}

#[test]
fn each_fixture_gets_its_class() {
    let cases = cases();
    assert!(cases.len() >= 20, "the suite has {} fixtures", cases.len());
    let mut wrong = Vec::new();
    for c in &cases {
        let got = compare(&c.old, &c.new);
        if std::env::var_os("TURNWISE_SHOW_FIXTURES").is_some() {
            eprintln!("## {}\n{}", c.name, show(&got));
        }
        if got.class != c.class {
            wrong.push(format!(
                "{}: expected {}, got\n{}",
                c.name,
                c.class,
                show(&got)
            ));
        }
    }
    assert!(wrong.is_empty(), "misclassified:\n{}", wrong.join("\n"));
}

/// The findings name what a user needs: the shortest breaking prefix, the new code's line and
/// the fix.
#[test]
fn findings_name_the_prefix_the_line_and_the_fix() {
    let between = compare(&manifest(&base::f), &manifest(&insert_between::f));
    let f = &between.findings[0];
    assert_eq!(f.prefix, ["step `a`", "sleep `nap`"]);
    let at = f.at.as_deref().unwrap();
    assert!(
        at.starts_with("runtime/tests/it/compat_fixtures/fixtures.rs:"),
        "{at}"
    );
    assert!(f.fix.contains("ctx.patched(\"x\")"), "{}", f.fix);

    let rename = compare(&manifest(&base::f), &manifest(&rename::f));
    assert_eq!(rename.findings[0].prefix, ["step `a`"]);
    assert!(
        rename.findings[0].fix.contains(".key(\"a\")"),
        "{}",
        rename.findings[0].fix
    );

    let removed = compare(&manifest(&patch_added::f), &manifest(&patch_removed::f));
    assert!(
        removed.findings[0].what.contains("patch `check`"),
        "{}",
        show(&removed)
    );

    let state = compare(&manifest(&base::f), &manifest(&required_field::f));
    assert!(state.findings[0].what.contains("owner"), "{}", show(&state));

    let output = compare(&manifest(&typed::f), &manifest(&output_changed::f));
    assert!(output.findings[0].what.contains("`a`"), "{}", show(&output));

    let variant = compare(&manifest(&enum_message::f), &manifest(&variant_removed::f));
    assert!(
        variant.findings[0].what.contains("Refund"),
        "{}",
        show(&variant)
    );
}
