//! Reading `git diff --numstat -z` and `git diff --name-status -z` into the files of a
//! change, and `git status --porcelain -z` into the dirty paths of a base. Parsing only.

use std::collections::BTreeMap;

use crate::run::FileChange;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The files of a change from the two listings (both made with `-M`): status from
/// `--name-status`, lines from `--numstat` (binary files count 0), sorted by path; a rename is
/// listed under its new path.
pub(super) fn files(name_status: &[u8], numstat: &[u8]) -> Vec<FileChange> {
    let mut by_path: BTreeMap<String, FileChange> = BTreeMap::new();
    let mut fields = name_status.split(|b| *b == 0).filter(|f| !f.is_empty());
    while let Some(status) = fields.next() {
        let letter = text(&status[..1]);
        let renamed = matches!(status.first(), Some(b'R' | b'C'));
        if renamed {
            fields.next();
        }
        let Some(path) = fields.next() else { break };
        let path = text(path);
        by_path.insert(
            path.clone(),
            FileChange {
                path,
                status: letter,
                added: 0,
                removed: 0,
            },
        );
    }
    let mut fields = numstat.split(|b| *b == 0);
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
        let ns = b"M\0a.txt\0R090\0old.txt\0new.txt\0A\0bin.dat\0";
        let num = b"2\t1\ta.txt\x003\t0\t\0old.txt\0new.txt\0-\t-\tbin.dat\0";
        let f = files(ns, num);
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
