//! Nothing here: the test in `tests/` plays the user's code.
