//! Holds the store's modules to the dependency order written in `src/store/mod.rs`: each module
//! names (through `super::` or `crate::store::`) only modules listed before it. Test code is
//! left out (`tests.rs` files and `#[cfg(test)] mod tests` blocks may reach anything).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn store_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store")
}

/// The modules in the order the `text` block of `mod.rs`'s documentation lists them.
fn order() -> Vec<String> {
    let doc = std::fs::read_to_string(store_dir().join("mod.rs")).unwrap();
    let block: Vec<&str> = doc
        .lines()
        .skip_while(|l| l.trim() != "//! ```text")
        .skip(1)
        .take_while(|l| l.trim() != "//! ```")
        .collect();
    block
        .iter()
        .flat_map(|l| l.trim_start_matches("//!").split_whitespace())
        .filter(|w| *w != "→")
        .map(String::from)
        .collect()
}

/// Every `.rs` file under `dir` but test files, with the store module it belongs to and how
/// many directories below `src/store` it sits.
fn files(dir: &Path, out: &mut Vec<(PathBuf, String, usize)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            files(&path, out);
            continue;
        }
        let rel = path.strip_prefix(store_dir()).unwrap().to_path_buf();
        let name = rel.file_name().unwrap().to_str().unwrap();
        if !name.ends_with(".rs") || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let module = first.trim_end_matches(".rs").to_string();
        // A directory's `mod.rs` is its module: its `super` is the store.
        let depth = rel
            .components()
            .count()
            .saturating_sub(if name == "mod.rs" { 2 } else { 1 });
        out.push((path.clone(), module, depth));
    }
}

/// The store modules a file's code names: `crate::store::M`, `super::M` from a file directly
/// in `src/store`, `super::super::M` from one a directory below, and the names inside a
/// `use super::{...}` group. Comments and the test module are skipped.
fn named(text: &str, depth: usize) -> Vec<(usize, String)> {
    let code = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    // Comment lines blanked, so line numbers stay and a group may span lines.
    let code: String = code
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let up = "super::".repeat(depth + 1);
    let mut out = Vec::new();
    for prefix in ["crate::store::", up.as_str()] {
        let mut at = 0;
        while let Some(i) = code[at..].find(prefix) {
            let start = at + i;
            at = start + prefix.len();
            // `super::super::x` also contains `super::x`: take only the whole prefix.
            if prefix.starts_with("super") && code[..start].ends_with("super::") {
                continue;
            }
            let line = code[..start].matches('\n').count() + 1;
            let rest = &code[at..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(g) => g
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|p| p.split("::").next().unwrap_or("").trim())
                    .collect(),
                None => rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .take(1)
                    .collect(),
            };
            out.extend(names.into_iter().map(|m| (line, m.to_string())));
        }
    }
    out
}

#[test]
fn store_modules_import_only_modules_listed_before_them() {
    let order = order();
    assert!(
        order.len() > 10,
        "no module order found in src/store/mod.rs"
    );
    for (i, m) in order.iter().enumerate() {
        assert!(
            !order[..i].contains(m),
            "{m} is listed twice in src/store/mod.rs"
        );
    }
    let rank: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut all = Vec::new();
    files(&store_dir(), &mut all);
    let mut wrong = Vec::new();
    for (path, module, depth) in &all {
        if module == "mod" || module.ends_with("_tests") {
            continue;
        }
        let Some(&mine) = rank.get(module.as_str()) else {
            wrong.push(format!(
                "{module} is missing from the order in src/store/mod.rs"
            ));
            continue;
        };
        let text = std::fs::read_to_string(path).unwrap();
        for (line, name) in named(&text, *depth) {
            match rank.get(name.as_str()) {
                Some(&theirs) if theirs > mine => wrong.push(format!(
                    "{}:{line}: {module} imports {name}, which comes after it",
                    path.strip_prefix(env!("CARGO_MANIFEST_DIR"))
                        .unwrap()
                        .display()
                )),
                _ => {}
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_order_test_sees_every_form_of_import() {
    let text = "use super::git::GitStore;\n// use super::sync::X;\nuse super::{lock, refs::CasOutcome};\n\
                let x = crate::store::wal::MIN;\nuse super::super::not_at_this_depth;\n";
    let found = named(text, 0);
    let names: Vec<(usize, &str)> = found.iter().map(|(l, m)| (*l, m.as_str())).collect();
    assert_eq!(
        names,
        [
            (4, "wal"),
            (1, "git"),
            (3, "lock"),
            (3, "refs"),
            (5, "super")
        ]
    );
    let below = named("use super::super::append::x;\nuse super::sibling;\n", 1);
    assert_eq!(below, [(1, "append".to_string())]);
}
