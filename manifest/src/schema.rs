// PLACEHOLDER: replaced by the real module
//! Whether a JSON Schema reads the values another one describes.
//!
//! This is a placeholder with the API of the real module: it answers [`SchemaCompat::Reads`]
//! for equal schemas and [`SchemaCompat::Unknown`] for every other pair.

use serde_json::Value;

/// Whether a reader's schema reads every value a writer's schema allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaCompat {
    /// Every value the writer allows, the reader reads.
    Reads,
    /// Some value the writer allows, the reader refuses.
    Breaks {
        /// Where in the schemas (a JSON pointer).
        at: String,
        /// Why, in one sentence.
        why: String,
    },
    /// The schemas use a keyword the comparison does not know.
    Unknown {
        /// Where in the schemas (a JSON pointer).
        at: String,
        /// The keyword.
        keyword: String,
    },
}

/// Whether `reader` reads every value `writer` allows. The placeholder compares the two for
/// equality only.
pub fn reads(reader: &Value, writer: &Value) -> SchemaCompat {
    if reader == writer {
        SchemaCompat::Reads
    } else {
        SchemaCompat::Unknown {
            at: String::new(),
            keyword: "(not compared)".into(),
        }
    }
}
