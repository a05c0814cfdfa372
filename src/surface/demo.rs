//! `git forum demo`: the main job end to end with no model and no network, in a throwaway
//! repository. A scripted agent (a shell script written beside the repository) plans two tasks,
//! fixes the failing test of a tiny shell project in one, and in the other adds a file the
//! scripted orchestrator refuses to ship, so that change is blocked and quarantined. The run is
//! the real `git forum submit --work` (this program, started again), under the default sandbox;
//! the demo then shows the run branch's diff and the commands to look at the record.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use super::{Error, Result};

/// The project: `add` subtracts, and its test says so.
const CALC: &str = "#!/bin/sh\n# Adds two numbers.\nadd() {\n    echo $(($1 - $2))\n}\n";
const TEST: &str = "#!/bin/sh\n. ./calc.sh\n[ \"$(add 2 3)\" = 5 ] || { echo \"add 2 3 gave $(add 2 3), want 5\"; exit 1; }\necho ok\n";

/// The scripted agent: it answers every seat by the prompt it gets (`$1`).
const AGENT: &str = r#"#!/bin/sh
case "$1" in
  *"Break this request"*)
    echo '{"tasks":[{"id":"T1","agent":"backend","instruction":"make add in calc.sh add its arguments","depends_on":[],"done_when":["sh test.sh passes"]},{"id":"T2","agent":"backend","instruction":"write the debugging notes to notes.txt","depends_on":["T1"],"done_when":[]}]}' ;;
  *"Decide whether to ship"*"Task T2"*)
    echo '{"decision":"block","reason":"notes.txt holds scratch notes, not a change to ship"}' ;;
  *"Decide whether to ship"*)
    echo '{"decision":"merge","reason":"the change fixes add and the test passes"}' ;;
  *"Judge one task"*)
    echo '{"decision":"pass","score":0.9,"reason":"done"}' ;;
  *"Write the answer"*)
    echo 'add in calc.sh now adds; the notes were kept out of the branch.' ;;
  *"make add in calc.sh"*)
    sed 's/\$1 - \$2/$1 + $2/' calc.sh > calc.sh.new && mv calc.sh.new calc.sh
    echo 'changed the - in add to +' ;;
  *)
    echo 'tried printf debugging; add subtracts' > notes.txt
    echo 'wrote notes.txt' ;;
esac
"#;

/// What the demo did, for `--json`.
#[derive(Debug, Serialize)]
pub(crate) struct Demo {
    pub(crate) schema: &'static str,
    /// The throwaway repository (kept, so its record can be read).
    pub(crate) repository: PathBuf,
    /// The exit code of the run (12, partial: one change delivered and one blocked by the
    /// gate, as scripted).
    pub(crate) run_exit: i32,
    /// The run branch.
    pub(crate) branch: String,
    /// `git diff --stat` of the run branch against `main`.
    pub(crate) diffstat: String,
    /// The change refs of the blocked change.
    pub(crate) quarantined: Vec<String>,
    /// Commands to look at the record, run inside the repository.
    pub(crate) look: Vec<String>,
    /// The run's diff against `main` (for the text form).
    #[serde(skip)]
    pub(crate) diff: String,
}

/// Who the demo's own commits (and the run's merges) are by, whatever the user's git config.
const AUTHOR: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "git forum demo"),
    ("GIT_AUTHOR_EMAIL", "demo@git-forum.invalid"),
    ("GIT_COMMITTER_NAME", "git forum demo"),
    ("GIT_COMMITTER_EMAIL", "demo@git-forum.invalid"),
];

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let mut cmd = crate::gitproc::in_dir(dir);
    cmd.args(args).envs(AUTHOR);
    let out = crate::gitproc::output(cmd, None, 16 << 20)
        .map_err(|e| Error::unavailable(format!("demo: {e}")))?;
    if !out.status.success() {
        return Err(Error::internal(format!(
            "demo: git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn write(path: &Path, text: &str, exec: bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text)
        .map_err(|e| Error::internal(format!("demo: writing {}: {e}", path.display())))?;
    if exec {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::internal(format!("demo: {}: {e}", path.display())))?;
    }
    Ok(())
}

/// Makes the demo's folder under `parent` (the system's temporary folder when `None`); it is
/// kept after the demo, so that its record can be read.
pub(crate) fn make_root(parent: Option<&Path>) -> Result<PathBuf> {
    let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
    Ok(crate::scratch::dir_in("git-forum-demo-", &parent)
        .map_err(|e| {
            Error::unavailable(format!(
                "demo: cannot make a folder in {}: {e}",
                parent.display()
            ))
        })?
        .keep())
}

/// Runs the demo in `root` (from [`make_root`]). `progress` says whether the run's progress
/// lines reach stderr.
pub(crate) fn run(root: &Path, progress: bool) -> Result<Demo> {
    let repo = root.join("calc");
    let agent = root.join("agent.sh");
    std::fs::create_dir(&repo)
        .map_err(|e| Error::internal(format!("demo: {}: {e}", repo.display())))?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    write(&repo.join("calc.sh"), CALC, false)?;
    write(&repo.join("test.sh"), TEST, false)?;
    write(&agent, AGENT, true)?;
    git(&repo, &["add", "."])?;
    git(&repo, &["commit", "-q", "-m", "calc: add, with its test"])?;

    let exe = std::env::current_exe()
        .map_err(|e| Error::unavailable(format!("demo: cannot find this program: {e}")))?;
    let agent_arg = agent.display().to_string();
    let status = Command::new(&exe)
        .current_dir(&repo)
        .args(["submit", "--work", "--quiet", "--cmd", &agent_arg])
        .args(["--check", "sh test.sh"])
        .arg("make the failing test pass")
        .env_remove("GIT_FORUM_LEDGER")
        .envs(AUTHOR)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(if progress {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .status()
        .map_err(|e| Error::unavailable(format!("demo: cannot start {}: {e}", exe.display())))?;
    let run_exit = status.code().unwrap_or(-1);
    let branch = "forum/run-0".to_string();
    if git(&repo, &["rev-parse", "--verify", "-q", &branch]).is_err() {
        return Err(Error::internal(format!(
            "demo: the run (exit {run_exit}) left no run branch; its record is in {}",
            repo.display()
        )));
    }
    let diffstat = git(&repo, &["diff", "--stat", "main", &branch])?;
    let diff = git(&repo, &["diff", "main", &branch])?;
    let quarantined = git(
        &repo,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/forum/quarantine/",
        ],
    )?
    .lines()
    .map(str::to_string)
    .collect();
    let look = [
        "git forum runs",
        "git forum room",
        "git forum receipt",
        "git forum log",
        "git forum verify --deep",
        "git forum apply 0",
    ]
    .iter()
    .map(|c| c.to_string())
    .collect();
    Ok(Demo {
        schema: "git-forum.demo/1",
        repository: repo,
        run_exit,
        branch,
        diffstat,
        quarantined,
        look,
        diff,
    })
}
