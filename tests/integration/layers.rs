//! The layers hold: the transports, `src/cli/` and `src/serve/`, name only the surface
//! (`crate::surface`), their own tree, and the leaf modules listed in [`LEAVES`] with the reason
//! each may be named. Everything else under `src/` (the store, the control loop, the
//! executors, the work machinery, the other transport) is reached through the surface, so a
//! transport cannot grow an operation of its own.
//!
//! The paths are read the way the purity check reads them ([`super::purity`]): parsed with
//! `syn`, `use` groups expanded, `super::` resolved against the file's module, comments,
//! strings and `#[cfg(test)]` items left out. A failure names each `file:line: path`.

use std::path::{Path, PathBuf};

use super::purity::{Finding, check_source_against, module_of, rust_files};

/// What a transport may name besides `crate::surface` and its own tree: a path prefix and why.
const LEAVES: &[(&str, &str)] = &[
    (
        "crate::config",
        "configuration discovery: every transport finds the roster, policy and runtime config there",
    ),
    (
        "crate::exec::config",
        "the runtime-config values the executor flags parse into and `runtime inspect` prints",
    ),
    (
        "crate::exec::endpoint",
        "where a runtime config came from (a value `runtime inspect` prints)",
    ),
    (
        "crate::ledger",
        "pure core: the entries, bodies and hashes requests and replies carry",
    ),
    (
        "crate::roster",
        "pure core: the roster a transport loads and renders",
    ),
    (
        "crate::route",
        "pure core: routing decisions and frames a transport renders",
    ),
    (
        "crate::plan",
        "pure core: the compiled plan a transport renders",
    ),
    (
        "crate::policy",
        "pure core: the policy values a request names",
    ),
    (
        "crate::context",
        "pure core: the context budget a request sets",
    ),
    (
        "crate::quality",
        "pure core: the checks a transport runs on text it is given",
    ),
    (
        "crate::report",
        "pure core: the projections a transport renders",
    ),
    ("crate::gate", "pure core: gate values"),
    ("crate::flight", "pure core: trace formats and their limits"),
    (
        "crate::campaign",
        "pure core: campaign specs and the room a transport renders",
    ),
    (
        "crate::secrets",
        "pure core: the secrets scanner and its modes, named by a request",
    ),
    ("crate::spend", "pure core: money arithmetic for rendering"),
    (
        "crate::egress::bridge",
        "the hidden `__egress-bridge` command is the program a sandbox starts, not an operation",
    ),
];

/// Named files that may reach past the surface, the prefix each may name, and why.
const STARTERS: &[(&str, &str, &str)] = &[(
    "src/cli/serve.rs",
    "crate::serve",
    "the `serve` and `mcp` verbs start the daemon and the MCP server",
)];

/// The top-level modules under `src/` (`src/NAME.rs` or `src/NAME/`), as `crate::NAME`.
fn top_modules(src: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(src)
        .expect("read src")
        .map(|e| e.expect("a directory entry").path())
        .filter_map(|p| {
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            let rust = p.extension().is_some_and(|x| x == "rs");
            (p.is_dir() || rust).then_some(stem)
        })
        .filter(|n| n != "lib" && n != "main")
        .map(|n| format!("crate::{n}"))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The prefixes a file of `transport` (`cli` or `serve`) may not name: every top-level module
/// but the surface, the transport's own tree and the ones [`LEAVES`] lists whole.
fn forbidden_for(transport: &str, modules: &[String]) -> Vec<&'static str> {
    let own = format!("crate::{transport}");
    modules
        .iter()
        .filter(|m| **m != own && *m != "crate::surface")
        .filter(|m| !LEAVES.iter().any(|(leaf, _)| leaf == *m))
        .map(|m| &*Box::leak(m.clone().into_boxed_str()))
        .collect()
}

/// Whether a finding is allowed after all: a deeper leaf (`crate::exec::config` inside the
/// forbidden `crate::exec`), or a listed starter.
fn allowed(f: &Finding) -> bool {
    let under = |prefix: &str| f.path == prefix || f.path.starts_with(&format!("{prefix}::"));
    LEAVES.iter().any(|(leaf, _)| under(leaf))
        || STARTERS
            .iter()
            .any(|(file, prefix, _)| f.file == *file && under(prefix))
}

/// Every finding in the transports' files under `src`.
fn transport_findings(src: &Path) -> (Vec<Finding>, usize) {
    let modules = top_modules(src);
    let mut findings = Vec::new();
    let mut checked = 0;
    for transport in ["cli", "serve"] {
        let rules = forbidden_for(transport, &modules);
        let mut files: Vec<PathBuf> = Vec::new();
        rust_files(&src.join(transport), &mut files);
        for path in files {
            let rel = path.strip_prefix(src).expect("under src").to_path_buf();
            let text = std::fs::read_to_string(&path).expect("read a transport file");
            let shown = format!("src/{}", rel.display());
            let (found, _) = check_source_against(&shown, &module_of(&rel), &text, &rules)
                .unwrap_or_else(|e| panic!("{e}"));
            findings.extend(found.into_iter().filter(|f| !allowed(f)));
            checked += 1;
        }
    }
    (findings, checked)
}

#[test]
fn the_transports_name_only_the_surface_their_own_tree_and_listed_leaves() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (findings, checked) = transport_findings(&src);
    assert!(
        checked >= 40,
        "only {checked} transport files under {}",
        src.display()
    );
    let lines: Vec<String> = findings.iter().map(Finding::to_string).collect();
    assert!(
        lines.is_empty(),
        "cli/ and serve/ reach the rest of the crate through src/surface only (or a leaf listed in LEAVES of {}, with its reason):\n{}",
        file!(),
        lines.join("\n")
    );
}

#[test]
fn the_layer_check_names_the_file_line_and_import() {
    let modules = vec![
        "crate::cli".to_string(),
        "crate::exec".to_string(),
        "crate::ledger".to_string(),
        "crate::run".to_string(),
        "crate::serve".to_string(),
        "crate::store".to_string(),
        "crate::surface".to_string(),
    ];
    let rules = forbidden_for("cli", &modules);
    assert_eq!(
        rules,
        vec!["crate::exec", "crate::run", "crate::serve", "crate::store"]
    );
    let source = r#"
use crate::surface::tlog;
use crate::ledger::Entry;
use crate::{exec::config::Flags, store::git::GitStore};
// use crate::store::git::open_repo;
fn f() {
    let _ = "crate::run::Interrupt";
    super::super::run::Interrupt::new();
    crate::exec::command::stop_all();
}
#[cfg(test)]
mod tests {
    use crate::store::git::GitStore;
}
"#;
    let module = vec!["cli".to_string(), "submit".to_string()];
    let (found, _) = check_source_against("src/cli/submit.rs", &module, source, &rules).unwrap();
    let shown: Vec<String> = found
        .iter()
        .filter(|f| !allowed(f))
        .map(Finding::to_string)
        .collect();
    assert_eq!(
        shown,
        vec![
            "src/cli/submit.rs:4: crate::store::git::GitStore (forbidden: crate::store)",
            "src/cli/submit.rs:8: crate::run::Interrupt::new (forbidden: crate::run)",
            "src/cli/submit.rs:9: crate::exec::command::stop_all (forbidden: crate::exec)",
        ]
    );
}
