#![no_main]
//! The pack reader: the bytes as one pack entry, or (after a leading `W`) as blobs written to a
//! pack and read back.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| git_forum::fuzzing::target("pack", data));
