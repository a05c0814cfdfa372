//! Every temporary directory git forum makes outside its tests is private (0700): it is made
//! through `src/scratch.rs`, never with `tempfile`'s own constructors, which give the process's
//! default mode (0755 under the usual umask), so a worker's checkout of the repository, a
//! replay's worktrees or the egress proxy's sockets would be open to anyone on the machine.
//! The paths are read as the purity check reads them ([`super::purity`]); `#[cfg(test)]` items
//! and test module files are left out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::purity::{Finding, check_source_against, module_of, rust_files};

/// The ways to make a temporary directory with the default mode.
const WIDE: &[&str] = &[
    "tempfile::tempdir",
    "tempfile::tempdir_in",
    "tempfile::Builder",
    "tempfile::TempDir::new",
    "tempfile::TempDir::new_in",
    "tempfile::TempDir::with_prefix",
    "tempfile::TempDir::with_prefix_in",
    "tempfile::TempDir::with_suffix",
    "tempfile::TempDir::with_suffix_in",
];

/// Files that may make one anyway, and why.
const ALLOWED: &[(&str, &str)] = &[
    (
        "src/scratch.rs",
        "the one place private directories are made",
    ),
    (
        "src/store/wal.rs",
        "its Builder makes a file, not a directory: the log's temporary file, which every user of the repository must be able to write",
    ),
    (
        "src/surface/tlog.rs",
        "the tiles are written beside the DIR the user names and renamed to it: a layout to publish keeps the user's default mode",
    ),
];

fn findings(src: &Path) -> (Vec<Finding>, usize) {
    let mut files: Vec<PathBuf> = Vec::new();
    rust_files(src, &mut files);
    let mut parsed = Vec::new();
    let mut tests: BTreeSet<Vec<String>> = BTreeSet::new();
    for path in &files {
        let rel = path.strip_prefix(src).expect("under src").to_path_buf();
        let text = std::fs::read_to_string(path).expect("read a source file");
        let shown = format!("src/{}", rel.display());
        let module = module_of(&rel);
        let (found, test_files) =
            check_source_against(&shown, &module, &text, WIDE).unwrap_or_else(|e| panic!("{e}"));
        tests.extend(test_files);
        parsed.push((module, shown, found));
    }
    let mut out = Vec::new();
    let mut checked = 0;
    for (module, shown, found) in parsed {
        if tests.contains(&module) || ALLOWED.iter().any(|(f, _)| *f == shown) {
            continue;
        }
        checked += 1;
        out.extend(found);
    }
    (out, checked)
}

#[test]
fn temporary_directories_are_made_private_through_scratch_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (found, checked) = findings(&src);
    assert!(checked >= 300, "only {checked} source files checked");
    let lines: Vec<String> = found.iter().map(Finding::to_string).collect();
    assert!(
        lines.is_empty(),
        "make temporary directories with crate::scratch::dir or dir_in (mode 0700), or list the file in ALLOWED of {} with its reason:\n{}",
        file!(),
        lines.join("\n")
    );
}

#[test]
fn the_scratch_check_finds_each_way_to_make_a_wide_directory() {
    let source = r#"
use tempfile::{Builder, TempDir};
fn f() {
    let _ = tempfile::tempdir();
    let _ = Builder::new().prefix("x").tempdir();
    let _ = TempDir::new_in("/tmp");
    let _ = tempfile::tempfile();
    let _: Option<TempDir> = None;
}
#[cfg(test)]
mod tests {
    fn g() { let _ = tempfile::tempdir(); }
}
"#;
    let (found, _) =
        check_source_against("src/x.rs", &["x".to_string()], source, WIDE).expect("parses");
    let shown: Vec<String> = found
        .iter()
        .map(|f| format!("{}: {}", f.line, f.path))
        .collect();
    assert_eq!(
        shown,
        [
            "2: tempfile::Builder",
            "4: tempfile::tempdir",
            "5: tempfile::Builder::new",
            "6: tempfile::TempDir::new_in",
        ],
        "a file-only tempfile and the TempDir type are fine; tests are left out"
    );
}
