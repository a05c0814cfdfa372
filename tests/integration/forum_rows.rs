//! Forum's rows as git forum writes and reads them: `tier_escalation` naming its tiers, the
//! OpenAI chat seat's structured-output allowlist, and `export` of an imported Forum ledger.

use crate::common::on_each_kind;
use crate::work_run::{kinds, model, payloads, plan, setup};

/// The fix of `add`, as a worker does it in its working directory.
const FIX_ADD: &str = "    sed -i 's/return a - b/return a + b/' calc.py; echo 'fixed add'";
const CHECK: &str = "python3 -m unittest -q";

#[test]
fn an_escalation_names_the_tiers_it_moves_between_and_the_model() {
    on_each_kind(|repo| {
        setup(repo);
        // The task goes to `backend`, a capable lane; its checks fail, and the frontier
        // command fixes it.
        let p = plan(&[("T1", "make add in calc.py add")], false);
        let weak = model(repo, "weak", &p, "merge", "    echo 'did nothing'");
        let strong = model(repo, "strong", &p, "merge", FIX_ADD);
        repo.forum_ok(&[
            "submit",
            "--work",
            "--check",
            CHECK,
            "--cmd",
            &weak,
            "--frontier-cmd",
            &strong,
            "make the failing test in calc pass",
        ]);
        assert!(kinds(repo).contains(&"tier_escalation".to_string()));
        let esc = &payloads(repo, "tier_escalation")[0].1;
        assert_eq!(
            esc,
            &serde_json::json!({"id": "T1", "to": strong, "reason": "checks failed",
                                "from_tier": "capable", "to_tier": "frontier"})
        );
        let log = repo.forum_ok(&["log", "--run", "0"]);
        assert!(
            log.contains(&format!("T1 → {strong} (capable → frontier)")),
            "{log}"
        );
    });
}
