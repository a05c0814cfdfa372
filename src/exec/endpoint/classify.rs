//! Address classes: which class a literal address (any IPv4 or IPv6 spelling, embedded IPv4
//! forms included) or a well-known name belongs to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::AddrClass;

/// The class of a well-known name (case-insensitive, with or without a trailing dot), or
/// `None` for a name only the resolver can classify.
pub(crate) fn classify_name(name: &str) -> Option<AddrClass> {
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
pub(crate) fn classify_ip(addr: IpAddr) -> AddrClass {
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
pub(crate) fn classify_v4(a: Ipv4Addr) -> AddrClass {
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
pub(crate) fn classify_v6(a: Ipv6Addr) -> AddrClass {
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
