//! Edges: what happens without the shared conformance folder, and usage errors on one line.

use crate::common::conformance_in;

#[test]
fn a_missing_conformance_folder_is_a_skip_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-conformance");
    assert_eq!(conformance_in(&missing, false), None);
    assert_eq!(
        conformance_in(dir.path(), true),
        Some(dir.path().to_path_buf())
    );
}

#[test]
#[should_panic(expected = "GIT_FORUM_REQUIRE_SHARED=1")]
fn a_missing_conformance_folder_fails_when_required() {
    let dir = tempfile::tempdir().unwrap();
    conformance_in(&dir.path().join("no-such-conformance"), true);
}

/// Bad command lines: each is refused with exit 2 and exactly one line on stderr that names
/// the problem and where to read more, and nothing on stdout.
#[test]
fn usage_errors_are_one_line_with_exit_2() {
    let repo = crate::common::Repo::new("sha1");
    let cases: &[(&[&str], &str)] = &[
        (
            &["append", "--foo"],
            "unknown flag --foo; see git forum append --help",
        ),
        (
            &["append", "--actor"],
            "--actor <ACTOR> needs a value; see git forum append --help",
        ),
        (
            &["append", "--kind", "k"],
            "missing --actor <ACTOR> and --payload <PAYLOAD>; see git forum append --help",
        ),
        (
            &[
                "append",
                "--actor",
                "a",
                "--kind",
                "k",
                "--payload",
                "1",
                "--payload-file",
                "f",
            ],
            "--payload <PAYLOAD> cannot be used with --payload-file <PATH>",
        ),
        (&["log", "--limit", "x"], "'x' for '--limit <LIMIT>'"),
        (
            &["log", "--jsno"],
            "unknown flag --jsno (did you mean --json?); see git forum log --help",
        ),
        (
            &["frobnicate"],
            "unknown command frobnicate; see git forum --help",
        ),
        (&["apend"], "unknown command apend (did you mean append?)"),
        (&["verify", "--deep=x"], "see git forum verify --help"),
        (
            &["verify", "extra"],
            "unexpected argument extra; see git forum verify --help",
        ),
        (&["route"], "missing <TEXT>...; see git forum route --help"),
        (
            &["submit"],
            "missing <REQUEST>...; see git forum submit --help",
        ),
        (&["show", "x"], "'x' for '<SEQ>'"),
        (&["replay"], "missing <SEQ>; see git forum replay --help"),
        (&["serve", "--port", "abc"], "see git forum serve --help"),
        (
            &["runtime"],
            "git forum runtime needs a command: inspect; see git forum runtime --help",
        ),
        (
            &["gate"],
            "git forum gate needs a command: list, approve, edit, reject",
        ),
        (
            &["gate", "approve", "--bogus"],
            "unknown flag --bogus; see git forum gate approve --help",
        ),
        (&[], "git forum needs a command; see git forum --help"),
        (&["-C"], "-C <DIR> needs a value; see git forum --help"),
        (
            &["submit", "--max-seconds", "-1", "x"],
            "no option here takes a negative number: -1; see git forum submit --help",
        ),
        (
            &["--ledger", "x", "log", "--nope"],
            "unknown flag --nope; see git forum log --help",
        ),
    ];
    for (args, want) in cases {
        let o = repo.forum().args(*args).output().expect("run git-forum");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err} lacks {want:?}");
    }
    // Help and version still print in full, on stdout, with exit 0.
    let o = repo.forum().args(["append", "--help"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: git forum append"));
    let o = repo.forum().args(["--version"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("git-forum "));
}
