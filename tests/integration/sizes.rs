//! Small pieces: no source file over 800 lines, no function over 80 lines, and no two files that
//! import each other.
//!
//! Every `.rs` file under `src/` is parsed with `syn` (with proc-macro2's span locations, so each
//! item knows its first and last line); nothing is matched with a regular expression.
//!
//! The rules, precisely:
//!
//! - **Test code is not measured.** A file named `tests.rs` or ending in `_tests.rs`, a file
//!   declared by a `#[cfg(test)] mod x;`, and every item carrying `#[cfg(test)]` or `#[test]`.
//! - **A file's length** is its number of lines minus the lines of its `#[cfg(test)]` items.
//!   Limit: [`MAX_FILE_LINES`].
//! - **A function's length** runs from the line of `fn` (after its attributes and doc comment)
//!   to the line of its closing brace, both included. Every function with a body counts: free
//!   functions, methods in `impl` blocks, provided trait methods and functions nested in other
//!   functions (a nested function also counts towards the one around it). Limit:
//!   [`MAX_FN_LINES`].
//! - **Tables are not measured.** A `const` or `static` item never is (it holds no function),
//!   and neither is a table function: one whose body is a single expression (no statements)
//!   that is either an array (`[..]`, `&[..]`, `vec![..]`) of literal rows, or a `match` whose
//!   arms have no guard and each yield a literal row. A literal row is a literal, a path (a
//!   constant or a unit variant), `-` before a literal row, a reference to a literal row, or a
//!   tuple, array, tuple-struct or variant call (`Some(..)`, `Kind::A(..)`) or struct literal
//!   whose parts are all literal rows.
//! - **Import circles.** A file imports another when a `use` item or a path starting with
//!   `crate::`, `super::` or `self::` names the other file's module or anything inside it. Two
//!   files that import each other are a circle, unless one is the other's own ancestor module
//!   (a `mod.rs` and its children are one unit: the parent declares them).
//!
//! The test holds all of `src/`: it fails naming every offender. Run it with `--no-capture` to
//! see the counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// The longest a source file may be, in lines (outside its tests).
const MAX_FILE_LINES: usize = 800;

/// The longest a function may be, in lines (signature to closing brace).
const MAX_FN_LINES: usize = 80;

/// One thing over a limit or in a circle, with where it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Offender {
    /// The file, relative to `src/`.
    pub file: String,
    /// The line the function starts on (0 for a whole file or a circle).
    pub line: usize,
    /// What it is: `file`, `fn name`, or `imports each other with x.rs`.
    pub what: String,
    /// Its length in lines (0 for a circle).
    pub lines: usize,
}

impl std::fmt::Display for Offender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lines == 0 {
            write!(f, "{}: {}", self.file, self.what)
        } else if self.line == 0 {
            write!(f, "{}: {} lines", self.file, self.lines)
        } else {
            write!(
                f,
                "{}:{}: {} is {} lines",
                self.file, self.line, self.what, self.lines
            )
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        (a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
            || a.path().is_ident("test")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
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
    }
}

/// Whether an expression is a literal row (see the module doc).
fn is_literal_row(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(_) | syn::Expr::Path(_) => true,
        syn::Expr::Unary(u) => matches!(u.op, syn::UnOp::Neg(_)) && is_literal_row(&u.expr),
        syn::Expr::Reference(r) => is_literal_row(&r.expr),
        syn::Expr::Group(g) => is_literal_row(&g.expr),
        syn::Expr::Paren(p) => is_literal_row(&p.expr),
        syn::Expr::Tuple(t) => t.elems.iter().all(is_literal_row),
        syn::Expr::Array(a) => a.elems.iter().all(is_literal_row),
        syn::Expr::Call(c) => {
            matches!(&*c.func, syn::Expr::Path(_)) && c.args.iter().all(is_literal_row)
        }
        syn::Expr::Struct(s) => {
            s.rest.is_none() && s.fields.iter().all(|f| is_literal_row(&f.expr))
        }
        _ => false,
    }
}

/// Whether an expression is an array of literal rows (`[..]`, `&[..]`, `vec![..]`).
fn is_row_array(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Array(a) => a.elems.iter().all(is_literal_row),
        syn::Expr::Reference(r) => is_row_array(&r.expr),
        syn::Expr::Macro(m) if m.mac.path.is_ident("vec") => m
            .mac
            .parse_body_with(
                syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
            )
            .is_ok_and(|rows| rows.iter().all(is_literal_row)),
        _ => false,
    }
}

/// Whether a function body is a table (see the module doc).
fn is_table(body: &syn::Block) -> bool {
    let [syn::Stmt::Expr(e, None)] = body.stmts.as_slice() else {
        return false;
    };
    match e {
        syn::Expr::Match(m) => m
            .arms
            .iter()
            .all(|a| a.guard.is_none() && is_literal_row(&a.body)),
        other => is_row_array(other),
    }
}

/// What one file holds: its functions' lengths, its test lines, its `#[cfg(test)] mod x;`
/// declarations, and the crate paths it names.
#[derive(Default)]
struct Survey {
    fns: Vec<(String, usize, usize)>,
    test_lines: usize,
    test_mods: Vec<(String, Option<String>)>,
    /// Paths as written (`crate::a::b`, `super::c`), each as segments.
    paths: Vec<Vec<String>>,
}

impl Survey {
    fn measure(&mut self, name: String, span: proc_macro2::Span, body: &syn::Block) {
        let (first, last) = (span.start().line, body.span().end().line);
        if !is_table(body) {
            self.fns.push((name, first, last + 1 - first));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_path(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.use_path(prefix, &r.ident),
            syn::UseTree::Glob(_) => self.paths.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn use_path(&mut self, prefix: &[String], last: &syn::Ident) {
        let mut p = prefix.to_vec();
        if last != "self" {
            p.push(last.to_string());
        }
        self.paths.push(p);
    }
}

impl<'ast> Visit<'ast> for Survey {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = item_attrs(item);
        if is_cfg_test(attrs) {
            let span = item.span();
            self.test_lines += span.end().line + 1 - span.start().line;
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                let path = attrs
                    .iter()
                    .find(|a| a.path().is_ident("path"))
                    .and_then(|a| match &a.meta {
                        syn::Meta::NameValue(nv) => match &nv.value {
                            syn::Expr::Lit(syn::ExprLit {
                                lit: syn::Lit::Str(s),
                                ..
                            }) => Some(s.value()),
                            _ => None,
                        },
                        _ => None,
                    });
                self.test_mods.push((m.ident.to_string(), path));
            }
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.measure(f.sig.ident.to_string(), f.sig.fn_token.span, &f.block);
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        self.measure(f.sig.ident.to_string(), f.sig.fn_token.span, &f.block);
        visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.measure(f.sig.ident.to_string(), f.sig.fn_token.span, body);
        }
        visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 && matches!(segments[0].as_str(), "crate" | "super" | "self") {
            self.paths.push(segments);
        }
        visit::visit_path(self, p);
    }
}

/// A source file, parsed: where it is, what module it is, and what it holds.
struct Source {
    rel: PathBuf,
    module: Vec<String>,
    lines: usize,
    survey: Survey,
}

/// The module path of a file relative to `src/` (`run/engine.rs` → `["run", "engine"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// Every non-test source file under `src`, parsed.
fn sources(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    crate::purity::rust_files(src, &mut files);
    let mut parsed = Vec::new();
    let mut test_files = BTreeSet::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read a source file");
        let file =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
        let mut survey = Survey::default();
        survey.visit_file(&file);
        let rel = path.strip_prefix(src).expect("under src").to_path_buf();
        // A `mod x;` resolves beside a `mod.rs`, or in the directory named after the file.
        let here = path.parent().expect("a parent").to_path_buf();
        let stem = path
            .file_stem()
            .expect("a stem")
            .to_string_lossy()
            .into_owned();
        let own = if matches!(stem.as_str(), "mod" | "lib" | "main") {
            here.clone()
        } else {
            here.join(&stem)
        };
        for (name, attr) in &survey.test_mods {
            match attr {
                Some(p) => {
                    test_files.insert(here.join(p));
                    test_files.insert(own.join(p));
                }
                None => {
                    test_files.insert(own.join(format!("{name}.rs")));
                    test_files.insert(own.join(name).join("mod.rs"));
                }
            }
        }
        parsed.push((path, rel, text.lines().count(), survey));
    }
    parsed
        .into_iter()
        .filter(|(path, rel, _, _)| {
            let name = rel.file_name().expect("a name").to_string_lossy();
            !test_files.contains(path) && name != "tests.rs" && !name.ends_with("_tests.rs")
        })
        .map(|(_, rel, lines, survey)| Source {
            module: module_of(&rel),
            rel,
            lines,
            survey,
        })
        .collect()
}

/// The module a path names, made absolute from the file's module (`super::x` in `run/a.rs`
/// → `["run", "x"]`), or `None` for a path outside the crate.
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        Some("super") => {
            // `a/b.rs` and `a/b/mod.rs` are both module `a::b`: `super` is `a` for either.
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Every pair of files that import each other (neither an ancestor of the other).
fn circles(sources: &[Source]) -> Vec<(usize, usize)> {
    let by_module: BTreeMap<&[String], usize> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| (s.module.as_slice(), i))
        .collect();
    let mut imports: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); sources.len()];
    for (i, s) in sources.iter().enumerate() {
        for p in &s.survey.paths {
            let Some(abs) = absolute(&s.module, p) else {
                continue;
            };
            // The longest prefix that is a file's module is the file named.
            let target = (1..=abs.len())
                .rev()
                .find_map(|n| by_module.get(&abs[..n]).copied());
            if let Some(t) = target
                && t != i
            {
                imports[i].insert(t);
            }
        }
    }
    let mut pairs = Vec::new();
    for (a, targets) in imports.iter().enumerate() {
        for &b in targets {
            let (ma, mb) = (&sources[a].module, &sources[b].module);
            let related = ma.starts_with(mb) || mb.starts_with(ma);
            if a < b && imports[b].contains(&a) && !related {
                pairs.push((a, b));
            }
        }
    }
    pairs
}

fn show(rel: &Path) -> String {
    rel.to_string_lossy().replace('\\', "/")
}

/// Every offender under `src`: files over the limit, functions over the limit, circles.
pub fn offenders(src: &Path) -> Vec<Offender> {
    let sources = sources(src);
    let mut out = Vec::new();
    for s in &sources {
        let file = show(&s.rel);
        let lines = s.lines - s.survey.test_lines;
        if lines > MAX_FILE_LINES {
            out.push(Offender {
                file: file.clone(),
                line: 0,
                what: "file".into(),
                lines,
            });
        }
        for (name, line, lines) in &s.survey.fns {
            if *lines > MAX_FN_LINES {
                out.push(Offender {
                    file: file.clone(),
                    line: *line,
                    what: format!("fn {name}"),
                    lines: *lines,
                });
            }
        }
    }
    for (a, b) in circles(&sources) {
        out.push(Offender {
            file: show(&sources[a].rel),
            line: 0,
            what: format!("imports each other with {}", show(&sources[b].rel)),
            lines: 0,
        });
    }
    out.sort();
    out
}

fn count(list: &[&Offender]) -> String {
    let files = list.iter().filter(|o| o.what == "file").count();
    let fns = list.iter().filter(|o| o.what.starts_with("fn ")).count();
    let circles = list.iter().filter(|o| o.lines == 0).count();
    format!(
        "{files} files over {MAX_FILE_LINES} lines, {fns} functions over {MAX_FN_LINES} lines, {circles} import circles"
    )
}

#[test]
fn sizes_no_long_file_no_long_function_no_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = offenders(&src);
    let all: Vec<&Offender> = all.iter().collect();
    println!("all of src/: {}", count(&all));
    assert!(
        all.is_empty(),
        "split these by what each part does:\n{}",
        all.iter()
            .map(|o| format!("  {o}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn survey_of(text: &str) -> Survey {
    let mut s = Survey::default();
    s.visit_file(&syn::parse_file(text).expect("parse"));
    s
}

#[test]
fn sizes_measure_from_fn_to_closing_brace_and_skip_tables_and_tests() {
    let long_body = "    let x = 1;\n".repeat(90);
    let text = format!(
        "/// Doc.\n#[inline]\nfn long() {{\n{long_body}}}\n\
         fn table(k: u8) -> &'static str {{\n    match k {{\n{}        _ => \"z\",\n    }}\n}}\n\
         fn rows() -> &'static [(&'static str, u8)] {{\n    &[\n{}    ]\n}}\n\
         #[cfg(test)]\nmod tests {{\n    fn t() {{\n{long_body}    }}\n}}\n",
        "        0 => \"a\",\n".repeat(90),
        "        (\"a\", 1),\n".repeat(90),
    );
    let s = survey_of(&text);
    assert_eq!(s.fns, vec![("long".to_string(), 3, 92)]);
    assert_eq!(s.test_lines, 3 + 90 + 2);
}

#[test]
fn sizes_a_match_that_computes_is_not_a_table() {
    let arms = "        0 => f(1) + 2,\n".repeat(90);
    let text = format!("fn m(k: u8) -> u8 {{\n    match k {{\n{arms}        _ => 0,\n    }}\n}}\n");
    let s = survey_of(&text);
    assert_eq!(s.fns, vec![("m".to_string(), 1, 95)]);
}

#[test]
fn sizes_resolve_super_and_crate_paths_to_modules() {
    let run_a = vec!["run".to_string(), "a".to_string()];
    let p = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert_eq!(absolute(&run_a, &p("super::b::X")), Some(p("run::b::X")));
    assert_eq!(
        absolute(&run_a, &p("crate::ledger::Y")),
        Some(p("ledger::Y"))
    );
    assert_eq!(absolute(&run_a, &p("self::c")), Some(p("run::a::c")));
    assert_eq!(absolute(&run_a, &p("std::fs")), None);
}
