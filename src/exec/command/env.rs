//! The environment of every process git forum starts for a worker or a check: built from an
//! allowlist, never inherited whole. A worker is hostile input, and
//! whatever it can read it can print into a body or write into a file of its change; git
//! forum's own environment holds the user's credentials (`ANTHROPIC_API_KEY`, `AWS_*`,
//! `GITHUB_TOKEN`, a database password) and git forum's own settings (`GIT_DIR`,
//! `GIT_FORUM_STATE_DIR`, which leads to the daemon's token).
//!
//! What passes, and why:
//!
//! * `PATH`, so the worker's program and the tools it calls are found;
//! * `LANG`, `LANGUAGE` and every `LC_*`, so text is read and written in the user's encoding;
//! * `TERM`, `NO_COLOR` and `TZ`: how output looks and which time zone dates are in;
//! * `USER`, `LOGNAME` and `SHELL`: who runs it and which shell a program that spawns one uses;
//! * the locations of TLS trust (`SSL_CERT_FILE`, `SSL_CERT_DIR`, `REQUESTS_CA_BUNDLE`,
//!   `CURL_CA_BUNDLE`, `NODE_EXTRA_CA_CERTS`), so an agent CLI reaches its endpoint where the
//!   certificates are not in the standard place;
//! * the locations of toolchains a check runs (`CARGO_HOME`, `RUSTUP_HOME`,
//!   `RUSTUP_TOOLCHAIN`, `GOROOT`, `GOPATH`, `JAVA_HOME`, `VIRTUAL_ENV`, `CONDA_PREFIX`);
//! * unconfined only: `HOME`, `TMPDIR` and the `XDG_*_HOME` directories, which a program needs
//!   to find its own configuration (an unconfined worker can read the home anyway). Under the
//!   sandbox they are not passed: the sandbox sets `HOME` and `TMPDIR` to its scratch
//!   directories, and the XDG directories would point into the home it hides.
//!
//! Under the sandbox, the run's profile (`crate::exec::sandbox::profile`) adds places of its
//! own: `PATH` with the project's venv and `node_modules/.bin` first, `VIRTUAL_ENV`,
//! `CARGO_HOME` and `RUSTUP_HOME` where the user's toolchains live, and the task's writable
//! caches (`GOCACHE`, `CARGO_TARGET_DIR`, `npm_config_cache`, `PIP_CACHE_DIR`,
//! `XDG_CACHE_HOME`).
//!
//! Every value is a place or a preference, never a credential. Nothing else passes: no `GIT_*`
//! (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE` and `GIT_CONFIG_*` would point the worker's git
//! at another repository or configuration, `GIT_FORUM_*` at git forum's own state), no
//! `LD_PRELOAD` or `LD_LIBRARY_PATH` (they change what every program runs), no proxy
//! variables (a proxy URL may carry a password), no `SSH_AUTH_SOCK`, `GPG_AGENT_INFO`,
//! `DBUS_SESSION_BUS_ADDRESS`, `DISPLAY` or `XDG_RUNTIME_DIR` (each leads to a host socket),
//! and no key, token or password. A variable a worker needs beyond these (its provider's key,
//! a proxy) is named by its executor: `env = ["NAME", ...]` in `.forum/runtime.toml`, or the
//! key variables a coding-agent preset names ([`crate::exec::preset::Preset::default_env`]).
//! Those values then reach that executor's processes only, and the run hands every one of them
//! to the secret scanner as a literal, so none is ever recorded.

use std::ffi::{OsStr, OsString};

/// Variables that pass by name, confined or not (and every `LC_*`, see [`allowed`]).
const ALLOWED: [&str; 24] = [
    "PATH",
    "LANG",
    "LANGUAGE",
    "TERM",
    "NO_COLOR",
    "TZ",
    "USER",
    "LOGNAME",
    "SHELL",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOROOT",
    "GOPATH",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    // Terminal width, read by programs that wrap their output.
    "COLUMNS",
    "LINES",
];

/// Variables that pass only to an unconfined process (the sandbox sets or hides them).
const UNCONFINED_ONLY: [&str; 6] = [
    "HOME",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
];

/// Whether the variable `name` passes to a worker's or a check's process (`confined`: under
/// the sandbox) without an executor naming it.
pub(crate) fn allowed(name: &OsStr, confined: bool) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    ALLOWED.contains(&name)
        || (name.starts_with("LC_") && name.len() > 3)
        || (!confined && UNCONFINED_ONLY.contains(&name))
}

/// Why `name` cannot be named in an executor's `env` list, or `None` when it can: it must be a
/// variable name, and no `GIT_*` (see the module doc).
pub(crate) fn refuse_name(name: &str) -> Option<String> {
    let looks_like_var = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !looks_like_var {
        let shown: String = name.chars().take(60).collect();
        return Some(format!(
            "{shown:?} is not an environment variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    if name.starts_with("GIT_") {
        return Some(format!(
            "{name} is refused: GIT_* variables point git at a repository or at git forum's own state, which a worker must not be handed"
        ));
    }
    None
}

/// The environment of one process, from `vars` (git forum's own): the allowlist, then each
/// variable of `passed` that is set (what its executor names). Pure, for the tests; [`of`]
/// reads the process's environment.
pub(crate) fn build(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    passed: &[String],
    confined: bool,
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = vars
        .into_iter()
        .filter(|(k, _)| allowed(k, confined) || passed.iter().any(|p| OsStr::new(p) == k))
        .collect();
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// [`build`] over this process's environment.
pub(crate) fn of(passed: &[String], confined: bool) -> Vec<(OsString, OsString)> {
    build(std::env::vars_os(), passed, confined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<&str> {
        env.iter().map(|(k, _)| k.to_str().unwrap()).collect()
    }

    #[test]
    fn only_the_allowlist_and_the_named_variables_pass() {
        let host = vars(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("TMPDIR", "/var/tmp"),
            ("LANG", "C.UTF-8"),
            ("LC_MESSAGES", "C"),
            ("LC_", "x"),
            ("ANTHROPIC_API_KEY", "sk-ant-x"),
            ("OPENAI_API_KEY", "sk-x"),
            ("AWS_SECRET_ACCESS_KEY", "a"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("MY_DB_PASSWORD", "p"),
            ("GIT_DIR", "/repo/.git"),
            ("GIT_FORUM_STATE_DIR", "/state"),
            ("SSH_AUTH_SOCK", "/run/ssh"),
            ("LD_PRELOAD", "/x.so"),
            ("HTTPS_PROXY", "http://u:p@proxy"),
            ("XDG_CONFIG_HOME", "/home/u/.config"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
        ]);
        let unconfined = build(host.clone(), &[], false);
        assert_eq!(
            names(&unconfined),
            [
                "HOME",
                "LANG",
                "LC_MESSAGES",
                "PATH",
                "TMPDIR",
                "XDG_CONFIG_HOME"
            ]
        );
        let confined = build(host.clone(), &[], true);
        assert_eq!(names(&confined), ["LANG", "LC_MESSAGES", "PATH"]);
        let named = build(host, &["OPENAI_API_KEY".into(), "NOT_SET".into()], true);
        assert_eq!(
            names(&named),
            ["LANG", "LC_MESSAGES", "OPENAI_API_KEY", "PATH"]
        );
    }

    #[test]
    fn names_an_executor_may_pass_are_variable_names_and_never_git() {
        assert_eq!(refuse_name("OPENAI_API_KEY"), None);
        assert_eq!(refuse_name("_X1"), None);
        for bad in ["", "1X", "A-B", "A B", "A=B"] {
            assert!(refuse_name(bad).is_some(), "{bad:?}");
        }
        for git in ["GIT_DIR", "GIT_FORUM_STATE_DIR", "GIT_CONFIG_GLOBAL"] {
            assert!(refuse_name(git).unwrap().contains("GIT_*"), "{git}");
        }
    }
}
