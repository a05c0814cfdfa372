//! Shell completion, driven through each shell's own completion machinery: bash (its
//! completion functions, with git's own completion loaded for `git forum`), zsh (an interactive
//! zsh in a pseudo-terminal given a TAB, `data/zsh-complete.zsh`) and fish (`complete -C`).
//! Subcommands and the flags after a subcommand complete for `git-forum` and for `git forum`.
//! The README's lines that install the scripts work as written in a fresh home.
//!
//! zsh and fish are Debian packages `.ci/run` installs; without them a test prints a skip
//! notice, unless `GIT_FORUM_REQUIRE_SHELLS=1`, which fails it instead.

use std::path::Path;
use std::process::Command;

use crate::common::Repo;

/// The directory of the built binary, first on the `PATH` a shell gets.
fn path_with_binary() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_git-forum")).parent().unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

/// Whether `shell` is installed; a skip notice (or, when required, a panic) when not.
fn have(shell: &str) -> bool {
    if Command::new(shell).arg("-c").arg("true").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var("GIT_FORUM_REQUIRE_SHELLS").as_deref() != Ok("1"),
        "{shell} is not installed and GIT_FORUM_REQUIRE_SHELLS=1: apt-get install {shell}"
    );
    eprintln!("skipped: {shell} is not installed (GIT_FORUM_REQUIRE_SHELLS=1 fails instead)");
    false
}

fn script(repo: &Repo, shell: &str) -> String {
    repo.forum_ok(&["completion", shell])
}

/// What bash offers for `line` (the cursor at its end): git's completion and ours loaded as
/// bash-completion would, then the function registered for the line's first word.
fn bash(repo: &Repo, line: &str) -> Vec<String> {
    let file = repo.dir.path().join("git-forum.bash");
    std::fs::write(&file, script(repo, "bash")).unwrap();
    let probe = format!(
        r#"source /usr/share/bash-completion/completions/git
source '{file}'
COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ "$COMP_LINE" == *' ' ]] && COMP_WORDS+=('')
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
f=$(complete -p "${{COMP_WORDS[0]}}" | sed -E 's/.* -F ([^ ]+) .*/\1/')
"$f" "${{COMP_WORDS[0]}}" "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        file = file.display()
    );
    let mut bash = Command::new("bash");
    bash.args(["--noprofile", "--norc", "-c", &probe]);
    run_shell(repo, bash)
        .lines()
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// Runs `shell` in the repository with the built binary first on `PATH` and the repository's
/// home folder as `HOME`; what it printed, once it succeeded.
fn run_shell(repo: &Repo, mut shell: Command) -> String {
    let o = shell
        .env("PATH", path_with_binary())
        .env("HOME", repo.dir.path())
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn zsh(repo: &Repo, line: &str) -> Vec<String> {
    let dir = repo.dir.path().join("zfunc");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("_git-forum"), script(repo, "zsh")).unwrap();
    let harness =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/data/zsh-complete.zsh");
    let mut zsh = Command::new("timeout");
    zsh.args(["-k", "5", "30", "zsh", "-f"])
        .arg(&harness)
        .env("DIR", &dir)
        .env("WORDS", line);
    run_shell(repo, zsh).lines().map(str::to_string).collect()
}

fn fish(repo: &Repo, line: &str) -> Vec<String> {
    let file = repo.dir.path().join("git-forum.fish");
    std::fs::write(&file, script(repo, "fish")).unwrap();
    let mut fish = Command::new("fish");
    fish.args(["--no-config", "-c"])
        .arg(format!("source '{}'; complete -C '{line}'", file.display()));
    run_shell(repo, fish)
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

/// Both spellings complete a subcommand and a flag after it.
fn completes_both_spellings(shell: &str, offered: impl Fn(&Repo, &str) -> Vec<String>) {
    let repo = Repo::new("sha1");
    for prefix in ["git-forum", "git forum"] {
        let subs = offered(&repo, &format!("{prefix} subm"));
        assert!(
            subs.iter().any(|s| s == "submit"),
            "{shell}, {prefix} subm: {subs:?}"
        );
        let flags = offered(&repo, &format!("{prefix} submit --wo"));
        assert!(
            flags.iter().any(|s| s == "--work"),
            "{shell}, {prefix} submit --wo: {flags:?}"
        );
        let flags = offered(&repo, &format!("{prefix} verify --de"));
        assert!(
            flags.iter().any(|s| s == "--deep"),
            "{shell}, {prefix} verify --de: {flags:?}"
        );
    }
}

#[test]
fn bash_completes_subcommands_and_their_flags_for_both_spellings() {
    completes_both_spellings("bash", bash);
}

#[test]
fn zsh_completes_subcommands_and_their_flags_for_both_spellings() {
    if have("zsh") {
        completes_both_spellings("zsh", zsh);
    }
}

#[test]
fn fish_completes_subcommands_and_their_flags_for_both_spellings() {
    if have("fish") {
        completes_both_spellings("fish", fish);
    }
}

/// The shell lines of README's completion block, run as written by bash in a fresh home.
#[test]
fn the_readme_completion_lines_work_in_a_fresh_home() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let block: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("Shell completion"))
        .skip_while(|l| !l.starts_with("```sh"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    assert!(block.len() >= 3, "{block:?}");
    let repo = Repo::new("sha1");
    let home = tempfile::tempdir().unwrap();
    for line in &block {
        let o = Command::new("bash")
            .args(["--noprofile", "--norc", "-ec", line])
            .env("PATH", path_with_binary())
            .env("HOME", home.path())
            .current_dir(repo.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for file in [
        ".local/share/bash-completion/completions/git-forum",
        ".zfunc/_git-forum",
        ".config/fish/completions/git-forum.fish",
    ] {
        let text = std::fs::read_to_string(home.path().join(file)).unwrap_or_default();
        assert!(text.contains("git-forum"), "{file} was not written");
    }
}
