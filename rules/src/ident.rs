//! The identifier rule: 1–128 characters from `A-Z a-z 0-9 _ - .`.
//!
//! One rule covers instance ids, message ids, signal ids, signal names, step keys, workflow
//! types and versions (also a claim's `workflows[]` entries).

use std::fmt;

/// The longest identifier: 128 characters (bytes and characters agree, as only ASCII is
/// allowed).
pub const MAX_LEN: usize = 128;

/// What the rule allows, as error messages say it.
pub const ALLOWED: &str = "1-128 of `A-Z a-z 0-9 _ - .`";

/// Whether `c` may appear in an identifier.
pub const fn is_identifier_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.'
}

/// Whether `s` follows the identifier rule. Usable in a `const` context.
pub const fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > MAX_LEN {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if !is_identifier_byte(b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// Why a string is not an identifier.
///
/// Its message names what is wrong and then what is allowed, e.g. `it contains ' '; use 1-128
/// of `A-Z a-z 0-9 _ - .``, so callers prefix it with what the string was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentifierError {
    /// The string is empty.
    Empty,
    /// The string holds a character outside `A-Z a-z 0-9 _ - .` (the first such one).
    Character(char),
    /// The string is longer than [`MAX_LEN`] characters.
    TooLong(usize),
}

impl fmt::Display for IdentifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdentifierError::Empty => f.write_str("it is empty")?,
            IdentifierError::Character(c) => write!(f, "it contains {c:?}")?,
            IdentifierError::TooLong(n) => write!(f, "it is {n} characters long")?,
        }
        write!(f, "; use {ALLOWED}")
    }
}

impl std::error::Error for IdentifierError {}

/// Check `s` against the identifier rule, saying why it breaks it.
///
/// A string that is both too long and holds a disallowed character is reported for the
/// character: that is the problem shortening it would not fix.
pub fn check_identifier(s: &str) -> Result<(), IdentifierError> {
    if s.is_empty() {
        return Err(IdentifierError::Empty);
    }
    if let Some(c) = s
        .chars()
        .find(|c| !c.is_ascii() || !is_identifier_byte(*c as u8))
    {
        return Err(IdentifierError::Character(c));
    }
    if s.len() > MAX_LEN {
        return Err(IdentifierError::TooLong(s.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_allowed_characters_up_to_the_limit() {
        for s in [
            "a",
            "counter-1.v2_x",
            "A.B-C_D",
            "0",
            "..",
            &"k".repeat(MAX_LEN),
        ] {
            assert!(is_identifier(s), "{s:?}");
            assert_eq!(check_identifier(s), Ok(()), "{s:?}");
        }
    }

    #[test]
    fn refuses_and_says_why() {
        let cases = [
            ("", IdentifierError::Empty),
            ("a b", IdentifierError::Character(' ')),
            ("a/b", IdentifierError::Character('/')),
            ("ünï", IdentifierError::Character('ü')),
            ("semi;colon", IdentifierError::Character(';')),
            (
                &*"x".repeat(MAX_LEN + 1),
                IdentifierError::TooLong(MAX_LEN + 1),
            ),
            // Too long and a bad character: the character is the reason.
            (
                &*format!("{}é", "x".repeat(200)),
                IdentifierError::Character('é'),
            ),
        ];
        for (s, want) in cases {
            assert!(!is_identifier(s), "{s:?}");
            assert_eq!(check_identifier(s), Err(want), "{s:?}");
        }
    }

    #[test]
    fn messages_name_the_problem_and_the_rule() {
        assert_eq!(
            IdentifierError::Character(' ').to_string(),
            "it contains ' '; use 1-128 of `A-Z a-z 0-9 _ - .`"
        );
        assert_eq!(
            IdentifierError::Empty.to_string(),
            "it is empty; use 1-128 of `A-Z a-z 0-9 _ - .`"
        );
        assert_eq!(
            IdentifierError::TooLong(129).to_string(),
            "it is 129 characters long; use 1-128 of `A-Z a-z 0-9 _ - .`"
        );
    }

    #[test]
    fn const_and_checked_forms_agree() {
        const OK: bool = is_identifier("step-1");
        const BAD: bool = is_identifier("step 1");
        const { assert!(OK && !BAD) };
        for b in 0u8..=255 {
            let s = [b];
            if let Ok(s) = std::str::from_utf8(&s) {
                assert_eq!(is_identifier(s), check_identifier(s).is_ok(), "{b}");
            }
        }
    }
}
