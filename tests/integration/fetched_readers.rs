//! Readers take fetched ledgers: in a second clone, after `git forum fetch`, `--ledger
//! origin:main` reads the copy fetched from origin with every reader (verify, log, show, room,
//! runs, receipt, prove in both forms, checkpoint); a bare `origin/main` that names no ledger
//! here says which form reads it; writers refuse a fetched copy; a copy never fetched is named.
//! On every repository kind.

use serde_json::Value as J;

use crate::common::{FORMATS, Repo, one_line_error};

const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"design the login API","depends_on":[],"done_when":[]}]}"#;

/// A repository with one answered run on `main`, pushed to a bare remote of the same kind;
/// returns the remote's URL.
fn pushed_run(a: &Repo, kind: &str) -> (tempfile::TempDir, String) {
    let model = crate::procs::executable(
        &a.dir.path().join("model.sh"),
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *) echo 'The login API is designed.' ;;\nesac\n"
        ),
    );
    a.forum_ok(&["submit", "--quiet", "--cmd", &model, "design a login API"]);
    // A signed note, so the C2SP proof has a checkpoint to stand on.
    let keys = a.dir.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (skey, _) = crate::tlog::keygen(a, &keys, "example.com/forum");
    crate::tlog::note(a, &skey);
    let (bare, url) = crate::common::bare_origin(a, kind);
    a.forum_ok(&["push"]);
    (bare, url)
}

#[test]
fn every_reader_reads_a_fetched_copy_as_remote_colon_name() {
    for kind in FORMATS {
        let a = &Repo::new(kind);
        let (_bare, url) = pushed_run(a, kind);
        let b = Repo::new(kind);
        b.git_ok(&["remote", "add", "origin", &url]);
        b.forum_ok(&["fetch"]);
        let on = |args: &[&str]| -> String {
            let mut all = vec!["--ledger", "origin:main"];
            all.extend_from_slice(args);
            b.forum_ok(&all)
        };
        let json = |args: &[&str]| -> J {
            let mut all = vec!["--json"];
            all.extend_from_slice(args);
            serde_json::from_str(&on(&all)).unwrap()
        };
        // The same answers as the clone that wrote it.
        let same = |args: &[&str]| {
            let mut mine = vec!["--json"];
            mine.extend_from_slice(args);
            assert_eq!(
                json(args),
                serde_json::from_str::<J>(&a.forum_ok(&mine)).unwrap(),
                "{kind} {args:?}"
            );
        };
        let v = json(&["verify", "--deep"]);
        assert_eq!(v["ok"], true, "{kind} {v}");
        same(&["log"]);
        same(&["show", "0"]);
        same(&["room"]);
        same(&["runs"]);
        same(&["receipt"]);
        same(&["prove", "1"]);
        // The checkpoint is the same; its report names the ledger as it was asked for.
        let theirs = json(&["checkpoint", "--no-record"]);
        let mine: J =
            serde_json::from_str(&a.forum_ok(&["--json", "checkpoint", "--no-record"])).unwrap();
        assert_eq!(
            (&theirs["checkpoint"], &theirs["size"], &theirs["ledger"]),
            (&mine["checkpoint"], &mine["size"], &J::from("origin:main")),
            "{kind}"
        );
        let tlog = on(&["prove", "1", "--tlog"]);
        assert!(tlog.starts_with("c2sp.org/tlog-proof@v1"), "{kind} {tlog}");
        assert_eq!(tlog, a.forum_ok(&["prove", "1", "--tlog"]), "{kind}");
        assert!(on(&["runs"]).contains("answered"), "{kind}");

        // A bare REMOTE/NAME: the form that reads the copy.
        let o = b
            .forum()
            .args(["--ledger", "origin/main", "log"])
            .output()
            .unwrap();
        one_line_error(
            &o,
            "no ledger named \"origin/main\" here; the copy fetched from \"origin\" is read with --ledger origin:main",
        );
        // Writers refuse the copy, and nothing moves.
        let before = b.git_ok(&["for-each-ref"]);
        for args in [
            &[
                "append",
                "--actor",
                "x",
                "--kind",
                "note",
                "--payload",
                "{}",
            ][..],
            &["checkpoint"][..],
            &["redact", "0", "--reason", "r"][..],
        ] {
            let mut all = vec!["--ledger", "origin:main"];
            all.extend_from_slice(args);
            let o = b.forum().args(&all).output().unwrap();
            one_line_error(&o, "a copy fetched from \"origin\" is read-only");
        }
        assert_eq!(b.git_ok(&["for-each-ref"]), before, "{kind}");
        // A copy never fetched.
        let o = b
            .forum()
            .args(["--ledger", "elsewhere:main", "log"])
            .output()
            .unwrap();
        one_line_error(
            &o,
            "no copy of ledger \"main\" fetched from \"elsewhere\" (refs/forum/remotes/elsewhere/main does not exist); run `git forum fetch elsewhere` first",
        );
    }
}
