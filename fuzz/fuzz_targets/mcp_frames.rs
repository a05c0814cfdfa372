#![no_main]
//! The MCP server's reader of its standard input, under the server's line cap and a small one.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| git_forum::fuzzing::target("mcp_frames", data));
