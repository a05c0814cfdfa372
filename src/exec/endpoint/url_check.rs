//! An endpoint URL checked before anything connects: scheme, no credentials, a host, and the
//! host's class against the policy; and the URL as messages show it (never a secret).

use std::net::IpAddr;

use super::{
    CheckedHost, CheckedUrl, Policy, UrlRefusal, canonical, check_addr_as, classify_ip,
    classify_name, decide,
};

/// The URL for messages: scheme, host, port and path; never credentials, query or fragment.
pub(crate) fn display_url(u: &url::Url) -> String {
    let mut s = format!("{}://", u.scheme());
    match u.host() {
        Some(url::Host::Ipv6(a)) => s.push_str(&format!("[{a}]")),
        Some(h) => s.push_str(&h.to_string()),
        None => {}
    }
    if let Some(p) = u.port() {
        s.push_str(&format!(":{p}"));
    }
    s.push_str(u.path());
    s
}

/// What to show of a string that did not parse as a URL: everything before any `@`, `?` or
/// `#` is dropped or cut so a typed password never reaches a message.
fn display_unparsed(text: &str) -> String {
    let t = text.trim();
    let t = match t.rfind('@') {
        Some(at) => match t.find("://") {
            Some(p) if p < at => format!("{}://…@{}", &t[..p], &t[at + 1..]),
            _ => format!("…@{}", &t[at + 1..]),
        },
        None => t.to_string(),
    };
    let cut = t.find(['?', '#']).unwrap_or(t.len());
    let shown: String = t[..cut].chars().take(200).collect();
    format!("{shown:?}")
}

/// Parses and checks an endpoint URL against `policy`. An IPv4-mapped literal
/// (`[::ffff:127.0.0.1]`) comes back with its IPv4 address as the host, so the connection goes
/// where the check looked.
pub(crate) fn check_url(text: &str, policy: &Policy) -> Result<CheckedUrl, UrlRefusal> {
    let mut u = url::Url::parse(text).map_err(|e| UrlRefusal::Invalid {
        url: display_unparsed(text),
        reason: e.to_string(),
    })?;
    let display = display_url(&u);
    if let Some(url::Host::Ipv6(a)) = u.host()
        && let IpAddr::V4(v4) = canonical(IpAddr::V6(a))
    {
        // Cannot fail: the URL already has a host.
        let _ = u.set_ip_host(IpAddr::V4(v4));
    }
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(UrlRefusal::Scheme {
            scheme: u.scheme().to_string(),
        });
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(UrlRefusal::Credentials { url: display });
    }
    let (host, class, shown) = match u.host() {
        None => return Err(UrlRefusal::NoHost { url: display }),
        Some(url::Host::Ipv4(a)) => {
            let ip = IpAddr::V4(a);
            let c = classify_ip(ip);
            (CheckedHost::Addr(ip, c), Some(c), a.to_string())
        }
        Some(url::Host::Ipv6(a)) => {
            let ip = IpAddr::V6(a);
            let c = classify_ip(ip);
            (CheckedHost::Addr(ip, c), Some(c), format!("[{a}]"))
        }
        Some(url::Host::Domain(d)) => {
            if d.is_empty() {
                return Err(UrlRefusal::NoHost { url: display });
            }
            let known = classify_name(d);
            (
                CheckedHost::Name {
                    name: d.to_string(),
                    known,
                },
                known,
                d.to_string(),
            )
        }
    };
    match (&host, class) {
        // A literal address: the one address check, as the resolver's addresses get it.
        (CheckedHost::Addr(ip, _), _) => check_addr_as(*ip, policy, &display, &shown)?,
        (CheckedHost::Name { .. }, Some(c)) => {
            decide(c, policy).map_err(|why| UrlRefusal::Denied {
                url: display.clone(),
                host: shown.clone(),
                class: c,
                why,
            })?;
        }
        // An unknown name: only the resolver can tell, but is_local needs loopback here.
        (CheckedHost::Name { .. }, None) if policy.is_local => {
            return Err(UrlRefusal::NotLocal {
                url: display,
                host: shown,
            });
        }
        (CheckedHost::Name { .. }, None) => {}
    }
    Ok(CheckedUrl {
        url: u,
        host,
        display,
        sends_key: policy.sends_key(),
    })
}
