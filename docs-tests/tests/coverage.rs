//! The doctest harness covers every document, and every document's code blocks are marked so
//! that rustdoc treats them as their authors meant.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("docs-tests sits inside the workspace")
        .to_path_buf()
}

/// The included documents, relative to the workspace root (`docs/guide.md`).
fn included() -> BTreeSet<String> {
    turnwise_docs::DOCUMENTS
        .iter()
        .map(|p| p.trim_start_matches("../../").to_owned())
        .collect()
}

#[test]
fn every_document_in_docs_is_included() {
    let mut on_disk = BTreeSet::from(["README.md".to_owned()]);
    for entry in std::fs::read_dir(root().join("docs")).expect("read docs/") {
        let name = entry.expect("a directory entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".md") {
            on_disk.insert(format!("docs/{name}"));
        }
    }
    let included = included();
    let missing: Vec<_> = on_disk.difference(&included).collect();
    let stale: Vec<_> = included.difference(&on_disk).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs-tests/src/lib.rs must list every document: add {missing:?}, remove {stale:?}"
    );
}

/// The info string of every opening code fence of `text`, with its line number.
fn fences(text: &str) -> Vec<(usize, String)> {
    let mut open = false;
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        if !open {
            found.push((i + 1, rest.trim().to_owned()));
        }
        open = !open;
    }
    found
}

/// Whether rustdoc compiles a block with this info string as Rust (no tag, or only Rust
/// attributes such as `rust`, `no_run`, `should_panic`, `compile_fail`, `edition2024`).
fn is_rust(info: &str) -> bool {
    info.split([',', ' ']).filter(|t| !t.is_empty()).all(|t| {
        matches!(
            t,
            "rust" | "ignore" | "no_run" | "should_panic" | "compile_fail" | "test_harness"
        ) || t.starts_with("edition")
    })
}

#[test]
fn every_code_block_says_what_it_is_and_no_rust_block_is_skipped() {
    let mut problems = Vec::new();
    let mut rust_blocks = 0;
    for doc in included() {
        let text = std::fs::read_to_string(root().join(&doc)).expect("read a document");
        for (line, info) in fences(&text) {
            if info.is_empty() {
                problems.push(format!(
                    "{doc}:{line}: a code block without a language is compiled as Rust by \
                     rustdoc; name its language (`text`, `sh`, `toml`, `rust`, ...)"
                ));
            } else if is_rust(&info) {
                rust_blocks += 1;
                if info.split(',').any(|t| t.trim() == "ignore") {
                    problems.push(format!(
                        "{doc}:{line}: a Rust block marked `ignore` is never compiled; make it \
                         compile (`no_run` if it needs a server)"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        rust_blocks > 0,
        "no Rust block found: the fence scan is broken"
    );
}
