//! Edges: what happens without the shared conformance folder, and usage errors on one line.

use crate::common::conformance_in;

#[test]
fn a_missing_conformance_folder_is_a_skip_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-conformance");
    assert_eq!(conformance_in(&missing, false), None);
    assert_eq!(
        conformance_in(dir.path(), true),
        Some(dir.path().to_path_buf())
    );
}

#[test]
#[should_panic(expected = "GIT_FORUM_REQUIRE_SHARED=1")]
fn a_missing_conformance_folder_fails_when_required() {
    let dir = tempfile::tempdir().unwrap();
    conformance_in(&dir.path().join("no-such-conformance"), true);
}
