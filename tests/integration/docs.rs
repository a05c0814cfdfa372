//! The documentation keeps its promises: README's quick start runs as written and changes code,
//! README links every page of `docs/`, every relative link in README, CONTRIBUTING and `docs/`
//! lands on a file and a heading that exist, README names the test commands `.ci/run` runs, and
//! README stays short enough to read in ten minutes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Pages another step generates: a link to one may point at it before it is written here, and
/// is checked like any other once it is.
const GENERATED: &[&str] = &["docs/api.md"];

/// README's length at most, in lines: a newcomer's page, not the manual (that is `docs/`).
const README_MAX_LINES: usize = 250;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The Markdown files of the documentation, relative to the repository's root.
fn doc_files() -> Vec<String> {
    let mut files = vec!["README.md".to_string(), "CONTRIBUTING.md".to_string()];
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// The lines of `text` outside fenced code blocks.
fn lines_outside_code(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push(line);
        }
    }
    out
}

/// The anchor GitHub gives a heading: lowercase, punctuation dropped but for `-` and `_`,
/// spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    lines_outside_code(text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of the inline links `[text](target)` outside code blocks. Link text may run
/// over a line end, so the text is read whole.
fn links(text: &str) -> Vec<String> {
    let prose = lines_outside_code(text).join("\n");
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(j) if !after[..j].contains(char::is_whitespace) => {
                out.push(after[..j].to_string())
            }
            _ => {}
        }
        rest = after;
    }
    out
}

/// `target` read from the file `from`, as a path relative to the root (`..` resolved).
fn resolve(from: &str, target: &str) -> String {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

#[test]
fn every_relative_link_in_the_docs_lands_on_a_file_and_a_heading() {
    let mut broken = Vec::new();
    for file in doc_files() {
        for link in links(&read(&file)) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                resolve(&file, path)
            };
            let exists = root().join(&target).exists();
            if !exists {
                if !GENERATED.contains(&target.as_str()) {
                    broken.push(format!("{file}: {link} (no file {target})"));
                }
                continue;
            }
            if !anchor.is_empty()
                && target.ends_with(".md")
                && !anchors(&read(&target)).contains(anchor)
            {
                broken.push(format!("{file}: {link} (no heading #{anchor} in {target})"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn readme_links_every_page_of_docs_and_stays_short() {
    let readme = read("README.md");
    let linked: BTreeSet<String> = links(&readme)
        .iter()
        .map(|l| l.split('#').next().unwrap_or_default().to_string())
        .collect();
    let missing: Vec<String> = doc_files()
        .into_iter()
        .filter(|f| f.starts_with("docs/") && !linked.contains(f))
        .collect();
    assert!(missing.is_empty(), "README does not link {missing:?}");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail to docs/"
    );
}

#[test]
fn readme_names_the_test_commands_ci_runs() {
    let readme = read("README.md");
    let test_section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Test"))
        .expect("README has a Test section");
    let ci = read(".ci/run");
    let commands: Vec<String> = ci
        .lines()
        .filter(|l| l.starts_with("cargo nextest run"))
        .map(|l| {
            l.split_whitespace()
                .filter(|w| !matches!(*w, "--no-fail-fast" | "--no-tests=warn"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        commands,
        ["cargo nextest run", "cargo nextest run --profile heavy"]
    );
    for c in &commands {
        assert!(
            test_section.contains(&format!("{c} ")) || test_section.contains(&format!("{c}\n")),
            "README's Test section does not name `{c}`"
        );
    }
    assert!(test_section.contains("scripts/test"), "{test_section}");
    assert!(root().join("scripts/test").exists());
}

/// The `sh` blocks of README's quick start, in order.
fn quick_start_blocks() -> Vec<String> {
    let readme = read("README.md");
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Quick start"))
        .expect("README has a Quick start section");
    section
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap_or_default().to_string())
        .collect()
}

/// `bash -e -c SCRIPT` in `dir`, with git forum's binary on `PATH` (so `git forum` finds it),
/// after `first` when given, git's configuration and git forum's cache and state kept inside
/// `home`.
fn bash(script: &str, dir: &Path, home: &Path, first: Option<&Path>) -> Output {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_git-forum"));
    let mut path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    if let Some(first) = first {
        path = format!("{}:{path}", first.display());
    }
    Command::new("bash")
        .args(["-e", "-c", script])
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_FORUM_LEDGER")
        .env_remove("GIT_FORUM_TIMESTAMP")
        .env("PATH", path)
        .env("HOME", home)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_SYSTEM", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_FORUM_CACHE_DIR", home.join("cache"))
        .env("GIT_FORUM_STATE_DIR", home.join("state"))
        .output()
        .expect("run bash")
}

/// A stand-in for Claude Code in the quick start's "your project": `claude -p ... PROMPT`
/// answers with Claude Code's `stream-json` result line; as the worker (in the task's
/// worktree) it fixes `add` first, as the pre-ship gate it approves, and as the classifier of a
/// request the keyword router cannot place it names the first lane its prompt lists.
const STAND_IN_CLAUDE: &str = r#"#!/bin/sh
for a; do p=$a; done
case "$p" in
  *"Choose the one lane"*) lane=$(printf '%s\n' "$p" | sed -n 's/^- \([^:]*\).*/\1/p' | head -n 1)
    r="{\\\"agent\\\":\\\"$lane\\\",\\\"confidence\\\":0.5,\\\"reason\\\":\\\"the first lane\\\"}" ;;
  *"Decide whether to ship"*) r='{\"decision\":\"merge\",\"reason\":\"the test passes\"}' ;;
  *) sed -i 's/a - b/a + b/' calc.py; r='Fixed add in calc.py: it subtracted.' ;;
esac
printf '{"type":"result","subtype":"success","is_error":false,"result":"%s","usage":{"input_tokens":10,"output_tokens":5},"total_cost_usd":0}\n' "$r"
"#;

/// "A repository of yours with a failing test", beside the quick start's folder `top`, and
/// the stand-in agent in `top/bin`.
fn your_project(top: &Path) {
    let p = top.join("your-project");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
    std::fs::write(
        p.join("test_calc.py"),
        "import unittest\nimport calc\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n",
    )
    .unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args([
                "-c",
                "user.name=You",
                "-c",
                "user.email=you@example.invalid",
            ])
            .args(args)
            .current_dir(&p)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "calc with a bug"]);
    let bin = top.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("claude"), STAND_IN_CLAUDE).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("claude"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_readme_quick_start_runs_as_written_and_changes_code() {
    let blocks = quick_start_blocks();
    assert!(blocks.len() >= 3, "{blocks:?}");
    let top = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let say = |o: &Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    // The demo, in a fresh HOME.
    let demo = bash(&blocks[0], top.path(), home.path(), None);
    assert!(demo.status.success(), "the demo failed: {}", say(&demo));
    // Your project, with its agent on PATH.
    your_project(top.path());
    let fix = bash(
        &blocks[1],
        top.path(),
        home.path(),
        Some(&top.path().join("bin")),
    );
    assert!(fix.status.success(), "the fix block failed: {}", say(&fix));
    let out = say(&fix);
    assert!(
        out.contains("claude"),
        "init names the agent it found: {out}"
    );
    let project = top.path().join("your-project");
    let calc = std::fs::read_to_string(project.join("calc.py")).unwrap();
    assert!(calc.contains("return a + b"), "{calc}\n{out}");
    let test = Command::new("python3")
        .args(["-m", "unittest", "-q"])
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(test.status.success(), "{test:?}");
    // Reading the record.
    let look = bash(&blocks[2], &project, home.path(), None);
    assert!(
        look.status.success(),
        "the record block failed: {}",
        say(&look)
    );
}
