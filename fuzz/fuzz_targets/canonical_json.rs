#![no_main]
//! The canonical JSON parser, checked against serde_json and its own canonical text.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| git_forum::fuzzing::target("canonical_json", data));
