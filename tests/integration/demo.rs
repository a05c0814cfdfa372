//! `git forum demo`: with no model and no network, in a throwaway repository, a scripted agent
//! fixes the failing test (the run branch's test passes), the orchestrator blocks a second
//! change (quarantined, not on the branch), the diff and the commands to read the record are
//! printed, and the record verifies.

use crate::common::Repo;

#[test]
fn the_demo_fixes_a_failing_test_blocks_a_second_change_and_says_where_to_look() {
    let here = Repo::new("sha1");
    let parent = tempfile::tempdir().unwrap();
    let o = here
        .forum()
        .args(["demo", "--dir", parent.path().to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("The run exited 12 (partial: one change is on the branch and the gate blocked the other, as scripted)"),
        "{out}"
    );
    assert!(out.contains("+    echo $(($1 + $2))"), "{out}");
    assert!(
        out.contains("Blocked and kept out of the branch: refs/forum/quarantine/main/0/T2"),
        "{out}"
    );
    assert!(out.contains("  git forum verify --deep"), "{out}");

    // The repository it names: the fix is on the run branch and its test passes there; the
    // blocked change is not; the record verifies.
    let repo_dir = out
        .lines()
        .find_map(|l| l.strip_prefix("The repository: "))
        .unwrap()
        .to_string();
    assert!(
        repo_dir.starts_with(parent.path().to_str().unwrap()),
        "{repo_dir}"
    );
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo_dir)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let files = git(&["ls-tree", "--name-only", "forum/run-0"]);
    assert_eq!(files.lines().collect::<Vec<_>>(), ["calc.sh", "test.sh"]);
    let wt = parent.path().join("check");
    git(&["worktree", "add", "-q", wt.to_str().unwrap(), "forum/run-0"]);
    let test = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&wt)
        .output()
        .unwrap();
    assert!(test.status.success(), "the run branch's test fails");
    git(&["worktree", "remove", "--force", wt.to_str().unwrap()]);
    let verify = here
        .forum()
        .args(["-C", &repo_dir, "--json", "verify", "--deep"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v}");

    // --json says the same.
    let o = here
        .forum()
        .args(["--json", "demo", "--dir", parent.path().to_str().unwrap()])
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "git-forum.demo/1");
    assert_eq!(j["run_exit"], 12);
    assert_eq!(
        j["quarantined"],
        serde_json::json!(["refs/forum/quarantine/main/0/T2"])
    );
}

#[test]
fn a_demo_folder_that_cannot_be_made_is_refused_in_one_line() {
    let here = Repo::new("sha1");
    let file = here.dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let o = here
        .forum()
        .args(["demo", "--dir", file.to_str().unwrap()])
        .output()
        .unwrap();
    crate::common::one_line_error(&o, "demo: cannot make a folder in");
}
