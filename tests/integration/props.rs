//! Property tests of the parsers that read untrusted bytes, through `git_forum::fuzzing` (the
//! same entry points the cargo-fuzz targets in `fuzz/` call): the canonical JSON parser, the
//! pack reader, the write-ahead log decoder, the hooks' stdin reader, the trace importers and
//! the MCP message reader. Each entry point checks the parser's own promises (round trips,
//! agreement with serde_json, one-line errors) and panics when one breaks; the properties here
//! feed it arbitrary bytes (never a panic, an error or a value) and well-formed inputs (the
//! value expected). Case counts are named per suite; the whole file runs in a few seconds in a
//! debug build.

use git_forum::fuzzing;
use proptest::prelude::*;
use serde_json::json;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// Text made of JSON's tokens and a few near-misses, so that most of it almost parses.
fn json_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{"),
        Just("}"),
        Just("["),
        Just("]"),
        Just(":"),
        Just(","),
        Just(" "),
        Just("\n"),
        Just("\"k\""),
        Just("\"\\u00e9\\n\""),
        Just("\"\\ud83d\\ude00\""),
        Just("\"\\ud800\""),
        Just("0"),
        Just("-0"),
        Just("12"),
        Just("1.5e3"),
        Just("1E400"),
        Just("123456789012345678901234567890"),
        Just("true"),
        Just("null"),
        Just("NaN"),
        Just("-Infinity"),
        Just("01"),
        Just("\"\t\""),
    ];
    proptest::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

/// Any JSON value serde_json can write, with keys that repeat across objects.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| json!(x)),
        any::<String>().prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            proptest::collection::vec(("[a-d\u{e9}\u{1F600}]{0,3}", inner), 0..6)
                .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A pack entry as git writes an undeltified object: the type and size header, then the
/// object deflated as one zlib stream.
fn pack_entry_bytes(kind: u8, data: &[u8]) -> Vec<u8> {
    let mut size = data.len() as u64;
    let mut out = vec![(kind << 4) | (size & 15) as u8];
    size >>= 4;
    while size > 0 {
        *out.last_mut().unwrap() |= 0x80;
        out.push((size & 0x7f) as u8);
        size >>= 7;
    }
    let mut c = libdeflater::Compressor::new(libdeflater::CompressionLvl::default());
    let mut z = vec![0; c.zlib_compress_bound(data.len())];
    let n = c.zlib_compress(data, &mut z).unwrap();
    out.extend_from_slice(&z[..n]);
    out
}

// The canonical JSON parser: 1,024 cases of arbitrary bytes, 1,024 of token soup, 512 values
// serde_json writes.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn canonical_json_reads_any_bytes_as_a_value_or_an_error(data in bytes(300)) {
        let _ = fuzzing::canonical_json(&data);
    }

    #[test]
    fn canonical_json_agrees_with_serde_json_on_token_soup(text in json_soup()) {
        if let Err(e) = fuzzing::canonical_json(text.as_bytes()) {
            let e = e.to_string();
            prop_assert!(!e.contains('\n'), "{e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn canonical_json_reads_what_serde_json_writes(v in json_value()) {
        for text in [serde_json::to_string(&v).unwrap(), serde_json::to_string_pretty(&v).unwrap()] {
            let ours = fuzzing::canonical_json(text.as_bytes());
            prop_assert!(ours.is_ok(), "{text}: {ours:?}");
            prop_assert_eq!(
                ours.unwrap().canonical(),
                git_forum::ledger::canonical::Value::from_serde(&v).canonical()
            );
        }
    }
}

// The pack reader: 1,024 cases of arbitrary entry bytes, 256 well-formed entries, 64 packs
// written and read back (each a pack and index in a temporary directory).
proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn a_pack_entry_of_any_bytes_reads_whole_or_goes_to_gix(data in bytes(300)) {
        if let Some((_, inflated)) = fuzzing::pack_entry(&data) {
            prop_assert!(inflated.len() <= data.len() * 1100 + 64);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_well_formed_pack_entry_reads_back_its_object(kind in 1u8..=4, data in bytes(5000)) {
        let (got, inflated) = fuzzing::pack_entry(&pack_entry_bytes(kind, &data))
            .expect("a whole object reads");
        let want = ["commit", "tree", "blob", "tag"][kind as usize - 1];
        prop_assert_eq!(got.to_string(), want);
        prop_assert!(inflated == data);
    }

    #[test]
    fn a_delta_entry_is_left_to_gix(kind in 6u8..=7, data in bytes(100)) {
        prop_assert!(fuzzing::pack_entry(&pack_entry_bytes(kind, &data)).is_none());
    }

    #[test]
    fn a_cut_pack_entry_is_left_to_gix(data in bytes(400).prop_filter("a stream", |d| !d.is_empty()), cut in any::<prop::sample::Index>()) {
        let entry = pack_entry_bytes(3, &data);
        let at = cut.index(entry.len());
        prop_assert!(fuzzing::pack_entry(&entry[..at]).is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn blobs_written_as_a_pack_read_back(data in bytes(3000)) {
        prop_assert!(fuzzing::pack_round_trip(&data) >= 1);
    }
}

// The write-ahead log: 1,024 cases of arbitrary record payloads and headers, 512 records
// encoded and decoded.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn a_wal_record_of_any_bytes_decodes_or_is_refused(data in bytes(400)) {
        let _ = fuzzing::wal_record(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_wal_record_decodes_as_it_was_encoded(data in bytes(2000)) {
        prop_assert!(fuzzing::wal_round_trip(&data) >= 8);
    }
}

// The hooks' stdin reader: 512 cases of arbitrary bytes, 256 of ref-update lines.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn hook_stdin_of_any_bytes_gives_lines_or_one_refusal(data in bytes(600)) {
        let _ = fuzzing::hook_lines(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn hook_stdin_keeps_exactly_the_ledger_refs(
        lines in proptest::collection::vec((any::<bool>(), "[a-z0-9/_.-]{1,12}", "[0-9a-f]{40}", "[ \t]{1,3}"), 0..20),
        last_newline in any::<bool>(),
    ) {
        let mut input = String::new();
        let mut want = Vec::new();
        for (ledger, name, id, sep) in &lines {
            let refname = if *ledger {
                format!("refs/forum/ledgers/{name}")
            } else {
                format!("refs/heads/{name}")
            };
            input.push_str(&format!("refs/heads/x{sep}{id}{sep}{refname}{sep}{id}\n"));
            if *ledger {
                want.push(vec!["refs/heads/x".to_string(), id.clone(), refname, id.clone()]);
            }
        }
        if !last_newline && input.ends_with('\n') {
            input.pop();
        }
        prop_assert_eq!(fuzzing::hook_lines(input.as_bytes()), Ok(want));
    }
}

// The trace importers (all six formats on each input): 256 cases of arbitrary bytes, 256 of
// token soup, 256 of Claude Code and OTLP lines built from known keys.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_trace_of_any_bytes_imports_or_gives_one_error(data in bytes(400)) {
        let _ = fuzzing::trace(&data);
    }

    #[test]
    fn a_trace_of_token_soup_imports_or_gives_one_error(text in json_soup()) {
        prop_assert_eq!(fuzzing::trace(text.as_bytes()).len(), 6);
    }

    #[test]
    fn a_trace_of_known_keys_imports_or_gives_one_error(
        events in proptest::collection::vec(
            (
                prop::sample::select(vec!["user", "assistant", "system", "span", "tool_use"]),
                prop::sample::select(vec!["type", "role", "name", "kind", "id", "parent_id", "parentUuid", "uuid", "traceId", "spanId"]),
                json_value(),
            ),
            0..8,
        )
    ) {
        let lines: Vec<String> = events
            .iter()
            .map(|(t, k, v)| json!({"type": t, *k: v, "message": {"role": t, "content": v}}).to_string())
            .collect();
        prop_assert_eq!(fuzzing::trace(lines.join("\n").as_bytes()).len(), 6);
        let list = format!("[{}]", lines.join(","));
        prop_assert_eq!(fuzzing::trace(list.as_bytes()).len(), 6);
        let otlp = json!({"resourceSpans": [{"scopeSpans": [{"spans": events
            .iter()
            .map(|(t, k, v)| json!({"name": t, *k: v, "attributes": [{"key": k, "value": {"stringValue": t}}]}))
            .collect::<Vec<_>>()}]}]});
        prop_assert_eq!(fuzzing::trace(otlp.to_string().as_bytes()).len(), 6);
    }
}

// The MCP message reader: 512 cases of arbitrary bytes under a small line cap, 256 under the
// server's own cap, 256 streams of JSON-RPC lines.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mcp_input_of_any_bytes_is_read_to_its_end_under_a_small_cap(data in bytes(600), cap in 1usize..80) {
        let _ = fuzzing::mcp_frames(&data, Some(cap));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mcp_input_of_any_bytes_is_read_to_its_end(data in bytes(600)) {
        let _ = fuzzing::mcp_frames(&data, None);
    }

    #[test]
    fn each_mcp_line_gets_one_reading(
        msgs in proptest::collection::vec(
            (
                prop_oneof![Just(json!(1)), Just(json!("a")), Just(json!(1.5)), Just(json!(null)), Just(json!([]))],
                any::<bool>(),
                prop::sample::select(vec!["ping", "tools/list", "tools/call", "notifications/cancelled"]),
                prop_oneof![Just(json!({})), Just(json!([])), Just(json!(null))],
            ),
            0..12,
        )
    ) {
        let mut input = String::new();
        let mut want = Vec::new();
        for (id, with_id, method, params) in &msgs {
            let mut m = json!({"jsonrpc": "2.0", "method": method, "params": params});
            if *with_id {
                m["id"] = id.clone();
            }
            input.push_str(&m.to_string());
            input.push('\n');
            let valid_id = id.is_string() || id.is_i64();
            want.push(match (with_id, valid_id, params.is_array()) {
                (false, _, true) => "quiet".to_string(),
                (false, _, false) => format!("notice {method}"),
                (true, false, _) => "reply -32600".to_string(),
                (true, true, true) => "reply -32602".to_string(),
                (true, true, false) => "request".to_string(),
            });
        }
        prop_assert_eq!(fuzzing::mcp_frames(input.as_bytes(), None), want);
    }
}

// The fuzz targets' seed corpora (fuzz/corpus/TARGET/), replayed on stable: every file through
// its target, as `cargo fuzz run TARGET` would run it, each in a thread given a minute so that
// a hang fails naming the file instead of stopping the suite.
#[test]
fn every_fuzz_corpus_file_replays_without_a_panic_or_a_hang() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut replayed = 0;
    for target in fuzzing::TARGETS {
        let dir = root.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; every fuzz target has a seed corpus",
                    dir.display()
                )
            })
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: an empty corpus", dir.display());
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let (done, finished) = std::sync::mpsc::channel();
            let run = std::thread::spawn(move || {
                fuzzing::target(target, &data);
                let _ = done.send(());
            });
            match finished.recv_timeout(std::time::Duration::from_secs(60)) {
                Ok(()) => run.join().unwrap(),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    std::panic::resume_unwind(run.join().unwrap_err())
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{target} did not finish {} within a minute", file.display())
                }
            }
            replayed += 1;
        }
    }
    assert!(replayed >= fuzzing::TARGETS.len());
}
