//! Reading what a user hands a command (a roster, a plan, a payload, a proof) — a file, a device, a FIFO, standard input — with a
//! byte limit.
//!
//! File metadata is not trusted for the size: `/dev/zero`, a FIFO or `/dev/stdin` report a
//! length of 0 and may never end. Every read here counts the bytes it takes and stops one byte
//! past its limit, so an endless source costs at most the limit in memory and time.

use std::io::Read;
use std::path::Path;

/// Where an input comes from, for messages: `standard input` for `-`, else the path.
pub(crate) fn source_name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}

/// How messages name the input: `roster FILE`, or `the roster on standard input`.
fn label(path: &Path, what: &str) -> String {
    if path.as_os_str() == "-" {
        format!("the {what} on standard input")
    } else {
        format!("{what} {}", path.display())
    }
}

/// Why an input could not be read. `label` names it as messages do (`roster FILE`, `the
/// roster on standard input`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// Longer than `limit`; `raise` says how to allow more.
    #[error("{label} is longer than the {limit} byte limit; {raise}")]
    TooLong {
        label: String,
        limit: u64,
        raise: String,
    },
    #[error("cannot read {label}: {source}")]
    Unreadable {
        label: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{label} is not UTF-8 text ({source})")]
    NotUtf8 {
        label: String,
        #[source]
        source: std::string::FromUtf8Error,
    },
}

/// The message as text, for the commands whose errors are still text.
impl From<InputError> for String {
    fn from(e: InputError) -> String {
        e.to_string()
    }
}

/// Reads up to `limit` bytes from `input`; `Ok(None)` when it holds more.
fn take_limited(input: impl Read, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    input.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    Ok((buf.len() as u64 <= limit).then_some(buf))
}

/// Reads the input at `path` (`-` for standard input), at most `limit` bytes. `what` names it
/// in messages ("payload file", "roster"), `raise` says how to allow more (empty when nothing
/// does). The error is one line.
pub(crate) fn read_limited(
    path: &Path,
    limit: u64,
    what: &str,
    raise: &str,
) -> Result<Vec<u8>, InputError> {
    let read = if path.as_os_str() == "-" {
        take_limited(std::io::stdin().lock(), limit)
    } else {
        std::fs::File::open(path).and_then(|f| take_limited(f, limit))
    };
    match read {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(InputError::TooLong {
            label: label(path, what),
            limit,
            raise: if raise.is_empty() {
                "give a smaller one"
            } else {
                raise
            }
            .to_string(),
        }),
        Err(source) => Err(InputError::Unreadable {
            label: label(path, what),
            source,
        }),
    }
}

/// [`read_limited`], as UTF-8 text.
pub(crate) fn read_limited_text(
    path: &Path,
    limit: u64,
    what: &str,
    raise: &str,
) -> Result<String, InputError> {
    let bytes = read_limited(path, limit, what, raise)?;
    String::from_utf8(bytes).map_err(|source| InputError::NotUtf8 {
        label: label(path, what),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_source_stops_one_byte_past_the_limit() {
        assert_eq!(take_limited(std::io::repeat(0), 10).unwrap(), None);
        assert_eq!(
            take_limited(&b"0123456789"[..], 10).unwrap(),
            Some(b"0123456789".to_vec())
        );
        let e = read_limited(Path::new("/dev/zero"), 1000, "payload file", "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "payload file /dev/zero is longer than the 1000 byte limit; give a smaller one"
        );
    }
}
