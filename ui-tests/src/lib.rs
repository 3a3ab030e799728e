//! Compile-fail and compile-pass tests of the turnwise macros (see `tests/`).
