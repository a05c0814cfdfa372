//! Tests of the log format: records, headers, deflated objects, format 1, inode blocks.

use super::*;

fn obj(kind: Kind, data: &[u8]) -> Obj {
    let id = gix::objs::compute_hash(HashKind::Sha1, kind, data).unwrap();
    Obj {
        id,
        kind,
        data: data.to_vec(),
    }
}

#[test]
fn records_round_trip_and_a_torn_tail_ends_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal/main.wal");
    let mut wal = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None, 1).unwrap();
    assert!(wal.is_empty());
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o600, 0o600, "{mode:o}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), MIN_CAPACITY);
    let a = obj(Kind::Blob, b"{\"a\":1}");
    let b = obj(Kind::Blob, b"{\"b\":2}");
    let r1 = WalRecord::new(None, a.id, std::slice::from_ref(&a));
    let r2 = WalRecord::new(Some(a.id), b.id, &[b.clone(), a.clone()]);
    assert!(wal.append(&r1, true).unwrap());
    assert!(wal.append(&r2, false).unwrap());
    let end = wal.end;
    drop(wal);

    let wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
    assert_eq!(wal.records(), vec![r1.clone(), r2.clone()]);
    assert_eq!(wal.end, end);
    assert_eq!(wal.header.last_new, Some(b.id));
    assert!(!wal.needs_recovery(), "written in this boot");

    // A torn third record (its CRC does not match) is not part of the log.
    let mut torn =
        WalRecord::new(Some(b.id), a.id, std::slice::from_ref(&a)).encode(wal.header.generation);
    let last = torn.len() - 1;
    torn[last] ^= 1;
    wal.file.write_all_at(&torn, end).unwrap();
    drop(wal);
    let mut wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
    assert_eq!(wal.records().len(), 2);
    assert_eq!(wal.end, end, "appends go over the torn record");

    // A reset empties it; the old records do not come back.
    wal.reset(None).unwrap();
    drop(wal);
    let mut wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
    assert!(wal.is_empty());
    assert!(wal.records().is_empty());

    // A record that cannot fit (even deflated: these bytes do not compress) is refused
    // without writing.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..MIN_CAPACITY)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let big = obj(Kind::Blob, &noise);
    assert!(
        !wal.append(&WalRecord::new(None, big.id, &[big]), true)
            .unwrap()
    );
    assert!(wal.is_empty());
}

#[test]
fn records_are_stored_deflated_and_a_format_1_log_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("main.wal");
    let mut wal = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None, 1).unwrap();
    let body = format!(
        "{{\"items\":[{}]}}",
        vec!["{\"k\":\"value\"}"; 200].join(",")
    );
    let a = obj(Kind::Blob, body.as_bytes());
    let r = WalRecord::new(None, a.id, std::slice::from_ref(&a));
    let encoded = r.encode(wal.header.generation);
    assert!(
        encoded.len() * 4 < body.len(),
        "{} bytes for a {}-byte body",
        encoded.len(),
        body.len()
    );
    assert!(wal.append(&r, true).unwrap());
    drop(wal);
    assert_eq!(
        Wal::open(&path, HashKind::Sha1, None)
            .unwrap()
            .unwrap()
            .records(),
        vec![r.clone()]
    );

    // The same record as an earlier version wrote it: objects stored raw, header "1".
    let mut wal = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None, 1).unwrap();
    wal.header.version = 1;
    wal.file.write_all_at(&wal.header.encode(), 0).unwrap();
    let mut p = wal.header.generation.to_le_bytes().to_vec();
    p.push(0);
    p.extend_from_slice(a.id.as_bytes());
    p.extend_from_slice(&1u32.to_le_bytes());
    p.push(kind_code(Kind::Blob));
    p.extend_from_slice(&(body.len() as u32).to_le_bytes());
    p.extend_from_slice(body.as_bytes());
    let mut v1 = (p.len() as u32).to_le_bytes().to_vec();
    v1.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    v1.extend_from_slice(&p);
    wal.file.write_all_at(&v1, DATA_START).unwrap();
    drop(wal);
    let wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
    assert_eq!(wal.header.version, 1);
    assert_eq!(wal.records(), vec![r]);
}

#[test]
fn a_torn_header_falls_back_to_the_records_generation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("main.wal");
    let mut wal = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None, 1).unwrap();
    wal.reset(None).unwrap(); // generation 2
    let a = obj(Kind::Blob, b"1");
    let r = WalRecord::new(None, a.id, &[a]);
    wal.append(&r, true).unwrap();
    wal.file.write_all_at(&[0xff; 8], 20).unwrap();
    drop(wal);
    let wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
    assert_eq!(wal.header.generation, 2);
    assert_eq!(wal.records(), vec![r.clone()]);
    assert_eq!(
        wal.header.last_new,
        Some(r.new),
        "the last record names the tip, whatever the header says"
    );
    assert!(
        wal.needs_recovery(),
        "a torn header is checked like another boot's log"
    );
}

#[test]
fn a_log_on_ext4_owns_its_inode_table_block() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let wal_dir = dir.path().join("wal");
    let path = wal_dir.join("main.wal");
    let pads = |n: usize| -> Vec<PathBuf> {
        (1..=n)
            .map(|k| wal_dir.join(pad_name("main.wal", k)))
            .collect()
    };
    let fs = rustix::fs::statfs(dir.path()).unwrap();
    #[allow(clippy::unnecessary_cast)]
    let ext = fs.f_type as u64 == 0xEF53;
    // Twice: a log made again (a new `forum.walSize`) replaces the first one's pads.
    for capacity in [MIN_CAPACITY, 2 * MIN_CAPACITY] {
        drop(Wal::create(&path, HashKind::Sha1, capacity, None, 1).unwrap());
        let mut names: Vec<String> = std::fs::read_dir(&wal_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        if !ext {
            println!("not ext2/3/4 here: the log gets no pads");
            assert_eq!(names, ["main.wal"]);
            continue;
        }
        // The log and its pads, numbered from 1, and no temporary file. How many pads
        // depends on the holes in this directory's inode table; a fresh one gives 15.
        let k = names.len() - 1;
        assert!(k <= 15, "{names:?}");
        let mut want: Vec<String> = pads(k)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        want.push("main.wal".into());
        want.sort();
        assert_eq!(names, want);
        let block = |p: &Path| (std::fs::metadata(p).unwrap().ino() - 1) / 16;
        for p in pads(k) {
            assert_eq!(std::fs::metadata(&p).unwrap().len(), 0, "{}", p.display());
            assert_eq!(
                block(&p),
                block(&path),
                "{} shares the log's block",
                p.display()
            );
        }
        println!("the log holds its inode-table block with {k} pads");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), capacity);
    }
}

/// A log made in place of another (again at another size, or after it was deleted) takes a
/// later generation, so the hint the other left in the writer-lock file is not taken for it:
/// that hint's end is past the new log's records, and an append there would leave a gap that
/// ends the log for the scan after a power loss.
#[test]
fn a_hint_from_an_earlier_log_does_not_skip_a_new_logs_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("main.wal");
    let a = obj(Kind::Blob, b"{\"a\":1}");
    let b = obj(Kind::Blob, b"{\"b\":2}");
    let c = obj(Kind::Blob, b"{\"c\":3}");
    let mut old = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None, 1).unwrap();
    for (from, o) in [(None, &a), (Some(a.id), &b), (Some(b.id), &c)] {
        assert!(
            old.append(&WalRecord::new(from, o.id, std::slice::from_ref(o)), true)
                .unwrap()
        );
    }
    let stale = old.hint();
    let next = old.header.generation + 1;
    drop(old);
    let mut new = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None, next).unwrap();
    let first = WalRecord::new(None, a.id, std::slice::from_ref(&a));
    assert!(new.append(&first, true).unwrap());
    let end = new.end;
    drop(new);
    let mut wal = Wal::open(&path, HashKind::Sha1, Some(&stale))
        .unwrap()
        .unwrap();
    assert_eq!(
        wal.end, end,
        "the end is the new log's, not the stale hint's"
    );
    let second = WalRecord::new(Some(a.id), b.id, std::slice::from_ref(&b));
    assert!(wal.append(&second, true).unwrap());
    let hint = wal.hint();
    drop(wal);
    let scanned = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
    assert_eq!(
        scanned.records(),
        vec![first, second],
        "a scan finds both appends"
    );
    assert!(scanned.end > end);
    // This log's own hint is taken, and says the same.
    let hinted = Wal::open(&path, HashKind::Sha1, Some(&hint))
        .unwrap()
        .unwrap();
    assert_eq!(hinted.end, scanned.end);
}
