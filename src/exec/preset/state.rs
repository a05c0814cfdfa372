//! An agent's private state folder for one task: its settings and login copied from the user's
//! home into a writable folder beside the task's worktree (`AREA/.caches/TASK/agent-NAME`,
//! which the sandbox binds writable), so the CLI finds its configuration and credentials
//! wherever it runs, and nothing it writes there (sessions, caches, transcripts) reaches the
//! user's home. Only the transcripts and history of the user's other projects stay behind.
//!
//! * Claude Code: `~/.claude/settings.json`, `~/.claude/.credentials.json` and `~/.claude.json`,
//!   found through `CLAUDE_CONFIG_DIR`;
//! * Codex: `config.toml` and `auth.json` of `$CODEX_HOME` (else `~/.codex`), found through
//!   `CODEX_HOME` (Codex needs it writable);
//! * aider keeps no login of its own (its keys come from the environment): nothing is copied.
//!
//! A login the CLI refreshed during the task (its credential file changed) is written back to
//! the user's file, and only that file, and only when the user's file did not change meanwhile.

use std::path::{Path, PathBuf};

use super::Preset;

/// A bound on what is copied: a settings or credential file is small.
const MAX_FILE: u64 = 4 << 20;

/// One task's private state folder for one agent.
#[derive(Debug)]
pub(super) struct State {
    /// The variables that point the CLI at it.
    vars: Vec<(String, String)>,
    /// The credential file: `(private copy, the user's file, what both held at the start)`.
    credential: Option<(PathBuf, PathBuf, Vec<u8>)>,
}

impl State {
    pub(super) fn vars(&self) -> Vec<(String, String)> {
        self.vars.clone()
    }

    /// Writes a refreshed login back to the user's credential file (see the module doc).
    pub(super) fn write_back(&self) {
        let Some((private, user, start)) = &self.credential else {
            return;
        };
        let Ok(now) = read_bounded(private) else {
            return;
        };
        if &now == start || read_bounded(user).ok().as_ref() != Some(start) {
            return;
        }
        let tmp = user.with_extension("git-forum-new");
        if std::fs::write(&tmp, &now).is_ok() {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600));
            }
            if std::fs::rename(&tmp, user).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
}

fn read_bounded(p: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    std::fs::File::open(p)?
        .take(MAX_FILE)
        .read_to_end(&mut out)?;
    Ok(out)
}

/// The state folder of `preset` for the task whose worktree is `worktree`, seeded from the
/// user's home (`HOME`, and `CODEX_HOME` for Codex).
pub(super) fn prepare(preset: Preset, worktree: &Path) -> std::io::Result<State> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    prepare_from(
        preset,
        worktree,
        home.as_deref(),
        std::env::var_os("CODEX_HOME").map(PathBuf::from),
    )
}

fn prepare_from(
    preset: Preset,
    worktree: &Path,
    home: Option<&Path>,
    codex_home: Option<PathBuf>,
) -> std::io::Result<State> {
    let task = worktree
        .file_name()
        .ok_or_else(|| std::io::Error::other("a worktree has a name"))?;
    let area = worktree
        .parent()
        .ok_or_else(|| std::io::Error::other("a worktree has a parent"))?;
    let dir = area
        .join(".caches")
        .join(task)
        .join(format!("agent-{}", preset.name()));
    std::fs::create_dir_all(&dir)?;
    let copy = |from: &Path, to: &Path| -> Option<Vec<u8>> {
        let meta = std::fs::symlink_metadata(from).ok()?;
        if !meta.is_file() || meta.len() > MAX_FILE {
            return None;
        }
        let bytes = read_bounded(from).ok()?;
        std::fs::write(to, &bytes).ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600));
        }
        Some(bytes)
    };
    // Per agent: the variable that names the folder, its settings files and its login file;
    // each is copied under its own name.
    let (var, settings, login): (&str, Vec<PathBuf>, Option<PathBuf>) = match preset {
        Preset::Claude => (
            "CLAUDE_CONFIG_DIR",
            home.map_or_else(Vec::new, |h| {
                vec![h.join(".claude/settings.json"), h.join(".claude.json")]
            }),
            home.map(|h| h.join(".claude/.credentials.json")),
        ),
        Preset::Codex => {
            let src = codex_home.or_else(|| home.map(|h| h.join(".codex")));
            (
                "CODEX_HOME",
                src.iter().map(|s| s.join("config.toml")).collect(),
                src.map(|s| s.join("auth.json")),
            )
        }
        Preset::Aider => {
            return Ok(State {
                vars: Vec::new(),
                credential: None,
            });
        }
    };
    let named = |p: &Path| dir.join(p.file_name().unwrap_or_default());
    for f in &settings {
        copy(f, &named(f));
    }
    let credential = login.and_then(|user| {
        let private = named(&user);
        copy(&user, &private).map(|bytes| (private, user, bytes))
    });
    let vars = vec![(var.to_string(), dir.display().to_string())];
    Ok(State { vars, credential })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_login_are_copied_and_only_a_refreshed_login_goes_back() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join(".claude/projects/other")).unwrap();
        std::fs::write(home.join(".claude/settings.json"), "{\"model\":\"x\"}").unwrap();
        std::fs::write(home.join(".claude/.credentials.json"), "old-login").unwrap();
        std::fs::write(
            home.join(".claude/projects/other/t.jsonl"),
            "secret transcript",
        )
        .unwrap();
        std::fs::write(home.join(".claude.json"), "{}").unwrap();
        let wt = t.path().join("area/T1");
        std::fs::create_dir_all(&wt).unwrap();
        let s = prepare_from(Preset::Claude, &wt, Some(&home), None).unwrap();
        let dir = t.path().join("area/.caches/T1/agent-claude");
        assert_eq!(
            s.vars(),
            vec![("CLAUDE_CONFIG_DIR".to_string(), dir.display().to_string())]
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("settings.json")).unwrap(),
            "{\"model\":\"x\"}"
        );
        assert!(dir.join(".claude.json").is_file());
        assert!(
            !dir.join("projects").exists(),
            "other projects' transcripts stay home"
        );
        // What the CLI writes stays private; a refreshed login goes back, and nothing else.
        std::fs::write(dir.join("settings.json"), "changed").unwrap();
        std::fs::write(dir.join(".credentials.json"), "new-login").unwrap();
        s.write_back();
        assert_eq!(
            std::fs::read_to_string(home.join(".claude/.credentials.json")).unwrap(),
            "new-login"
        );
        assert_eq!(
            std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(),
            "{\"model\":\"x\"}"
        );
        // A user's file that changed meanwhile is never overwritten.
        let s = prepare_from(Preset::Claude, &wt, Some(&home), None).unwrap();
        std::fs::write(dir.join(".credentials.json"), "agent-login").unwrap();
        std::fs::write(home.join(".claude/.credentials.json"), "user-login").unwrap();
        s.write_back();
        assert_eq!(
            std::fs::read_to_string(home.join(".claude/.credentials.json")).unwrap(),
            "user-login"
        );
    }

    #[test]
    fn codex_gets_a_writable_home_seeded_from_its_own() {
        let t = tempfile::tempdir().unwrap();
        let codex = t.path().join("codex-home");
        std::fs::create_dir_all(&codex).unwrap();
        std::fs::write(codex.join("config.toml"), "model = \"m\"\n").unwrap();
        let wt = t.path().join("area/T2");
        std::fs::create_dir_all(&wt).unwrap();
        let s = prepare_from(Preset::Codex, &wt, None, Some(codex)).unwrap();
        let dir = t.path().join("area/.caches/T2/agent-codex");
        assert_eq!(
            s.vars(),
            vec![("CODEX_HOME".to_string(), dir.display().to_string())]
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("config.toml")).unwrap(),
            "model = \"m\"\n"
        );
        assert!(
            prepare_from(Preset::Aider, &wt, None, None)
                .unwrap()
                .vars()
                .is_empty()
        );
    }
}
