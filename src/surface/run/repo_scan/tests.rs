//! The answers given in this process are git's, byte for byte, in each kind of repository
//! (files/SHA-1, files/SHA-256, reftable), for text, binary, executable, symlinked, deleted,
//! intent-to-add and unmerged entries; and what git would answer otherwise is left to it.

use std::path::{Path, PathBuf};

use super::{Env, GitDirs, Scan};

const KINDS: [&[&str]; 3] = [
    &["--object-format=sha1"],
    &["--object-format=sha256"],
    &["--ref-format=reftable"],
];

/// A hermetic `git` in `dir`: git forum's environment policy, no global or system
/// configuration, a fixed identity.
fn git_cmd(dir: &Path, args: &[&str]) -> std::process::Output {
    crate::gitproc::in_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap()
}

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = git_cmd(dir, args);
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// An environment with no configuration or attributes file anywhere.
fn clean_env(home: &Path) -> Env {
    Env {
        home: Some(home.to_path_buf()),
        xdg: Some(home.join(".config")),
        global: None,
        system: Some(PathBuf::from("/dev/null")),
        params: false,
        etcs: vec![home.join("etc")],
    }
}

fn dirs(top: &Path) -> GitDirs {
    let kind = match git(top, &["rev-parse", "--show-object-format"]).as_slice() {
        b"sha256\n" => gix::hash::Kind::Sha256,
        _ => gix::hash::Kind::Sha1,
    };
    let git_dir = String::from_utf8(git(top, &["rev-parse", "--absolute-git-dir"])).unwrap();
    GitDirs {
        git_dir: PathBuf::from(git_dir.trim_end()),
        kind,
    }
}

fn write(top: &Path, path: &str, bytes: &[u8]) {
    let full = top.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, bytes).unwrap();
}

/// A repository of `init` kind holding every sort of entry the scan must treat as git does,
/// with a conflict left unmerged on `both.txt`.
fn varied(init: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path();
    git(top, &[&["init", "-q", "-b", "main"][..], init].concat());
    write(top, "README.md", b"# Title\nThe first PART of it.\n");
    write(top, "src/a.txt", b"nothing here\n");
    write(top, "src/deep/b.txt", b"a Part, and src/a too\n");
    write(top, "bin.dat", b"\0\x01part binary\n");
    let mut late = vec![b'x'; 9_000];
    late.extend_from_slice(b"\0part after the probe\n");
    write(top, "late.dat", &late);
    write(top, "café.txt", "café pArT ünïcode\n".as_bytes());
    write(top, "split.txt", b"par\nt\n");
    write(top, "gone.txt", b"part that will be deleted\n");
    write(top, "both.txt", b"base\n");
    write(top, "run.sh", b"#!/bin/sh\necho part\n");
    std::os::unix::fs::symlink("README.md", top.join("link.md")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let exec = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(top.join("run.sh"), exec).unwrap();
    }
    git(top, &["add", "-A"]);
    git(top, &["commit", "-qm", "start"]);
    git(top, &["checkout", "-qb", "other"]);
    write(top, "both.txt", b"theirs\n");
    git(top, &["commit", "-qam", "theirs"]);
    git(top, &["checkout", "-q", "main"]);
    write(top, "both.txt", b"ours, a part\n");
    git(top, &["commit", "-qam", "ours"]);
    let merged = git_cmd(top, &["merge", "-q", "other"]);
    assert!(!merged.status.success(), "the merge must leave a conflict");
    std::fs::remove_file(top.join("gone.txt")).unwrap();
    write(top, "new.txt", b"an intent to add a PART\n");
    git(top, &["add", "-N", "new.txt"]);
    dir
}

const TERMS: [&str; 7] = ["part", "PART", "src/a", "missing", "par", "title", "the"];

#[test]
fn paths_and_greps_are_gits_in_each_kind() {
    for init in KINDS {
        let dir = varied(init);
        let top = dir.path();
        let home = tempfile::tempdir().unwrap();
        let scan = Scan::read_in(top, &dirs(top), &clean_env(home.path()))
            .unwrap_or_else(|| panic!("{init:?}: the scan left a plain repository to git"));
        let listed = scan.ls_files(1 << 20);
        assert_eq!(listed.stdout, git(top, &["ls-files", "-z"]), "{init:?}");
        assert!(listed.ok && !listed.cut);
        for term in TERMS {
            let ours = scan.grep(term, 1 << 20).unwrap();
            let theirs = git_cmd(
                top,
                &["grep", "-l", "-z", "-I", "-i", "-F", "-e", term, "--"],
            );
            assert_eq!(
                String::from_utf8_lossy(&ours.stdout),
                String::from_utf8_lossy(&theirs.stdout),
                "{init:?}: {term}"
            );
            assert_eq!(ours.code, theirs.status.code(), "{init:?}: {term}");
        }
        // The greps found what the cases are for.
        let part = String::from_utf8(scan.grep("part", 1 << 20).unwrap().stdout).unwrap();
        for hit in ["README.md", "both.txt", "late.dat", "new.txt", "run.sh"] {
            assert!(part.split('\0').any(|p| p == hit), "{hit} in {part:?}");
        }
        for miss in ["bin.dat", "gone.txt", "link.md", "split.txt"] {
            assert!(!part.split('\0').any(|p| p == miss), "{miss} in {part:?}");
        }
    }
}

#[test]
fn output_past_the_bound_is_cut_as_gits_is() {
    let dir = varied(KINDS[0]);
    let top = dir.path();
    let home = tempfile::tempdir().unwrap();
    let scan = Scan::read_in(top, &dirs(top), &clean_env(home.path())).unwrap();
    let listed = scan.ls_files(12);
    assert!(listed.cut && !listed.ok);
    assert_eq!(listed.stdout, git(top, &["ls-files", "-z"])[..12].to_vec());
    let found = scan.grep("part", 5).unwrap();
    assert!(found.cut && !found.ok);
    assert_eq!(found.stdout.len(), 5);
}

/// A small committed repository of `init` kind.
fn plain(init: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path();
    git(top, &[&["init", "-q"][..], init].concat());
    write(top, "src/lib.txt", b"part\n");
    write(top, "top.txt", b"part\n");
    git(top, &["add", "-A"]);
    git(top, &["commit", "-qm", "start"]);
    dir
}

#[test]
fn what_git_would_answer_otherwise_is_left_to_it() {
    type Change = fn(&Path, &Path);
    let cases: [(&str, Change); 9] = [
        ("a tracked .gitattributes", |top, _| {
            write(top, "src/.gitattributes", b"*.txt -diff\n");
            git(top, &["add", "src/.gitattributes"]);
        }),
        (
            "an untracked .gitattributes beside a tracked file",
            |top, _| {
                write(top, "src/.gitattributes", b"*.txt -diff\n");
            },
        ),
        ("info/attributes", |top, _| {
            write(top, ".git/info/attributes", b"*.txt -diff\n");
        }),
        ("the global attributes file", |_, home| {
            write(home, ".config/git/attributes", b"*.txt -diff\n");
        }),
        ("a system attributes file", |_, home| {
            write(home, "etc/gitattributes", b"*.txt -diff\n");
        }),
        ("core.attributesFile in the repository", |top, _| {
            git(top, &["config", "core.attributesFile", "/nowhere"]);
        }),
        ("an include in the global configuration", |_, home| {
            write(home, ".gitconfig", b"[include]\n\tpath = more\n");
        }),
        ("a skip-worktree entry", |top, _| {
            git(top, &["update-index", "--skip-worktree", "top.txt"]);
        }),
        ("an assume-unchanged entry", |top, _| {
            git(top, &["update-index", "--assume-unchanged", "top.txt"]);
        }),
    ];
    for init in KINDS {
        for (what, change) in cases {
            let dir = plain(init);
            let home = tempfile::tempdir().unwrap();
            let top = dir.path();
            let env = clean_env(home.path());
            assert!(Scan::read_in(top, &dirs(top), &env).is_some(), "{init:?}");
            change(top, home.path());
            assert!(
                Scan::read_in(top, &dirs(top), &env).is_none(),
                "{init:?}: {what} was not left to git"
            );
        }
    }
    // Configuration given in the environment, and a term not ASCII.
    let dir = plain(KINDS[0]);
    let home = tempfile::tempdir().unwrap();
    let top = dir.path();
    let given = Env {
        params: true,
        ..clean_env(home.path())
    };
    assert!(Scan::read_in(top, &dirs(top), &given).is_none());
    let scan = Scan::read_in(top, &dirs(top), &clean_env(home.path())).unwrap();
    assert!(scan.grep("café", 1 << 20).is_none());
    assert!(scan.grep("part", 1 << 20).is_some());
    // A tracked file grown past what this process reads after the index was read: git's.
    let big = std::fs::File::create(top.join("top.txt")).unwrap();
    big.set_len(super::MAX_BYTES + 1).unwrap();
    assert!(scan.grep("part", 1 << 20).is_none());
    // A tracked file turned into a link to a file outside the work tree is not read.
    std::fs::remove_file(top.join("top.txt")).unwrap();
    write(home.path(), "outside.txt", b"part\n");
    std::os::unix::fs::symlink(home.path().join("outside.txt"), top.join("top.txt")).unwrap();
    let found = scan.grep("part", 1 << 20).unwrap();
    assert_eq!(found.stdout, b"src/lib.txt\0".to_vec());
}
