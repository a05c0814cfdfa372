use super::stream::*;
use super::*;
use proptest::prelude::*;

/// Body `k` of the stream tests: its value, canonical text and hash.
fn body(k: usize) -> (Value, String, String) {
    let v = canonical::parse(&format!(
        "{{\"k\": {k}, \"pad\": \"{}\"}}",
        "x".repeat(k % 13)
    ))
    .unwrap();
    let c = v.canonical();
    let h = hash::sha256_hex(c.as_bytes());
    (v, c, h)
}

fn entry_naming(h: &str) -> Entry {
    let new = crate::ledger::NewEntry {
        actor: "t".into(),
        kind: "note".into(),
        causal_parent: None,
        payload: Value::Null,
        ts: 1.0,
    };
    Entry::next(None, &new, h.to_string())
}

/// A directory whose payload rows hold `rows` (body numbers, in this order; a pair gives a
/// row whose body is not the one its hash names), and no entries.
fn dir_of(rows: &[(usize, usize)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for &(named, held) in rows {
        let row = Value::Object(vec![
            ("hash".into(), Value::str(&body(named).2)),
            ("body".into(), body(held).0),
        ]);
        text.push_str(&row.python_dumps());
        text.push('\n');
    }
    fs::write(d.path().join("payloads.jsonl"), text).unwrap();
    fs::write(d.path().join("entries.jsonl"), "").unwrap();
    d
}

fn open(d: &Path, tuning: Tuning) -> Payloads {
    open_tuned(d, &Limits::default(), d, tuning)
        .unwrap()
        .payloads
}

/// What Forum's reader gives for `asks` against `rows`: the body (first row wins) and
/// whether an earlier ask got it.
fn oracle(rows: &[usize], asks: &[usize]) -> Vec<Option<(String, bool)>> {
    let mut given = std::collections::HashSet::new();
    asks.iter()
        .map(|k| rows.contains(k).then(|| (body(*k).1, !given.insert(*k))))
        .collect()
}

fn served(p: &mut Payloads, asks: &[usize]) -> Vec<Option<(String, bool)>> {
    asks.iter()
        .map(|k| {
            p.body(&entry_naming(&body(*k).2))
                .unwrap()
                .map(|b| (b.canonical, b.repeated))
        })
        .collect()
}

const TUNINGS: [Tuning; 5] = [
    Tuning {
        index_run: INDEX_RUN,
        fences: FENCES,
        key_mask: u64::MAX,
        ranges_max: None,
    },
    Tuning {
        index_run: 1,
        fences: 1,
        key_mask: 0,
        ranges_max: Some(0),
    },
    Tuning {
        index_run: 2,
        fences: 3,
        key_mask: 1,
        ranges_max: Some(1),
    },
    Tuning {
        index_run: 5,
        fences: 2,
        key_mask: 7,
        ranges_max: Some(3),
    },
    Tuning {
        index_run: 3,
        fences: 4096,
        key_mask: u64::MAX,
        ranges_max: None,
    },
];

/// Rows in the order Forum writes them (each body once, just before its first entry) are
/// all served by the cursor: no lookup, nothing passed over, however the index is tuned.
#[test]
fn rows_in_forum_order_are_served_by_the_cursor_alone() {
    let asks: Vec<usize> = (0..300).collect();
    let rows: Vec<(usize, usize)> = asks.iter().map(|&k| (k, k)).collect();
    let d = dir_of(&rows);
    for tuning in TUNINGS {
        let mut p = open(d.path(), tuning);
        let plain: Vec<usize> = rows.iter().map(|r| r.0).collect();
        assert_eq!(served(&mut p, &asks), oracle(&plain, &asks));
        assert_eq!(p.lookups, 0);
        assert!(p.skipped.is_empty() && p.later.is_empty());
        assert!(matches!(p.skipped, Passed::Ranges(..)));
    }
}

/// A repeated body and a body the directory lacks are looked up; rows passed over stay
/// few when rows come in reverse.
#[test]
fn repeats_absences_and_reversed_rows_are_looked_up() {
    let rows: Vec<(usize, usize)> = (0..200).rev().map(|k| (k, k)).collect();
    let d = dir_of(&rows);
    let asks: Vec<usize> = (0..200).chain([5, 199, 1000, 0]).collect();
    let plain: Vec<usize> = rows.iter().map(|r| r.0).collect();
    for tuning in TUNINGS {
        let mut p = open(d.path(), tuning);
        assert_eq!(served(&mut p, &asks), oracle(&plain, &asks));
        match &p.skipped {
            Passed::Ranges(map, _) => assert!(map.len() <= 1, "{map:?}"),
            Passed::Bits(_) => assert!(tuning.ranges_max.is_some()),
        }
    }
}

/// The first row of a hash gives the body: a later row of the same hash with another body
/// is never read, and a first row whose body is wrong is an error even when a later one is
/// right.
#[test]
fn the_first_row_of_a_hash_wins() {
    for tuning in TUNINGS {
        let d = dir_of(&[(1, 1), (0, 0), (1, 2), (3, 3)]);
        let mut p = open(d.path(), tuning);
        assert_eq!(
            served(&mut p, &[1, 0, 3, 1]),
            oracle(&[1, 0, 3], &[1, 0, 3, 1])
        );
        assert_eq!(p.later, vec![2]);
        let d = dir_of(&[(0, 0), (1, 2), (1, 1)]);
        let mut p = open(d.path(), tuning);
        assert!(p.body(&entry_naming(&body(0).2)).unwrap().is_some());
        let e = p.body(&entry_naming(&body(1).2));
        assert!(matches!(e, Err(ForumDirError::Corrupt(_))), "{:?}", e.err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Any rows (out of order, repeated, never named) and any requests (repeated, for
    /// bodies the directory lacks) get what Forum's reader gives, however the index is
    /// tuned.
    #[test]
    fn any_rows_and_requests_get_what_forum_reads(
        rows in proptest::collection::vec(0usize..24, 0..40),
        asks in proptest::collection::vec(0usize..28, 0..60),
        t in 0usize..TUNINGS.len(),
    ) {
        let pairs: Vec<(usize, usize)> = rows.iter().map(|&k| (k, k)).collect();
        let d = dir_of(&pairs);
        let mut p = open(d.path(), TUNINGS[t]);
        prop_assert_eq!(served(&mut p, &asks), oracle(&rows, &asks));
    }
}

#[test]
fn splitlines_matches_python() {
    assert_eq!(
        splitlines("a\nb\r\nc\rd\u{2028}e\u{85}f\n"),
        vec!["a", "b", "c", "d", "e", "f"]
    );
    assert_eq!(splitlines("a\n\nb"), vec!["a", "", "b"]);
    assert_eq!(splitlines(""), Vec::<&str>::new());
    // Text that breaks only at `\n` takes the short way, with the same answers.
    assert_eq!(splitlines("\n"), vec![""]);
    assert_eq!(splitlines("a\n\n"), vec!["a", ""]);
    assert_eq!(splitlines("a\nb\n"), vec!["a", "b"]);
    assert_eq!(splitlines("caf\u{e9}\x1f"), vec!["caf\u{e9}\x1f"]);
    assert_eq!(splitlines("x\u{2028}y\n"), vec!["x", "y"]);
    // Each of the other breaks alone is found, wherever it sits.
    for brk in [
        "\r", "\u{b}", "\u{c}", "\u{1c}", "\u{1d}", "\u{1e}", "\u{85}", "\u{2029}",
    ] {
        let long = "y".repeat(70);
        let text = format!("{long}{brk}z");
        assert_eq!(splitlines(&text), vec![long.as_str(), "z"], "{brk:?}");
    }
}
