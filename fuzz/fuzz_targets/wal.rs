#![no_main]
//! The write-ahead log decoder: the bytes as a record and a header, then as a record encoded
//! and decoded.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| git_forum::fuzzing::target("wal", data));
