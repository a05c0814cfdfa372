//! Signed checkpoints with a real ssh key: who signed which size, a truncation caught by a
//! signature, forged and untrusted signatures refused.

use crate::common::{FORMATS, Repo, init_flags, move_ref_quietly};

fn keygen(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let key = dir.join(name);
    let o = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_string())
}

/// A repository of `kind` with three entries, set up to sign with alice's key and to trust it.
fn signing_repo_of(kind: &str) -> (Repo, tempfile::TempDir, std::path::PathBuf) {
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = keygen(keys.path(), "alice");
    let allowed = keys.path().join("allowed_signers");
    std::fs::write(
        &allowed,
        format!("alice@example.invalid namespaces=\"git-forum-checkpoint\" {public}\n"),
    )
    .unwrap();
    let repo = Repo::new(kind);
    repo.git_ok(&["config", "gpg.format", "ssh"]);
    repo.git_ok(&["config", "user.signingKey", key.to_str().unwrap()]);
    repo.git_ok(&[
        "config",
        "gpg.ssh.allowedSignersFile",
        allowed.to_str().unwrap(),
    ]);
    for i in 0..3 {
        repo.append("agent", "note", &i.to_string());
    }
    (repo, keys, key)
}

fn signing_repo() -> (Repo, tempfile::TempDir, std::path::PathBuf) {
    signing_repo_of("sha1")
}

/// On each kind of repository (the signatures ref is read through git, so reftable sees it).
#[test]
fn signed_checkpoint_names_its_signer_and_catches_a_truncation() {
    for kind in FORMATS {
        let (repo, _keys, _) = signing_repo_of(kind);
        let out = repo.forum_json(&["checkpoint", "--sign"]);
        assert_eq!(out["signed"], "ssh", "{kind}");
        let r = repo.forum_json(&["verify"]);
        assert_eq!(r["ok"], true, "{kind}: {r}");
        assert_eq!(r["signatures"][0]["size"], 3, "{kind}: {r}");
        assert_eq!(
            r["signatures"][0]["signer"], "alice@example.invalid",
            "{kind}"
        );
        // Cut the tail with no reflog line and no local witness: the signature still catches it.
        let first = repo
            .git_ok(&["rev-list", "--reverse", "refs/forum/ledgers/main"])
            .lines()
            .next()
            .unwrap()
            .to_string();
        std::fs::remove_file(repo.git_dir().join("forum/checkpoints/main.jsonl")).unwrap();
        move_ref_quietly(&repo, &first);
        let r = repo.forum_json(&["verify"]);
        assert_eq!(r["ok"], false, "{kind}: {r}");
        assert_eq!(r["code"], "truncated", "{kind}: {r}");
        assert!(
            r["problem"]
                .as_str()
                .unwrap()
                .contains("alice@example.invalid"),
            "{kind}: {r}"
        );
    }
}

#[test]
fn forged_and_untrusted_signatures_are_refused() {
    let (repo, keys, _) = signing_repo();
    // A key outside the allowed signers.
    let (mallory, _) = keygen(keys.path(), "mallory");
    repo.git_ok(&["config", "user.signingKey", mallory.to_str().unwrap()]);
    repo.forum_ok(&["checkpoint", "--sign"]);
    let r = repo.forum_json(&["verify"]);
    assert_eq!(r["code"], "bad-signature", "{r}");
    assert!(
        r["problem"]
            .as_str()
            .unwrap()
            .contains("not in the allowed signers"),
        "{r}"
    );

    // A forged signature: alice's signature over a different root.
    let (repo, _keys2, _) = signing_repo();
    repo.forum_ok(&["checkpoint", "--sign"]);
    let tip = repo.git_ok(&["rev-parse", "refs/forum/checkpoints/main"]);
    let text = repo.git_ok(&["cat-file", "blob", &format!("{tip}:checkpoint")]) + "\n";
    let forged_text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("root ") {
                format!("root {}\n", "0".repeat(64))
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(forged_text, text);
    let a = repo.git_in(&["hash-object", "-w", "--stdin"], forged_text.as_bytes());
    let sig = repo.git_ok(&["rev-parse", &format!("{tip}:signature")]);
    let tree = repo.git_in(
        &["mktree"],
        format!("100644 blob {a}\tcheckpoint\n100644 blob {sig}\tsignature\n").as_bytes(),
    );
    let commit = repo.git_ok(&["commit-tree", &tree, "-p", &tip, "-m", "forged"]);
    repo.git_ok(&["update-ref", "refs/forum/checkpoints/main", &commit]);
    let r = repo.forum_json(&["verify"]);
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["code"], "bad-signature", "{r}");
}

#[test]
fn signing_without_a_key_is_one_clear_line_and_changes_nothing() {
    let repo = Repo::new("sha1");
    repo.append("agent", "note", "1");
    let before = repo.snapshot();
    let o = repo
        .forum()
        .args(["checkpoint", "--sign"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("user.signingKey"), "{err}");
    assert_eq!(repo.snapshot(), before);
}

/// On each kind of repository: the proof finds the signature wherever git keeps the ref.
#[test]
fn a_proof_carries_the_checkpoint_signature_and_checks_it_without_a_repository() {
    for kind in FORMATS {
        let (repo, keys, _) = signing_repo_of(kind);
        repo.forum_ok(&["checkpoint", "--sign"]);
        let proof = repo.forum_ok(&["prove", "1"]);
        let outside = tempfile::tempdir().unwrap();
        let f = outside.path().join("p.json");
        std::fs::write(&f, &proof).unwrap();
        let allowed = keys.path().join("allowed_signers");
        let run = |extra: &[&str]| {
            let mut args = vec!["verify-proof", f.to_str().unwrap(), "--json"];
            args.extend_from_slice(extra);
            repo.forum()
                .current_dir(outside.path())
                .env("GIT_CEILING_DIRECTORIES", outside.path().parent().unwrap())
                .args(&args)
                .output()
                .unwrap()
        };
        let o = run(&[
            "--allowed-signers",
            allowed.to_str().unwrap(),
            "--require-signature",
        ]);
        assert!(
            o.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["signer"], "alice@example.invalid", "{kind}: {v}");
        // Without a trust anchor a signature cannot be required.
        let o = run(&["--require-signature"]);
        assert_eq!(o.status.code(), Some(1), "{kind}");
        // A signer outside the file is refused.
        let other = keys.path().join("other_signers");
        let (_, public) = keygen(keys.path(), "carol");
        std::fs::write(&other, format!("carol@example.invalid {public}\n")).unwrap();
        let o = run(&["--allowed-signers", other.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{kind}");
    }
}

/// Signed checkpoints travel with `git forum push` and are checked on `git forum fetch`: a
/// remote copy cut below a signed size is refused even on a first fetch. On each kind of
/// repository, the remote of the same kind: a reftable repository keeps the signatures ref where
/// only git can see it.
#[test]
fn signatures_travel_with_push_and_are_checked_on_fetch() {
    for kind in FORMATS {
        let (repo, keys, _) = signing_repo_of(kind);
        repo.forum_ok(&["checkpoint", "--sign"]);
        let bare = tempfile::tempdir().unwrap();
        let o = std::process::Command::new("git")
            .args(["init", "-q", "--bare"])
            .args(init_flags(kind))
            .arg(bare.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{kind}");
        let url = format!("file://{}", bare.path().display());
        repo.git_ok(&["remote", "add", "origin", &url]);
        repo.forum_ok(&["push", "origin"]);
        let remote_refs = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(bare.path())
            .args(["for-each-ref", "--format=%(refname)"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&remote_refs.stdout).contains("refs/forum/checkpoints/main"),
            "{kind}: the signatures did not travel with the push"
        );

        // A second clone trusts alice too, fetches, and sees the signature.
        let other = Repo::new(kind);
        other.git_ok(&[
            "config",
            "gpg.ssh.allowedSignersFile",
            keys.path().join("allowed_signers").to_str().unwrap(),
        ]);
        other.git_ok(&["remote", "add", "origin", &url]);
        let out = other.forum_json(&["fetch", "origin"]);
        assert_eq!(out["ok"], true, "{kind}: {out}");
        assert!(
            other
                .git_ok(&["for-each-ref", "--format=%(refname)"])
                .contains("refs/forum/remote-checkpoints/origin/main"),
            "{kind}: the fetched signatures were not kept"
        );

        // The remote is cut below the signed size: a fresh clone refuses it on its first fetch.
        let first = repo
            .git_ok(&["rev-list", "--reverse", "refs/forum/ledgers/main"])
            .lines()
            .next()
            .unwrap()
            .to_string();
        let o = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(bare.path())
            .args(["update-ref", "refs/forum/ledgers/main", &first])
            .output()
            .unwrap();
        assert!(o.status.success(), "{kind}");
        let fresh = Repo::new(kind);
        fresh.git_ok(&[
            "config",
            "gpg.ssh.allowedSignersFile",
            keys.path().join("allowed_signers").to_str().unwrap(),
        ]);
        fresh.git_ok(&["remote", "add", "origin", &url]);
        let o = fresh
            .forum()
            .args(["fetch", "origin", "--json"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{kind}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let text = v.to_string();
        assert!(
            text.contains("truncated") && text.contains("alice@example.invalid"),
            "{kind}: {text}"
        );
        assert!(
            !fresh
                .git_ok(&["for-each-ref", "--format=%(refname)"])
                .contains("refs/forum/remotes/origin/main"),
            "{kind}"
        );
    }
}

/// The openpgp path: a checkpoint signed with a gpg key from a throwaway keyring verifies and
/// names its signer; checked with a keyring that lacks the key, it is refused, as a key outside
/// the allowed signers is for ssh.
#[test]
fn openpgp_signed_checkpoint() {
    let home = tempfile::tempdir().unwrap();
    let gnupg = home.path().join("gnupg");
    std::fs::create_dir(&gnupg).unwrap();
    std::fs::set_permissions(&gnupg, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let o = std::process::Command::new("gpg")
        .env("GNUPGHOME", &gnupg)
        .args([
            "--batch",
            "--passphrase",
            "",
            "--quick-gen-key",
            "Test Signer <signer@example.invalid>",
            "ed25519",
            "sign",
            "never",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let repo = Repo::new("sha1");
    repo.git_ok(&["config", "user.signingKey", "signer@example.invalid"]);
    for i in 0..2 {
        repo.append("agent", "note", &i.to_string());
    }
    let out = repo
        .forum()
        .env("GNUPGHOME", &gnupg)
        .args(["checkpoint", "--sign", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = repo
        .forum()
        .env("GNUPGHOME", &gnupg)
        .args(["verify", "--json"])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["ok"], true, "{r}");
    assert!(
        r["signatures"][0]["signer"]
            .as_str()
            .unwrap()
            .contains("signer@example.invalid"),
        "{r}"
    );
    // Without the key in the keyring the signature is not vouched for.
    let empty = home.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::set_permissions(&empty, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let o = repo
        .forum()
        .env("GNUPGHOME", &empty)
        .args(["verify", "--json"])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        r["signatures"].as_array().unwrap().is_empty() || r["ok"] == false,
        "{r}"
    );
}
