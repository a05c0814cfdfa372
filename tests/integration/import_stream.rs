//! The streaming `import`: a Forum directory imports into the same commits
//! the ledger had, verifies deep and passes `git fsck --strict` on every repository format,
//! and a bad row anywhere in a long directory imports nothing and leaves no file behind.

use std::path::Path;

use git_forum::ledger::canonical;
use git_forum::ledger::{Entry, NewEntry};
use git_forum::store::forum_dir;

use crate::common::{self, LEDGER_REF, Repo, commit_texts, on_each_kind, one_line_error};

/// Every file under the repository's objects/pack, to show nothing was left there.
fn pack_files(repo: &Repo) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo.git_dir().join("objects/pack"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Insists that objects/pack holds packs and their indexes and nothing else.
fn assert_only_packs(repo: &Repo) {
    let files = pack_files(repo);
    assert!(
        files
            .iter()
            .all(|f| f.ends_with(".pack") || f.ends_with(".idx")),
        "{files:?}"
    );
}

#[test]
fn an_exported_ledger_imports_into_identical_commits_on_every_format() {
    on_each_kind(|src| {
        src.append("client", "request", r#"{"text": "hello"}"#);
        src.append("router", "route_frame", r#"{"to": ["a", "b"], "n": 1.5}"#);
        // A body that two entries share, and one with characters that need escaping.
        src.append("a", "note", r#"{"same": true}"#);
        src.append("b", "note", r#"{"same": true}"#);
        src.append("c", "note", r#"{"text": "caf\u00e9 \u2028 \"q\""}"#);
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("forum");
        src.forum_ok(&["export", dir.to_str().unwrap()]);
        let kind = src.kind();
        let dst = Repo::new(kind);
        let out = dst.forum_json(&["import", dir.to_str().unwrap()]);
        assert_eq!(out["entries"], 5, "{out}");
        assert_eq!(
            out["commit"].as_str().unwrap(),
            src.git_ok(&["rev-parse", LEDGER_REF])
        );
        // Byte for byte the same commits, so the same ids.
        assert_eq!(
            commit_texts(&dst, LEDGER_REF),
            commit_texts(src, LEDGER_REF)
        );
        let v = dst.forum_json(&["verify", "--deep"]);
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["checkpoint"], out["checkpoint"]);
        dst.fsck();
        // The ledger goes on from there, and the seq index written by the import serves reads.
        assert_eq!(dst.append("d", "note", "{}")["seq"], 5);
        let shown = dst.forum_json(&["show", "3"]);
        assert_eq!(
            shown["entry"]["actor"].as_str().or(shown["actor"].as_str()),
            Some("b"),
            "{shown}"
        );
        assert_eq!(dst.forum_json(&["verify", "--deep"])["ok"], true);
        // Nothing but the pack (and its index) is left in objects/pack.
        assert_only_packs(&dst);
    });
}

/// Writes a Forum directory of `n` entries (every seventh body repeats an earlier one).
fn forum_dir_of(dir: &Path, n: usize) {
    forum_dir_with(dir, n, |i| if i % 7 == 6 { i - 6 } else { i });
}

/// Writes a Forum directory of `n` entries, entry `i` holding body number `body(i)`.
fn forum_dir_with(dir: &Path, n: usize, body: impl Fn(usize) -> usize) {
    let mut entries: Vec<Entry> = Vec::with_capacity(n);
    let mut bodies = std::collections::HashMap::new();
    for i in 0..n {
        let text = format!("{{\"i\": {}}}", body(i));
        let new = NewEntry {
            actor: "bench".into(),
            kind: "note".into(),
            causal_parent: (i % 3 == 1).then(|| i as i64 - 1),
            payload: canonical::parse(&text).unwrap(),
            ts: 1000.0 + i as f64,
        };
        let body = new.validate().unwrap();
        let ph = git_forum::ledger::hash::sha256_hex(body.as_bytes());
        bodies.insert(ph.clone(), new.payload.clone());
        let e = Entry::next(entries.last(), &new, ph);
        entries.push(e);
    }
    forum_dir::write(
        dir,
        &entries,
        |e| Ok(bodies.get(&e.payload_hash).cloned()),
        false,
    )
    .unwrap();
}

/// What `git forum import DIR` gives in `repo`.
fn import_of(repo: &Repo, dir: &Path) -> std::process::Output {
    repo.forum()
        .args(["import", dir.to_str().unwrap()])
        .output()
        .unwrap()
}

/// A copy of the Forum directory `good` at `to`, for one damaged case.
fn copy_of(good: &Path, to: &Path) -> std::path::PathBuf {
    std::fs::create_dir(to).unwrap();
    for f in ["entries.jsonl", "payloads.jsonl"] {
        std::fs::copy(good.join(f), to.join(f)).unwrap();
    }
    to.to_path_buf()
}

/// Replaces line `row` (0-based) of `file` with what `f` makes of it.
fn edit_row(file: &Path, row: usize, f: impl Fn(&str) -> String) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[row] = f(&lines[row]);
    std::fs::write(file, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_bad_row_deep_in_a_long_directory_imports_nothing() {
    let work = tempfile::tempdir().unwrap();
    let good = work.path().join("good");
    forum_dir_of(&good, 3000);
    let copy = |name: &str| copy_of(&good, &work.path().join(name));
    for kind in common::FORMATS {
        let repo = Repo::new(kind);
        let before = repo.snapshot();
        let import = |d: &Path| import_of(&repo, d);
        // A body edited near the end: it no longer hashes to its entry.
        let d = copy(&format!("{kind}-body"));
        edit_row(&d.join("payloads.jsonl"), 2500, |l| {
            l.replace("\"i\": ", "\"i\": 1")
        });
        one_line_error(
            &import(&d),
            "does not hash to its payload_hash; nothing was imported",
        );
        // A broken link late and a bad body early: the broken chain is reported, as a
        // whole-directory read reports it.
        let d = copy(&format!("{kind}-both"));
        edit_row(&d.join("payloads.jsonl"), 10, |l| {
            l.replace("\"i\": ", "\"i\": 1")
        });
        edit_row(&d.join("entries.jsonl"), 2990, |l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let prev = v["prev_hash"].as_str().unwrap().to_string();
            l.replace(&prev, &"0".repeat(64))
        });
        one_line_error(&import(&d), "does not verify at row 2990");
        // A corrupt payload row and a corrupt entry row: the entry row is named.
        let d = copy(&format!("{kind}-rows"));
        edit_row(&d.join("payloads.jsonl"), 5, |l| {
            l[..l.len() - 3].to_string()
        });
        edit_row(&d.join("entries.jsonl"), 2000, |l| {
            l[..l.len() - 3].to_string()
        });
        one_line_error(&import(&d), "entries.jsonl: corrupt line at row 2000");
        // A payload row torn inside: named alone.
        let d = copy(&format!("{kind}-payload"));
        edit_row(&d.join("payloads.jsonl"), 5, |l| {
            l[..l.len() - 3].to_string()
        });
        one_line_error(&import(&d), "payloads.jsonl: corrupt line at row 5");
        assert_eq!(repo.snapshot(), before, "nothing imported on {kind}");
        assert!(
            pack_files(&repo).is_empty(),
            "{kind}: {:?}",
            pack_files(&repo)
        );
        // The good directory imports, and its bodies verify.
        let out = repo.forum_json(&["import", good.to_str().unwrap()]);
        assert_eq!(out["entries"], 3000, "{out}");
        assert_eq!(repo.forum_json(&["verify", "--deep"])["ok"], true);
        repo.fsck();
    }
}

/// `import` reads the directory on a thread of its own and hands the rows over in batches of
/// 256: a corrupt entry row at either side of a batch's edge and at the first row, a broken
/// link in the last row and a bad last body are named as they were before, with nothing
/// imported; a directory of exactly two batches imports whole.
#[test]
fn a_bad_row_at_the_edge_of_a_batch_read_ahead_is_named() {
    let work = tempfile::tempdir().unwrap();
    let good = work.path().join("good");
    forum_dir_of(&good, 512);
    let copy = |name: String| copy_of(&good, &work.path().join(name));
    for kind in common::FORMATS {
        let repo = &Repo::new(kind);
        let before = repo.snapshot();
        let import = |d: &Path| import_of(repo, d);
        for row in [0, 255, 256, 257, 510] {
            let d = copy(format!("{kind}-entry-{row}"));
            edit_row(&d.join("entries.jsonl"), row, |l| {
                l[..l.len() - 3].to_string()
            });
            one_line_error(
                &import(&d),
                &format!("entries.jsonl: corrupt line at row {row}"),
            );
        }
        // The last row's link broken (a torn last line would be dropped, as Forum drops it).
        let d = copy(format!("{kind}-link"));
        edit_row(&d.join("entries.jsonl"), 511, |l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let prev = v["prev_hash"].as_str().unwrap().to_string();
            l.replace(&prev, &"0".repeat(64))
        });
        one_line_error(&import(&d), "does not verify at row 511");
        // The last body row (the body of entry 511).
        let d = copy(format!("{kind}-body"));
        let rows = std::fs::read_to_string(d.join("payloads.jsonl")).unwrap();
        edit_row(&d.join("payloads.jsonl"), rows.lines().count() - 1, |l| {
            l.replace("\"i\": ", "\"i\": 1")
        });
        one_line_error(
            &import(&d),
            "does not hash to its payload_hash; nothing was imported",
        );
        assert_eq!(repo.snapshot(), before, "nothing imported on {kind}");
        assert!(
            pack_files(repo).is_empty(),
            "{kind}: {:?}",
            pack_files(repo)
        );
        let out = repo.forum_json(&["import", good.to_str().unwrap()]);
        assert_eq!(out["entries"], 512, "{out}");
        assert_eq!(repo.forum_json(&["verify", "--deep"])["ok"], true);
        repo.fsck();
    }
}

/// The payload rows of `good` rearranged by `f` into a new directory `name` beside it.
fn rearranged(
    good: &Path,
    name: &str,
    f: impl Fn(Vec<String>) -> Vec<String>,
) -> std::path::PathBuf {
    let d = good.with_file_name(name);
    std::fs::create_dir(&d).unwrap();
    std::fs::copy(good.join("entries.jsonl"), d.join("entries.jsonl")).unwrap();
    let rows: Vec<String> = std::fs::read_to_string(good.join("payloads.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    std::fs::write(d.join("payloads.jsonl"), f(rows).join("\n") + "\n").unwrap();
    d
}

/// A payload row of a body no entry names.
fn orphan_row(k: usize) -> String {
    let body = format!("{{\"orphan\": {k}}}");
    let h = git_forum::ledger::hash::sha256_hex(
        canonical::parse(&body).unwrap().canonical().as_bytes(),
    );
    format!("{{\"hash\": \"{h}\", \"body\": {body}}}")
}

#[test]
fn payload_rows_in_any_order_import_into_the_same_commits_on_every_format() {
    let work = tempfile::tempdir().unwrap();
    let good = work.path().join("good");
    // Every seventh body repeats one six entries back, and the last two repeat the first
    // body and one from the middle; the rows are in Forum's order.
    let n = 2000;
    forum_dir_with(&good, n, |i| match i {
        _ if i == n - 1 => 0,
        _ if i == n - 2 => n / 2,
        _ if i % 7 == 6 => i - 6,
        _ => i,
    });
    let shuffled = rearranged(&good, "shuffled", |mut rows| {
        // A fixed permutation: multiplying by a unit modulo the length.
        let n = rows.len();
        let step = (1..n)
            .rev()
            .find(|s| gcd(*s, n) == 1 && *s > n / 3)
            .unwrap();
        let old = rows.clone();
        for (i, r) in rows.iter_mut().enumerate() {
            *r = old[(i * step) % n].clone();
        }
        rows
    });
    let reversed = rearranged(&good, "reversed", |mut rows| {
        rows.reverse();
        rows
    });
    // Rows no entry names, first, in the middle and last, and every row written twice, the
    // copies far from the originals.
    let extra = rearranged(&good, "extra", |rows| {
        let n = rows.len();
        let mut out = vec![orphan_row(0)];
        out.extend(rows[..n / 2].iter().cloned());
        out.push(orphan_row(1));
        out.extend(rows[n / 2..].iter().cloned());
        out.extend(rows.iter().rev().cloned());
        out.push(orphan_row(2));
        out
    });
    // The row of a body in the middle missing: that entry's body is absent, as after a
    // redaction.
    let far = rearranged(&good, "far", |mut rows| {
        rows.remove(700);
        rows
    });
    for kind in common::FORMATS {
        let base = Repo::new(kind);
        let want = base.forum_json(&["import", good.to_str().unwrap()]);
        for d in [&shuffled, &reversed, &extra] {
            let repo = Repo::new(kind);
            let out = repo.forum_json(&["import", d.to_str().unwrap()]);
            assert_eq!(
                out["commit"],
                want["commit"],
                "{kind} {}: {out}",
                d.display()
            );
            assert_eq!(out["absent_bodies"], 0, "{out}");
            assert_eq!(repo.forum_json(&["verify", "--deep"])["ok"], true);
            repo.fsck();
            // The index's temporary files are gone with the import.
            let stray: Vec<String> = std::fs::read_dir(repo.git_dir().join("objects"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .filter(|n| n.len() != 2 && n != "pack" && n != "info")
                .collect();
            assert!(stray.is_empty(), "{stray:?}");
            assert_only_packs(&repo);
        }
        let repo = Repo::new(kind);
        let out = repo.forum_json(&["import", far.to_str().unwrap()]);
        assert_ne!(out["commit"], want["commit"]);
        assert!(out["absent_bodies"].as_u64().unwrap() >= 1, "{out}");
        // Verify names the entry whose body is gone (no redaction entry accounts for it).
        let v = repo.forum_json(&["verify", "--deep"]);
        assert_eq!(v["code"], "body-missing", "{v}");
        repo.fsck();
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The standard root of `hashes` (hex entry hashes) as a note writes it, from the library's
/// incremental tree (not from tiles).
fn standard_root_b64(hashes: &[String]) -> String {
    let mut f = git_forum::ledger::tlog::Frontier::default();
    for h in hashes {
        let mut raw = [0u8; 32];
        for (o, pair) in raw.iter_mut().zip(h.as_bytes().chunks(2)) {
            *o = u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap();
        }
        f.push(&raw);
    }
    git_forum::store::note::b64(&f.root())
}

/// A tile rebuild of a long ledger (read in ranges, one a thread) gives the root the entries
/// give; a seq index that lies is not believed; an edited entry stops the rebuild.
#[test]
fn a_long_ledger_rebuilds_its_tiles_in_ranges_and_an_edit_stops_it() {
    for kind in common::FORMATS {
        let repo = Repo::new(kind);
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("forum");
        forum_dir_of(&dir, 5000);
        repo.forum_ok(&["import", dir.to_str().unwrap()]);
        let hashes: Vec<String> = std::fs::read_to_string(dir.join("entries.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["entry_hash"].as_str().unwrap().to_string()
            })
            .collect();
        let want = standard_root_b64(&hashes);
        let keys = tempfile::tempdir().unwrap();
        repo.forum_ok(&["keygen", "k", "--dir", keys.path().to_str().unwrap()]);
        let key = keys.path().join("k.key");
        let note = || repo.forum_ok(&["checkpoint", "--note", "--note-key", key.to_str().unwrap()]);
        let signed = note();
        assert!(
            signed.contains(&format!("\n5000\n{want}\n")),
            "{kind}: {signed}"
        );
        let tiles = "refs/forum/tiles/main";
        let tree = repo.git_ok(&["rev-parse", &format!("{tiles}^{{tree}}")]);
        // The seq index with two ids swapped in the middle: the rebuild walks instead.
        let index = repo.git_dir().join("forum/index/main.idx");
        let mut ids = std::fs::read(&index).unwrap();
        let w = ids.len() / 5000;
        let (a, b) = (2000 * w, 2001 * w);
        let first: Vec<u8> = ids[a..a + w].to_vec();
        ids.copy_within(b..b + w, a);
        ids[b..b + w].copy_from_slice(&first);
        std::fs::write(&index, &ids).unwrap();
        repo.git_ok(&["update-ref", "-d", tiles]);
        let again = note();
        assert!(
            again.contains(&format!("\n5000\n{want}\n")),
            "{kind}: {again}"
        );
        assert_eq!(
            repo.git_ok(&["rev-parse", &format!("{tiles}^{{tree}}")]),
            tree
        );
        // An entry near the tip edited, its commits re-chained: the rebuild refuses.
        let base = repo.git_ok(&["rev-parse", &format!("{LEDGER_REF}~10")]);
        let mut parent = base;
        let tail = repo.git_ok(&[
            "rev-list",
            "--reverse",
            &format!("{LEDGER_REF}~10..{LEDGER_REF}"),
        ]);
        for (i, id) in tail.lines().enumerate() {
            let mut text = repo.git_ok(&["cat-file", "commit", id]) + "\n";
            if i == 3 {
                text = text.replace("\"actor\":\"bench\"", "\"actor\":\"mallory\"");
            }
            parent = common::write_commit(&repo, &common::set_parent(&text, Some(&parent)));
        }
        common::move_ref_quietly(&repo, &parent);
        repo.git_ok(&["update-ref", "-d", tiles]);
        let o = repo
            .forum()
            .args(["prove", "10", "--tlog-proof"])
            .output()
            .unwrap();
        one_line_error(&o, "entry 4993 does not continue the chain");
    }
}
