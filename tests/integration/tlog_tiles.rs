//! The standard tree's tiles in git as a cache that keeps up with the ledger, through the real
//! binary: `prove` and `checkpoint --note` extend stale tiles from their last size (to exactly
//! the tiles a rebuild gives), a tampered tile is rebuilt rather than believed, and `verify`
//! holds every stored note to the standard root its entries give.

use crate::common::{FORMATS, Repo};
use crate::tlog::{imported, keygen, note, verify_proof};

const TILES: &str = "refs/forum/tiles/main";

/// The size the tiles ref says it holds (its subject is `tiles SIZE ROOT`).
fn tiled_size(repo: &Repo) -> String {
    let s = repo.git_ok(&["log", "-1", "--format=%s", TILES]);
    s.split(' ').nth(1).unwrap_or("").to_string()
}

fn tiles_tree(repo: &Repo) -> String {
    repo.git_ok(&["rev-parse", &format!("{TILES}^{{tree}}")])
}

/// Points the tiles ref at a copy of its commit whose `path` blob holds `bytes` instead.
fn tamper(repo: &Repo, path: &str, bytes: &[u8]) {
    let index = repo.path().join("tamper.index");
    let env_index = index.to_str().unwrap();
    let blob = repo.git_in(&["hash-object", "-w", "--stdin"], bytes);
    let run = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .current_dir(repo.path())
            .env("GIT_INDEX_FILE", env_index)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {o:?}");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    run(&["read-tree", TILES]);
    run(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{blob},{path}"),
    ]);
    let tree = run(&["write-tree"]);
    std::fs::remove_file(&index).unwrap();
    let message = repo.git_ok(&["log", "-1", "--format=%B", TILES]);
    let commit = repo.git_in(&["commit-tree", &tree], message.as_bytes());
    repo.git_ok(&["update-ref", TILES, &commit]);
}

/// Appends after a signed note leave the tiles stale; `prove` (against the old note) extends
/// them to the tip and `checkpoint --note` signs from them, the extension is exactly what a
/// rebuild from every entry gives, and a tile changed in git is rebuilt, not believed.
#[test]
fn tiles_are_extended_with_the_ledger_and_rebuilt_when_tampered_on_every_format() {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let keys = tempfile::tempdir().unwrap();
        let (skey, vkey) = keygen(&repo, keys.path(), "k");
        let hashes = imported(&repo, 300);
        note(&repo, &skey);
        assert_eq!(tiled_size(&repo), "300", "{kind}");
        repo.append("agent", "note", r#"{"i":300}"#);
        repo.append("agent", "note", r#"{"i":301}"#);
        let first = repo.forum_ok(&["prove", "7", "--tlog-proof"]);
        assert_eq!(tiled_size(&repo), "302", "{kind}: prove extends the tiles");
        let outside = tempfile::tempdir().unwrap();
        let args = ["--note-verifier", vkey.as_str(), "--entry-hash", &hashes[7]];
        let ok = verify_proof(&repo, outside.path(), &first, &args);
        assert!(ok.status.success(), "{kind}: {ok:?}");
        let extended = tiles_tree(&repo);
        let signed = note(&repo, &skey);
        assert!(signed.contains("\n302\n"), "{kind}: {signed}");
        // A rebuild from every entry gives the very tree the extension wrote.
        repo.git_ok(&["update-ref", "-d", TILES]);
        let again = repo.forum_ok(&["prove", "7", "--tlog-proof"]);
        assert_eq!(tiles_tree(&repo), extended, "{kind}");
        assert!(
            again.contains("\n302\n"),
            "{kind}: proves against the newest note"
        );
        let listing = repo.git_ok(&["ls-tree", "-r", "--name-only", TILES]);
        assert_eq!(
            listing,
            "tile/0/000\ntile/0/001.p/46\ntile/1/000.p/1\ntile/entries/000\ntile/entries/001.p/46",
            "{kind}: superseded partial tiles are removed"
        );
        // A tampered full tile is caught by its root and rebuilt; the proof still holds.
        let honest = tiles_tree(&repo);
        tamper(&repo, "tile/0/000", &[0u8; 256 * 32]);
        assert_ne!(tiles_tree(&repo), honest);
        let proof = repo.forum_ok(&["prove", "7", "--tlog-proof"]);
        assert_eq!(proof, again, "{kind}");
        assert_eq!(
            tiles_tree(&repo),
            honest,
            "{kind}: the tampered tiles were replaced"
        );
    }
}

/// `verify` checks the standard root a note signs, not only its Forum-root line: a note signed
/// by a trusted key whose Forum root is right but whose standard root is not fails verify.
#[test]
fn verify_refuses_a_note_whose_standard_root_the_entries_do_not_give_on_every_format() {
    for kind in FORMATS {
        let repo = Repo::new(kind);
        let keys = tempfile::tempdir().unwrap();
        let (skey, vkey) = keygen(&repo, keys.path(), "example.com/forum");
        repo.git_ok(&["config", "forum.noteVerifiers", &vkey]);
        for i in 0..3 {
            repo.append("agent", "note", &format!(r#"{{"i":{i}}}"#));
        }
        let k = skey.to_str().unwrap();
        let signed = repo.forum_ok(&["checkpoint", "--note", "--note-key", k, "--no-record"]);
        let good = repo.forum_ok(&["verify"]);
        assert!(
            good.contains("by note key example.com/forum"),
            "{kind}: {good}"
        );
        // The same text with another standard root (its Forum root line untouched), signed.
        let text = signed.split_once("\n\n").unwrap().0;
        let mut lines: Vec<&str> = text.lines().collect();
        let zero = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        assert_ne!(lines[2], zero);
        lines[2] = zero;
        let forged_text = format!("{}\n", lines.join("\n"));
        let key = std::fs::read_to_string(&skey).unwrap();
        let forged = git_forum::store::note::sign_text(&forged_text, &key).unwrap();
        let blob = repo.git_in(&["hash-object", "-w", "--stdin"], forged.as_bytes());
        let tree = repo.git_in(
            &["mktree"],
            format!("100644 blob {blob}\tnote\n").as_bytes(),
        );
        let refname = "refs/forum/checkpoints/main";
        let parent = repo.git_ok(&["rev-parse", refname]);
        let commit = repo.git_in(
            &["commit-tree", &tree, "-p", &parent],
            format!("note 3 {zero} (forged)\n").as_bytes(),
        );
        repo.git_ok(&["update-ref", refname, &commit]);
        let o = repo.forum().arg("verify").output().unwrap();
        assert!(!o.status.success(), "{kind}");
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(
            said.contains("have standard root") && said.contains(zero),
            "{kind}: {said}"
        );
    }
}
