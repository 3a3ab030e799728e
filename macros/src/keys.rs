//! The key rules shared by step keys, signal names, workflow names and versions.

/// The longest key: 128 characters.
pub(crate) const MAX_LEN: usize = 128;

/// What the rules are, for messages.
pub(crate) const RULES: &str = "1-128 of `A-Z a-z 0-9 _ - .`";

/// Why `s` breaks the key rules, or `None` if it follows them.
pub(crate) fn problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("it is empty".into());
    }
    if s.len() > MAX_LEN {
        return Some(format!("it is {} characters long", s.len()));
    }
    s.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .map(|c| format!("it contains {c:?}"))
}
