//! Help that is there: `git forum man --out DIR` writes a page for
//! git-forum and every subcommand, each one renders with `man -l`, the top page names no page
//! that was not written, and `git forum completion bash|zsh|fish` prints a script the shell
//! loads.

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::Repo;

/// The `NAME(1)` references a rendered page makes to git-forum pages.
fn named_pages(page: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"(git-forum(?:-[a-z0-9-]+)?)\(1\)").unwrap();
    re.captures_iter(page)
        .map(|c| format!("{}.1", &c[1]))
        .collect()
}

#[test]
fn man_writes_a_page_per_subcommand_and_each_renders() {
    let repo = Repo::new("sha1");
    let out = repo.path().join("man1");
    let said = repo.forum_ok(&["man", "--out", out.to_str().unwrap()]);
    let written: BTreeSet<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        said.contains(&format!("wrote {} man pages", written.len())),
        "{said}"
    );
    // The top page, each subcommand's, nested ones, and no page for the hidden hook command.
    for want in [
        "git-forum.1",
        "git-forum-submit.1",
        "git-forum-resume.1",
        "git-forum-verify.1",
        "git-forum-man.1",
        "git-forum-completion.1",
        "git-forum-gate.1",
    ] {
        assert!(written.contains(want), "{want} missing from {written:?}");
    }
    assert!(!written.contains("git-forum-hook.1"), "{written:?}");
    assert!(
        !written.iter().any(|w| w.contains("-help")),
        "no pages for help subcommands: {written:?}"
    );
    // Each page renders with man -l, without a warning, and names only pages that exist.
    let mut named_by_top = BTreeSet::new();
    for name in &written {
        let o = Command::new("man")
            .args(["-l", "--warnings"])
            .arg(out.join(name))
            .env("MANWIDTH", "80")
            .env_remove("MAN_KEEP_FORMATTING")
            .output()
            .expect("run man");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "man -l {name}: {stderr}");
        assert!(stderr.trim().is_empty(), "man -l {name} warned: {stderr}");
        let shown = String::from_utf8_lossy(&o.stdout);
        assert!(shown.contains("SYNOPSIS"), "{name}: {shown}");
        for page in named_pages(&shown) {
            assert!(
                written.contains(&page),
                "{name} names {page}, which was not written"
            );
            if name == "git-forum.1" {
                named_by_top.insert(page);
            }
        }
    }
    // The top page names every subcommand's page (46 visible commands today).
    assert!(named_by_top.len() > 40, "{named_by_top:?}");
    assert!(
        named_by_top.contains("git-forum-submit.1"),
        "{named_by_top:?}"
    );
}

#[test]
fn man_into_a_path_that_is_a_file_fails_in_one_line() {
    let repo = Repo::new("sha1");
    let file = repo.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let o = repo
        .forum()
        .args(["man", "--out", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot create") && err.contains("--out"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

#[test]
fn completion_bash_loads_and_completes_subcommands() {
    let repo = Repo::new("sha1");
    let script = repo.forum_ok(&["completion", "bash"]);
    let file = repo.path().join("git-forum.bash");
    std::fs::write(&file, &script).unwrap();
    // Loadable, registered for git-forum, and it offers the subcommands for `git-forum su<TAB>`.
    let probe = format!(
        "source '{}' && complete -p git-forum && COMP_WORDS=(git-forum su) COMP_CWORD=1 && \
         _git__forum git-forum su git-forum && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let o = Command::new("bash")
        .args(["--noprofile", "--norc", "-c", &probe])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains("-F _git__forum git-forum"),
        "{out}"
    );
    let offered: Vec<&str> = out.lines().skip(1).collect();
    assert!(
        offered.contains(&"submit") && offered.contains(&"summary"),
        "{out}"
    );
    assert!(!offered.contains(&"verify"), "{out}");
}

#[test]
fn completion_for_zsh_and_fish_and_a_bad_shell() {
    let repo = Repo::new("sha1");
    let zsh = repo.forum_ok(&["completion", "zsh"]);
    assert!(zsh.starts_with("#compdef git-forum"), "{}", &zsh[..80]);
    let fish = repo.forum_ok(&["completion", "fish"]);
    assert!(fish.contains("complete -c git-forum"), "{}", &fish[..200]);
    assert!(fish.contains("submit"));
    let o = repo.forum().args(["completion", "tcsh"]).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("tcsh"), "{err}");
}
