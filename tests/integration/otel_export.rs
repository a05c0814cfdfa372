//! `git forum export-otel`: the file it writes parses with the official
//! OTLP definitions (`opentelemetry-proto`), one trace per run, a span per entry whose ids come
//! from entry hashes and whose parents are the causal parents, with the ledger's seq and
//! checkpoint on every span and the GenAI attributes on the model calls.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;

use crate::common::{FORMATS, Repo};

fn model(repo: &Repo) -> String {
    let path = repo.path().join("model.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\ncase \"$1\" in\n  *\"Break this request\"*) echo '{\"tasks\":[{\"id\":\"T1\",\"agent\":\"backend\",\"instruction\":\"say hi\",\"depends_on\":[],\"done_when\":[]}]}' ;;\n  *\"Judge one task\"*) echo '{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}' ;;\n  *) echo 'hi' ;;\nesac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_string()
}

fn attr(span: &opentelemetry_proto::tonic::trace::v1::Span, key: &str) -> Option<Any> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.clone())
        .and_then(|v| v.value)
}

#[test]
fn the_export_parses_as_otlp_with_ids_parents_and_ledger_attributes() {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let m = model(&repo);
        repo.forum_ok(&["submit", "--cmd", &m, "--quiet", "say hi"]);
        let out = repo.path().join("run.otlp.json");
        repo.forum_ok(&["export-otel", "0", "--out", out.to_str().unwrap()]);
        let text = std::fs::read_to_string(&out).unwrap();
        let req: ExportTraceServiceRequest = serde_json::from_str(&text).unwrap();
        let spans = &req.resource_spans[0].scope_spans[0].spans;
        let log = repo.forum_json(&["log"]);
        let mut entries: Vec<&serde_json::Value> = log.as_array().unwrap().iter().collect();
        entries.reverse();
        assert_eq!(spans.len(), entries.len(), "{kind}: a span per entry");
        let checkpoint = repo.forum_json(&["verify"])["checkpoint"].clone();
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let root_hash = entries[0]["entry_hash"].as_str().unwrap();
        for (span, e) in spans.iter().zip(&entries) {
            let h = e["entry_hash"].as_str().unwrap();
            assert_eq!(hex(&span.trace_id), root_hash[..32], "{kind}: one trace");
            assert_eq!(hex(&span.span_id), h[..16], "{kind}");
            match e["causal_parent"].as_u64() {
                Some(p) => {
                    let ph = entries[p as usize]["entry_hash"].as_str().unwrap();
                    assert_eq!(hex(&span.parent_span_id), ph[..16], "{kind}");
                }
                None => assert!(span.parent_span_id.is_empty(), "{kind}"),
            }
            assert_eq!(
                attr(span, "forum.seq"),
                Some(Any::IntValue(e["seq"].as_i64().unwrap()))
            );
            assert_eq!(
                attr(span, "forum.entry_hash"),
                Some(Any::StringValue(h.to_string()))
            );
            if let Some(c) = checkpoint.as_str() {
                assert_eq!(
                    attr(span, "forum.checkpoint"),
                    Some(Any::StringValue(c.into()))
                );
            }
        }
        let chat: Vec<_> = spans
            .iter()
            .filter(|s| attr(s, "gen_ai.operation.name") == Some(Any::StringValue("chat".into())))
            .collect();
        assert!(!chat.is_empty(), "{kind}: the worker's call is a chat span");
        assert!(
            chat.iter()
                .all(|s| attr(s, "gen_ai.request.model").is_some())
        );
        // An existing file is refused, and left as it was.
        let o = repo
            .forum()
            .args(["export-otel", "--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{kind}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
        let o = repo.forum().args(["export-otel", "7"]).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{kind}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("no run starts at seq 7"));
    }
}
