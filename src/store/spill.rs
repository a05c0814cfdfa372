//! Fixed-size records sorted in bounded memory: records gather in memory up to a run's size,
//! each full run is sorted and written to an unnamed temporary file, and [`SortedRuns::merge`]
//! hands every record out in order from a k-way merge of the runs. An import uses it twice:
//! for its pack's index rows and for the index of a Forum directory's payload rows, so neither
//! holds a row per entry in memory.
//!
//! Hand-written because the two callers need exactly this and no more (fixed-size byte
//! records compared as bytes, a temporary file that vanishes with the process, and a merge
//! whose read buffers stay within [`MERGE_BUFFERS`] however many runs there are); the external
//! sort crates we looked at sort serde values through a codec per record.

use std::borrow::Borrow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

/// Bytes of read buffer the merge gives all its runs together (at least one record each).
const MERGE_BUFFERS: usize = 1 << 20;
/// The most a single run's read buffer holds.
const RUN_BUFFER: usize = 64 << 10;

/// Records of `R` bytes, to be handed out sorted by their bytes.
pub(crate) struct SortedRuns<const R: usize> {
    dir: PathBuf,
    rows: Vec<[u8; R]>,
    /// Records per run before it is sorted and written out.
    pub(crate) run_rows: usize,
    runs: Option<BufWriter<File>>,
    run_lens: Vec<u64>,
    len: u64,
}

impl<const R: usize> SortedRuns<R> {
    /// Sorts records in runs of `run_rows`, spilling them to a temporary file in `dir`.
    pub(crate) fn new(dir: &Path, run_rows: usize) -> SortedRuns<R> {
        SortedRuns {
            dir: dir.to_path_buf(),
            rows: Vec::new(),
            run_rows: run_rows.max(1),
            runs: None,
            run_lens: Vec::new(),
            len: 0,
        }
    }

    /// Adds one record.
    pub(crate) fn push(&mut self, rec: [u8; R]) -> std::io::Result<()> {
        if self.rows.capacity() == 0 {
            self.rows.reserve_exact(self.run_rows.min(1 << 12));
        }
        self.rows.push(rec);
        self.len += 1;
        if self.rows.len() >= self.run_rows {
            self.spill()?;
        }
        Ok(())
    }

    /// The records added so far.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// How many runs went to the temporary file so far.
    #[cfg(test)]
    pub(crate) fn spilled_runs(&self) -> usize {
        self.run_lens.len()
    }

    fn spill(&mut self) -> std::io::Result<()> {
        self.rows.sort_unstable_by(order);
        if self.runs.is_none() {
            let f = tempfile::tempfile_in(&self.dir)?;
            self.runs = Some(BufWriter::with_capacity(1 << 16, f));
        }
        let w = self.runs.as_mut().expect("just set");
        for r in &self.rows {
            w.write_all(r)?;
        }
        self.run_lens.push(self.rows.len() as u64);
        self.rows.clear();
        Ok(())
    }

    /// Hands every record to `f` in ascending byte order (equal records one after another).
    pub(crate) fn merge(
        mut self,
        mut f: impl FnMut(&[u8; R]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        if self.runs.is_none() {
            self.rows.sort_unstable_by(order);
            return self.rows.iter().try_for_each(f);
        }
        if !self.rows.is_empty() {
            self.spill()?;
        }
        self.rows = Vec::new();
        let file = self
            .runs
            .take()
            .expect("spilled")
            .into_inner()
            .map_err(|e| e.into_error())?;
        let buffer = (MERGE_BUFFERS / self.run_lens.len()).clamp(R, RUN_BUFFER);
        let mut readers = Vec::with_capacity(self.run_lens.len());
        let mut start = 0u64;
        for &n in &self.run_lens {
            readers.push(Records::<_, R>::new(&file, start, n, buffer));
            start += n * R as u64;
        }
        // A heap of each run's next record picks the least.
        let mut heap = std::collections::BinaryHeap::with_capacity(readers.len());
        for (k, r) in readers.iter_mut().enumerate() {
            if let Some(rec) = r.next()? {
                heap.push(std::cmp::Reverse(Head(rec, k)));
            }
        }
        while let Some(std::cmp::Reverse(Head(rec, k))) = heap.pop() {
            f(&rec)?;
            if let Some(next) = readers[k].next()? {
                heap.push(std::cmp::Reverse(Head(next, k)));
            }
        }
        Ok(())
    }
}

/// Byte order of two records, settled by their first eight bytes read as one number when
/// those differ (as they nearly always do for object ids and hash keys), which costs less than
/// comparing the bytes one call at a time.
#[inline]
fn order<const R: usize>(a: &[u8; R], b: &[u8; R]) -> std::cmp::Ordering {
    if R >= 8 {
        let x = u64::from_be_bytes(a[..8].try_into().expect("8 bytes"));
        let y = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
        if x != y {
            return x.cmp(&y);
        }
    }
    a.cmp(b)
}

/// A run's next record in the merge's heap, ordered by [`order`], then by run.
struct Head<const R: usize>([u8; R], usize);

impl<const R: usize> PartialEq for Head<R> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl<const R: usize> Eq for Head<R> {}

impl<const R: usize> PartialOrd for Head<R> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<const R: usize> Ord for Head<R> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        order(&self.0, &other.0).then(self.1.cmp(&other.1))
    }
}

/// Reads records of `R` bytes from a file, starting at a byte offset, a buffer at a time.
pub(crate) struct Records<F, const R: usize> {
    file: F,
    at: u64,
    left: u64,
    buf: Vec<u8>,
    pos: usize,
    /// Bytes read at once (a whole number of records).
    chunk: usize,
}

impl<F: Borrow<File>, const R: usize> Records<F, R> {
    /// `count` records from byte `at` of `file`, read `buffer` bytes at a time (rounded down to
    /// whole records, at least one).
    pub(crate) fn new(file: F, at: u64, count: u64, buffer: usize) -> Records<F, R> {
        Records {
            file,
            at,
            left: count,
            buf: Vec::new(),
            pos: 0,
            chunk: (buffer / R).max(1) * R,
        }
    }

    /// Moves to `count` records from byte `at`, dropping what was buffered.
    pub(crate) fn reset(&mut self, at: u64, count: u64) {
        self.at = at;
        self.left = count;
        self.buf.clear();
        self.pos = 0;
    }

    /// The next record, `None` after the last.
    pub(crate) fn next(&mut self) -> std::io::Result<Option<[u8; R]>> {
        if self.pos == self.buf.len() {
            if self.left == 0 {
                return Ok(None);
            }
            let n = self.left.min((self.chunk / R) as u64) as usize;
            self.buf.resize(n * R, 0);
            self.file.borrow().read_exact_at(&mut self.buf, self.at)?;
            self.at += self.buf.len() as u64;
            self.left -= n as u64;
            self.pos = 0;
        }
        let rec: [u8; R] = self.buf[self.pos..self.pos + R]
            .try_into()
            .expect("R bytes");
        self.pos += R;
        Ok(Some(rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorts `input` through [`SortedRuns`] with runs of `run_rows` records.
    fn sorted<const R: usize>(dir: &Path, input: &[[u8; R]], run_rows: usize) -> Vec<[u8; R]> {
        let mut s = SortedRuns::<R>::new(dir, run_rows);
        for r in input {
            s.push(*r).unwrap();
        }
        assert_eq!(s.len(), input.len() as u64);
        assert_eq!(s.spilled_runs() > 0, run_rows < input.len(), "{run_rows}");
        let mut got = Vec::new();
        s.merge(|r| {
            got.push(*r);
            Ok(())
        })
        .unwrap();
        got
    }

    /// Records in any order, with repeats, come out sorted, whether they stayed in memory or
    /// spilled in many runs, and nothing is left in the directory.
    #[test]
    fn records_come_out_sorted_from_memory_and_from_many_runs() {
        let dir = tempfile::tempdir().unwrap();
        let input: Vec<[u8; 5]> = (0..2000u32)
            .map(|i| {
                let x = i.wrapping_mul(2_654_435_761) % 1500;
                let mut r = [0u8; 5];
                r[..4].copy_from_slice(&x.to_be_bytes());
                r[4] = (i % 3) as u8;
                r
            })
            .collect();
        let mut want = input.clone();
        want.sort();
        for run_rows in [1, 7, 64, 5000] {
            assert_eq!(
                sorted(dir.path(), &input, run_rows),
                want,
                "run_rows {run_rows}"
            );
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Wide records, many with the same first eight bytes, sort in byte order too.
    #[test]
    fn wide_records_sort_in_byte_order() {
        let dir = tempfile::tempdir().unwrap();
        let input: Vec<[u8; 12]> = (0..3000u64)
            .map(|i| {
                let mut r = [0u8; 12];
                r[..8].copy_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 50).to_be_bytes());
                r[8..].copy_from_slice(&((i * 7919) as u32).to_be_bytes());
                r
            })
            .collect();
        let mut want = input.clone();
        want.sort();
        for run_rows in [3, 100_000] {
            assert_eq!(
                sorted(dir.path(), &input, run_rows),
                want,
                "run_rows {run_rows}"
            );
        }
    }

    #[test]
    fn records_read_back_in_chunks_and_from_a_new_place() {
        let mut f = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..100u8).collect();
        f.write_all(&bytes).unwrap();
        let mut r = Records::<_, 4>::new(&f, 8, 5, 9);
        let mut got = Vec::new();
        while let Some(rec) = r.next().unwrap() {
            got.push(rec[0]);
        }
        assert_eq!(got, vec![8, 12, 16, 20, 24]);
        r.reset(96, 1);
        assert_eq!(r.next().unwrap(), Some([96, 97, 98, 99]));
        assert_eq!(r.next().unwrap(), None);
        // A file shorter than the records asked for is an error, not a short record.
        r.reset(98, 1);
        assert!(r.next().is_err());
    }
}
