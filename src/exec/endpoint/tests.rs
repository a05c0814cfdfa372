//! Unit tests of the endpoint policy: every spelling of an address, what each policy admits,
//! URL shapes and key variable names.

use std::net::{Ipv4Addr, Ipv6Addr};

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
        assert!(matches!(r, UrlRefusal::NotLocal { .. }), "{u}: {r}");
        assert!(r.to_string().contains("is_local = true"), "{u}: {r}");
        // Typed on the command line, where loopback counts as the user's own choice: refused
        // all the same, since it is not this host that answers.
        let r = check_url(u, &cli()).expect_err(u);
        assert_eq!(r.class(), Some(AddrClass::Loopback), "{u}: {r}");
        assert!(r.to_string().contains("routed off this host"), "{u}: {r}");
        // The same rule at connection time, for a name that resolves to one of them.
        let Some(url::Host::Ipv6(a)) = url::Url::parse(u).unwrap().host() else {
            panic!("{u}")
        };
        let a = IpAddr::V6(a);
        assert!(!is_direct_loopback(a), "{u}");
        assert!(check_addr(a, &repo_local()).is_err(), "{u}");
        assert!(check_addr(a, &repo()).is_err(), "{u}");
        assert!(check_addr(a, &cli()).is_err(), "{u}");
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

/// The command-line flag and a file with `is_local = true` (what a loopback `--chat-url` stands
/// for) give the same answer for every loopback form, direct or embedded, as a literal in the
/// URL and as an address a name resolved to; with `allow_private` on both sides, the embedded
/// forms of private addresses get the same answer too.
#[test]
fn the_flag_and_the_file_give_the_same_answer_for_every_loopback_form() {
    let flag_private = Policy {
        allow_private: true,
        ..cli()
    };
    let file_private = Policy {
        allow_private: true,
        ..file()
    };
    for u in LOOPBACK.iter().chain(EMBEDDED_LOOPBACK) {
        let (flag, file) = (check_url(u, &cli()), check_url(u, &repo_local()));
        assert_eq!(flag.is_ok(), file.is_ok(), "{u}: {flag:?} / {file:?}");
        assert_eq!(flag.is_ok(), !EMBEDDED_LOOPBACK.contains(u), "{u}");
        if let Some(url::Host::Ipv6(a)) = url::Url::parse(u).unwrap().host() {
            let a = IpAddr::V6(a);
            assert_eq!(
                check_addr(a, &cli()).is_ok(),
                check_addr(a, &repo_local()).is_ok(),
                "{u}"
            );
        }
    }
    for u in PRIVATE.iter().chain(METADATA).chain(RESERVED).chain(GLOBAL) {
        let (flag, file) = (check_url(u, &flag_private), check_url(u, &file_private));
        assert_eq!(flag.is_ok(), file.is_ok(), "{u}: {flag:?} / {file:?}");
    }
}

#[test]
fn is_local_needs_a_loopback_host() {
    let e = check_url("https://api.example.com/", &repo_local()).unwrap_err();
    assert!(matches!(e, UrlRefusal::NotLocal { .. }), "{e}");
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
        let e = check_key_env(n).expect_err(n).to_string();
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
        let e = check_key_env(n).expect_err(n).to_string();
        assert!(e.contains("not an environment variable name"), "{n}: {e}");
    }
    for n in ["LOCAL_LLM_API_KEY", "_X", "openai_api_key", "MODEL_KEY"] {
        assert!(matches!(check_key_env(n), Ok(KeyEnv::Unusual(_))), "{n}");
    }
}
