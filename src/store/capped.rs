//! Reading lines from a source that may never end (a device, a FIFO, a pipe) with a cap on each
//! line: at most `cap + 1` bytes are taken for one line, whatever the source claims or sends.

use std::io::{BufRead, Read};

/// What one capped read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A line ended by `\n` (left in the buffer).
    Ended,
    /// The last line, ended by the end of input without `\n` (the buffer may be empty: the end).
    Last,
    /// More than `cap` bytes came without a `\n`; the buffer holds the first `cap + 1`.
    TooLong,
}

/// Reads one line into `buf` (cleared first), taking at most `cap + 1` bytes. A line of `cap`
/// bytes followed by its `\n` fits.
pub(crate) fn read_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: u64,
) -> std::io::Result<Line> {
    buf.clear();
    input
        .by_ref()
        .take(cap.saturating_add(1))
        .read_until(b'\n', buf)?;
    Ok(if buf.last() == Some(&b'\n') {
        Line::Ended
    } else if buf.len() as u64 > cap {
        Line::TooLong
    } else {
        Line::Last
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_stops_one_byte_past_its_cap() {
        let mut buf = Vec::new();
        let mut r = &b"abc\nabcd\nab"[..];
        assert_eq!(read_line(&mut r, &mut buf, 3).unwrap(), Line::Ended);
        assert_eq!(buf, b"abc\n");
        assert_eq!(read_line(&mut r, &mut buf, 3).unwrap(), Line::TooLong);
        assert_eq!(buf, b"abcd");
        let mut r = &b"ab"[..];
        assert_eq!(read_line(&mut r, &mut buf, 3).unwrap(), Line::Last);
        assert_eq!(buf, b"ab");
        assert_eq!(read_line(&mut r, &mut buf, 3).unwrap(), Line::Last);
        assert!(buf.is_empty());
        let mut zero = std::io::BufReader::new(std::io::repeat(0));
        assert_eq!(read_line(&mut zero, &mut buf, 1000).unwrap(), Line::TooLong);
        assert_eq!(buf.len(), 1001);
    }
}
