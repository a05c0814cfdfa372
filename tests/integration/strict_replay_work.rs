//! Strict replay of runs that work in the repository (`--work`): the workers are not run
//! again, their change commits, check outcomes and the pre-ship gate's replies are answered
//! from the record, and every decision the engine makes from them (which check failed, the
//! escalation, the gate's verdict, what merges, the answer) is compared with the recorded one.

use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind};
use crate::strict_replay::{export, forged_export};
use crate::work_run::{self, payloads};

const CHECK: &str = "python3 -m unittest -q";

/// Two waves: T1 fixes `add`, T2 (on T1's change) writes the docs.
fn two_wave_plan() -> String {
    work_run::plan(&[("T1", "fix add in calc"), ("T2", "write the docs")], true)
}

/// A scripted model: the planner's two-wave plan, a gate that merges T1 and blocks T2,
/// validators that pass, and `fix` as what its worker does to `add` (the docs task writes a
/// file).
fn model(repo: &Repo, name: &str, fix: &str) -> String {
    let plan = two_wave_plan();
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{plan}' ;;\n  *\"Decide whether to ship\"*) case \"$p\" in *\"Task T2\"*) echo '{{\"decision\":\"block\",\"reason\":\"the docs name an internal host\"}}' ;; *) echo '{{\"decision\":\"merge\",\"reason\":\"fixes add\"}}' ;; esac ;;\n  *\"Choose the one lane\"*) echo '{{\"agent\":\"tests\",\"confidence\":0.8,\"reason\":\"a failing test\"}}' ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Fixed calc and wrote the docs.' ;;\n  *\"write the docs\"*) printf 'add adds\\n' > API.md; echo 'wrote the docs' ;;\n  *) {fix} ;;\nesac\n"
    );
    crate::procs::executable(&repo.path().join(format!("{name}.sh")), &body)
}

/// Records the run in `repo`: the cheap worker breaks `mul` (the check fails), T1 climbs to
/// the frontier worker, which fixes `add`; T2's change passes its check and the gate blocks it.
fn record(repo: &Repo) {
    work_run::setup(repo);
    let weak = model(
        repo,
        "weak",
        "sed -i 's/return a + b/return a * b/' calc.py; echo 'changed mul'",
    );
    let strong = model(
        repo,
        "strong",
        "sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'",
    );
    let j = repo.forum_json(&[
        "submit",
        "--work",
        "--check",
        CHECK,
        "--cmd",
        &weak,
        "--frontier-cmd",
        &strong,
        "fix calc and document it",
    ]);
    let answer = j["answer"].as_str().unwrap();
    assert!(answer.contains("- T1: merged"), "{answer}");
    assert!(answer.contains("- T2: blocked (quarantined)"), "{answer}");
    assert_eq!(payloads(repo, "tier_escalation").len(), 1);
}

/// A strict replay's exit `code` and report `r` say no divergence: exit 0, nothing diverged
/// or left unanswered, and the recomputed decisions are the recorded ones.
pub(crate) fn no_divergence(code: Option<i32>, r: &J) {
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["divergence"], J::Null, "{r}");
    assert_eq!(r["unanswered"], json!([]), "{r}");
    assert_eq!(r["recorded"], r["recomputed"], "{r}");
}

/// `git forum [ARGS] replay 0 --strict --json`: its exit code and report.
pub(crate) fn strict(repo: &Repo, args: &[&str]) -> (Option<i32>, J) {
    let o = repo
        .forum()
        .args(args)
        .args(["replay", "0", "--strict", "--json"])
        .output()
        .unwrap();
    let r = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| {
        panic!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), r)
}

/// The seq of the first `kind` entry whose body's `key` is `id`.
pub(crate) fn seq_of(repo: &Repo, kind: &str, key: &str, id: &str) -> u64 {
    payloads(repo, kind)
        .into_iter()
        .find(|(_, p)| p[key] == id)
        .map(|(s, _)| s)
        .unwrap_or_else(|| panic!("no {kind} of {id}"))
}

/// The ledger with one body edited, re-hashed so it verifies, imported as ledger `forged`.
pub(crate) fn import_forged(repo: &Repo, seq: u64, edit: impl Fn(&mut J)) {
    import_forged_as(repo, "forged", seq, edit);
}

/// [`import_forged`], imported as ledger `name`.
pub(crate) fn import_forged_as(repo: &Repo, name: &str, seq: u64, edit: impl Fn(&mut J)) {
    let forged = forged_export(repo, seq, edit);
    let dir = repo.path().join(format!("{name}-{seq}"));
    export(&forged, &dir);
    repo.forum_ok(&["--ledger", name, "import", dir.to_str().unwrap()]);
    repo.forum_ok(&["--ledger", name, "verify"]);
}

#[test]
fn a_multi_wave_work_run_with_escalation_and_a_blocked_change_replays_with_no_divergence() {
    on_each_kind(|repo| {
        record(repo);
        let refs = repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]);
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
        assert_eq!(r["answer_sha256"], r["recomputed_answer_sha256"], "{r}");
        let net = r["network"].as_str().unwrap();
        assert!(
            ["bwrap", "unshare -rn", "unshare -n", "none"].contains(&net),
            "{r}"
        );
        // The replay made no worktree and moved no ref: the run branch and the kept changes
        // are as the live run left them.
        assert_eq!(
            repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]),
            refs
        );
        work_run::no_worktrees(repo);
    });
}

#[test]
fn an_edited_ship_entry_or_verdict_of_a_work_run_is_a_divergence_at_its_seq() {
    on_each_kind(|repo| {
        record(repo);
        // The ship entry made to name another change than the one the gate was asked about.
        let ship = seq_of(repo, "ship", "task", "T2");
        import_forged(repo, ship, |b| b["change"] = json!(0));
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        let d = &r["divergence"];
        assert_eq!(d["seq"], json!(ship), "{r}");
        // The change each names is shown by its place in the run: seq 0 is the request.
        assert!(
            d["recorded"]
                .as_str()
                .unwrap()
                .contains("change:request #0"),
            "{r}"
        );
        assert!(
            d["recomputed"]
                .as_str()
                .unwrap()
                .contains("change:change of task T2 #"),
            "{r}"
        );
    });
}

#[test]
fn an_edited_check_outcome_of_a_work_run_is_a_divergence_at_its_seq() {
    on_each_kind(|repo| {
        record(repo);
        // The failing check of the cheap worker's change made to say it passed: the exit code
        // the record answers with still fails it.
        let at = payloads(repo, "check")
            .into_iter()
            .find(|(_, p)| p["ok"] == false)
            .map(|(s, _)| s)
            .expect("a failed check");
        import_forged(repo, at, |b| b["ok"] = json!(true));
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        assert_eq!(r["divergence"]["seq"], json!(at), "{r}");
        assert!(
            r["divergence"]["recomputed"]
                .as_str()
                .unwrap()
                .contains("ok:false"),
            "{r}"
        );
    });
}

#[test]
fn a_solo_run_replays_with_no_divergence() {
    on_each_kind(|repo| {
        work_run::setup(repo);
        let m = model(
            repo,
            "solo",
            "sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'",
        );
        let j = repo.forum_json(&["fix", "--check", CHECK, "--cmd", &m, "fix the failing test"]);
        assert!(
            j["answer"].as_str().unwrap().contains("- T1: merged"),
            "{j}"
        );
        assert_eq!(payloads(repo, "request")[0].1["solo"], true);
        let (code, r) = strict(repo, &[]);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["divergence"], J::Null, "{r}");
        assert_eq!(r["recorded"], r["recomputed"], "{r}");
        assert!(r["answer_sha256"].is_string(), "{r}");
        assert_eq!(r["answer_sha256"], r["recomputed_answer_sha256"], "{r}");
    });
}

#[test]
fn a_work_run_killed_mid_wave_and_resumed_replays_across_the_resume() {
    on_each_kind(|repo| {
        work_run::setup(repo);
        let marker = repo.path().join("hang");
        std::fs::write(&marker, "").unwrap();
        // T2 hangs while the marker exists; T1 (wave 0) is shipped before it starts.
        let work = format!(
            "    case \"$p\" in\n      *\"fix mul\"*) while [ -e '{}' ]; do sleep 0.1; done; sed -i '$ s/return a + b/return a * b/' calc.py; echo mul ;;\n      *) sed -i 's/return a - b/return a + b/' calc.py; echo add ;;\n    esac",
            marker.display()
        );
        let m = work_run::model(
            repo,
            "model",
            &work_run::plan(&[("T1", "fix add"), ("T2", "fix mul")], true),
            "merge",
            &work,
        );
        let mut child = crate::common::Guarded(
            repo.forum()
                .args(["submit", "--work", "--check", CHECK, "--cmd", &m, "--quiet"])
                .arg("fix calc")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Waits (a guard, not a measurement) until T2's task entry is witnessed.
        crate::common::wait_until(
            "T2 never started",
            std::time::Duration::from_secs(120),
            || {
                repo.forum()
                    .args(["log", "--json"])
                    .output()
                    .ok()
                    .and_then(|o| serde_json::from_slice::<J>(&o.stdout).ok())
                    .is_some_and(|j| {
                        j.as_array()
                            .unwrap()
                            .iter()
                            .filter(|e| e["kind"] == "task")
                            .count()
                            >= 2
                    })
            },
        );
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        std::fs::remove_file(&marker).unwrap();
        let j = repo.forum_json(&["resume", "--cmd", &m]);
        assert_eq!(j["git_forum_receipt"]["status"], "answered", "{j}");
        assert_eq!(payloads(repo, "resume")[0].1["reused"], json!(["T1"]));
        let (code, r) = strict(repo, &[]);
        no_divergence(code, &r);
    });
}
