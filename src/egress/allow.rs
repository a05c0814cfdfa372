//! The proxy's allowlist: `host:port` entries, from the seat's endpoint URL or from
//! `--sandbox-allow-host HOST[:PORT]`.

use std::fmt;

/// The port an entry without one admits: HTTPS, which is what agents and package tools use.
pub const DEFAULT_PORT: u16 = 443;

/// One `host:port` the proxy admits. The host is kept lower-case, without a trailing dot and
/// without the brackets of an IPv6 literal, so it compares equal to what a client asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Allow {
    host: String,
    port: u16,
}

/// Why a host entry could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowError {
    /// `--sandbox-allow-host` was not `HOST` or `HOST:PORT`.
    #[error("--sandbox-allow-host {0:?}: give HOST or HOST:PORT (an IPv6 address as [ADDR]:PORT)")]
    Shape(String),
    /// Its port is not a number from 1 to 65535.
    #[error("--sandbox-allow-host {0:?}: the port must be a number from 1 to 65535")]
    Port(String),
    /// An endpoint URL without a host.
    #[error("{0}: the endpoint has no host")]
    NoHost(url::Url),
    /// An endpoint URL without a port whose scheme has no default.
    #[error("{0}: the endpoint has no port and no known default")]
    NoPort(url::Url),
}

impl Allow {
    /// An entry for `host` and `port` (the host normalised as the type says).
    pub fn new(host: &str, port: u16) -> Allow {
        Allow {
            host: normal_host(host),
            port,
        }
    }

    /// Parses `HOST[:PORT]` as `--sandbox-allow-host` takes it (`[::1]:8080` for IPv6); a
    /// missing port is [`DEFAULT_PORT`].
    pub fn parse(spec: &str) -> Result<Allow, AllowError> {
        let (host, port) =
            split_host_port(spec).ok_or_else(|| AllowError::Shape(spec.to_string()))?;
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| AllowError::Port(spec.to_string()))?,
        };
        Ok(Allow::new(host, port))
    }

    /// The entry for an endpoint URL: its host and its port (80 or 443 when the URL has none).
    pub fn from_url(url: &url::Url) -> Result<Allow, AllowError> {
        let host = url
            .host_str()
            .ok_or_else(|| AllowError::NoHost(url.clone()))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| AllowError::NoPort(url.clone()))?;
        Ok(Allow::new(host, port))
    }

    /// The host, normalised.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether a request for `host` and `port` is this entry.
    pub fn admits(&self, host: &str, port: u16) -> bool {
        self.port == port && self.host == normal_host(host)
    }
}

impl fmt::Display for Allow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// `host` lower-case, without a trailing dot or IPv6 brackets.
pub(crate) fn normal_host(host: &str) -> String {
    let h = host.trim();
    let h = h
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(h);
    let h = h.strip_suffix('.').unwrap_or(h);
    h.to_ascii_lowercase()
}

/// Splits `host[:port]` or `[v6][:port]`; `None` when the host is empty or the shape is wrong.
pub(crate) fn split_host_port(spec: &str) -> Option<(&str, Option<&str>)> {
    let spec = spec.trim();
    let (host, port) = if let Some(rest) = spec.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':')?)),
        }
    } else {
        match spec.rsplit_once(':') {
            // A bare IPv6 address has more than one colon and no port.
            Some((h, _)) if h.contains(':') => (spec, None),
            Some((h, p)) => (h, Some(p)),
            None => (spec, None),
        }
    };
    let bad = host.is_empty()
        || host
            .chars()
            .any(|c| c.is_whitespace() || "/?#@".contains(c));
    (!bad).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_compare_as_clients_ask() {
        let a = Allow::parse("API.Example.com.:8443").unwrap();
        assert_eq!(a.to_string(), "api.example.com:8443");
        assert!(a.admits("api.example.COM", 8443));
        assert!(!a.admits("api.example.com", 443));
        assert_eq!(Allow::parse("example.com").unwrap().port(), DEFAULT_PORT);
        let v6 = Allow::parse("[::1]:8080").unwrap();
        assert_eq!((v6.host(), v6.port()), ("::1", 8080));
        assert_eq!(v6.to_string(), "[::1]:8080");
        assert!(v6.admits("[::1]", 8080));
        assert_eq!(Allow::parse("::1").unwrap().host(), "::1");
        for bad in [
            "",
            ":80",
            "host:0",
            "host:x",
            "a/b:1",
            "[::1]x",
            "user@host",
        ] {
            assert!(Allow::parse(bad).is_err(), "{bad:?} parsed");
        }
        let u = url::Url::parse("https://api.anthropic.com/v1").unwrap();
        assert_eq!(
            Allow::from_url(&u).unwrap().to_string(),
            "api.anthropic.com:443"
        );
    }
}
