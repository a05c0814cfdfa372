//! `git forum man` and `git forum completion`: the manual pages and the shell completions,
//! both generated from the clap definition. git turns `git forum --help` into `man git-forum`,
//! so the pages must be installed for it to work; `git-forum(1)` names a `git-forum-CMD(1)`
//! page for every subcommand, and `man --out DIR` writes every one of them (nested commands
//! too: `git-forum-gate-approve.1`), so no page it names is missing.

use std::path::PathBuf;

use super::{CliError, Ctx};

/// Write the man pages: git-forum(1) and one page per subcommand, e.g. git-forum-submit(1).
#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// Directory to write every page into, e.g. ~/.local/share/man/man1 (without it, print
    /// git-forum(1) alone).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

/// Print a shell completion script for git forum.
#[derive(Debug, clap::Args)]
#[command(after_help = "Load it in the current shell:
  bash:  source <(git forum completion bash)
  zsh:   source <(git forum completion zsh)
  fish:  git forum completion fish | source
or save it where your shell looks for completions, e.g.
  git forum completion bash > ~/.local/share/bash-completion/completions/git-forum")]
pub(crate) struct CompletionArgs {
    /// The shell: bash, zsh or fish.
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: Shell,
}

/// The shells a completion script is written for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The clap command the pages and completions describe: named `git-forum`, so each
/// subcommand's page is `git-forum-NAME` and the top page's list points at them; no `help`
/// subcommands (their pages would only repeat `--help`).
fn unbuilt() -> clap::Command {
    super::command()
        .name("git-forum")
        .disable_help_subcommand(true)
}

/// [`unbuilt`], built: every subcommand knows its display name (`git-forum-gate-approve`).
fn top() -> clap::Command {
    let mut cmd = unbuilt();
    cmd.build();
    cmd
}

/// Every page: `(file name, roff text)`, git-forum.1 first, then each visible subcommand's
/// page, depth first. Hidden commands (the hook entry points) have no page and are not named.
pub(crate) fn render_all() -> Result<Vec<(String, Vec<u8>)>, std::io::Error> {
    fn walk(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> Result<(), std::io::Error> {
        let man = clap_mangen::Man::new(cmd.clone());
        let mut buf = Vec::new();
        man.render(&mut buf)?;
        out.push((man.get_filename(), buf));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, out)?;
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(&top(), &mut out)?;
    Ok(out)
}

/// The roff text of git-forum(1).
pub(crate) fn render() -> Result<Vec<u8>, std::io::Error> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(top()).render(&mut buf)?;
    Ok(buf)
}

pub(crate) fn run(ctx: &Ctx, args: ManArgs) -> Result<(), CliError> {
    let failed = |e: std::io::Error| CliError::internal(format!("rendering the man pages: {e}"));
    let Some(dir) = args.out else {
        let page = render().map_err(failed)?;
        return ctx.out(String::from_utf8_lossy(&page).trim_end());
    };
    let pages = render_all().map_err(failed)?;
    std::fs::create_dir_all(&dir).map_err(|e| {
        CliError::usage(format!(
            "cannot create {}: {e}; pass --out a directory you can write",
            dir.display()
        ))
    })?;
    for (name, text) in &pages {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| {
            CliError::usage(format!(
                "cannot write {}: {e}; pass --out a directory you can write",
                path.display()
            ))
        })?;
    }
    ctx.out(&format!(
        "wrote {} man pages to {} (git-forum.1 and one per subcommand)",
        pages.len(),
        dir.display()
    ))
}

/// The completion script for `shell`, completing the `git-forum` program (and, in bash,
/// `git forum` through git's own completion when it is loaded).
pub(crate) fn completion_script(shell: Shell) -> Vec<u8> {
    use clap_complete::Shell as S;
    let mut cmd = unbuilt().bin_name("git-forum");
    let mut buf = Vec::new();
    let s = match shell {
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
    };
    clap_complete::generate(s, &mut cmd, "git-forum", &mut buf);
    if let Shell::Fish = shell {
        // fish's own git completion (before fish 3.7) registers `git forum` under the name
        // `git-forum`, so it never hands on the arguments of `git forum ...`; this does, to the
        // completions above.
        buf.extend_from_slice(
            br#"
function __git_forum_complete_args
    set -l tokens (commandline -opc)
    set -l at (contains -i -- forum $tokens)
    set -e tokens[1..$at]
    complete -C "git-forum $tokens "(commandline -ct)
end
complete -c git -f -n '__fish_seen_subcommand_from forum' -a '(__git_forum_complete_args)'
"#,
        );
    }
    if let Shell::Bash = shell {
        // clap_complete names a subcommand's state `git__forum__subcmd__NAME` where it sets it
        // but `git__subcmd__forum__subcmd__NAME` in the case arm that completes it (the `-` of
        // the program's name is taken for a subcommand separator there), so no flag after a
        // subcommand would ever complete; the arms are renamed to what is set.
        let text = String::from_utf8_lossy(&buf)
            .replace("git__subcmd__forum__subcmd__", "git__forum__subcmd__");
        buf = text.into_bytes();
        // git's bash completion calls _git_forum for `git forum ...`; hand it the words as if
        // `git-forum` had been typed.
        buf.extend_from_slice(
            br#"
_git_forum() {
    local -a COMP_WORDS=("git-forum" "${words[@]:2}")
    local COMP_CWORD=$((cword - 1))
    _git__forum git-forum "${cur}" "${prev}"
}
"#,
        );
    }
    buf
}

pub(crate) fn completion(ctx: &Ctx, args: CompletionArgs) -> Result<(), CliError> {
    let script = completion_script(args.shell);
    ctx.out(String::from_utf8_lossy(&script).trim_end())
}
