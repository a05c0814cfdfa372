//! Unit tests of the ruleset, the scanner and the guard.

use super::*;

const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

fn rules_of(text: &str) -> Vec<&'static str> {
    Scanner::new()
        .scan_text(text)
        .into_iter()
        .map(|f| f.rule)
        .collect()
}

#[test]
fn each_rule_finds_its_kind_of_secret() {
    let gh = format!("ghp_{}", &"a1B2c3D4e5".repeat(4)[..36]);
    let cases = [
        (format!("key {AWS_ID} here"), "aws-access-key"),
        (format!("ASIA{}", "Y3FMOSBIEXAMPLE1"), "aws-access-key"),
        (format!("aws_secret_access_key = {AWS_SECRET}"), "aws-secret-key"),
        (format!("token: {gh}"), "github-token"),
        (format!("AWS_ACCESS_KEY_ID={AWS_ID}"), "aws-access-key"),
        (gh.clone(), "github-token"),
        (format!("github_pat_{}", "11ABCDEFG0123456789_abcdefXYZ"), "github-token"),
        ("glpat-abcdefghij0123456789".to_string(), "gitlab-token"),
        ("xoxb-123456789012-abcdefABCDEF".to_string(), "slack-token"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
                .to_string(),
            "private-key",
        ),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".to_string(),
            "jwt",
        ),
        ("password=Zx9#kQ2!vLp7Wm".to_string(), "generic-secret"),
        // A random value with a dot in it is no code path.
        ("VAULT_TOKEN=hvs.CAESIJ7kPq2Wz9LmXr4Tb".to_string(), "generic-secret"),
        ("token = Zx9.kQ2vLp7Wm".to_string(), "generic-secret"),
        ("secret: ab.Qw2mX8pL3aB".to_string(), "generic-secret"),
        // A URL that carries credentials is still a secret.
        (
            "token_url: https://bot:Zx9kQ2vLp7Wm@hooks.example.com/x".to_string(),
            "generic-secret",
        ),
        (
            "token = https://example.com/cb?sig=Zx9kQ2vLp7Wm3".to_string(),
            "generic-secret",
        ),
    ];
    for (text, rule) in cases {
        assert_eq!(rules_of(&text), [rule], "{text}");
    }
}

#[test]
fn near_misses_are_not_secrets() {
    for text in [
        "AKIA is a prefix; AKIA1234 is too short",
        "password=changeme",
        "AWS_SECRET_TOKEN=from-the-vault-at-deploy",
        "password = ${DB_PASSWORD}",
        "secret=xxxxxxxxxxxxxxxx",
        "max_tokens = 2048",
        "token_count: 123456789012345",
        "-----BEGIN CERTIFICATE-----",
        "ghp_short",
        "eyJhbGciOiJIUzI1NiJ9 alone",
        "xoxb-short",
        "\"token_uri\": \"https://oauth2.googleapis.com/token\"",
        "auth_endpoint = http://127.0.0.1:8080/v2/auth",
        "ANTHROPIC_API_KEY=sk-ant-api03-your-key-goes-here-please-replace-me",
        "password: <replace-with-a-strong-one-2024>",
        "db_password=Changeme2024!",
        "api_key=PLACEHOLDER_123_abc",
        // Code that names where a secret lives.
        "const token = session.accessToken;",
        "secretKey: process.env.SECRET_KEY,",
        "password=settings.DATABASE_PASSWORD",
        "Token: cfg.GitHubToken,",
        "token: this.authService.getToken()",
        "let secret = config.secrets.signingKey2;",
        "apiKey: import.meta.env.VITE_API_KEY",
        "String token = BuildConfig.API_TOKEN_V2;",
        "token=e.accessToken||n.refreshToken",
        "auth_token = self.client.oauth2Token!",
        "$token = $this->config->apiToken;",
        "let api_key = Settings::OPENAI_API_KEY;",
        "{token:t.authToken2,secret:e.clientSecret}",
    ] {
        assert_eq!(rules_of(text), Vec::<&str>::new(), "{text}");
    }
}

#[test]
fn a_private_key_cut_short_is_redacted_to_the_end() {
    let text = "before -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA";
    let found = Scanner::new().scan_text(text);
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].start, found[0].end), (7, text.len()));
}

#[test]
fn literal_values_are_found_and_short_ones_are_skipped() {
    let s = Scanner::with_literals(["sk-local-0123456789", "abc"]);
    assert_eq!(s.literal_count(), 1);
    let found = s.scan_text("echo: sk-local-0123456789!");
    assert_eq!(
        found,
        [Finding {
            rule: API_KEY_ENV,
            start: 6,
            end: 25,
            line: 1,
            fingerprint: Fingerprint::of(API_KEY_ENV, b"sk-local-0123456789"),
        }]
    );
    assert!(s.scan_text("abc abc").is_empty());
}

#[test]
fn redaction_replaces_the_secret_and_reports_the_markers_span() {
    let body = Value::Object(vec![
        ("answer".into(), Value::str(format!("id {AWS_ID} ok"))),
        (
            "tasks".into(),
            Value::Array(vec![Value::str("clean"), Value::str(format!("a/{AWS_ID}"))]),
        ),
    ]);
    let Screened::Redacted(out, hits) = Guard::default().check(&body) else {
        panic!("expected a redaction");
    };
    assert_eq!(
        out.get("answer").and_then(Value::as_str),
        Some("id [REDACTED:aws-access-key] ok")
    );
    assert!(!out.canonical().contains(AWS_ID));
    assert_eq!(hits.len(), 2);
    assert_eq!(
        (hits[0].path.as_str(), hits[0].start, hits[0].end),
        ("/answer", 3, 3 + marker("aws-access-key").len())
    );
    assert_eq!(hits[1].path, "/tasks/1");
}

#[test]
fn block_refuses_allow_writes_and_runtime_values_are_always_redacted() {
    let body = Value::str(format!("{AWS_ID} and sk-local-0123456789"));
    let block = Guard::new(
        Scanner::new(),
        SecretsPolicy {
            mode: Mode::Block,
            ..SecretsPolicy::default()
        },
    );
    assert!(matches!(block.check(&body), Screened::Blocked(h) if h[0].rule == "aws-access-key"));
    let allow_all = SecretsPolicy {
        mode: Mode::Allow,
        ..SecretsPolicy::default()
    };
    assert_eq!(
        Guard::new(Scanner::new(), allow_all.clone()).check(&body),
        Screened::Clean
    );
    let keyed = Guard::new(Scanner::with_literals(["sk-local-0123456789"]), allow_all);
    let Screened::Redacted(out, hits) = keyed.check(&body) else {
        panic!("the key value is redacted even under allow");
    };
    assert_eq!(hits.len(), 1);
    assert_eq!(
        out.as_str(),
        Some(format!("{AWS_ID} and [REDACTED:api-key-env]").as_str())
    );
    let mut allow = BTreeSet::new();
    allow.insert("aws-access-key".to_string());
    let per_rule = Guard::new(
        Scanner::new(),
        SecretsPolicy {
            mode: Mode::Redact,
            allow,
            ..SecretsPolicy::default()
        },
    );
    assert_eq!(per_rule.check(&body), Screened::Clean);
}

#[test]
fn the_policy_table_is_checked() {
    let t: toml::Table = toml::from_str(
        "mode = \"block\"\nallow = [\"jwt\"]\nallow_fingerprints = [\"0123456789ABCDEF\"]",
    )
    .unwrap();
    let p = SecretsPolicy::from_toml(&t).unwrap();
    assert_eq!(p.mode, Mode::Block);
    assert!(p.allow.contains("jwt"));
    assert_eq!(
        p.allow_fingerprints
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>(),
        ["0123456789abcdef"]
    );
    for (text, needle) in [
        ("mode = \"loud\"", "unknown secrets mode"),
        ("allow = [\"nope\"]", "names no rule"),
        ("allow = [\"api-key-env\"]", "always redacted"),
        ("colour = 1", "no key"),
        ("mode = 1", "wrong type"),
        ("allow_fingerprints = \"0123456789abcdef\"", "wrong type"),
        ("allow_fingerprints = [1]", "as strings"),
        ("allow_fingerprints = [\"0123\"]", "16 hex digits"),
        (
            "allow_fingerprints = [\"0123456789abcdeg\"]",
            "16 hex digits",
        ),
        (
            "allow_fingerprints = [\"0123456789abcdef0\"]",
            "16 hex digits",
        ),
        ("allow_fingerprints = [\"ééééééééc\"]", "16 hex digits"),
    ] {
        let t: toml::Table = toml::from_str(text).unwrap();
        let e = SecretsPolicy::from_toml(&t).unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn entropy_is_in_bits_per_byte() {
    assert_eq!(entropy(""), 0.0);
    assert_eq!(entropy("aaaa"), 0.0);
    assert!((entropy("abcd") - 2.0).abs() < 1e-9);
}

#[test]
fn a_fingerprint_is_sha256_of_the_rule_a_nul_and_the_secret() {
    // SHA-256("aws-access-key\0AKIAIOSFODNN7EXAMPLE"), computed apart from this code.
    let fp = Fingerprint::of("aws-access-key", AWS_ID.as_bytes());
    let mut h = sha2::Sha256::new();
    h.update(b"aws-access-key\0AKIAIOSFODNN7EXAMPLE");
    let want: String = h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(fp.to_string(), want);
    assert_eq!(fp.to_string().len(), 16);
    assert_eq!(Fingerprint::parse(&fp.to_string()), Ok(fp));
    assert_eq!(Fingerprint::parse(&fp.to_string().to_uppercase()), Ok(fp));
    // The rule is part of it: the same text found by another rule is another secret.
    assert_ne!(fp, Fingerprint::of("generic-secret", AWS_ID.as_bytes()));
    assert_ne!(
        fp,
        Fingerprint::of("aws-access-key", b"AKIAIOSFODNN7EXAMPLF")
    );
}

#[test]
fn findings_name_their_rule_line_and_fingerprint() {
    let text = format!("first line\nkey = {AWS_ID}\n\n  password=Zx9#kQ2!vLp7Wm\nlast {AWS_ID}");
    let found = Scanner::new().scan_text(&text);
    let got: Vec<(&str, usize, &str)> = found
        .iter()
        .map(|f| (f.rule(), f.line(), &text[f.span()]))
        .collect();
    assert_eq!(
        got,
        [
            ("aws-access-key", 2, AWS_ID),
            ("generic-secret", 4, "Zx9#kQ2!vLp7Wm"),
            ("aws-access-key", 5, AWS_ID),
        ]
    );
    // The same secret twice: one fingerprint, wherever it is.
    assert_eq!(found[0].fingerprint(), found[2].fingerprint());
    assert_eq!(
        found[0].fingerprint(),
        Fingerprint::of("aws-access-key", AWS_ID.as_bytes())
    );
    assert_ne!(found[0].fingerprint(), found[1].fingerprint());
}

#[test]
fn invalid_utf8_hides_no_key_and_keeps_spans_lines_and_fingerprints() {
    let clean = format!("a\nid={AWS_ID} x\npassword=Zx9#kQ2!vLp7Wm\n");
    let want: Vec<(&str, usize, Fingerprint)> = Scanner::new()
        .scan_text(&clean)
        .iter()
        .map(|f| (f.rule(), f.line(), f.fingerprint()))
        .collect();
    assert_eq!(want.len(), 2);
    // Invalid bytes right before, between and after the keys, a lone continuation byte, a
    // truncated sequence and an overlong encoding.
    let mut bytes = b"\xff\xfe a\n".to_vec();
    let at = bytes.len();
    bytes.extend_from_slice(&clean.as_bytes()[2..]);
    bytes.splice(at + 3..at + 3, *b"\x80");
    bytes.extend_from_slice(b"\xe2\x84 \xc0\xaf");
    let got = Scanner::new().scan_bytes(&bytes);
    let got_plain: Vec<(&str, usize, Fingerprint)> = got
        .iter()
        .map(|f| (f.rule(), f.line(), f.fingerprint()))
        .collect();
    assert_eq!(got_plain, want);
    // The spans are the bytes given.
    assert_eq!(&bytes[got[0].span()], AWS_ID.as_bytes());
    // Valid UTF-8 gives what scan_text gives.
    assert_eq!(
        Scanner::new().scan_bytes(clean.as_bytes()),
        Scanner::new().scan_text(&clean)
    );
    // An invalid byte inside a generic value is part of the value, as U+FFFD would be; the
    // fingerprint is over the bytes as they are.
    let odd = b"password=Zx9#kQ2\xff!vLp7Wm";
    let f = &Scanner::new().scan_bytes(odd)[0];
    assert_eq!(&odd[f.span()], &odd[9..]);
    assert_eq!(
        f.fingerprint(),
        Fingerprint::of("generic-secret", &odd[9..])
    );
}

#[test]
fn allowed_fingerprints_accept_that_secret_and_no_other() {
    let other = "AKIAQX7RTY2ZW4NB9K3M";
    let body = Value::str(format!("{AWS_ID} and {other} and sk-local-0123456789"));
    let mut policy = SecretsPolicy {
        mode: Mode::Block,
        ..SecretsPolicy::default()
    };
    policy
        .allow_fingerprints
        .insert(Fingerprint::of("aws-access-key", AWS_ID.as_bytes()));
    // The runtime value's fingerprint cannot allow it either.
    policy
        .allow_fingerprints
        .insert(Fingerprint::of(API_KEY_ENV, b"sk-local-0123456789"));
    let guard = Guard::new(
        Scanner::with_literals(["sk-local-0123456789"]),
        policy.clone(),
    );
    let Screened::Blocked(hits) = guard.check(&body) else {
        panic!("the other key and the runtime value are still refused");
    };
    let rules: Vec<(&str, usize)> = hits.iter().map(|h| (h.rule, h.start)).collect();
    assert_eq!(rules, [("aws-access-key", 25), (API_KEY_ENV, 50)]);
    assert_eq!(
        hits[0].fingerprint,
        Fingerprint::of("aws-access-key", other.as_bytes())
    );
    // Recorded with the hit.
    let v = hits[0].to_value();
    assert_eq!(
        v.get("fingerprint").and_then(Value::as_str),
        Some(hits[0].fingerprint.to_string().as_str())
    );
    // Redact mode: the allowed key stays, the other becomes a marker.
    policy.mode = Mode::Redact;
    let Screened::Redacted(out, _) = Guard::new(Scanner::new(), policy).check(&body) else {
        panic!("the other key is redacted");
    };
    assert_eq!(
        out.as_str(),
        Some(format!("{AWS_ID} and [REDACTED:aws-access-key] and sk-local-0123456789").as_str())
    );
}

#[test]
fn the_rules_are_listed_with_what_they_find() {
    let listed: Vec<(&str, &str)> = rules().collect();
    assert_eq!(listed.len(), RULES.len());
    for (id, what) in listed {
        assert!(!what.is_empty(), "{id}");
        assert!(
            id.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "{id} is kebab-case"
        );
    }
}

#[test]
fn identifiers_read_as_words_and_random_strings_do_not() {
    for id in [
        "e",
        "t2",
        "_a",
        "accessToken",
        "GitHubToken",
        "API_TOKEN_V2",
        "oauth2Token",
        "s3Bucket",
        "HTTPServer",
        "XMLHttpRequest",
        "sha256Sum",
        "DATABASE_PASSWORD",
        "getURL",
        "x509Cert",
    ] {
        assert!(word_like(id.as_bytes()), "{id}");
    }
    for id in [
        "Qw2mX8pL3aB",
        "kQwmXpLaBzR",
        "CAESIJ7kPq2Wz9LmXr4Tb",
        "abc12345",
        "a1b2c3",
    ] {
        assert!(!word_like(id.as_bytes()), "{id}");
    }
    for v in [
        "session.accessToken",
        "process.env.SECRET_KEY",
        "a?.b!.cToken",
        "Config::API_KEY",
        "this->token",
        "e.token||n.token",
        "x.y!",
    ] {
        assert!(code_path(v), "{v}");
    }
    for v in [
        "accessToken",
        "e||n",
        "hvs.CAESIJ7kPq2Wz9LmXr4Tb",
        "a.b.c1d2e3f4",
        "1a.b",
        "a.",
        "a..b",
        "a.b-c",
    ] {
        assert!(!code_path(v), "{v}");
    }
}
