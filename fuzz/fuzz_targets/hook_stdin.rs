#![no_main]
//! The pre-push and pre-receive hooks' reader of the ref updates git gives them.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| git_forum::fuzzing::target("hook_stdin", data));
