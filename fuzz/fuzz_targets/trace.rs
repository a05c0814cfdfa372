#![no_main]
//! The trace importers, every format on every input.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| git_forum::fuzzing::target("trace", data));
