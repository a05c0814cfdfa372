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
//! [`decide`] is the one place that says which class a policy admits.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What an address (or a well-known name) is, for the purpose of sending requests to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrClass {
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
    pub fn as_str(self) -> &'static str {
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
    pub fn as_str(self) -> &'static str {
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
    pub allow_private: bool,
    /// Where the endpoint came from.
    pub origin: Origin,
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

    /// Whether the endpoint came from the repository's own `.forum/runtime.toml`.
    pub fn from_repo_config(&self) -> bool {
        self.origin == Origin::RepoConfig
    }

    /// Whether a key may be sent to this endpoint.
    pub fn sends_key(&self) -> bool {
        !self.is_local
    }
}

/// Why an endpoint is refused. Messages never contain credentials, query strings or keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
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
        why: String,
    },
    /// `is_local = true` with a host that is not loopback.
    #[error(
        "{url}: is_local = true needs a host that is loopback itself (127.0.0.1, [::1] or localhost), not {host}"
    )]
    NotLocal { url: String, host: String },
}

impl Refusal {
    /// The class that caused a [`Refusal::Denied`], if that is what this is.
    pub fn class(&self) -> Option<AddrClass> {
        match self {
            Refusal::Denied { class, .. } => Some(*class),
            _ => None,
        }
    }
}

/// The host of a checked URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckedHost {
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
pub struct Checked {
    /// The URL as the `url` crate normalised it (this is what the client must use).
    pub url: url::Url,
    /// Its host.
    pub host: CheckedHost,
    /// The URL without credentials, query or fragment, for messages and the ledger.
    pub display: String,
    /// Whether a key may be sent (false for `is_local`).
    pub sends_key: bool,
}

impl Checked {
    /// Whether the host is loopback (a loopback literal or a loopback name).
    pub fn is_loopback(&self) -> bool {
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

/// Says whether `policy` admits an address of `class`; the reason otherwise.
pub fn decide(class: AddrClass, policy: &Policy) -> Result<(), String> {
    match class {
        AddrClass::Metadata => Err("cloud metadata endpoints are refused always".into()),
        AddrClass::Reserved => {
            Err("not a global unicast address (reserved, documentation or multicast)".into())
        }
        AddrClass::Loopback => {
            if policy.is_local || policy.origin == Origin::CommandLine {
                Ok(())
            } else {
                Err(match policy.origin {
                    Origin::RepoConfig => "loopback is reached from the repository's config only with is_local = true (which sends no key)".into(),
                    _ => "loopback needs is_local = true (which sends no key) or a --chat-url typed on the command line".into(),
                })
            }
        }
        AddrClass::Private if policy.is_local => {
            Err("is_local = true allows loopback addresses only".into())
        }
        AddrClass::Private => {
            if policy.allow_private {
                Ok(())
            } else {
                Err(
                    "private and link-local addresses need allow_private = true or --allow-private"
                        .into(),
                )
            }
        }
        AddrClass::Global if policy.is_local => {
            Err("is_local = true allows loopback addresses only".into())
        }
        AddrClass::Global => Ok(()),
    }
}

/// Whether a connection to `addr` stays on this host: 127/8, `::1`, or an IPv4-mapped 127/8
/// (which [`canonical`] turns into the IPv4 address before anything dials it). The NAT64,
/// 6to4, Teredo and IPv4-compatible forms of 127.0.0.1 are classified as loopback, but they are
/// routed off the host, so they are not loopback for `is_local`.
pub fn is_direct_loopback(addr: IpAddr) -> bool {
    canonical(addr).is_loopback()
}

/// `addr` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) replaced by its IPv4 address,
/// which is what a dual-stack socket would dial anyway; every other address unchanged.
pub fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => addr,
        },
        v4 => v4,
    }
}

/// Checks one address (a literal, or one the resolver returned) against `policy`.
pub fn check_addr(addr: IpAddr, policy: &Policy) -> Result<(), Refusal> {
    let class = classify_ip(addr);
    decide(class, policy).map_err(|why| Refusal::Denied {
        url: addr.to_string(),
        host: addr.to_string(),
        class,
        why,
    })?;
    if policy.is_local && !is_direct_loopback(addr) {
        return Err(Refusal::NotLocal {
            url: addr.to_string(),
            host: addr.to_string(),
        });
    }
    Ok(())
}

/// The URL for messages: scheme, host, port and path; never credentials, query or fragment.
pub fn display_url(u: &url::Url) -> String {
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
pub fn check_url(text: &str, policy: &Policy) -> Result<Checked, Refusal> {
    let mut u = url::Url::parse(text).map_err(|e| Refusal::Invalid {
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
        return Err(Refusal::Scheme {
            scheme: u.scheme().to_string(),
        });
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(Refusal::Credentials { url: display });
    }
    let (host, class, shown) = match u.host() {
        None => return Err(Refusal::NoHost { url: display }),
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
                return Err(Refusal::NoHost { url: display });
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
    match class {
        Some(c) => {
            decide(c, policy).map_err(|why| Refusal::Denied {
                url: display.clone(),
                host: shown.clone(),
                class: c,
                why,
            })?;
            // is_local: the address itself must be loopback, not one that embeds 127.0.0.1.
            if let CheckedHost::Addr(ip, _) = host
                && policy.is_local
                && !is_direct_loopback(ip)
            {
                return Err(Refusal::NotLocal {
                    url: display,
                    host: shown,
                });
            }
        }
        // An unknown name: only the resolver can tell, but is_local needs loopback here.
        None if policy.is_local => {
            return Err(Refusal::NotLocal {
                url: display,
                host: shown,
            });
        }
        None => {}
    }
    Ok(Checked {
        url: u,
        host,
        display,
        sends_key: policy.sends_key(),
    })
}

/// The class of a well-known name (case-insensitive, with or without a trailing dot), or
/// `None` for a name only the resolver can classify.
pub fn classify_name(name: &str) -> Option<AddrClass> {
    let lower = name.to_ascii_lowercase();
    let n = lower.strip_suffix('.').unwrap_or(&lower);
    if n == "localhost" || n.ends_with(".localhost") {
        return Some(AddrClass::Loopback);
    }
    const METADATA: [&str; 4] = [
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.com",
        "instance-data",
    ];
    if METADATA.contains(&n) || n.starts_with("instance-data.") {
        return Some(AddrClass::Metadata);
    }
    None
}

/// The cloud metadata addresses: AWS/GCP/Azure/OCI/DigitalOcean/OpenStack, AWS ECS, Alibaba.
const METADATA_V4: [Ipv4Addr; 3] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
];

/// AWS's IPv6 instance metadata address.
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// Classifies an address; IPv4 embedded in IPv6 is classified as IPv4.
pub fn classify_ip(addr: IpAddr) -> AddrClass {
    match addr {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => classify_v6(a),
    }
}

fn in_v4(a: Ipv4Addr, net: [u8; 4], len: u32) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    (u32::from(a) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

/// Classifies an IPv4 address.
pub fn classify_v4(a: Ipv4Addr) -> AddrClass {
    if METADATA_V4.contains(&a) {
        return AddrClass::Metadata;
    }
    const RESERVED: [([u8; 4], u32); 10] = [
        ([0, 0, 0, 0], 8),       // "this network"; 0.0.0.0 reaches the local host on Linux
        ([192, 0, 0, 0], 24),    // IETF protocol assignments
        ([192, 0, 2, 0], 24),    // TEST-NET-1
        ([192, 88, 99, 0], 24),  // 6to4 relay anycast (deprecated)
        ([198, 18, 0, 0], 15),   // benchmarking
        ([198, 51, 100, 0], 24), // TEST-NET-2
        ([203, 0, 113, 0], 24),  // TEST-NET-3
        ([224, 0, 0, 0], 4),     // multicast
        ([240, 0, 0, 0], 4),     // reserved, and 255.255.255.255
        ([255, 255, 255, 255], 32),
    ];
    const PRIVATE: [([u8; 4], u32); 5] = [
        ([10, 0, 0, 0], 8),
        ([172, 16, 0, 0], 12),
        ([192, 168, 0, 0], 16),
        ([169, 254, 0, 0], 16), // link-local (its metadata addresses are caught above)
        ([100, 64, 0, 0], 10),  // CGNAT / overlay networks
    ];
    if in_v4(a, [127, 0, 0, 0], 8) {
        AddrClass::Loopback
    } else if RESERVED.iter().any(|&(n, l)| in_v4(a, n, l)) {
        AddrClass::Reserved
    } else if PRIVATE.iter().any(|&(n, l)| in_v4(a, n, l)) {
        AddrClass::Private
    } else {
        AddrClass::Global
    }
}

fn in_v6(a: Ipv6Addr, net: Ipv6Addr, len: u32) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    (u128::from(a) & mask) == (u128::from(net) & mask)
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("a valid IPv6 literal in the deny table")
}

/// The IPv4 address in bits `from..from+32` of `a`.
fn v4_at(a: Ipv6Addr, from: u32) -> Ipv4Addr {
    Ipv4Addr::from(((u128::from(a) >> (96 - from)) & 0xffff_ffff) as u32)
}

/// Classifies an IPv6 address, extracting embedded IPv4 addresses.
pub fn classify_v6(a: Ipv6Addr) -> AddrClass {
    if a == METADATA_V6 {
        return AddrClass::Metadata;
    }
    if a == Ipv6Addr::UNSPECIFIED {
        return AddrClass::Reserved;
    }
    if a == Ipv6Addr::LOCALHOST {
        return AddrClass::Loopback;
    }
    // ::ffff:0:0/96, IPv4-mapped: the IPv4 address is what a dual-stack socket dials.
    if in_v6(a, v6("::ffff:0:0"), 96) {
        return classify_v4(v4_at(a, 96));
    }
    // ::/96, IPv4-compatible (deprecated): never global, at best reserved.
    if in_v6(a, Ipv6Addr::UNSPECIFIED, 96) {
        return not_global(classify_v4(v4_at(a, 96)), AddrClass::Reserved);
    }
    // 64:ff9b::/96, well-known NAT64 prefix: the translator dials the embedded IPv4.
    if in_v6(a, v6("64:ff9b::"), 96) {
        return classify_v4(v4_at(a, 96));
    }
    // 64:ff9b:1::/48, local-use NAT64: a translator inside the site, so at least private.
    if in_v6(a, v6("64:ff9b:1::"), 48) {
        return not_global(classify_v4(v4_at(a, 96)), AddrClass::Private);
    }
    // 2002::/16, 6to4: the IPv4 address in bits 16-47.
    if in_v6(a, v6("2002::"), 16) {
        return classify_v4(v4_at(a, 16));
    }
    // 2001::/32, Teredo: server IPv4 in bits 32-63, client IPv4 inverted in the last 32.
    if in_v6(a, v6("2001::"), 32) {
        let server = classify_v4(v4_at(a, 32));
        let client = classify_v4(Ipv4Addr::from(!u32::from(v4_at(a, 96))));
        return if client != AddrClass::Global {
            client
        } else {
            server
        };
    }
    const PRIVATE: [(&str, u32); 3] = [
        ("fc00::", 7),  // unique-local (fd00:ec2::254 is caught above)
        ("fe80::", 10), // link-local
        ("fec0::", 10), // site-local (deprecated)
    ];
    if PRIVATE.iter().any(|&(n, l)| in_v6(a, v6(n), l)) {
        return AddrClass::Private;
    }
    const RESERVED: [(&str, u32); 4] = [
        ("100::", 64),      // discard-only
        ("2001:db8::", 32), // documentation
        ("2001::", 23),     // IETF protocol assignments (benchmarking, ORCHID...)
        ("ff00::", 8),      // multicast
    ];
    if RESERVED.iter().any(|&(n, l)| in_v6(a, v6(n), l)) {
        return AddrClass::Reserved;
    }
    // Deny by default: only 2000::/3 is global unicast.
    if in_v6(a, v6("2000::"), 3) {
        AddrClass::Global
    } else {
        AddrClass::Reserved
    }
}

/// `class`, unless it is global, then `floor`.
fn not_global(class: AddrClass, floor: AddrClass) -> AddrClass {
    if class == AddrClass::Global {
        floor
    } else {
        class
    }
}

/// Known provider key variables: they pass without a warning.
pub const KNOWN_KEY_ENVS: [&str; 16] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "DEEPSEEK_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "XAI_API_KEY",
    "FIREWORKS_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "COHERE_API_KEY",
    "PERPLEXITY_API_KEY",
    "CEREBRAS_API_KEY",
    "HUGGINGFACE_API_KEY",
];

/// Words that mark a variable as some other secret (a session token, a password, a signing
/// key); such variables are never sent to a model endpoint.
pub const FORBIDDEN_KEY_WORDS: [&str; 10] = [
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE",
    "ACCESS",
    "SESSION",
    "COOKIE",
    "SIGNING",
];

/// Longest accepted variable name.
pub const MAX_KEY_ENV_LEN: usize = 128;

/// How an `api_key_env` name was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyEnv {
    /// A known provider variable.
    Known,
    /// Accepted, with a warning to show.
    Unusual(String),
}

/// Checks an `api_key_env` name: it must look like a variable name, must not name another
/// kind of secret, and should be a known provider variable.
pub fn check_key_env(name: &str) -> Result<KeyEnv, String> {
    let looks_like_var = !name.is_empty()
        && name.len() <= MAX_KEY_ENV_LEN
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !looks_like_var {
        let shown: String = name.chars().take(60).collect();
        return Err(format!(
            "api_key_env {shown:?} is not an environment variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    if KNOWN_KEY_ENVS.contains(&name) {
        return Ok(KeyEnv::Known);
    }
    let upper = name.to_ascii_uppercase();
    if let Some(w) = FORBIDDEN_KEY_WORDS.iter().find(|w| upper.contains(*w)) {
        return Err(format!(
            "api_key_env {name} is refused: a name containing {w} looks like a credential that is not a model API key"
        ));
    }
    Ok(KeyEnv::Unusual(format!(
        "api_key_env {name} is not a known provider key variable; its value will be sent to the endpoint as a bearer key"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Policy {
        Policy::strict(Origin::CommandLine)
    }
    fn repo() -> Policy {
        Policy::strict(Origin::RepoConfig)
    }
    fn repo_private() -> Policy {
        Policy {
            allow_private: true,
            ..repo()
        }
    }
    fn repo_local() -> Policy {
        Policy {
            is_local: true,
            ..repo()
        }
    }
    fn file() -> Policy {
        Policy::strict(Origin::UserFile)
    }

    /// Loopback spellings: refused from config files without is_local.
    const LOOPBACK: &[&str] = &[
        "http://127.0.0.1/",
        "http://127.0.0.1:8080/v1/chat/completions",
        "http://127.1/",
        "http://127.0.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0x7f.1/",
        "http://0x7f.0.0.1/",
        "http://0177.0.0.1/",
        "http://0177.1/",
        "http://017700000001/",
        "http://127.0.0.1./",
        "http://127.255.255.254/",
        "http://127.1.2.3/",
        "http://%31%32%37.0.0.1/",
        "http://１２７.０.０.１/",
        "http://[::1]/",
        "http://[0:0:0:0:0:0:0:1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[0:0:0:0:0:ffff:7f00:1]/",
        "http://localhost/",
        "http://localhost./",
        "http://LOCALHOST:11434/",
        "http://api.localhost/",
        "http://a.b.localhost./",
        "https://localhost:8443/v1",
        "http://127.0.0.1:80\\@good.example/",
    ];

    /// Addresses that embed 127.0.0.1 but are routed off the host (NAT64, local-use NAT64,
    /// 6to4, Teredo server and client, IPv4-compatible): classified by the embedded address,
    /// so refused where loopback is refused, and never loopback for is_local.
    const EMBEDDED_LOOPBACK: &[&str] = &[
        "http://[64:ff9b::127.0.0.1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[64:ff9b:1::7f00:1]/",
        "http://[2002:7f00:1::]/",
        "http://[2002:7f00:1::1]:8080/v1",
        "http://[2001:0:7f00:1::f7f7:f7f7]/",
        "http://[2001:0:4136:e378::80ff:fffe]/",
        "http://[::127.0.0.1]/",
        "http://[::7f00:1]/",
    ];

    /// Private spellings: refused without allow_private.
    const PRIVATE: &[&str] = &[
        "http://10.0.0.1/",
        "http://10.255.255.255/",
        "http://012.0.0.1/",
        "http://0xa000001/",
        "http://167772161/",
        "http://10.1/",
        "http://172.16.0.1/",
        "http://172.31.255.255/",
        "http://192.168.1.1/",
        "http://192.168.1.1./",
        "http://0xc0a80101/",
        "http://3232235777/",
        "http://0300.0250.1.1/",
        "http://169.254.1.1/",
        "http://100.64.0.1/",
        "http://100.127.255.254/",
        "http://[fc00::1]/",
        "http://[fd12:3456::1]/",
        "http://[fe80::1]/",
        "http://[febf::1]/",
        "http://[fec0::1]/",
        "http://[::ffff:10.0.0.1]/",
        "http://[::ffff:c0a8:101]/",
        "http://[64:ff9b::10.0.0.1]/",
        "http://[64:ff9b::c0a8:101]/",
        "http://[64:ff9b:1::8.8.8.8]/",
        "http://[2002:c0a8:101::1]/",
        "http://[2002:a00:1::]/",
    ];

    /// Metadata spellings: refused whatever the policy.
    const METADATA: &[&str] = &[
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.169.254./",
        "http://2852039166/",
        "http://0xa9fea9fe/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://0251.0376.0251.0376/",
        "http://169.254.43518/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[64:ff9b::169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[64:ff9b:1::a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::]/",
        "http://169.254.170.2/v2/credentials",
        "http://[::ffff:169.254.170.2]/",
        "http://100.100.100.200/latest/meta-data/",
        "http://[::ffff:6464:64c8]/",
        "http://[fd00:ec2::254]/",
        "http://[FD00:EC2:0:0:0:0:0:254]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://metadata.google.internal./",
        "http://METADATA.GOOGLE.INTERNAL/",
        "http://metadata.goog/",
        "http://metadata.azure.com/",
        "http://instance-data/",
        "http://instance-data./",
    ];

    /// Never allowed: reserved ranges.
    const RESERVED: &[&str] = &[
        "http://0.0.0.0/",
        "http://0/",
        "http://0.1.2.3/",
        "http://192.0.2.1/",
        "http://198.51.100.7/",
        "http://203.0.113.9/",
        "http://198.18.0.1/",
        "http://224.0.0.1/",
        "http://239.255.255.250/",
        "http://240.0.0.1/",
        "http://255.255.255.255/",
        "http://4294967295/",
        "http://[::]/",
        "http://[::8.8.8.8]/",
        "http://[ff02::1]/",
        "http://[2001:db8::1]/",
        "http://[100::1]/",
        "http://[2001:2::1]/",
        "http://[4000::1]/",
        "http://[::ffff:0.0.0.0]/",
    ];

    /// Global addresses and names: allowed by every policy without is_local.
    const GLOBAL: &[&str] = &[
        "https://api.openai.com/v1/chat/completions",
        "https://api.anthropic.com/v1/messages",
        "http://8.8.8.8/",
        "http://134744072/",
        "http://1.1.1.1:8080/v1",
        "http://172.32.0.1/",
        "http://172.15.255.255/",
        "http://100.63.255.255/",
        "http://100.128.0.1/",
        "http://169.253.0.1/",
        "http://192.169.0.1/",
        "http://[2606:4700:4700::1111]/",
        "http://[::ffff:8.8.8.8]/",
        "http://[64:ff9b::8.8.8.8]/",
        "http://[2002:808:808::]/",
        "http://[2a00:1450:4001::200e]/",
        "https://localhost.example.com/",
        "https://metadata.google.internal.example.com/",
        "https://example.com./",
    ];

    #[test]
    fn deny_table_spellings() {
        let mut count = 0;
        for (urls, class) in [
            (LOOPBACK, AddrClass::Loopback),
            (PRIVATE, AddrClass::Private),
            (METADATA, AddrClass::Metadata),
            (RESERVED, AddrClass::Reserved),
        ] {
            for u in urls {
                for p in [repo(), file()] {
                    let r = check_url(u, &p).expect_err(u);
                    assert_eq!(r.class(), Some(class), "{u}: {r}");
                }
                count += 1;
            }
        }
        assert!(count >= 60, "only {count} spellings");
    }

    #[test]
    fn what_each_policy_admits() {
        let private_from_cli = Policy {
            allow_private: true,
            ..cli()
        };
        for u in LOOPBACK {
            // Typed on the command line: the user's explicit choice.
            assert!(check_url(u, &cli()).is_ok(), "{u}");
            // is_local = true in a file, even the repository's.
            let c = check_url(u, &repo_local()).unwrap();
            assert!(c.is_loopback() && !c.sends_key, "{u}");
            // allow_private does not open loopback.
            assert!(check_url(u, &repo_private()).is_err(), "{u}");
        }
        for u in PRIVATE {
            assert!(check_url(u, &repo_private()).is_ok(), "{u}");
            assert!(check_url(u, &private_from_cli).is_ok(), "{u}");
            assert!(check_url(u, &cli()).is_err(), "{u}");
            assert!(check_url(u, &repo_local()).is_err(), "{u}");
        }
        let everything = Policy {
            is_local: false,
            allow_private: true,
            origin: Origin::CommandLine,
        };
        for u in METADATA.iter().chain(RESERVED) {
            assert!(check_url(u, &everything).is_err(), "{u}");
            assert!(check_url(u, &repo_local()).is_err(), "{u}");
        }
        for u in GLOBAL {
            for p in [repo(), file(), cli(), repo_private()] {
                let c = check_url(u, &p).unwrap_or_else(|e| panic!("{u}: {e}"));
                assert!(c.sends_key);
            }
            // is_local needs loopback.
            assert!(check_url(u, &repo_local()).is_err(), "{u}");
        }
    }

    #[test]
    fn embedded_loopback_is_not_local() {
        for u in EMBEDDED_LOOPBACK {
            // Classified by the embedded IPv4 address: refused where loopback is refused.
            for p in [repo(), file(), repo_private()] {
                let r = check_url(u, &p).expect_err(u);
                assert_eq!(r.class(), Some(AddrClass::Loopback), "{u}: {r}");
            }
            // is_local needs the connected address itself to be loopback.
            let r = check_url(u, &repo_local()).expect_err(u);
            assert!(matches!(r, Refusal::NotLocal { .. }), "{u}: {r}");
            assert!(r.to_string().contains("is_local = true"), "{u}: {r}");
            // The same rule at connection time, for a name that resolves to one of them.
            let Some(url::Host::Ipv6(a)) = url::Url::parse(u).unwrap().host() else {
                panic!("{u}")
            };
            let a = IpAddr::V6(a);
            assert!(!is_direct_loopback(a), "{u}");
            assert!(check_addr(a, &repo_local()).is_err(), "{u}");
            assert!(check_addr(a, &repo()).is_err(), "{u}");
        }
        // The mapped form does reach loopback: the URL is rewritten to the IPv4 address.
        for u in [
            "http://[::ffff:127.0.0.1]:8080/v1",
            "http://[::ffff:7f00:1]/",
        ] {
            let c = check_url(u, &repo_local()).unwrap();
            assert!(c.is_loopback() && !c.sends_key, "{u}");
            assert_eq!(
                c.url.host(),
                Some(url::Host::Ipv4(Ipv4Addr::LOCALHOST)),
                "{u}"
            );
        }
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert!(check_addr(mapped, &repo_local()).is_ok());
        assert_eq!(canonical(mapped), "127.0.0.2".parse::<IpAddr>().unwrap());
        // Mapped private or global stays refused under is_local.
        for a in ["::ffff:10.0.0.1", "::ffff:8.8.8.8"] {
            let a: IpAddr = a.parse().unwrap();
            assert!(check_addr(a, &repo_local()).is_err(), "{a}");
        }
        for a in ["127.0.0.1", "127.9.9.9", "::1"] {
            let a: IpAddr = a.parse().unwrap();
            assert!(
                is_direct_loopback(a) && check_addr(a, &repo_local()).is_ok(),
                "{a}"
            );
        }
    }

    #[test]
    fn url_shape_is_checked_and_never_echoes_secrets() {
        let p = Policy {
            allow_private: true,
            ..cli()
        };
        for (u, want) in [
            ("ftp://example.com/", "scheme"),
            ("file:///etc/passwd", "scheme"),
            ("gopher://example.com/", "scheme"),
            ("https://user:hunter2@example.com/v1", "credentials"),
            ("https://user@example.com/v1", "credentials"),
            ("http://user@evil.example@127.0.0.1/", "credentials"),
            ("not a url", "not a valid URL"),
            ("http://[fe80::1%25eth0]/", "not a valid URL"),
            ("http://1.2.3.4.5/", "not a valid URL"),
            ("http://256.0.0.1/", "not a valid URL"),
            ("", "not a valid URL"),
        ] {
            let e = check_url(u, &p).expect_err(u).to_string();
            assert!(e.contains(want), "{u}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
        let e = check_url("https://k:hunter2@example.com/v1?key=sk-abc", &p)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2") && !e.contains("sk-abc"), "{e}");
        let e = check_url("htp:/k:hunter2@ex ample?key=sk-abc", &p)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2") && !e.contains("sk-abc"), "{e}");
        let c = check_url("https://api.example.com/v1/chat?key=sk-abc#x", &p).unwrap();
        assert_eq!(c.display, "https://api.example.com/v1/chat");
        assert_eq!(
            c.host,
            CheckedHost::Name {
                name: "api.example.com".into(),
                known: None
            }
        );
    }

    #[test]
    fn is_local_needs_a_loopback_host() {
        let e = check_url("https://api.example.com/", &repo_local()).unwrap_err();
        assert!(matches!(e, Refusal::NotLocal { .. }), "{e}");
        assert!(check_url("http://10.0.0.1/", &repo_local()).is_err());
    }

    #[test]
    fn check_addr_is_what_the_resolver_will_call() {
        let v = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(check_addr(v("8.8.8.8"), &repo()).is_ok());
        assert!(check_addr(v("2606:4700::1"), &repo()).is_ok());
        for a in [
            "127.0.0.1",
            "::1",
            "10.0.0.1",
            "::ffff:10.0.0.1",
            "169.254.169.254",
            "fd00:ec2::254",
            "0.0.0.0",
            "::",
        ] {
            assert!(check_addr(v(a), &repo()).is_err(), "{a}");
        }
        // A name that resolved to loopback under is_local is fine; to anything else it is not.
        assert!(check_addr(v("127.0.0.1"), &repo_local()).is_ok());
        assert!(check_addr(v("8.8.8.8"), &repo_local()).is_err());
        assert!(check_addr(v("169.254.169.254"), &repo_local()).is_err());
    }

    #[test]
    fn teredo_extracts_both_addresses() {
        // Server 65.54.227.120, client 192.168.1.1 (inverted: 3f57:fefe).
        let t: Ipv6Addr = "2001:0:4136:e378:8000:63bf:3f57:fefe".parse().unwrap();
        assert_eq!(classify_v6(t), AddrClass::Private);
        // Client 8.8.8.8 (inverted f7f7:f7f7), server 127.0.0.1.
        let t: Ipv6Addr = "2001:0:7f00:1:0:0:f7f7:f7f7".parse().unwrap();
        assert_eq!(classify_v6(t), AddrClass::Loopback);
        // Both global.
        let t: Ipv6Addr = "2001:0:4136:e378:0:0:f7f7:f7f7".parse().unwrap();
        assert_eq!(classify_v6(t), AddrClass::Global);
    }

    #[test]
    fn key_env_names() {
        for n in KNOWN_KEY_ENVS {
            assert_eq!(check_key_env(n), Ok(KeyEnv::Known), "{n}");
        }
        for n in [
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "DB_PASSWORD",
            "MYSQL_PASSWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SSH_PRIVATE_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "SESSION_ID",
            "COOKIE_JAR",
            "GPG_SIGNING_KEY",
            "my_secret_api_key",
        ] {
            let e = check_key_env(n).expect_err(n);
            assert!(e.contains("refused"), "{n}: {e}");
        }
        for n in [
            "",
            "1KEY",
            "MY-KEY",
            "A B",
            "KEY=x",
            "ÄPI_KEY",
            &"K".repeat(129),
        ] {
            let e = check_key_env(n).expect_err(n);
            assert!(e.contains("not an environment variable name"), "{n}: {e}");
        }
        for n in ["LOCAL_LLM_API_KEY", "_X", "openai_api_key", "MODEL_KEY"] {
            assert!(matches!(check_key_env(n), Ok(KeyEnv::Unusual(_))), "{n}");
        }
    }
}
