//! Reading `git diff -z --raw --numstat` into the files of a change, and
//! `git status --porcelain -z` into the dirty paths of a base. Parsing only.

use std::collections::BTreeMap;

use crate::run::FileChange;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The files of a change from `git diff -z -M --raw --numstat` (the raw records first, then
/// the numstat ones): status from the raw records, lines from numstat (binary files count 0),
/// sorted by path; a rename is listed under its new path.
pub(super) fn files(stats: &[u8]) -> Vec<FileChange> {
    let mut by_path: BTreeMap<String, FileChange> = BTreeMap::new();
    let mut fields = stats.split(|b| *b == 0).peekable();
    // Raw: `:MODE MODE OID OID STATUS`, then the path (two for a rename or copy).
    while let Some(head) = fields.next_if(|f| f.first() == Some(&b':')) {
        let mut words = head.rsplit(|b| *b == b' ');
        let status = words.next().unwrap_or_default();
        // The new side's object id; all zeros when the file was deleted.
        let blob = words
            .next()
            .map(text)
            .filter(|id| !id.is_empty() && !id.bytes().all(|b| b == b'0'));
        let Some(letter) = status.first() else { break };
        if matches!(letter, b'R' | b'C') {
            fields.next();
        }
        let Some(path) = fields.next() else { break };
        let path = text(path);
        by_path.insert(
            path.clone(),
            FileChange {
                path,
                status: text(&[*letter]),
                added: 0,
                removed: 0,
                blob,
            },
        );
    }
    while let Some(head) = fields.next() {
        if head.is_empty() {
            continue;
        }
        let mut parts = head.splitn(3, |b| *b == b'\t');
        let added = parts.next().map(text).unwrap_or_default();
        let removed = parts.next().map(text).unwrap_or_default();
        let rest = parts.next().unwrap_or_default();
        let path = if rest.is_empty() {
            // A rename: the old path, then the new one, as their own fields.
            fields.next();
            fields.next().map(text).unwrap_or_default()
        } else {
            text(rest)
        };
        if let Some(f) = by_path.get_mut(&path) {
            f.added = added.parse().unwrap_or(0);
            f.removed = removed.parse().unwrap_or(0);
        }
    }
    by_path.into_values().collect()
}

/// The paths `git status --porcelain -z` lists (for a rename, the new path), sorted.
pub(super) fn dirty_paths(status: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut fields = status.split(|b| *b == 0).filter(|f| !f.is_empty());
    while let Some(f) = fields.next() {
        if f.len() > 3 {
            out.push(text(&f[3..]));
        }
        if matches!(f[0], b'R' | b'C') {
            fields.next();
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_adds_and_binaries_are_read() {
        let stats = b":100644 100644 ab cd M\0a.txt\0:100644 100644 ef ef R090\0old.txt\0new.txt\0:000000 100644 00 12 A\0bin.dat\x002\t1\ta.txt\x003\t0\t\0old.txt\0new.txt\0-\t-\tbin.dat\0";
        let f = files(stats);
        let blobs: Vec<Option<&str>> = f.iter().map(|f| f.blob.as_deref()).collect();
        assert_eq!(blobs, [Some("cd"), Some("12"), Some("ef")]);
        let got: Vec<(&str, &str, u64, u64)> = f
            .iter()
            .map(|f| (f.path.as_str(), f.status.as_str(), f.added, f.removed))
            .collect();
        assert_eq!(
            got,
            [
                ("a.txt", "M", 2, 1),
                ("bin.dat", "A", 0, 0),
                ("new.txt", "R", 3, 0)
            ]
        );
        assert_eq!(
            dirty_paths(b" M a.txt\0R  n.txt\0o\0?? u\0"),
            ["a.txt", "n.txt", "u"]
        );
    }
}
