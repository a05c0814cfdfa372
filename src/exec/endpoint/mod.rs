//! Endpoint policy: where a model endpoint may point, and which environment variables may hold
//! its key (reliability §3). Pure: no I/O, no resolver, no environment.
//!
//! A `chat_url` can come from `.forum/runtime.toml`, which arrives with a cloned repository, so
//! whoever edits the repository chooses where requests (and the key) go. Every host is
//! therefore classified and checked against a [`Policy`]:
//!
//! * the URL must be `http` or `https`, carry no credentials, and have a host;
//! * a literal address in any spelling (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`,
//!   `[::ffff:7f00:1]`, `[64:ff9b::a9fe:a9fe]`, a trailing dot...) is parsed by the `url`
//!   crate (the parser reqwest uses) and then classified by [`classify_ip`];
//! * addresses that embed an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are
//!   classified by the IPv4 address inside;
//! * a few names are known without resolving them (`localhost`, `*.localhost`, the cloud
//!   metadata names), for an early, clear refusal;
//! * every other name is left to the resolver, which must call [`check_addr`] on each address
//!   it returns (that is what closes DNS rebinding; it comes with the HTTP client).
//!
//! [`decide`] is the one place that says which class a policy admits, and one address check
//! applies it to a literal in a URL and to every address the resolver returns alike: loopback,
//! whether `is_local = true` or a `--chat-url` typed on the command line admits it, must be the
//! address itself, never a NAT64, 6to4, Teredo or IPv4-compatible form of it (those are routed
//! off the host). A URL typed as a flag and the same URL in a file with `is_local = true` get the
//! same answer.
//!
//! This file holds the policy itself (the classes, [`Policy`], [`decide`], [`check_addr`]);
//! `classify.rs` says which class an address or a well-known name is, `url_check.rs` checks
//! the shape of an endpoint URL and shows it without secrets, and `key_env.rs` vets the names
//! of key variables.

mod classify;
mod key_env;
#[cfg(test)]
mod tests;
mod url_check;

use std::fmt;
use std::net::IpAddr;

#[cfg(test)]
pub(crate) use classify::classify_v6;
pub(crate) use classify::{classify_ip, classify_name};
#[cfg(test)]
pub(crate) use key_env::KNOWN_KEY_ENVS;
pub(crate) use key_env::{KeyEnv, check_key_env};
pub(crate) use url_check::{check_url, display_url};

/// What an address (or a well-known name) is, for the purpose of sending requests to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum AddrClass {
    /// Globally routed unicast: allowed.
    Global,
    /// 127/8, `::1`, `localhost`: only for `is_local = true` or a URL typed on the command line.
    Loopback,
    /// RFC 1918, CGNAT (100.64/10), link-local, unique-local and site-local IPv6: only with
    /// `allow_private`. CGNAT is here rather than in `Reserved` because overlay networks
    /// (Tailscale, for one) put LAN model servers there.
    Private,
    /// A cloud metadata address or name: refused always.
    Metadata,
    /// Unspecified, documentation, benchmarking, multicast, broadcast, reserved and other
    /// addresses that are not global unicast: refused always.
    Reserved,
}

impl AddrClass {
    /// A lower-case name for messages and JSON.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AddrClass::Global => "global",
            AddrClass::Loopback => "loopback",
            AddrClass::Private => "private",
            AddrClass::Metadata => "metadata",
            AddrClass::Reserved => "reserved",
        }
    }
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an endpoint was configured; decides whether a loopback URL counts as the user's own
/// explicit choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Typed on the command line (`--chat-url`, `--cheap-chat-url`...): a loopback URL here is
    /// the user's explicit choice and is treated as local.
    CommandLine,
    /// A file the user named (`--runtime-config FILE`).
    UserFile,
    /// The repository's `.forum/runtime.toml`, which arrives with a clone: it gets nothing
    /// beyond the policy written in it.
    RepoConfig,
}

impl Origin {
    /// A lower-case name for messages and JSON.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Origin::CommandLine => "command-line",
            Origin::UserFile => "runtime-config",
            Origin::RepoConfig => "repository",
        }
    }
}

/// The policy one endpoint is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `is_local = true`: the endpoint must be loopback (in the URL and from the resolver) and
    /// no key is sent to it.
    pub is_local: bool,
    /// `allow_private = true` or `--allow-private`: private and link-local ranges are allowed.
    pub(crate) allow_private: bool,
    /// Where the endpoint came from.
    pub(crate) origin: Origin,
}

impl Policy {
    /// The strictest policy for an endpoint from `origin`.
    pub fn strict(origin: Origin) -> Policy {
        Policy {
            is_local: false,
            allow_private: false,
            origin,
        }
    }

    /// Whether a key may be sent to this endpoint.
    pub(crate) fn sends_key(&self) -> bool {
        !self.is_local
    }
}

/// Why an endpoint is refused. Messages never contain credentials, query strings or keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UrlRefusal {
    /// The text is not a URL.
    #[error("{url} is not a valid URL: {reason}")]
    Invalid { url: String, reason: String },
    /// Not http or https.
    #[error("scheme {scheme:?} is not allowed for an endpoint; use http or https")]
    Scheme { scheme: String },
    /// A user name or password inside the URL.
    #[error(
        "{url}: credentials in the URL are not allowed; name the key variable with api_key_env"
    )]
    Credentials { url: String },
    /// No host at all.
    #[error("{url}: the URL has no host")]
    NoHost { url: String },
    /// The host's class is not admitted by the policy.
    #[error("{url}: host {host} is {class}: {why}")]
    Denied {
        url: String,
        host: String,
        class: AddrClass,
        why: Denial,
    },
    /// `is_local = true` with a host that is not loopback.
    #[error(
        "{url}: is_local = true needs a host that is loopback itself (127.0.0.1, [::1] or localhost), not {host}"
    )]
    NotLocal { url: String, host: String },
}

impl UrlRefusal {
    /// The class that caused a [`UrlRefusal::Denied`], if that is what this is.
    #[cfg(test)]
    pub(crate) fn class(&self) -> Option<AddrClass> {
        match self {
            UrlRefusal::Denied { class, .. } => Some(*class),
            _ => None,
        }
    }
}

/// The host of a checked URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CheckedHost {
    /// A literal address (after the `url` crate's parsing), with its class.
    Addr(IpAddr, AddrClass),
    /// A name; `known` is its class when it is one of the well-known names, else `None` and
    /// the resolver must check every address it returns with [`check_addr`].
    Name {
        name: String,
        known: Option<AddrClass>,
    },
}

/// A URL that passed [`check_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckedUrl {
    /// The URL as the `url` crate normalised it (this is what the client must use).
    pub(crate) url: url::Url,
    /// Its host.
    pub(crate) host: CheckedHost,
    /// The URL without credentials, query or fragment, for messages and the ledger.
    pub(crate) display: String,
    /// Whether a key may be sent (false for `is_local`).
    pub(crate) sends_key: bool,
}

impl CheckedUrl {
    /// Whether the host is loopback (a loopback literal or a loopback name).
    #[cfg(test)]
    pub(crate) fn is_loopback(&self) -> bool {
        matches!(
            self.host,
            CheckedHost::Addr(ip, AddrClass::Loopback) if is_direct_loopback(ip)
        ) || matches!(
            self.host,
            CheckedHost::Name {
                known: Some(AddrClass::Loopback),
                ..
            }
        )
    }
}

/// Why a policy does not admit an address: the reason a [`UrlRefusal::Denied`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Denial {
    /// A cloud metadata address.
    #[error("cloud metadata endpoints are refused always")]
    Metadata,
    /// Reserved, documentation or multicast.
    #[error("not a global unicast address (reserved, documentation or multicast)")]
    Reserved,
    /// Loopback named by the repository's config without `is_local`.
    #[error(
        "loopback is reached from the repository's config only with is_local = true (which sends no key)"
    )]
    LoopbackFromRepo,
    /// Loopback named elsewhere without `is_local` and not typed on the command line.
    #[error(
        "loopback needs is_local = true (which sends no key) or a --chat-url typed on the command line"
    )]
    LoopbackNeedsLocal,
    /// A private or global address for an `is_local` endpoint.
    #[error("is_local = true allows loopback addresses only")]
    LocalIsLoopbackOnly,
    /// A private or link-local address without `allow_private`.
    #[error("private and link-local addresses need allow_private = true or --allow-private")]
    PrivateNeedsAllow,
    /// 127.0.0.1 in a form (NAT64, 6to4, Teredo, IPv4-compatible) routed off this host.
    #[error(
        "it embeds a loopback address in a form routed off this host (NAT64, 6to4, Teredo or IPv4-compatible); a --chat-url reaches this host only as 127.0.0.1, [::1], [::ffff:127.0.0.1] or localhost"
    )]
    EmbeddedLoopback,
}

/// Says whether `policy` admits an address of `class`; the reason otherwise.
pub(crate) fn decide(class: AddrClass, policy: &Policy) -> Result<(), Denial> {
    match class {
        AddrClass::Metadata => Err(Denial::Metadata),
        AddrClass::Reserved => Err(Denial::Reserved),
        AddrClass::Loopback => {
            if policy.is_local || policy.origin == Origin::CommandLine {
                Ok(())
            } else {
                Err(match policy.origin {
                    Origin::RepoConfig => Denial::LoopbackFromRepo,
                    _ => Denial::LoopbackNeedsLocal,
                })
            }
        }
        AddrClass::Private if policy.is_local => Err(Denial::LocalIsLoopbackOnly),
        AddrClass::Private => {
            if policy.allow_private {
                Ok(())
            } else {
                Err(Denial::PrivateNeedsAllow)
            }
        }
        AddrClass::Global if policy.is_local => Err(Denial::LocalIsLoopbackOnly),
        AddrClass::Global => Ok(()),
    }
}

/// Whether a connection to `addr` stays on this host: 127/8, `::1`, or an IPv4-mapped 127/8
/// (which [`canonical`] turns into the IPv4 address before anything dials it). The NAT64,
/// 6to4, Teredo and IPv4-compatible forms of 127.0.0.1 are classified as loopback, but they are
/// routed off the host, so they are not loopback for `is_local` nor for a command-line URL.
pub(crate) fn is_direct_loopback(addr: IpAddr) -> bool {
    canonical(addr).is_loopback()
}

/// `addr` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) replaced by its IPv4 address,
/// which is what a dual-stack socket would dial anyway; every other address unchanged.
pub(crate) fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => addr,
        },
        v4 => v4,
    }
}

/// Why `policy` refuses the address `addr` of class `class`, or `None` when it admits it. The
/// one address check: a literal in a URL ([`check_url`]) and every address the resolver returns
/// ([`check_addr`]) both come here, whichever file or flag the endpoint came from.
///
/// Loopback is admitted only as the address itself (127/8, `::1`, or the mapped `::ffff:127.x`
/// that [`canonical`] dials as IPv4), whether `is_local = true` or a `--chat-url` typed on the
/// command line admitted it: the NAT64, 6to4, Teredo and IPv4-compatible forms of 127.0.0.1 are
/// classified as loopback but routed off the host, so neither path dials them.
fn refusal_of(addr: IpAddr, class: AddrClass, policy: &Policy) -> Option<AddrRefusal> {
    if let Err(why) = decide(class, policy) {
        return Some(AddrRefusal::Denied(why));
    }
    if is_direct_loopback(addr) {
        return None;
    }
    if policy.is_local {
        return Some(AddrRefusal::NotLocal);
    }
    (class == AddrClass::Loopback).then_some(AddrRefusal::Denied(Denial::EmbeddedLoopback))
}

/// What [`refusal_of`] found: a class the policy does not admit (and why), or an `is_local`
/// endpoint that is not loopback itself.
enum AddrRefusal {
    Denied(Denial),
    NotLocal,
}

/// Checks one address (a literal, or one the resolver returned) against `policy`.
pub(crate) fn check_addr(addr: IpAddr, policy: &Policy) -> Result<(), UrlRefusal> {
    check_addr_as(addr, policy, &addr.to_string(), &addr.to_string())
}

/// [`check_addr`] with the URL and host a refusal names.
fn check_addr_as(addr: IpAddr, policy: &Policy, url: &str, host: &str) -> Result<(), UrlRefusal> {
    let class = classify_ip(addr);
    match refusal_of(addr, class, policy) {
        None => Ok(()),
        Some(AddrRefusal::Denied(why)) => Err(UrlRefusal::Denied {
            url: url.to_string(),
            host: host.to_string(),
            class,
            why,
        }),
        Some(AddrRefusal::NotLocal) => Err(UrlRefusal::NotLocal {
            url: url.to_string(),
            host: host.to_string(),
        }),
    }
}
