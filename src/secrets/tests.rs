//! Unit tests of the ruleset, the scanner and the guard.

use super::*;

const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

fn rules_of(text: &str) -> Vec<&'static str> {
    Scanner::new()
        .scan(text)
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
    ] {
        assert_eq!(rules_of(text), Vec::<&str>::new(), "{text}");
    }
}

#[test]
fn a_private_key_cut_short_is_redacted_to_the_end() {
    let text = "before -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA";
    let found = Scanner::new().scan(text);
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].start, found[0].end), (7, text.len()));
}

#[test]
fn literal_values_are_found_and_short_ones_are_skipped() {
    let s = Scanner::with_literals(["sk-local-0123456789", "abc"]);
    assert_eq!(s.literal_count(), 1);
    let found = s.scan("echo: sk-local-0123456789!");
    assert_eq!(
        found,
        [Finding {
            rule: API_KEY_ENV,
            start: 6,
            end: 25
        }]
    );
    assert!(s.scan("abc abc").is_empty());
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
    let Checked::Redacted(out, hits) = Guard::default().check(&body) else {
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
    assert!(matches!(block.check(&body), Checked::Blocked(h) if h[0].rule == "aws-access-key"));
    let allow_all = SecretsPolicy {
        mode: Mode::Allow,
        ..SecretsPolicy::default()
    };
    assert_eq!(
        Guard::new(Scanner::new(), allow_all.clone()).check(&body),
        Checked::Clean
    );
    let keyed = Guard::new(Scanner::with_literals(["sk-local-0123456789"]), allow_all);
    let Checked::Redacted(out, hits) = keyed.check(&body) else {
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
        },
    );
    assert_eq!(per_rule.check(&body), Checked::Clean);
}

#[test]
fn the_policy_table_is_checked() {
    let t: toml::Table = toml::from_str("mode = \"block\"\nallow = [\"jwt\"]").unwrap();
    let p = SecretsPolicy::from_toml(&t).unwrap();
    assert_eq!(p.mode, Mode::Block);
    assert!(p.allow.contains("jwt"));
    for (text, needle) in [
        ("mode = \"loud\"", "unknown secrets mode"),
        ("allow = [\"nope\"]", "names no rule"),
        ("allow = [\"api-key-env\"]", "always redacted"),
        ("colour = 1", "no key"),
        ("mode = 1", "wrong type"),
    ] {
        let t: toml::Table = toml::from_str(text).unwrap();
        let e = SecretsPolicy::from_toml(&t).unwrap_err();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn entropy_is_in_bits_per_byte() {
    assert_eq!(entropy(""), 0.0);
    assert_eq!(entropy("aaaa"), 0.0);
    assert!((entropy("abcd") - 2.0).abs() < 1e-9);
}
