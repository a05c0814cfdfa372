//! The standard tree through the real binary: `keygen`, `checkpoint --note`, `prove
//! --tlog-proof`, `prove --consistency-from M --tlog` and `verify-proof`, checked by git forum
//! and by an independent Go verifier built on golang.org/x/mod/sumdb/{note,tlog}
//! (tests/integration/data/tlogcheck), which must accept every proof and refuse any changed byte.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{FORMATS, Repo, one_line_error};

/// The variable that turns a missing `go` from a skip into a failure (CI sets it).
const REQUIRE_GO: &str = "GIT_FORUM_REQUIRE_GO";

/// Builds the Go checker once per test binary run (into the target's temporary directory), or
/// `None` with a printed reason when Go or golang.org/x/mod is absent.
fn go_checker() -> Option<PathBuf> {
    go_tool("tlogcheck")
}

/// [`go_checker`] for the Go program in tests/integration/data/NAME.
pub(crate) fn go_tool(name: &str) -> Option<PathBuf> {
    let require = std::env::var(REQUIRE_GO).is_ok_and(|v| v == "1");
    let skip = |why: String| {
        if require {
            panic!("{why}, and {REQUIRE_GO}=1");
        }
        eprintln!(
            "skipped: {why} (install golang-go golang-golang-x-mod-dev; {REQUIRE_GO}=1 fails instead)"
        );
        None
    };
    let gopath = Path::new("/usr/share/gocode");
    if !gopath.join("src/golang.org/x/mod/sumdb/tlog").is_dir() {
        return skip("golang.org/x/mod is not under /usr/share/gocode".into());
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/integration/data/{name}"));
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let bin = out.join(name);
        let o = Command::new("go")
            .args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(&src)
            .env("GOPATH", gopath)
            .env("GO111MODULE", "off")
            .env("GOFLAGS", "")
            .env("GOCACHE", out.join("cache"))
            .output();
        match o {
            Err(e) => return skip(format!("cannot run go: {e}")),
            Ok(o) if !o.status.success() => panic!(
                "building the Go checker failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Ok(_) => built.push(name.to_string()),
        }
    }
    Some(out.join(name))
}

/// `keygen NAME` in `dir`: (signer key file, verifier key).
pub(crate) fn keygen(repo: &Repo, dir: &Path, name: &str) -> (PathBuf, String) {
    let vkey = repo
        .forum_ok(&["keygen", name, "--dir", dir.to_str().unwrap()])
        .trim()
        .to_string();
    let file = name.replace('/', "_");
    let skey = dir.join(format!("{file}.key"));
    assert!(
        std::fs::read_to_string(&skey)
            .unwrap()
            .starts_with("PRIVATE+KEY+")
    );
    assert_eq!(
        std::fs::read_to_string(dir.join(format!("{file}.pub")))
            .unwrap()
            .trim(),
        vkey
    );
    (skey, vkey)
}

/// The entry hashes in seq order (`log` lists newest first).
fn entry_hashes(repo: &Repo) -> Vec<String> {
    let log = repo.forum_json(&["log"]);
    let mut entries: Vec<(u64, String)> = log
        .as_array()
        .expect("log --json is an array")
        .iter()
        .map(|e| {
            let seq = e["seq"].as_u64().unwrap();
            (seq, e["entry_hash"].as_str().unwrap().to_string())
        })
        .collect();
    entries.sort();
    entries.into_iter().map(|(_, h)| h).collect()
}

pub(crate) fn note(repo: &Repo, key: &Path) -> String {
    repo.forum_ok(&["checkpoint", "--note", "--note-key", key.to_str().unwrap()])
}

/// Runs `verify-proof` outside any repository.
pub(crate) fn verify_proof(
    repo: &Repo,
    outside: &Path,
    text: &str,
    args: &[&str],
) -> std::process::Output {
    let f = outside.join("proof.txt");
    std::fs::write(&f, text).unwrap();
    repo.forum()
        .current_dir(outside)
        .env("GIT_CEILING_DIRECTORIES", outside.parent().unwrap())
        .arg("verify-proof")
        .arg(&f)
        .args(args)
        .output()
        .unwrap()
}

fn go_check(checker: &Path, vkey: &str, manifest: &str, mutate: bool) -> String {
    use std::io::Write;
    let mut c = Command::new(checker);
    c.args(["proofs", vkey]);
    if mutate {
        c.arg("-mutate");
    }
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A checker that stops early closes its stdin; its own message says why.
    let _ = child.stdin.take().unwrap().write_all(manifest.as_bytes());
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "the Go checker refused: {out}");
    out
}

#[test]
fn notes_and_standard_proofs_verify_on_every_format() {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let keys = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let (skey, vkey) = keygen(&repo, keys.path(), "example.com/forum");
        for i in 0..5 {
            repo.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
        }
        let first = note(&repo, &skey);
        assert!(first.contains("\n5\n"), "{kind}: {first}");
        assert!(first.contains("\nforum-root "), "{kind}: {first}");
        assert!(
            first.contains("\n\u{2014} example.com/forum "),
            "{kind}: {first}"
        );
        for i in 5..9 {
            repo.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
        }
        note(&repo, &skey);
        let hashes = entry_hashes(&repo);
        // The ssh/openpgp signature reader and verify are untouched by the notes on the ref.
        assert!(
            repo.forum().arg("verify").status().unwrap().success(),
            "{kind}"
        );

        let proof = repo.forum_ok(&["prove", "3", "--tlog-proof"]);
        assert!(
            proof.starts_with("c2sp.org/tlog-proof@v1\nindex 3\n"),
            "{kind}: {proof}"
        );
        let ok = verify_proof(
            &repo,
            outside.path(),
            &proof,
            &["--note-verifier", &vkey, "--entry-hash", &hashes[3]],
        );
        assert!(
            ok.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
        assert!(String::from_utf8_lossy(&ok.stdout).contains("seq 3 is in"));
        let wrong = verify_proof(
            &repo,
            outside.path(),
            &proof,
            &["--note-verifier", &vkey, "--entry-hash", &hashes[4]],
        );
        one_line_error(&wrong, "does not hold");

        let old = repo.forum_ok(&["prove", "2", "--tlog-proof", "--size", "5"]);
        assert!(old.contains("\n5\n"), "{kind}: {old}");

        let cons = repo.forum_ok(&["prove", "--consistency-from", "5", "--tlog"]);
        let ok = verify_proof(&repo, outside.path(), &cons, &["--note-verifier", &vkey]);
        assert!(
            ok.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
        assert!(String::from_utf8_lossy(&ok.stdout).contains("at size 9 extends size 5"));
        let (_, other) = keygen(&repo, keys.path(), "someone.else");
        let untrusted = verify_proof(&repo, outside.path(), &cons, &["--note-verifier", &other]);
        one_line_error(&untrusted, "not signed by any trusted key");

        // Notes travel with push: they ride on the signatures ref.
        let remote = tempfile::tempdir().unwrap();
        let mut init = vec!["init", "-q", "--bare"];
        let flags = crate::common::init_flags(kind);
        init.extend(flags.iter().map(String::as_str));
        init.push(remote.path().to_str().unwrap());
        repo.git_ok(&init);
        repo.git_ok(&["remote", "add", "up", remote.path().to_str().unwrap()]);
        repo.forum_ok(&["push", "up"]);
        let there = Command::new("git")
            .arg("--git-dir")
            .arg(remote.path())
            .args(["log", "--format=%s", "refs/forum/checkpoints/main"])
            .output()
            .unwrap();
        let subjects = String::from_utf8_lossy(&there.stdout).to_string();
        assert_eq!(
            subjects.lines().filter(|l| l.starts_with("note ")).count(),
            2,
            "{kind}: {subjects}"
        );
    }
}

#[test]
fn standard_proof_input_errors_are_one_line_and_write_nothing() {
    let repo = Repo::new("sha1");
    let keys = tempfile::tempdir().unwrap();
    repo.append("agent", "note", r#"{"i":0}"#);
    let before = repo.snapshot();
    let no_key = repo
        .forum()
        .args(["checkpoint", "--note"])
        .output()
        .unwrap();
    one_line_error(&no_key, "no note key");
    let bad = keys.path().join("bad.key");
    std::fs::write(&bad, "PRIVATE+KEY+nonsense\n").unwrap();
    let bad_key = repo
        .forum()
        .args(["checkpoint", "--note", "--note-key", bad.to_str().unwrap()])
        .output()
        .unwrap();
    one_line_error(&bad_key, "not a signed-note signer key");
    let missing = repo
        .forum()
        .args(["checkpoint", "--note", "--note-key", "/nonexistent/k.key"])
        .output()
        .unwrap();
    one_line_error(&missing, "cannot read note key");
    let no_note = repo
        .forum()
        .args(["prove", "0", "--tlog-proof"])
        .output()
        .unwrap();
    one_line_error(&no_note, "no signed note");
    assert_eq!(repo.snapshot(), before, "a refused command wrote something");
    let bad_name = repo.forum().args(["keygen", "a b"]).output().unwrap();
    one_line_error(&bad_name, "is not valid");
    let (skey, _) = keygen(&repo, keys.path(), "k");
    let again = repo
        .forum()
        .args(["keygen", "k", "--dir", keys.path().to_str().unwrap()])
        .output()
        .unwrap();
    one_line_error(&again, "already exists");
    assert!(
        std::fs::read_to_string(&skey)
            .unwrap()
            .starts_with("PRIVATE+KEY+k+")
    );
    let no_size = repo
        .forum()
        .args(["prove", "0", "--tlog-proof", "--size", "7"])
        .output()
        .unwrap();
    one_line_error(&no_size, "no signed note of size 7");
    // --dir makes a folder that does not exist yet, private; one it cannot make is refused.
    let fresh = keys.path().join("new/keys");
    let (skey, _) = keygen(&repo, &fresh, "k");
    assert!(skey.is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    let blocked = skey.join("below");
    let o = repo
        .forum()
        .args(["keygen", "k", "--dir", blocked.to_str().unwrap()])
        .output()
        .unwrap();
    one_line_error(&o, "pass --dir a folder you can write");
}

/// The acceptance sweep: one ledger of 70 entries with a signed note at every size. The Go
/// verifier accepts the inclusion proof of every seq at every size and the consistency proof
/// between every pair of sizes, and refuses every single-byte change of a proof at each size.
/// The binary writes a proof for every seq at size 70, for the last seq at every size and for
/// the consistency to 70 from every size and to every size from its half; each is byte-identical
/// to what the library (the code `prove` runs) writes for that pair, and the library writes the
/// rest of the 4,900 pairs, which would otherwise take one process each.
#[test]
fn go_verifier_accepts_every_proof_up_to_70_and_refuses_any_changed_byte() {
    use git_forum::ledger::tlog::Tree;
    use git_forum::store::note;
    let Some(checker) = go_checker() else {
        return;
    };
    let repo = Repo::new("sha1");
    let keys = tempfile::tempdir().unwrap();
    let proofs = tempfile::tempdir().unwrap();
    let (skey, vkey) = keygen(&repo, keys.path(), "example.com/forum");
    let mut notes = Vec::new();
    for i in 0..70 {
        repo.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
        notes.push(note(&repo, &skey));
    }
    let hashes = entry_hashes(&repo);
    assert_eq!(hashes.len(), 70);
    let tree = Tree::from_entry_hashes(hashes.iter().map(String::as_str)).unwrap();
    let inclusion = |seq: u64, size: u64| {
        let path = tree.inclusion_proof(seq, size).unwrap();
        note::tlog_proof_text(seq, &path, &notes[size as usize - 1])
    };
    let consistency = |old: u64, size: u64| {
        let path = tree.consistency_proof(old, size).unwrap();
        let (o, n) = (&notes[old as usize - 1], &notes[size as usize - 1]);
        note::consistency_text(old, size, &path, o, n)
    };
    let (mut all, mut sample) = (String::new(), String::new());
    let mut from_binary = 0;
    for size in 1..=70u64 {
        for seq in 0..size {
            let f = proofs.path().join(format!("incl-{seq}-{size}"));
            let text = inclusion(seq, size);
            if size == 70 || seq == size - 1 {
                let (s, n) = (seq.to_string(), size.to_string());
                let got = repo.forum_ok(&["prove", &s, "--tlog-proof", "--size", &n]);
                assert_eq!(got, text, "prove {seq} --size {size}");
                from_binary += 1;
            }
            std::fs::write(&f, &text).unwrap();
            let line = format!("inclusion {} {}\n", f.display(), hashes[seq as usize]);
            if seq == size / 2 {
                sample.push_str(&line);
            }
            all.push_str(&line);
        }
        for old in 1..size {
            let f = proofs.path().join(format!("cons-{old}-{size}"));
            let text = consistency(old, size);
            if size == 70 || old == size / 2 {
                let (o, n) = (old.to_string(), size.to_string());
                let got =
                    repo.forum_ok(&["prove", "--consistency-from", &o, "--size", &n, "--tlog"]);
                assert_eq!(got, text, "prove --consistency-from {old} --size {size}");
                from_binary += 1;
            }
            std::fs::write(&f, &text).unwrap();
            let line = format!("consistency {}\n", f.display());
            if old == size / 2 {
                sample.push_str(&line);
            }
            all.push_str(&line);
        }
    }
    assert!(from_binary > 250, "{from_binary}");
    let out = go_check(&checker, &vkey, &all, false);
    let want = 70 * 71 / 2 + 70 * 69 / 2;
    assert!(
        out.starts_with(&format!("ok: {want} proofs accepted")),
        "{out}"
    );
    let out = go_check(&checker, &vkey, &sample, true);
    assert!(out.starts_with("ok: "), "{out}");
    // A key the verifier does not trust is refused, so the acceptance above means something.
    let (_, other) = keygen(&repo, keys.path(), "example.com/other");
    let first = all.lines().next().unwrap().to_string() + "\n";
    let mut child = Command::new(&checker)
        .args(["proofs", &other])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), first.as_bytes());
    let o = child.wait_with_output().unwrap();
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// A ledger of `n` entries built in memory, written as a Forum directory and imported in one go;
/// returns its entry hashes in seq order.
pub(crate) fn imported(repo: &Repo, n: u64) -> Vec<String> {
    use git_forum::ledger::{MemoryStorage, NewEntry, Storage, Value};
    let mut mem = MemoryStorage::default();
    for i in 0..n {
        let payload = Value::object([("i".to_string(), Value::str(i.to_string()))]);
        let e = NewEntry {
            actor: "a".into(),
            kind: "note".into(),
            causal_parent: None,
            payload,
            ts: 1000.0,
        };
        mem.append(e).unwrap();
    }
    let dir = repo.path().join("forum-dir");
    git_forum::store::forum_dir::write(
        &dir,
        &mem.entries,
        |e| Ok(mem.payloads.get(&e.payload_hash).cloned()),
        false,
    )
    .unwrap();
    repo.forum_ok(&["import", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    mem.entries.iter().map(|e| e.entry_hash.clone()).collect()
}

/// `tiles export` serves a ledger of 600 entries (two full level-0 tiles, a partial one and a
/// partial level-1 tile) whose every inclusion and consistency proof the Go verifier derives
/// from the tiles alone and accepts; a changed tile byte is refused.
#[test]
fn go_verifier_proves_everything_from_exported_tiles_alone() {
    let Some(checker) = go_checker() else {
        return;
    };
    let repo = Repo::new("sha1");
    let keys = tempfile::tempdir().unwrap();
    let (skey, vkey) = keygen(&repo, keys.path(), "example.com/forum");
    let hashes = imported(&repo, 600);
    note(&repo, &skey);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("site");
    let said = repo.forum_ok(&["tiles", "export", dir.to_str().unwrap()]);
    assert!(said.contains("for size 600"), "{said}");
    for p in [
        "checkpoint",
        "tile/0/000",
        "tile/0/002.p/88",
        "tile/1/000.p/2",
        "tile/entries/001",
    ] {
        assert!(dir.join(p).is_file(), "{p} missing");
    }
    let entries = out.path().join("entries");
    std::fs::write(&entries, hashes.join("\n")).unwrap();
    let run = |d: &Path| {
        Command::new(&checker)
            .args(["tiles", &vkey])
            .arg(d)
            .arg(&entries)
            .output()
            .unwrap()
    };
    let o = run(&dir);
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{said}");
    assert!(
        said.starts_with("ok: 600 records and 599 consistency proofs"),
        "{said}"
    );
    let tile = dir.join("tile/0/001");
    let mut bytes = std::fs::read(&tile).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&tile, bytes).unwrap();
    assert!(!run(&dir).status.success(), "a changed tile was accepted");
    // The export refuses a directory that is not empty, and writes nothing into it.
    let again = repo
        .forum()
        .args(["tiles", "export", dir.to_str().unwrap()])
        .output()
        .unwrap();
    one_line_error(&again, "is not empty");
}

/// Tiles live on refs/forum/tiles/NAME, follow each signed note, and are re-derived rather than
/// trusted: a deleted or tampered ref is rebuilt by the next export, and verify never reads it.
#[test]
fn tiles_in_git_are_rebuilt_when_missing_or_tampered_on_every_format() {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let keys = tempfile::tempdir().unwrap();
        let (skey, _) = keygen(&repo, keys.path(), "k");
        for i in 0..3 {
            repo.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
        }
        note(&repo, &skey);
        let tiles = "refs/forum/tiles/main";
        let first = repo.git_ok(&["rev-parse", tiles]);
        assert_eq!(
            repo.git_ok(&["log", "-1", "--format=%s", tiles])
                .split(' ')
                .nth(1),
            Some("3")
        );
        let listing = repo.git_ok(&["ls-tree", "-r", "--name-only", tiles]);
        assert_eq!(listing, "tile/0/000.p/3\ntile/entries/000.p/3", "{kind}");
        repo.append("agent", "note", r#"{"i":3}"#);
        note(&repo, &skey);
        let second = repo.git_ok(&["rev-parse", &format!("{tiles}^{{tree}}")]);
        assert_ne!(repo.git_ok(&["rev-parse", tiles]), first, "{kind}");
        // Tampered: point the ref at the old (size 3) tiles; export re-derives and replaces them.
        repo.git_ok(&["update-ref", tiles, &first]);
        assert!(
            repo.forum().arg("verify").status().unwrap().success(),
            "{kind}"
        );
        let out = tempfile::tempdir().unwrap();
        repo.forum_ok(&["tiles", "export", out.path().join("a").to_str().unwrap()]);
        assert_eq!(
            repo.git_ok(&["rev-parse", &format!("{tiles}^{{tree}}")]),
            second,
            "{kind}"
        );
        // Missing: deleted, then rebuilt the same.
        repo.git_ok(&["update-ref", "-d", tiles]);
        repo.forum_ok(&["tiles", "export", out.path().join("b").to_str().unwrap()]);
        assert_eq!(
            repo.git_ok(&["rev-parse", &format!("{tiles}^{{tree}}")]),
            second,
            "{kind}"
        );
        assert_eq!(
            std::fs::read(out.path().join("a/tile/0/000.p/4")).unwrap(),
            std::fs::read(out.path().join("b/tile/0/000.p/4")).unwrap()
        );
    }
}

/// A witness cosigns a first note and then only trees that extend it: an extended ledger is
/// cosigned (the cosigned note opens with the witness's key), a rewritten one is refused with
/// both notes kept as evidence, and a refusal leaves the accepted checkpoint as it was.
#[test]
fn witness_cosigns_an_extended_ledger_and_refuses_a_rewritten_one() {
    use git_forum::store::note;
    let keys = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("witness");
    let honest = Repo::new("sha1");
    let (skey, vkey) = keygen(&honest, keys.path(), "example.com/forum");
    let (wkey, wvkey) = keygen(&honest, keys.path(), "witness.example");
    let rewritten = Repo::new("sha1");
    for r in [&honest, &rewritten] {
        r.git_ok(&["config", "forum.origin", "example.com/forum/main"]);
    }
    let witness = |repo: &Repo, offer: &str| {
        let f = work.path().join("offer.txt");
        std::fs::write(&f, offer).unwrap();
        repo.forum()
            .arg("witness")
            .arg(&f)
            .arg("--state")
            .arg(&state)
            .arg("--witness-key")
            .arg(&wkey)
            .args(["--note-verifier", &vkey])
            .output()
            .unwrap()
    };
    for i in 0..3 {
        honest.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
    }
    let first = note(&honest, &skey);
    let o = witness(&honest, &first);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cosigned = String::from_utf8(o.stdout).unwrap();
    let opened = note::open(
        &cosigned,
        &note::verifiers(std::slice::from_ref(&vkey)).unwrap(),
    )
    .unwrap();
    assert_eq!(opened.signers, ["example.com/forum"]);
    // The witness's line is a C2SP tlog-cosignature/v1 (type 0x04) of the same key.
    use git_forum::store::cosign;
    let wv = cosign::verifiers(&[cosign::vkey_of_note_vkey(&wvkey).unwrap()]).unwrap();
    assert_eq!(
        cosign::verify(&cosigned, &wv).unwrap()[0].witness,
        "witness.example"
    );

    for i in 3..5 {
        honest.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
    }
    note(&honest, &skey);
    let extend = honest.forum_ok(&["prove", "--consistency-from", "3", "--tlog"]);
    let o = witness(&honest, &extend);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cosigned = String::from_utf8(o.stdout).unwrap();
    assert_eq!(cosign::verify(&cosigned, &wv).unwrap().len(), 1);
    let opened = note::open(
        &cosigned,
        &note::verifiers(std::slice::from_ref(&vkey)).unwrap(),
    )
    .unwrap();
    assert_eq!(opened.checkpoint.size, 5);
    let accepted_file = |s: &Path| {
        let mut notes: Vec<_> = std::fs::read_dir(s)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "note"))
            .collect();
        assert_eq!(notes.len(), 1, "{notes:?}");
        std::fs::read_to_string(notes.pop().unwrap()).unwrap()
    };
    let accepted_before = accepted_file(&state);
    assert!(accepted_before.contains("\n5\n"), "{accepted_before}");

    // The same origin and key, other entries: a rewritten ledger of 7 entries.
    for i in 0..7 {
        rewritten.append("mallory", "note", &format!(r#"{{"x":{i}}}"#));
        if i == 4 {
            note(&rewritten, &skey);
        }
    }
    note(&rewritten, &skey);
    let forged = rewritten.forum_ok(&["prove", "--consistency-from", "5", "--tlog"]);
    let o = witness(&rewritten, &forged);
    let err = one_line_error(&o, "rewritten or shows another view");
    assert!(err.contains("both notes kept in"), "{err}");
    let evidence_dir = state.join("evidence");
    let evidence = std::fs::read_dir(&evidence_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(evidence).unwrap();
    assert!(text.contains(&note(&honest, &skey)[..20]), "{text}");
    assert!(text.contains(&forged), "{text}");
    // The forged path under the honest old note does not verify either.
    let honest_old = honest.forum_ok(&["prove", "--consistency-from", "5", "--tlog"]);
    let old_note = note::parse_consistency(&honest_old)
        .unwrap()
        .new_note
        .to_string();
    let p = note::parse_consistency(&forged).unwrap();
    let spliced = forged.replacen(p.old_note, &old_note, 1);
    let o = witness(&rewritten, &spliced);
    one_line_error(&o, "does not extend");
    // A bare note of another size after the first contact is refused too.
    let o = witness(&rewritten, &note(&rewritten, &skey));
    one_line_error(&o, "offer a consistency proof");
    assert_eq!(accepted_file(&state), accepted_before);
}

/// `verify` checks stored notes with `forum.noteVerifiers` and holds them, through the Forum root
/// their extension line carries, to the truncation and rewrite checks of signed checkpoints.
#[test]
fn verify_checks_notes_with_the_configured_verifiers_on_every_format() {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let keys = tempfile::tempdir().unwrap();
        let (skey, vkey) = keygen(&repo, keys.path(), "example.com/forum");
        let (_, other) = keygen(&repo, keys.path(), "other.example");
        for i in 0..3 {
            repo.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
        }
        // Not recorded, so only the note can catch the truncation below.
        let k = skey.to_str().unwrap();
        repo.forum_ok(&["checkpoint", "--note", "--note-key", k, "--no-record"]);
        let unchecked = repo.forum_ok(&["verify"]);
        assert!(
            unchecked.contains("no forum.noteVerifiers configured"),
            "{kind}: {unchecked}"
        );
        repo.git_ok(&["config", "forum.noteVerifiers", &vkey]);
        let good = repo.forum_ok(&["verify"]);
        assert!(good.contains("signed: size 3 (root "), "{kind}: {good}");
        assert!(
            good.contains("by note key example.com/forum"),
            "{kind}: {good}"
        );
        repo.git_ok(&["config", "forum.noteVerifiers", &other]);
        let o = repo.forum().arg("verify").output().unwrap();
        assert!(!o.status.success(), "{kind}");
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(
            said.contains("not signed by any trusted key"),
            "{kind}: {said}"
        );
        // Truncation below a signed note is caught through its forum-root line.
        repo.git_ok(&["config", "forum.noteVerifiers", &vkey]);
        let tip = repo.git_ok(&["rev-parse", "refs/forum/ledgers/main~1"]);
        repo.git_ok(&["update-ref", "refs/forum/ledgers/main", &tip]);
        let o = repo.forum().arg("verify").output().unwrap();
        assert!(!o.status.success(), "{kind}");
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(
            said.contains("signed a checkpoint at 3 entries"),
            "{kind}: {said}"
        );
    }
}
