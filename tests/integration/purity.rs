//! The core stays pure: the ledger, canonical JSON, Merkle roots and
//! proofs, roster, route, plan, policy, the context budget, quality, the report projections
//! and the gate module name no filesystem, process, socket, environment, clock, async runtime,
//! HTTP client, git library or system-call crate, and none of the adapter or transport
//! modules (`store`, `exec`, `run`, `serve`, `cli`, `surface`).
//!
//! The check parses each core source file with `syn` (so comments, doc comments and string
//! literals never count) and looks at every path it names: `use` trees (groups, renames and
//! globs expanded), qualified paths in types, expressions, patterns and attributes, and the
//! paths inside macro bodies. `super::` and `self::` are resolved against the file's module,
//! and a name brought in by `use` is expanded where it is used (`use std::time; time::Instant`).
//! Items under `#[cfg(test)]` are not core code and are skipped, with the test files they
//! declare. A failure lists every `file:line: path (forbidden: prefix)`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// Paths a core module must not name, as segment prefixes.
const FORBIDDEN: &[&str] = &[
    "std::fs",
    "std::process",
    "std::net",
    "std::env",
    "std::os",
    "std::time::SystemTime",
    "std::time::Instant",
    "tokio",
    "reqwest",
    "hyper",
    "hyper_util",
    "axum",
    "gix",
    "libc",
    "rustix",
    "tempfile",
    "crate::store",
    "crate::exec",
    "crate::run",
    "crate::serve",
    "crate::cli",
    "crate::surface",
];

/// The core, relative to `src/`: each module as a file (`plan.rs`) or a folder (`plan/`),
/// whichever shape it has. `required`: the module must exist in one shape.
const CORE: &[(&str, bool)] = &[
    ("ledger", true),
    ("plan", true),
    ("route", true),
    ("roster", true),
    ("policy", true),
    ("context", true),
    ("quality", true),
    ("report", true),
    ("gate", false),
    ("flight", true),
    ("campaign", true),
    ("observe", true),
    ("secrets", true),
    ("spend", true),
];

/// One path a source file names.
#[derive(Debug, Clone)]
struct Named {
    segments: Vec<String>,
    line: usize,
    /// From a `use` tree (a one-segment path there is a crate or module, not a variable).
    in_use: bool,
}

/// A forbidden path found: where, what, and which rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: String,
    pub line: usize,
    pub path: String,
    pub rule: &'static str,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {} (forbidden: {})",
            self.file, self.line, self.path, self.rule
        )
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// Walks one file: collects every path it names, the names its `use` trees bring in, and the
/// `#[cfg(test)] mod x;` files to skip.
struct Collector {
    /// The module path of where the walk is (`["report", "room"]`).
    module: Vec<String>,
    named: Vec<(Vec<String>, Named)>,
    aliases: BTreeMap<String, Vec<String>>,
    test_files: Vec<Vec<String>>,
}

impl Collector {
    fn push(&mut self, segments: Vec<String>, line: usize, in_use: bool) {
        if segments.is_empty() {
            return;
        }
        self.named.push((
            self.module.clone(),
            Named {
                segments,
                line,
                in_use,
            },
        ));
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let line = n.ident.span().start().line;
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                if let Some(last) = full.last() {
                    self.aliases.insert(last.clone(), full.clone());
                }
                self.push(full, line, true);
            }
            syn::UseTree::Rename(r) => {
                let line = r.ident.span().start().line;
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.aliases.insert(r.rename.to_string(), full.clone());
                self.push(full, line, true);
            }
            syn::UseTree::Glob(g) => {
                let line = g.star_token.span.start().line;
                let mut full = prefix.clone();
                full.push("*".into());
                self.push(full, line, true);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// Paths in a macro's or an attribute's tokens: `a::b::c` runs, at any depth.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => {
                    self.tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(id) => {
                    // After `::` an ident continues a path, unless the `::` leads one
                    // (`::std::env`: nothing path-like before it).
                    let after_sep = i >= 2
                        && is_sep(&trees[i - 2], &trees[i - 1])
                        && i >= 3
                        && (matches!(trees[i - 3], TokenTree::Ident(_))
                            || is_punct(&trees[i - 3], '>'));
                    let after_dot = i >= 1 && is_punct(&trees[i - 1], '.');
                    let mut segments = vec![id.to_string()];
                    let line = id.span().start().line;
                    let mut j = i + 1;
                    while j + 1 < trees.len() && is_sep(&trees[j], &trees[j + 1]) {
                        match trees.get(j + 2) {
                            Some(TokenTree::Ident(next)) => {
                                segments.push(next.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if !after_sep && !after_dot {
                        self.push(segments, line, false);
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
    }
}

fn is_punct(t: &TokenTree, c: char) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == c)
}

/// `::` as two tokens: a joint `:` then a `:`.
fn is_sep(a: &TokenTree, b: &TokenTree) -> bool {
    matches!(a, TokenTree::Punct(p) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
        && is_punct(b, ':')
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::ExternCrate(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::ForeignMod(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::TraitAlias(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Union(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if is_cfg_test(attrs) {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                let mut file = self.module.clone();
                file.push(m.ident.to_string());
                self.test_files.push(file);
            }
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.module.push(m.ident.to_string());
        visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        self.use_tree(&mut prefix, &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if let Some(first) = p.segments.first() {
            let line = first.ident.span().start().line;
            let segments = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.push(segments, line, false);
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        visit::visit_macro(self, m);
    }

    fn visit_meta_list(&mut self, m: &'ast syn::MetaList) {
        self.tokens(m.tokens.clone());
        visit::visit_meta_list(self, m);
    }
}

/// The full path a named path stands for: `super`/`self` resolved against `module`, a leading
/// name brought in by `use` expanded (once, so a cycle cannot loop).
fn resolve(
    module: &[String],
    segments: &[String],
    aliases: &BTreeMap<String, Vec<String>>,
    in_use: bool,
) -> Vec<String> {
    let mut segs: Vec<String> = segments.to_vec();
    if !in_use
        && let Some(full) = aliases.get(&segs[0])
        && full.len() > 1
    {
        segs.splice(0..1, full.iter().cloned());
    }
    match segs[0].as_str() {
        "self" => {
            let mut out = vec!["crate".to_string()];
            out.extend(module.iter().cloned());
            out.extend(segs[1..].iter().cloned());
            out
        }
        "super" => {
            let mut base: Vec<String> = module.to_vec();
            let mut rest = &segs[..];
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            let mut out = vec!["crate".to_string()];
            out.extend(base);
            out.extend(rest.iter().cloned());
            out
        }
        _ => segs,
    }
}

/// The rule a resolved path breaks, if any. A glob breaks a rule when it would bring the
/// forbidden name in (`use std::time::*` brings `Instant`).
fn broken_rule(path: &[String], in_use: bool, rules: &[&'static str]) -> Option<&'static str> {
    if path.len() < 2 && !in_use {
        return None;
    }
    let (glob, body) = match path.split_last() {
        Some((last, body)) if last == "*" => (true, body),
        _ => (false, path),
    };
    rules.iter().copied().find(|rule| {
        let rule_segs: Vec<&str> = rule.split("::").collect();
        let starts = body.len() >= rule_segs.len()
            && rule_segs.iter().zip(body).all(|(r, p)| *r == p.as_str());
        let glob_brings = glob
            && body.len() < rule_segs.len()
            && body.iter().zip(&rule_segs).all(|(p, r)| p.as_str() == *r);
        starts || glob_brings
    })
}

/// Checks one file's source; `module` is its module path (`["report", "room"]`). Returns the
/// findings and the `#[cfg(test)]` module files it declares (as module paths).
pub fn check_source(
    file: &str,
    module: &[String],
    source: &str,
) -> Result<(Vec<Finding>, Vec<Vec<String>>), String> {
    check_source_against(file, module, source, FORBIDDEN)
}

/// [`check_source`] against another list of forbidden path prefixes.
pub(crate) fn check_source_against(
    file: &str,
    module: &[String],
    source: &str,
    rules: &[&'static str],
) -> Result<(Vec<Finding>, Vec<Vec<String>>), String> {
    let parsed = syn::parse_file(source).map_err(|e| {
        let at = e.span().start();
        format!("{file}:{}:{}: does not parse: {e}", at.line, at.column)
    })?;
    let mut c = Collector {
        module: module.to_vec(),
        named: Vec::new(),
        aliases: BTreeMap::new(),
        test_files: Vec::new(),
    };
    c.visit_file(&parsed);
    let mut seen = BTreeSet::new();
    let mut findings = Vec::new();
    for (module, n) in &c.named {
        let full = resolve(module, &n.segments, &c.aliases, n.in_use);
        if let Some(rule) = broken_rule(&full, n.in_use, rules) {
            let path = full.join("::");
            if seen.insert((n.line, path.clone())) {
                findings.push(Finding {
                    file: file.to_string(),
                    line: n.line,
                    path,
                    rule,
                });
            }
        }
    }
    findings.sort_by(|a, b| (a.line, &a.path).cmp(&(b.line, &b.path)));
    Ok((findings, c.test_files))
}

/// The module path of a source file under `src/` (`report/mod.rs` → `["report"]`).
pub(crate) fn module_of(rel: &Path) -> Vec<String> {
    let mut out: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = out.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        if stem != "mod" {
            out.push(stem);
        }
    }
    out
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every source file of the core, as paths relative to `src/`.
fn core_files(src: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for &(name, required) in CORE {
        let file = src.join(format!("{name}.rs"));
        let dir = src.join(name);
        let before = files.len();
        if file.is_file() {
            files.push(file);
        }
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        assert!(
            !required || files.len() > before,
            "core module {name} is neither src/{name}.rs nor src/{name}/: update CORE in {}",
            file!()
        );
    }
    files
        .into_iter()
        .map(|p| p.strip_prefix(src).expect("under src").to_path_buf())
        .collect()
}

fn snippet(source: &str) -> Vec<String> {
    check_source("snippet.rs", &["report".to_string()], source)
        .expect("snippet parses")
        .0
        .iter()
        .map(|f| format!("{}: {}", f.line, f.path))
        .collect()
}

#[test]
fn the_core_names_no_io_clock_runtime_or_adapter() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = core_files(&src);
    let mut skip: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut findings = Vec::new();
    let mut checked = 0;
    for rel in &files {
        let module = module_of(rel);
        if skip.contains(&module) {
            continue;
        }
        let text = std::fs::read_to_string(src.join(rel)).expect("read a core file");
        let shown = format!("src/{}", rel.display());
        let (found, tests) = check_source(&shown, &module, &text).unwrap_or_else(|e| panic!("{e}"));
        findings.extend(found);
        skip.extend(tests);
        checked += 1;
    }
    assert!(
        checked >= 10,
        "only {checked} core files found under {}",
        src.display()
    );
    let lines: Vec<String> = findings.iter().map(Finding::to_string).collect();
    assert!(
        lines.is_empty(),
        "the core must stay pure (no I/O, clock, runtime or adapter); load in src/surface and hand the entries in:\n{}",
        lines.join("\n")
    );
}

#[test]
fn the_checker_refuses_std_fs_in_every_spelling() {
    assert_eq!(
        snippet("use std::fs;\nfn f() {}\n"),
        ["1: std::fs"],
        "a plain use"
    );
    assert_eq!(
        snippet("fn f() -> String {\n    std::fs::read_to_string(\"x\").unwrap()\n}\n"),
        ["2: std::fs::read_to_string"],
        "a qualified call"
    );
    assert_eq!(
        snippet("use std::{io, fs::File as F};\n"),
        ["1: std::fs::File"],
        "a group with a rename"
    );
    assert_eq!(
        snippet("use std::time;\nfn f() { let _ = time::Instant::now(); }\n"),
        ["2: std::time::Instant::now"],
        "through a module alias"
    );
    assert_eq!(
        snippet("use std::time::*;\n"),
        ["1: std::time::*"],
        "a glob that brings Instant"
    );
    assert_eq!(
        snippet("fn f() { println!(\"{}\", ::std::env::var(\"X\").is_ok()); }\n"),
        ["1: std::env::var"],
        "inside a macro"
    );
    assert_eq!(
        snippet("use super::store::git::GitStore;\nuse crate::run::status;\n"),
        ["1: crate::store::git::GitStore", "2: crate::run::status"],
        "an adapter module, also through super"
    );
    assert_eq!(
        snippet("#[tokio::main]\nasync fn main() {}\n"),
        ["1: tokio::main"],
        "an attribute"
    );
}

#[test]
fn the_checker_ignores_comments_strings_tests_and_lookalikes() {
    let clean = r#"
//! Never std::fs here; see crate::store for loading.
use std::collections::BTreeMap;
use std::time::Duration;
use crate::ledger::Entry;
/// A doc naming std::process::Command is prose.
fn f(gix: u8, fs: &str) -> String {
    // tokio::spawn in a comment
    let _ = BTreeMap::<u8, u8>::new();
    let _ = Duration::from_secs(1);
    format!("std::net::TcpStream {gix} {fs}")
}
#[cfg(test)]
mod tests {
    use std::fs;
    #[test]
    fn t() { let _ = fs::read("x"); }
}
"#;
    assert_eq!(snippet(clean), Vec::<String>::new());
    let (_, tests) = check_source(
        "x.rs",
        &["report".to_string()],
        "#[cfg(test)]\nmod tests;\n",
    )
    .unwrap();
    assert_eq!(tests, [vec!["report".to_string(), "tests".to_string()]]);
    assert_eq!(module_of(Path::new("report/mod.rs")), ["report"]);
    assert_eq!(module_of(Path::new("report/room.rs")), ["report", "room"]);
    assert_eq!(module_of(Path::new("roster.rs")), ["roster"]);
}

/// The layers above the core, and what each must not name: the dependency rule of the design
/// (`cli` → `surface` ← `serve`; `surface` → `run`), so the CLI and the daemon cannot drift
/// into two copies of an operation again.
const LAYERS: &[(&str, &[&str])] = &[
    ("serve", &["crate::cli"]),
    ("surface", &["crate::cli", "crate::serve"]),
    ("config", &["crate::cli", "crate::serve", "crate::surface"]),
    ("run", &["crate::cli", "crate::serve", "crate::surface"]),
    (
        "exec",
        &["crate::cli", "crate::serve", "crate::surface", "crate::run"],
    ),
    (
        "store",
        &["crate::cli", "crate::serve", "crate::surface", "crate::run"],
    ),
];

#[test]
fn the_layers_depend_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut lines = Vec::new();
    for &(layer, rules) in LAYERS {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "no files under src/{layer}");
        for path in files {
            let rel = path.strip_prefix(&src).expect("under src").to_path_buf();
            let text = std::fs::read_to_string(&path).expect("read a source file");
            let shown = format!("src/{}", rel.display());
            let (found, _) = check_source_against(&shown, &module_of(&rel), &text, rules)
                .unwrap_or_else(|e| panic!("{e}"));
            lines.extend(found.iter().map(Finding::to_string));
        }
    }
    assert!(
        lines.is_empty(),
        "a layer names one it must not (cli -> surface <- serve; surface -> run -> core and exec):\n{}",
        lines.join("\n")
    );
}

#[test]
fn the_layer_check_bites() {
    let (found, _) = check_source_against(
        "src/serve/x.rs",
        &["serve".to_string(), "x".to_string()],
        "use crate::cli::submit::preload;\nfn f() { crate::cli::main(); }\n",
        &["crate::cli"],
    )
    .unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
}
