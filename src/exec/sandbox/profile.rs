//! A run's sandbox profile: what a confined worker and its checks see beyond the system
//! allowlist, worked out on the host once, before any worker runs, so that an agent installed
//! anywhere and the project's own environment are found inside as the user's shell finds them.
//!
//! * **The program and its runtime** ([`runtime_of`]): the program is looked up on the host's
//!   `PATH` (not inside the sandbox, where `$HOME` and `/tmp` are not the host's), its links
//!   followed, and the tree it runs from bound read-only: the package prefix of an npm install
//!   (the folder above its top `node_modules`), a Python venv with its base interpreter, or the
//!   prefix above a `bin` folder; a script's interpreter (its `#!` line, `env NAME` looked up
//!   on `PATH`) the same way.
//! * **The project's environment** ([`Profile::resolve`]), from the base checkout: its venv
//!   (`VIRTUAL_ENV`, else `.venv`, `venv` or `env` holding a `pyvenv.cfg`, else Poetry's venv
//!   for the project under `~/.cache/pypoetry/virtualenvs`) with its base interpreter, put
//!   first on `PATH` with `VIRTUAL_ENV` set; a pyenv version named by `.python-version`; the
//!   whole `node_modules`, shown inside each task's worktree with its `.bin` on `PATH`; and the
//!   toolchains the user's `PATH` reaches outside the system folders (rustup and cargo, Go,
//!   nvm, pyenv, `~/.local/bin`), with `RUSTUP_HOME` and `CARGO_HOME` set where they live,
//!   since the sandbox's `HOME` is not the user's.
//! * **Caches**: each task gets writable caches of its own beside its worktree (`GOCACHE`, a
//!   cargo target folder, npm's and pip's caches), so builds and test runners work without
//!   writing into the bound trees.
//!
//! Every path is bound read-only and listed in the run's record. Nothing is bound that holds
//! the home folder whole, `/`, or a system folder (already shown).

use std::path::{Path, PathBuf};

use super::SYSTEM_DIRS;

/// How deep a program's `#!` interpreters are followed (a script run by a script's program).
const INTERPRETER_DEPTH: usize = 2;

/// What a run's sandbox shows beyond the system allowlist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Profile {
    /// Trees bound read-only at their own path.
    pub(crate) read: Vec<PathBuf>,
    /// Trees of the base checkout shown inside each task's worktree, read-only:
    /// `(source, path relative to the worktree)`.
    pub(crate) in_tree: Vec<(PathBuf, PathBuf)>,
    /// Folders put first on `PATH`, in order; a relative one is relative to the worktree.
    pub(crate) path_front: Vec<PathBuf>,
    /// Variables set inside.
    pub(crate) env: Vec<(String, String)>,
    /// Folders of the base checkout that the project's venv installs editable (`pip install
    /// -e .`), relative to it: put on `PYTHONPATH` inside each task's worktree, so a check
    /// imports the task's code, not the user's checkout the install names.
    pub(crate) python_path: Vec<PathBuf>,
}

impl Profile {
    /// The profile of a run in the base checkout `repo`, under the host's environment `vars`
    /// (`HOME`, `PATH`, `VIRTUAL_ENV`).
    pub(crate) fn resolve(repo: &Path, vars: &dyn Fn(&str) -> Option<String>) -> Profile {
        let mut p = Profile::default();
        let home = vars("HOME").map(PathBuf::from);
        if let Some(venv) = project_venv(repo, vars, home.as_deref()) {
            p.add_venv(&venv, repo);
        }
        if let Some(version) = std::fs::read_to_string(repo.join(".python-version"))
            .ok()
            .and_then(|t| t.lines().next().map(|l| l.trim().to_string()))
            .filter(|v| !v.is_empty() && !v.contains('/'))
        {
            let root = vars("PYENV_ROOT")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".pyenv")));
            if let Some(dir) = root.map(|r| r.join("versions").join(&version))
                && dir.is_dir()
            {
                p.path_front.push(dir.join("bin"));
                p.push_read(dir);
            }
        }
        if repo.join("node_modules").is_dir() {
            p.in_tree
                .push((repo.join("node_modules"), PathBuf::from("node_modules")));
            p.path_front.push(PathBuf::from("node_modules/.bin"));
        }
        for dir in std::env::split_paths(&vars("PATH").unwrap_or_default()) {
            if !dir.is_absolute() || !dir.is_dir() || under_system(&dir) {
                continue;
            }
            p.push_read(toolchain_root(&dir, home.as_deref()));
        }
        // cargo and rustup find their homes through `HOME`, which the sandbox changes: where
        // cargo's `bin` is on the user's `PATH`, both homes are bound and named.
        if let Some(h) = &home {
            let cargo = vars("CARGO_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| h.join(".cargo"));
            let cargo = cargo.canonicalize().unwrap_or(cargo);
            if p.read.contains(&cargo) {
                p.env
                    .push(("CARGO_HOME".into(), cargo.to_string_lossy().into_owned()));
                let rustup = vars("RUSTUP_HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| h.join(".rustup"));
                if rustup.is_dir() {
                    p.env
                        .push(("RUSTUP_HOME".into(), rustup.to_string_lossy().into_owned()));
                    p.push_read(rustup);
                }
            }
        }
        p
    }

    /// Binds the venv `venv` (and the interpreter it was made from), first on `PATH` with
    /// `VIRTUAL_ENV` set; a venv inside the base checkout is shown inside each worktree too.
    fn add_venv(&mut self, venv: &Path, repo: &Path) {
        self.path_front.push(venv.join("bin"));
        self.env
            .push(("VIRTUAL_ENV".into(), venv.to_string_lossy().into_owned()));
        if let Some(base) = venv_base(venv) {
            self.push_read(base);
        }
        self.push_read(venv.to_path_buf());
        if let Ok(rel) = venv.strip_prefix(repo) {
            self.in_tree.push((venv.to_path_buf(), rel.to_path_buf()));
        }
        for rel in editable_roots(&site_files(venv), repo) {
            if !self.python_path.contains(&rel) {
                self.python_path.push(rel);
            }
        }
    }

    /// The `PYTHONPATH` a confined process gets in the worktree `worktree`, when the project
    /// is installed editable.
    pub(crate) fn python_path_in(&self, worktree: &Path) -> Option<String> {
        if self.python_path.is_empty() {
            return None;
        }
        let dirs = self.python_path.iter().map(|rel| {
            if rel.as_os_str().is_empty() {
                worktree.to_path_buf()
            } else {
                worktree.join(rel)
            }
        });
        std::env::join_paths(dirs)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    }

    /// Adds `dir` to the read-only trees, unless it is there already or inside one.
    fn push_read(&mut self, dir: PathBuf) {
        if dir.as_os_str().is_empty() || dir == Path::new("/") || under_system(&dir) {
            return;
        }
        if self.read.iter().any(|r| dir.starts_with(r)) {
            return;
        }
        self.read.retain(|r| !r.starts_with(&dir));
        self.read.push(dir);
    }

    /// The `PATH` a confined process gets in the worktree `worktree`: the profile's folders,
    /// then the host's `path`.
    pub(crate) fn path_in(&self, worktree: &Path, path: &str) -> String {
        let mut parts: Vec<PathBuf> = self
            .path_front
            .iter()
            .map(|p| {
                if p.is_relative() {
                    worktree.join(p)
                } else {
                    p.clone()
                }
            })
            .collect();
        parts.extend(std::env::split_paths(path));
        std::env::join_paths(parts)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.to_string())
    }

    /// Every path the profile shows, for the run's record.
    pub(crate) fn listed(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .read
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        for (src, rel) in &self.in_tree {
            let line = format!("{} (as {})", src.display(), rel.display());
            if !out.contains(&line) {
                out.push(line);
            }
        }
        for rel in &self.python_path {
            let shown = if rel.as_os_str().is_empty() {
                Path::new(".")
            } else {
                rel
            };
            out.push(format!(
                "{} of the worktree on PYTHONPATH (the project is installed editable)",
                shown.display()
            ));
        }
        out
    }
}

/// The most files of a venv's `site-packages` read for editable installs, and the most bytes
/// of each.
const SITE_FILES: usize = 256;
const SITE_FILE_BYTES: u64 = 64 * 1024;

/// The files of `venv`'s `site-packages` that can say where an editable install points: `.pth`
/// files, `.egg-link` files and setuptools' `__editable__` finders, as `(name, text)`
/// (bounded: see [`SITE_FILES`]).
fn site_files(venv: &Path) -> Vec<(String, String)> {
    use std::io::Read;
    let Ok(lib) = std::fs::read_dir(venv.join("lib")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for py in lib.filter_map(Result::ok) {
        let Ok(site) = std::fs::read_dir(py.path().join("site-packages")) else {
            continue;
        };
        for f in site.filter_map(Result::ok).take(4 * SITE_FILES) {
            let name = f.file_name().to_string_lossy().into_owned();
            let wanted = name.ends_with(".pth")
                || name.ends_with(".egg-link")
                || (name.starts_with("__editable__") && name.ends_with("_finder.py"));
            if !wanted || out.len() >= SITE_FILES {
                continue;
            }
            let mut text = String::new();
            if std::fs::File::open(f.path())
                .and_then(|h| h.take(SITE_FILE_BYTES).read_to_string(&mut text))
                .is_ok()
            {
                out.push((name, text));
            }
        }
    }
    out
}

/// The folders of the checkout `repo` that editable installs named in `files` (see
/// [`site_files`]) put on Python's path, relative to `repo`: a `.pth` file's lines that are
/// paths (the folder itself), an `.egg-link`'s first line, and the folder holding each package
/// a setuptools finder maps (`MAPPING = {'calc': '/repo/src/calc'}` gives `src`). Paths
/// outside `repo` are another project's and left alone.
pub(crate) fn editable_roots(files: &[(String, String)], repo: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut keep = |p: &Path| {
        if let Ok(rel) = p.strip_prefix(repo)
            && !out.iter().any(|o| o == rel)
        {
            out.push(rel.to_path_buf());
        }
    };
    for (name, text) in files {
        if name.ends_with(".pth") {
            // `import` lines run code; the others are folders.
            for line in text.lines().map(str::trim) {
                if line.starts_with('/') {
                    keep(Path::new(line));
                }
            }
        } else if name.ends_with(".egg-link") {
            if let Some(line) = text.lines().next().map(str::trim)
                && line.starts_with('/')
            {
                keep(Path::new(line));
            }
        } else if let Some(mapping) = text.lines().find(|l| l.trim_start().starts_with("MAPPING")) {
            // The values of `MAPPING: dict[str, str] = {'name': '/path', ...}`.
            for path in mapping.split(['\'', '"']).filter(|p| p.starts_with('/')) {
                if let Some(parent) = Path::new(path).parent() {
                    keep(parent);
                }
            }
        }
    }
    out
}

/// Whether `p` lies in a system folder the sandbox shows anyway.
fn under_system(p: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| p.starts_with(d))
}

/// The tree to bind for a `PATH` folder `dir`: the prefix above a `bin` folder (a toolchain's
/// own tree, such as `~/.cargo` or `~/.nvm/versions/node/v20`), else the folder itself; never
/// the home folder or a folder that holds it (`~/bin` binds `~/bin`, `~/.local/bin` only
/// itself).
fn toolchain_root(dir: &Path, home: Option<&Path>) -> PathBuf {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let holds_home = |p: &Path| home.is_some_and(|h| h.starts_with(p));
    if dir.file_name().is_some_and(|n| n == "bin")
        && let Some(parent) = dir.parent()
        && !holds_home(parent)
        && home.is_none_or(|h| parent != h.join(".local"))
    {
        // pyenv's shims need the whole pyenv tree (`~/.pyenv/shims` -> `~/.pyenv`).
        return parent.to_path_buf();
    }
    if dir.file_name().is_some_and(|n| n == "shims")
        && let Some(parent) = dir.parent()
        && !holds_home(parent)
    {
        return parent.to_path_buf();
    }
    dir
}

/// The venv of the project in `repo`: `VIRTUAL_ENV`, else `.venv`, `venv` or `env` in the
/// checkout, else Poetry's venv named after the project.
fn project_venv(
    repo: &Path,
    vars: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(v) = vars("VIRTUAL_ENV").map(PathBuf::from)
        && v.join("pyvenv.cfg").is_file()
    {
        return Some(v);
    }
    for name in [".venv", "venv", "env"] {
        let v = repo.join(name);
        if v.join("pyvenv.cfg").is_file() {
            return Some(v);
        }
    }
    // Poetry keeps a project's venv as `NAME-HASH-pyX.Y` under its cache.
    let name = poetry_name(repo)?;
    let dir = home?.join(".cache/pypoetry/virtualenvs");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}-")))
                && p.join("pyvenv.cfg").is_file()
        })
        .collect();
    found.sort();
    found.pop()
}

/// The project name Poetry derives its venv's name from (`[tool.poetry] name` or
/// `[project] name` in `pyproject.toml`, lowercased, `_` and `.` as `-`).
fn poetry_name(repo: &Path) -> Option<String> {
    let text = std::fs::read_to_string(repo.join("pyproject.toml")).ok()?;
    if text.len() > 1 << 20 {
        return None;
    }
    let doc: toml::Table = text.parse().ok()?;
    doc.get("tool")?.get("poetry")?;
    let name = doc
        .get("tool")
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.get("name"))
        .or_else(|| doc.get("project").and_then(|p| p.get("name")))?
        .as_str()?;
    Some(name.to_lowercase().replace(['_', '.'], "-"))
}

/// The prefix of the interpreter a venv was made from (`home = PREFIX/bin` in `pyvenv.cfg`).
fn venv_base(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })?;
    let home = home.canonicalize().unwrap_or(home);
    Some(if home.file_name().is_some_and(|n| n == "bin") {
        home.parent()?.to_path_buf()
    } else {
        home
    })
}

/// `program` looked up the way a shell would on the host: a path as given (relative to the
/// current folder), a bare name on `path`. `None` when it is not there.
pub(crate) fn find_program(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The trees the program at `program` (a host path) needs to run, read-only: its install
/// tree and, for a script, its interpreter's (see the module doc). `path` is the host's `PATH`,
/// for `#!/usr/bin/env NAME`.
pub(crate) fn runtime_of(program: &Path, path: &str, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    runtime_into(program, path, home, 0, &mut out);
    out
}

fn runtime_into(
    program: &Path,
    path: &str,
    home: Option<&Path>,
    depth: usize,
    out: &mut Vec<PathBuf>,
) {
    let Ok(real) = program.canonicalize() else {
        return;
    };
    for p in [program.to_path_buf(), real.clone()] {
        if under_system(&p) {
            continue;
        }
        let tree = install_tree(&p, home);
        if let Some(base) = tree
            .join("pyvenv.cfg")
            .is_file()
            .then(|| venv_base(&tree))
            .flatten()
        {
            push_unique(out, base);
        }
        push_unique(out, tree);
    }
    if depth >= INTERPRETER_DEPTH {
        return;
    }
    if let Some(interpreter) = shebang(&real, path) {
        runtime_into(&interpreter, path, home, depth + 1, out);
    }
}

fn push_unique(out: &mut Vec<PathBuf>, p: PathBuf) {
    if !out.iter().any(|o| p.starts_with(o)) {
        out.retain(|o| !o.starts_with(&p));
        out.push(p);
    }
}

/// The tree a program file `p` belongs to: the folder above its top `node_modules` (an npm
/// prefix), a venv (an ancestor holding `pyvenv.cfg`), the prefix above its `bin` folder, or
/// the file alone; never a folder that holds the home folder.
fn install_tree(p: &Path, home: Option<&Path>) -> PathBuf {
    let holds_home = |d: &Path| home.is_some_and(|h| h.starts_with(d)) || d == Path::new("/");
    if let Some(top) = p
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        && let Some(prefix) = top.parent()
        && !holds_home(prefix)
    {
        return prefix.to_path_buf();
    }
    if let Some(venv) = p
        .ancestors()
        .skip(1)
        .find(|a| a.join("pyvenv.cfg").is_file())
        && !holds_home(venv)
    {
        return venv.to_path_buf();
    }
    if let Some(bin) = p.parent()
        && bin.file_name().is_some_and(|n| n == "bin")
        && let Some(prefix) = bin.parent()
        && !holds_home(prefix)
        && home.is_none_or(|h| prefix != h.join(".local"))
    {
        return prefix.to_path_buf();
    }
    p.to_path_buf()
}

/// The interpreter a script's `#!` line names (`env NAME` looked up on `path`), if any.
fn shebang(script: &Path, path: &str) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let text = std::str::from_utf8(head.get(..n)?.strip_prefix(b"#!")?).ok()?;
    let line = text.lines().next()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return find_program(name, path);
    }
    Some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(p: &Path, body: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn an_npm_install_under_home_binds_its_prefix_and_its_interpreter() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let prefix = home.join(".npm-global");
        let real = prefix.join("lib/node_modules/@x/agent/cli.js");
        let node = home.join(".nvm/versions/node/v22/bin/node");
        exe(&node, "\x7fELF");
        exe(&real, "#!/usr/bin/env node\n");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::os::unix::fs::symlink(&real, prefix.join("bin/agent")).unwrap();
        let path = format!(
            "{}:{}",
            prefix.join("bin").display(),
            node.parent().unwrap().display()
        );
        let found = find_program("agent", &path).unwrap();
        assert_eq!(found, prefix.join("bin/agent"));
        let r = runtime_of(&found, &path, Some(&home));
        assert_eq!(
            r,
            vec![
                prefix.canonicalize().unwrap(),
                home.join(".nvm/versions/node/v22").canonicalize().unwrap()
            ]
        );
        // The home folder itself is never bound.
        assert!(
            !r.iter()
                .any(|p| home.canonicalize().unwrap().starts_with(p))
        );
    }

    #[test]
    fn a_venv_program_binds_the_venv_and_its_base_interpreter() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("pyenv/versions/3.11.7");
        exe(&base.join("bin/python3.11"), "\x7fELF");
        let venv = t.path().join("tools/aider");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", base.join("bin").display()),
        )
        .unwrap();
        std::os::unix::fs::symlink(base.join("bin/python3.11"), venv.join("bin/python3")).unwrap();
        exe(
            &venv.join("bin/aider"),
            &format!("#!{}\nimport aider\n", venv.join("bin/python3").display()),
        );
        let r = runtime_of(&venv.join("bin/aider"), "", None);
        let base = base.canonicalize().unwrap();
        let venv = venv.canonicalize().unwrap();
        assert!(r.contains(&venv) && r.contains(&base), "{r:?}");
        assert_eq!(r.len(), 2, "{r:?}");
    }

    #[test]
    fn the_project_venv_node_modules_and_toolchains_are_found_as_a_shell_would() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let repo = t.path().join("repo");
        let base = home.join(".pyenv/versions/3.12.1");
        exe(&base.join("bin/python3"), "\x7fELF");
        let venv = repo.join(".venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", base.join("bin").display()),
        )
        .unwrap();
        std::fs::create_dir_all(repo.join("node_modules/.bin")).unwrap();
        std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
        std::fs::create_dir_all(home.join(".rustup")).unwrap();
        std::fs::create_dir_all(home.join("bin")).unwrap();
        let path = format!(
            "{}:{}:/usr/bin:relative",
            home.join(".cargo/bin").display(),
            home.join("bin").display()
        );
        let vars = |k: &str| match k {
            "HOME" => Some(home.display().to_string()),
            "PATH" => Some(path.clone()),
            _ => None,
        };
        let p = Profile::resolve(&repo, &vars);
        let canon = |p: &Path| p.canonicalize().unwrap();
        assert_eq!(p.path_front[0], venv.join("bin"));
        assert_eq!(p.path_front[1], PathBuf::from("node_modules/.bin"));
        assert!(p.read.contains(&canon(&base)), "{:?}", p.read);
        assert!(p.read.contains(&venv), "{:?}", p.read);
        assert!(
            p.read.contains(&canon(&home.join(".cargo"))),
            "{:?}",
            p.read
        );
        assert!(p.read.contains(&canon(&home.join("bin"))), "{:?}", p.read);
        assert!(p.read.contains(&home.join(".rustup")), "{:?}", p.read);
        assert!(
            !p.read.iter().any(|r| canon(&home).starts_with(r)),
            "{:?}",
            p.read
        );
        assert!(p.in_tree.contains(&(venv.clone(), PathBuf::from(".venv"))));
        assert!(
            p.in_tree
                .contains(&(repo.join("node_modules"), PathBuf::from("node_modules")))
        );
        assert!(
            p.env
                .contains(&("VIRTUAL_ENV".into(), venv.display().to_string()))
        );
        assert!(p.env.iter().any(|(k, _)| k == "RUSTUP_HOME"));
        let inside = p.path_in(Path::new("/w/T1"), "/usr/bin");
        assert!(
            inside.starts_with(&format!(
                "{}:/w/T1/node_modules/.bin:",
                venv.join("bin").display()
            )),
            "{inside}"
        );
    }

    #[test]
    fn editable_installs_of_the_checkout_are_found_in_each_form_and_others_left_alone() {
        let repo = Path::new("/home/u/calc");
        let files = [
            (
                "__editable__.calc-0.1.pth".to_string(),
                "import __editable___calc_0_1_finder; __editable___calc_0_1_finder.install()\n"
                    .to_string(),
            ),
            (
                "__editable___calc_0_1_finder.py".to_string(),
                "import sys\nMAPPING: dict[str, str] = {'calc': '/home/u/calc/src/calc', 'other': '/opt/other/other'}\n"
                    .to_string(),
            ),
            (
                "_calc_tools.pth".to_string(),
                "/home/u/calc/tools\n/home/u/elsewhere\n".to_string(),
            ),
            (
                "calc-plugin.egg-link".to_string(),
                "/home/u/calc\n.\n".to_string(),
            ),
            (
                "distutils-precedence.pth".to_string(),
                "import os; var = 'SETUPTOOLS_USE_DISTUTILS'\n".to_string(),
            ),
        ];
        assert_eq!(
            editable_roots(&files, repo),
            [PathBuf::from("src"), PathBuf::from("tools"), PathBuf::new()]
        );
        let p = Profile {
            python_path: editable_roots(&files, repo),
            ..Profile::default()
        };
        assert_eq!(
            p.python_path_in(Path::new("/w/T1")).unwrap(),
            "/w/T1/src:/w/T1/tools:/w/T1"
        );
        assert!(Profile::default().python_path_in(Path::new("/w")).is_none());
    }
}
