//! The little of HTTP/1.1 the proxy and the bridge need on blocking streams: reading a request
//! head, writing a one-line refusal, and piping two streams into each other until both ends
//! are done.

use std::io::{self, BufRead, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;

/// The longest request head the proxy reads.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// A request head: the request line's three parts and the header lines as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) version: String,
    pub(crate) headers: Vec<(String, String)>,
}

/// Reads a request head up to its empty line; `Ok(None)` when the peer closed before sending
/// anything, an error for a head that is malformed or longer than [`MAX_HEAD`].
pub(crate) fn read_head(r: &mut impl BufRead) -> io::Result<Option<Head>> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
    let mut lines = Vec::new();
    let mut total = 0usize;
    loop {
        let mut line = Vec::new();
        let n = r
            .take((MAX_HEAD - total + 1) as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return if lines.is_empty() {
                Ok(None)
            } else {
                Err(bad("the request head ended early"))
            };
        }
        total += n;
        if total > MAX_HEAD {
            return Err(bad("the request head is too long"));
        }
        let text = String::from_utf8(line).map_err(|_| bad("the request head is not UTF-8"))?;
        let text = text.trim_end_matches(['\r', '\n']).to_string();
        if text.is_empty() {
            if lines.is_empty() {
                continue; // a stray empty line before the request, as RFC 9112 allows
            }
            break;
        }
        lines.push(text);
    }
    let mut parts = lines[0].split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("the request line is not METHOD TARGET VERSION"));
    };
    let headers = lines[1..]
        .iter()
        .map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| bad("a header line has no colon"))
        })
        .collect::<io::Result<Vec<_>>>()?;
    Ok(Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
    }))
}

/// Writes a short plain-text answer with `status` and one line of `reason`, and closes.
pub(crate) fn answer(w: &mut impl Write, status: u16, reason: &str) -> io::Result<()> {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        502 => "Bad Gateway",
        _ => "Error",
    };
    let body = format!("{reason}\n");
    write!(
        w,
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    w.flush()
}

/// A stream that can be split into a reading and a writing half and shut down one way.
pub(crate) trait Duplex: Read + Write + Send + 'static + Sized {
    fn split(&self) -> io::Result<Self>;
    fn close_write(&self);
    fn close(&self);
}

impl Duplex for UnixStream {
    fn split(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
    fn close(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

impl Duplex for std::net::TcpStream {
    fn split(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn close_write(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
    fn close(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

/// Copies `a` to `b` and `b` to `a`. When `a` (the client) ends its half, `b`'s writing half is
/// closed and `b`'s answer still flows back; when `b` (the server) is done, the exchange is over
/// and `a` is closed both ways, which also ends the copy the other way.
pub(crate) fn pipe<A: Duplex, B: Duplex>(a: A, b: B) -> io::Result<()> {
    let (mut a_read, mut b_write) = (a.split()?, b.split()?);
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut a_read, &mut b_write);
        b_write.close_write();
    });
    let (mut b_read, mut a_write) = (b, a);
    let _ = io::copy(&mut b_read, &mut a_write);
    a_write.close();
    b_read.close();
    let _ = up.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_and_bad_ones_are_refused() {
        let raw = b"\r\nCONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Connection: keep-alive\r\n\r\nrest";
        let mut r = io::BufReader::new(&raw[..]);
        let h = read_head(&mut r).unwrap().unwrap();
        assert_eq!(
            (h.method.as_str(), h.target.as_str()),
            ("CONNECT", "example.com:443")
        );
        assert_eq!(
            h.headers[1],
            ("Proxy-Connection".into(), "keep-alive".into())
        );
        let mut left = String::new();
        r.read_to_string(&mut left).unwrap();
        assert_eq!(left, "rest");
        assert!(
            read_head(&mut io::BufReader::new(&b""[..]))
                .unwrap()
                .is_none()
        );
        for bad in [
            &b"GET / HTTP/1.1\r\nHost"[..],
            b"GET /\r\n\r\n",
            b"GET / HTTP/1.1\r\nnocolon\r\n\r\n",
        ] {
            assert!(read_head(&mut io::BufReader::new(bad)).is_err());
        }
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(read_head(&mut io::BufReader::new(long.as_bytes())).is_err());
    }
}
