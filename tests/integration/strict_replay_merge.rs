//! Strict replay merges a `--work` run's changes again and decides its ship verdicts again
//! from the gate's raw replies: a run with a merge, a conflict, a change that adds nothing and
//! a blocked change replays with no divergence, touching no ref and leaving no object in the
//! repository; a recorded tree or a ship decision edited in a copy of the ledger (re-hashed so
//! it verifies) is a divergence at that entry's seq; a run recorded before merges were
//! witnessed still replays by its record; and change commits missing from the repository are
//! refused in one line.

use git_forum::ledger::{MemoryStorage, NewEntry, Storage};
use serde_json::{Value as J, json};

use crate::common::{Repo, on_each_kind, one_line_error};
use crate::strict_replay::{export, forged_export};
use crate::strict_replay_work::strict;
use crate::work_run::{self, payloads};

const CHECK: &str = "python3 -m unittest -q";

/// What each worker does: T4 writes the docs; a worker whose worktree already holds the fix
/// of `add` (T2 run again on the run branch after its conflict) writes a note instead; T2 first
/// fixes `add` its own way (it conflicts with T1's); T1 and T3 make the same fix (so T3's
/// change adds nothing once T1's is on the run branch).
const WORK: &str = "    case \"$p\" in\n      *\"write the docs\"*) printf 'add adds\\n' > API.md; echo docs ;;\n      *) if head -2 calc.py | grep -q 'a + b'; then printf 'checked\\n' > CHECKED.md; echo again; else\n        case \"$p\" in\n          *\"also fix add\"*) sed -i 's/return a - b/return b + a/' calc.py; echo two ;;\n          *) sed -i 's/return a - b/return a + b/' calc.py; echo one ;;\n        esac; fi ;;\n    esac";

/// The plan: T1, T2 and T3 in the first wave, T4 (on T1's change) in the second.
const PLAN: &str = r#"{"tasks":[{"id":"T1","agent":"backend","instruction":"fix add","depends_on":[],"done_when":["the tests pass"]},{"id":"T2","agent":"backend","instruction":"also fix add in calc","depends_on":[],"done_when":["the tests pass"]},{"id":"T3","agent":"backend","instruction":"fix add once more","depends_on":[],"done_when":["the tests pass"]},{"id":"T4","agent":"backend","instruction":"write the docs","depends_on":["T1"],"done_when":["the tests pass"]}]}"#;

/// A scripted model: [`PLAN`] for the planner, a gate that blocks T4 and merges the rest,
/// validators that pass, [`WORK`] for the workers.
fn model(repo: &Repo) -> String {
    let body = format!(
        "#!/bin/sh\np=\"$1\"\ncase \"$p\" in\n  *\"Break this request\"*) echo '{PLAN}' ;;\n  *\"Decide whether to ship\"*) case \"$p\" in *\"Task T4\"*) echo '{{\"decision\":\"block\",\"reason\":\"the docs are thin\"}}' ;; *) echo '{{\"decision\":\"merge\",\"reason\":\"fixes add\"}}' ;; esac ;;\n  *\"Judge one task\"*) echo '{{\"decision\":\"pass\",\"score\":0.9,\"reason\":\"ok\"}}' ;;\n  *\"Write the answer\"*) echo 'Fixed calc.' ;;\n  *)\n{WORK}\n  ;;\nesac\n"
    );
    crate::procs::executable(&repo.path().join("model.sh"), &body)
}

/// Records the run (run 0) in `repo` and checks it holds what the tests rely on.
pub(crate) fn record(repo: &Repo) {
    work_run::setup(repo);
    let m = model(repo);
    let j = repo.forum_json(&[
        "submit", "--work", "--check", CHECK, "--cmd", &m, "fix calc",
    ]);
    let answer = j["answer"].as_str().unwrap();
    assert!(answer.contains("- T1: merged"), "{answer}");
    assert!(answer.contains("- T2: merged"), "{answer}");
    assert!(answer.contains("- T4: blocked (quarantined)"), "{answer}");
    let conflicts = payloads(repo, "conflict");
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(conflicts[0].1["task"], "T2");
    let nothing: Vec<J> = payloads(repo, "change")
        .into_iter()
        .filter(|(_, b)| b["adds_nothing"].is_string())
        .map(|(_, b)| b)
        .collect();
    assert_eq!(nothing.len(), 1, "{nothing:?}");
    assert_eq!(nothing[0]["task"], "T3");
    // Each integration is witnessed with the run branch's commit and its tree.
    let integrated = payloads(repo, "integrated");
    let tasks: Vec<&str> = integrated
        .iter()
        .map(|(_, b)| b["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["T1", "T2"], "{integrated:?}");
    let commits = work_run::branch_commits(repo, 0);
    assert_eq!(commits.len(), 2, "{commits:?}");
    for ((_, b), c) in integrated.iter().zip(&commits) {
        assert_eq!(b["tip"], json!(c), "{b}");
        let tree = repo.git_ok(&["rev-parse", &format!("{c}^{{tree}}")]);
        assert_eq!(b["tree"], json!(tree), "{b}");
    }
    // Each ship entry whose gate was asked keeps the gate's raw reply.
    for (_, b) in payloads(repo, "ship") {
        let reply: J = serde_json::from_str(b["reply"].as_str().unwrap()).unwrap();
        assert_eq!(reply["decision"], b["decision"], "{b}");
    }
}

/// Every ref with its object, and how many objects the repository holds.
fn repository_state(repo: &Repo) -> (String, String) {
    let refs = repo.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    let objects = repo.git_ok(&["count-objects", "-v"]);
    let counts: Vec<&str> = objects
        .lines()
        .filter(|l| l.starts_with("count:") || l.starts_with("in-pack:"))
        .collect();
    (refs, counts.join(" "))
}

/// Imports `store` as ledger `name` and checks that it verifies.
pub(crate) fn import_as(repo: &Repo, name: &str, store: &MemoryStorage) {
    let dir = repo.path().join(format!("ledger-{name}"));
    export(store, &dir);
    repo.forum_ok(&["--ledger", name, "import", dir.to_str().unwrap()]);
    repo.forum_ok(&["--ledger", name, "verify"]);
}

#[test]
fn a_run_with_a_merge_a_conflict_and_a_change_that_adds_nothing_replays_with_no_divergence() {
    on_each_kind(|repo| {
        record(repo);
        let before = repository_state(repo);
        let (code, r) = strict(repo, &[]);
        crate::strict_replay_work::no_divergence(code, &r);
        assert_eq!(r["answer_sha256"], r["recomputed_answer_sha256"], "{r}");
        // The merges made again moved no ref and left no object in the repository.
        assert_eq!(repository_state(repo), before);
        work_run::no_worktrees(repo);
    });
}

#[test]
fn an_edited_integration_tree_is_a_divergence_at_its_seq() {
    on_each_kind(|repo| {
        record(repo);
        let (at, b) = payloads(repo, "integrated")
            .into_iter()
            .find(|(_, b)| b["task"] == "T2")
            .unwrap();
        let real = b["tree"].as_str().unwrap().to_string();
        // Another tree of the repository: the base's.
        let other = repo.git_ok(&["rev-parse", "main^{tree}"]);
        let forged = forged_export(repo, at, |b| b["tree"] = json!(other));
        import_as(repo, "forged", &forged);
        let before = repository_state(repo);
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        let d = &r["divergence"];
        assert_eq!(d["seq"], json!(at), "{r}");
        assert!(d["recorded"].as_str().unwrap().contains(&other), "{r}");
        assert!(d["recomputed"].as_str().unwrap().contains(&real), "{r}");
        assert_eq!(repository_state(repo), before);
    });
}

#[test]
fn a_ship_decision_edited_from_block_to_merge_is_a_divergence_at_its_seq() {
    on_each_kind(|repo| {
        record(repo);
        let (at, b) = payloads(repo, "ship")
            .into_iter()
            .find(|(_, b)| b["task"] == "T4")
            .unwrap();
        assert_eq!(b["decision"], "block", "{b}");
        let forged = forged_export(repo, at, |b| b["decision"] = json!("merge"));
        import_as(repo, "forged", &forged);
        let (code, r) = strict(repo, &["--ledger", "forged"]);
        assert_eq!(code, Some(1), "{r}");
        let d = &r["divergence"];
        assert_eq!(d["seq"], json!(at), "{r}");
        assert!(
            d["recorded"].as_str().unwrap().contains("decision:merge"),
            "{r}"
        );
        assert!(
            d["recomputed"].as_str().unwrap().contains("decision:block"),
            "{r}"
        );
        // The command line names the seq on its first line.
        let o = repo
            .forum()
            .args(["--ledger", "forged", "replay", "0", "--strict"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            text.lines().next(),
            Some(format!("run 0 diverges at seq {at}").as_str()),
            "{text}"
        );
    });
}

/// The ledger of `repo` as a run recorded before integrations and gate replies were
/// witnessed: no `integrated` entry (each later entry's parent, and the change a `ship` or
/// `conflict` names, mapped to the seq it has in the copy), no `witnesses` in the request, no
/// `reply` in a ship entry; re-hashed so it verifies.
fn as_recorded_before(repo: &Repo) -> MemoryStorage {
    let mut store = MemoryStorage::default();
    let mut moved: std::collections::BTreeMap<i64, Option<i64>> = Default::default();
    for (e, mut b) in crate::spend::exported(repo) {
        let seq = e["seq"].as_i64().unwrap();
        let parent = e["causal_parent"]
            .as_i64()
            .and_then(|p| match moved.get(&p) {
                Some(to) => *to,
                None => Some(p),
            });
        if e["kind"] == "integrated" {
            moved.insert(seq, parent);
            continue;
        }
        if let Some(o) = b.get_mut("work").and_then(J::as_object_mut) {
            o.remove("witnesses");
        }
        if e["kind"] == "ship"
            && let Some(o) = b.as_object_mut()
        {
            o.remove("reply");
        }
        // The change a ship or conflict entry names, at its seq in the copy.
        if let Some(c) = b.get("change").and_then(J::as_i64)
            && let Some(Some(to)) = moved.get(&c)
        {
            b["change"] = json!(to);
        }
        let at = store
            .append(NewEntry {
                actor: e["actor"].as_str().unwrap().to_string(),
                kind: e["kind"].as_str().unwrap().to_string(),
                causal_parent: parent,
                payload: git_forum::ledger::canonical::Value::from_serde(&b),
                ts: e["ts"].as_f64().unwrap(),
            })
            .unwrap();
        moved.insert(seq, Some(at.seq as i64));
    }
    store
}

#[test]
fn a_run_recorded_before_merges_were_witnessed_replays_by_its_record() {
    on_each_kind(|repo| {
        record(repo);
        let old = as_recorded_before(repo);
        assert!(old.entries.iter().all(|e| e.kind != "integrated"));
        import_as(repo, "old", &old);
        let (code, r) = strict(repo, &["--ledger", "old"]);
        assert_eq!(code, Some(0), "{r}");
        assert_eq!(r["divergence"], J::Null, "{r}");
        assert_eq!(r["recorded"], r["recomputed"], "{r}");
    });
}

#[test]
fn a_run_whose_change_commits_are_not_in_the_repository_is_refused_in_one_line() {
    let a = Repo::new("sha1");
    record(&a);
    let copy = forged_export(&a, 0, |_| {});
    // A repository that never saw the run's commits holds only its ledger.
    let b = Repo::new("sha1");
    b.git_ok(&["commit", "-q", "--allow-empty", "-m", "elsewhere"]);
    import_as(&b, "main", &copy);
    let refs = b.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    let o = b
        .forum()
        .args(["replay", "0", "--strict"])
        .output()
        .unwrap();
    let err = one_line_error(&o, "is not in this repository");
    assert!(err.contains("git forum fetch"), "{err}");
    assert_eq!(
        b.git_ok(&["for-each-ref", "--format=%(refname) %(objectname)"]),
        refs
    );
}
