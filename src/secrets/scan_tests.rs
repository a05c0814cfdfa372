//! Unit tests of the hand-written matcher (`scan.rs`): each rule at the start, middle and end
//! of a body, the edges of every prefix and length, and generated texts compared with the
//! ruleset's patterns run by `regex` (`oracle.rs`).

use super::oracle;
use super::scan;
use super::*;

type Found = Vec<(&'static str, usize, usize)>;

fn plain(v: Vec<Finding>) -> Found {
    v.into_iter().map(|f| (f.rule, f.start, f.end)).collect()
}

fn plain_finds(v: Vec<Find>) -> Found {
    v.into_iter().map(|f| (f.rule, f.start, f.end)).collect()
}

fn found(text: &str) -> Found {
    plain(Scanner::new().scan_text(text))
}

/// What the scanner before `scan.rs` reported for `text`.
fn before(text: &str) -> Found {
    plain_finds(merge(oracle::previous(text)))
}

/// What each rule's pattern alone finds in `text`, merged.
fn each_rule(text: &str) -> Found {
    plain_finds(merge(oracle::per_rule(text)))
}

fn covered(found: &Found, len: usize) -> Vec<bool> {
    let mut v = vec![false; len];
    for (_, start, end) in found {
        v[*start..*end].iter_mut().for_each(|b| *b = true);
    }
    v
}

/// Every byte `oracle` covers, the scanner covers too.
fn loses_nothing(text: &str, oracle: Vec<Find>) -> bool {
    let (old, new) = (
        covered(&plain_finds(oracle), text.len()),
        covered(&found(text), text.len()),
    );
    old.iter().zip(&new).all(|(o, n)| !*o || *n)
}

const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const URL_SAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const LOWER_HEX: &[u8] = b"0123456789abcdef";

/// `n` characters of `alphabet`, the same for the same `n` and alphabet on every run (a
/// xorshift seeded by both): random enough to clear every entropy floor, and never a literal
/// in the source.
fn fill(n: usize, alphabet: &[u8]) -> String {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ ((n as u64) << 32) ^ alphabet.len() as u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            alphabet[(x % alphabet.len() as u64) as usize] as char
        })
        .collect()
}

/// One example of each rule, built at run time: what leads up to the secret (kept), the
/// secret, its rule.
fn examples() -> Vec<(String, String, &'static str)> {
    let s = |lead: &str, secret: String, rule| (lead.to_string(), secret, rule);
    vec![
        s(
            "",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----".into(),
            "private-key",
        ),
        s(
            "",
            format!(
                "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 1\n{}\nPrivate-Lines: 1\n{}\nPrivate-MAC: {}",
                fill(68, BASE64),
                fill(44, BASE64),
                fill(64, LOWER_HEX)
            ),
            "putty-private-key",
        ),
        s("", format!("sk-ant-api03-{}AA", fill(93, URL_SAFE)), "anthropic-api-key"),
        s("", format!("sk-ant-oat01-{}AA", fill(93, URL_SAFE)), "anthropic-api-key"),
        s("", format!("sk-ant-admin01-{}AA", fill(93, URL_SAFE)), "anthropic-admin-key"),
        s(
            "",
            format!("sk-proj-{}T3BlbkFJ{}", fill(74, URL_SAFE), fill(74, ALNUM)),
            "openai-api-key",
        ),
        s(
            "",
            format!("sk-{}T3BlbkFJ{}", fill(20, ALNUM), fill(20, ALNUM)),
            "openai-api-key",
        ),
        s("", "AKIAIOSFODNN7EXAMPLE".into(), "aws-access-key"),
        s("", format!("ASIA{}", fill(16, UPPER_DIGITS)), "aws-access-key"),
        s("", format!("A3TX{}", fill(16, UPPER_DIGITS)), "aws-access-key"),
        s("aws_secret_access_key = ", AWS_SECRET.into(), "aws-secret-key"),
        s("awsSessionToken: ", AWS_SECRET.into(), "aws-secret-key"),
        s("", format!("ABSKQmVkcm9ja0FQSUtleS1{}", fill(110, BASE64)), "aws-bedrock-key"),
        s(
            "",
            format!("bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t{}==", fill(300, BASE64)),
            "aws-bedrock-key",
        ),
        s("AccountName=x;AccountKey=", format!("{}==", fill(86, BASE64)), "azure-storage-key"),
        s("\"", format!("a.~8Q~{}", fill(34, URL_SAFE)), "azure-ad-client-secret"),
        s("", format!("AIza{}", fill(35, URL_SAFE)), "google-api-key"),
        s("", format!("GOCSPX-{}", fill(28, URL_SAFE)), "google-oauth-secret"),
        s("", format!("ghp_{}", fill(36, ALNUM)), "github-token"),
        s("", format!("github_pat_{}_{}", fill(22, ALNUM), fill(59, ALNUM)), "github-token"),
        s("", format!("glpat-{}", fill(20, URL_SAFE)), "gitlab-token"),
        s("", format!("glptt-{}", fill(40, LOWER_HEX)), "gitlab-token"),
        s("", format!("GR1348941{}", fill(20, URL_SAFE)), "gitlab-token"),
        s("Cookie: _gitlab_session=", fill(32, LOWER_HEX), "gitlab-token"),
        s("", format!("xoxb-123456789012-{}", fill(24, ALNUM)), "slack-token"),
        s("", format!("xoxe.xoxp-1-{}", fill(163, ALNUM)), "slack-token"),
        s("", format!("xapp-1-A0{}-{}", fill(9, UPPER_DIGITS), fill(64, LOWER_HEX)), "slack-token"),
        s(
            "https://hooks.slack.com/",
            format!("services/T{}/B{}/{}", fill(8, UPPER_DIGITS), fill(10, UPPER_DIGITS), fill(24, ALNUM)),
            "slack-webhook",
        ),
        s("", format!("sk_live_{}", fill(24, ALNUM)), "stripe-key"),
        s("", format!("rk_test_{}", fill(99, ALNUM)), "stripe-key"),
        s("", format!("npm_{}", fill(36, ALNUM)), "npm-token"),
        s("//registry.npmjs.org/:_authToken=", fill(36, LOWER_HEX), "npm-token"),
        s("", format!("pypi-AgEIcHlwaS5vcmc{}", fill(150, URL_SAFE)), "pypi-token"),
        s(
            "",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(),
            "jwt",
        ),
        s("password=", "Zx9#kQ2!vLp7Wm".into(), "generic-secret"),
        s("\"api_key\": \"", "Zx9#kQ2!vLp7Wm".into(), "generic-secret"),
    ]
}

#[test]
fn the_rule_indexes_name_their_rules() {
    for (i, id) in [
        (scan::PRIVATE_KEY, "private-key"),
        (scan::PUTTY_KEY, "putty-private-key"),
        (scan::ANTHROPIC_API, "anthropic-api-key"),
        (scan::ANTHROPIC_ADMIN, "anthropic-admin-key"),
        (scan::OPENAI, "openai-api-key"),
        (scan::AWS_ACCESS_KEY, "aws-access-key"),
        (scan::AWS_SECRET_KEY, "aws-secret-key"),
        (scan::AWS_BEDROCK, "aws-bedrock-key"),
        (scan::AZURE_STORAGE, "azure-storage-key"),
        (scan::AZURE_AD, "azure-ad-client-secret"),
        (scan::GOOGLE_API, "google-api-key"),
        (scan::GOOGLE_OAUTH, "google-oauth-secret"),
        (scan::GITHUB_TOKEN, "github-token"),
        (scan::GITLAB_TOKEN, "gitlab-token"),
        (scan::SLACK_TOKEN, "slack-token"),
        (scan::SLACK_WEBHOOK, "slack-webhook"),
        (scan::STRIPE, "stripe-key"),
        (scan::NPM, "npm-token"),
        (scan::PYPI, "pypi-token"),
        (scan::JWT, "jwt"),
        (scan::GENERIC_SECRET, "generic-secret"),
    ] {
        assert_eq!(RULES[i].id, id);
    }
    assert_eq!(RULES.len(), 21, "a new rule needs its check in scan.rs");
    // Every rule has an example above.
    let examples = examples();
    for r in RULES {
        assert!(
            examples.iter().any(|e| e.2 == r.id),
            "no example of {}",
            r.id
        );
    }
}

#[test]
fn each_rule_is_found_at_the_start_middle_and_end_of_a_body() {
    let contexts = [
        ("", ""),
        ("note: ", " done"),
        ("x\n", "\n"),
        ("(", ")"),
        ("日本 ", " é"),
        (
            &"a clean line of prose and code, fn main() {}\n".repeat(40),
            "",
        ),
        ("", &"\nand then a long tail of ordinary text ".repeat(40)),
    ];
    for (lead, secret, rule) in examples() {
        for &(pre, post) in &contexts {
            let text = format!("{pre}{lead}{secret}{post}");
            let s = pre.len() + lead.len();
            let want = vec![(rule, s, s + secret.len())];
            assert_eq!(found(&text), want, "{text:?}");
            assert_eq!(before(&text), want, "the patterns agree on {text:?}");
        }
    }
}

#[test]
fn the_edges_of_every_shape_agree_with_the_patterns() {
    let up = |n: usize| fill(n, UPPER_DIGITS);
    let al = |n: usize| fill(n, ALNUM);
    let us = |n: usize| fill(n, URL_SAFE);
    let b64 = |n: usize| fill(n, BASE64);
    let mut cases: Vec<String> = Vec::new();
    for n in [15, 16, 17] {
        cases.push(format!("AKIA{}", up(n)));
        cases.push(format!("A3T{}", up(n)));
    }
    cases.extend([
        format!("xAKIA{}", up(16)),
        format!("_ASIA{}", up(16)),
        format!("-ABIA{}-", up(16)),
        format!("ACCA{}_", up(16)),
        format!("AKIA{}é", up(16)),
        "AKIAXXXXXXXXXXXXXXXX".to_string(),
        format!("A3Ta{}", up(16)),
    ]);
    for n in [35, 36, 255, 256] {
        cases.push(format!("ghp_{}", al(n)));
        cases.push(format!("gho_{} x", al(n)));
    }
    cases.push(format!("ghs_{}_", al(40)));
    cases.push(format!("ghr_{}-", al(40)));
    cases.push(format!("ghu_{}", "x".repeat(36)));
    for n in [21, 22, 255, 256] {
        cases.push(format!("github_pat_{}", fill(n, b"A_1bC9zQ")));
    }
    // GitLab: every prefix, the lengths, the routable tail, the runner and session forms.
    for prefix in [
        "glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glft-", "glimt-", "glagent-",
        "glffct-", "glsoat-",
    ] {
        for n in [19, 20, 300, 301] {
            cases.push(format!("{prefix}{}", us(n)));
        }
    }
    cases.extend([
        format!("glpat-{}.01{}", us(27), fill(7, b"0123456789abcdefxyz")),
        format!("glpat-{}.01{}X", us(27), fill(6, b"0123456789abcdefxyz")),
        format!("glrt-t1_{}.0a{}", us(27), fill(7, b"0123456789abcdefxyz")),
        format!("xglpat-{}", us(20)),
        format!("GR1348941{}", us(19)),
        format!("GR1348941{}", us(70)),
        format!("_GR1348941{}", us(20)),
        format!("_gitlab_session={}", fill(31, LOWER_HEX)),
        format!("_gitlab_session={}", fill(40, LOWER_HEX)),
        format!("x_gitlab_session={}", fill(32, LOWER_HEX)),
    ]);
    for n in [9, 10, 255, 256, 300] {
        cases.push(format!("xoxp-{}", fill(n, b"a-1Q9z")));
    }
    cases.extend([
        format!("xoxo-{}", fill(20, b"a-1Q9z")),
        format!("xoxe-1-{}", al(146)),
        format!("xoxe.xoxb-1-{}", al(165)),
        format!("xoxe.xoxa-1-{}", al(165)),
        format!("xoxq-{}", al(20)),
        format!("xapp-1-{}", fill(40, b"A-19z")),
        format!("axapp-1-{}", fill(40, b"A-19z")),
    ]);
    // Slack webhooks: the three kinds, the length limits, Slack's own placeholder.
    for kind in ["services", "workflows", "triggers", "hooks"] {
        for n in [42, 43, 120, 121] {
            cases.push(format!(
                "https://hooks.slack.com/{kind}/{}",
                fill(n, b"T0aZ9_/+bY8cX7dW6")
            ));
        }
    }
    cases.push(format!(
        "https://hooks.slack.com/services/T00000000/B00000000/{}",
        "X".repeat(24)
    ));
    // Anthropic and OpenAI.
    for n in [31, 32, 93, 255, 256] {
        cases.push(format!("sk-ant-api03-{}", us(n)));
        cases.push(format!("sk-ant-admin01-{}", us(n)));
    }
    for n in [39, 40, 156, 255, 256] {
        cases.push(format!("sk-proj-{}", us(n)));
        cases.push(format!("sk-svcacct-{}", us(n)));
        cases.push(format!("sk-None-{}", us(n)));
    }
    cases.extend([
        format!("sk-ant-sid01-{}", us(93)),
        format!("sk-ant-ort01-{}", us(93)),
        format!("sk-ant-api3-{}", us(93)),
        format!("sk-ant-api033-{}", us(93)),
        format!("sk-ant-test-{}", us(93)),
        format!("xsk-ant-api03-{}", us(93)),
        format!("-sk-ant-api03-{}", us(93)),
        format!("sk-ant-api03-{}", "x".repeat(93)),
        "sk-ant-api03-your-key-goes-here-please-replace-me".to_string(),
        format!("sk-admin-{}", us(80)),
        format!("sk-{}T3BlbkFJ{}", al(20), al(20)),
        format!("sk-{}T3BlbkFJ{}", al(20), al(21)),
        format!("sk-{}T3BlbkFJ{}", al(19), al(20)),
        format!("sk-{}T3BlbkFJ{}_", al(20), al(20)),
        format!("sk-{}T3BlbkFJ{}-", al(20), al(20)),
        format!("sk-{}T3BlbkFI{}", al(20), al(20)),
        format!("task-{}T3BlbkFJ{}", al(20), al(20)),
    ]);
    // AWS Bedrock, Google, Stripe, npm, PyPI.
    for n in [108, 109, 269, 270] {
        cases.push(format!("ABSK{}", b64(n)));
        cases.push(format!("ABSK{}==", b64(n)));
    }
    cases.extend([
        format!("xABSK{}", b64(120)),
        format!("ABSK{}===", b64(120)),
        "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t".to_string(),
        format!("bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t{}=", b64(100)),
        format!("xbedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t{}", b64(5000)),
    ]);
    for n in [34, 35, 64, 65] {
        cases.push(format!("AIza{}", us(n)));
    }
    for n in [27, 28, 64, 65] {
        cases.push(format!("GOCSPX-{}", us(n)));
    }
    cases.extend([
        format!("_AIza{}", us(35)),
        format!("AIza{}", "a".repeat(35)),
        format!("xGOCSPX-{}", us(28)),
    ]);
    for n in [9, 10, 255, 256] {
        cases.push(format!("sk_live_{}", al(n)));
        cases.push(format!("rk_prod_{}", al(n)));
    }
    cases.extend([
        format!("sk_test_{}_x", al(24)),
        format!("task_test_{}", al(24)),
        format!("sk_demo_{}", al(24)),
        format!("pk_live_{}", al(24)),
    ]);
    for n in [35, 36, 37] {
        cases.push(format!("npm_{}", al(n)));
    }
    cases.extend([
        format!("npm_{}_", al(36)),
        format!("npm_{}-", al(36)),
        format!("_npm_{}", al(36)),
        format!(
            "//registry.npmjs.org/:_authToken={}",
            fill(36, b"0123456789abcdef-")
        ),
        format!("//r.example/:_authToken = {}", fill(20, BASE64)),
        format!("//r.example/:_authToken     ={}", fill(20, BASE64)),
        format!("//r.example/:_authToken=     {}", fill(20, BASE64)),
        "//r.example/:_authToken=${NPM_TOKEN}".to_string(),
        format!("_authToken={}", fill(15, BASE64)),
        format!("_authToken={}", fill(600, b"aZ9._~+/=-")),
    ]);
    for n in [49, 50, 1000, 1001] {
        cases.push(format!("pypi-AgEIcHlwaS5vcmc{}", us(n)));
        cases.push(format!("pypi-AgENdGVzdC5weXBpLm9yZw{}", us(n)));
    }
    cases.push(format!("pypi-AgEIcHlwaS5vcmX{}", us(80)));
    // Azure: storage keys in their contexts, AD client secrets and their delimiters.
    let key = format!("{}==", b64(86));
    cases.extend([
        format!("DefaultEndpointsProtocol=https;AccountName=x;AccountKey={key};EndpointSuffix=core.windows.net"),
        format!("AZURE_STORAGE_KEY=\"{key}\""),
        format!("storageAccountKey: {key}"),
        format!("account_\u{212a}ey={key}"),
        format!("AccountKey={}=", b64(86)),
        format!("AccountKey={}==", b64(85)),
        format!("AccountKey={}", "A".repeat(86) + "=="),
        format!("MyKey={key}"),
    ]);
    let az = |n: usize| {
        format!(
            "{}{}Q~{}",
            fill(3, b"aZ9_~."),
            7,
            fill(n, b"abcXYZ0123_~.-")
        )
    };
    for n in [30, 31, 34, 35] {
        cases.push(az(n));
        cases.push(format!("client_secret=\"{}\"", az(n)));
    }
    cases.extend([
        format!("x{}", az(34)),
        format!("-{}", az(34)),
        format!("({}) ", az(33)),
        format!("<v>{}</v>", az(32)),
        format!("{}\u{2003}", az(32)),
        format!("\u{a0}{}", az(32)),
        format!("{} {}", az(32), az(33)),
        format!("{}x", az(32)),
        format!("ab8Q~{}", fill(34, b"aZ9")),
        format!("abcdQ~{}", fill(34, b"aZ9")),
        format!("ab{}", "~".repeat(60)),
    ]);
    cases.extend([
        "eyJ1234567.eyJ12345678.sig".to_string(),
        "eyJ12345678.eyJ1234567.sig".to_string(),
        "eyJ12345678.eyJ12345678.".to_string(),
        "eyJ12345678.eyJ12345678".to_string(),
        "aeyJ12345678.eyJ12345678.x".to_string(),
        "-eyJ12345678.eyJ12345678.x-y".to_string(),
        format!("{}.eyJ12345678.x", "eyJ-".repeat(20)),
    ]);
    // Prefixes that overlap, private key headers and END lines, PuTTY files.
    cases.extend([
        "glpat-----BEGIN RSA PRIVATE KEY-----\nabc".to_string(),
        "xoxb-----BEGIN EC PRIVATE KEY-----\nabc\n-----END EC PRIVATE KEY-----".to_string(),
        "-----BEGIN PRIVATE KEY PRIVATE KEY-----x".to_string(),
        "-----BEGIN PRIVATE KEY-----x-----END PRIVATE KEY PRIVATE KEY-----y".to_string(),
        "-----BEGIN RSA PRIVATE KEY BLOCK-----x-----END RSA PRIVATE KEY BLOCK-----y".to_string(),
        "-----BEGIN RSA PRIVATE KEY BLOCK x-----END RSA PRIVATE KEY-----y".to_string(),
        "-----BEGIN RSA PRIVATE KEY-----a-----END CERTIFICATE-----b-----END RSA PRIVATE KEY-----c"
            .to_string(),
        "a -----BEGIN DSA PRIVATE KEY-----\n1\n-----END DSA PRIVATE KEY----- b -----BEGIN PRIVATE KEY-----\n2"
            .to_string(),
        "-----BEGIN PRIVATE KEY-----\n-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----tail"
            .to_string(),
        "-----BEGINPRIVATE KEY-----x-----ENDPRIVATE KEY-----y".to_string(),
        "-----BEGIN OPENSSH_V1-X PRIVATE KEY-----x-----END OPENSSH_V1-X PRIVATE KEY-----y"
            .to_string(),
        "-----BEGIN-----BEGIN PRIVATE KEY-----x".to_string(),
        "-----END PRIVATE KEY----------BEGIN PRIVATE KEY-----x-----END-----END PRIVATE KEY-----y"
            .to_string(),
        format!("-----BEGIN {} PRIVATE KEY-----x", "A".repeat(99)),
        format!("-----BEGIN {} PRIVATE KEY-----x", "A".repeat(100)),
        format!("-----BEGIN {} PRIVATE KEY-----x", "A".repeat(101)),
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----".to_string(),
        "-----BEGIN rsa private key-----\nMIIB".to_string(),
        "{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----\\n\", \"x\": 1}"
            .to_string(),
        "PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 1\nAAAA\nPrivate-MAC: 0a1B2c3d\nmore".to_string(),
        "PuTTY-User-Key-File-3: ssh-rsa\nno mac".to_string(),
        "PuTTY-User-Key-File-2: a PuTTY-User-Key-File-3: b Private-MAC: ff".to_string(),
        "PuTTY-User-Key-File-1234: x".to_string(),
        "PuTTY-User-Key-File-: x".to_string(),
        "PuTTY-User-Key-File-2:x".to_string(),
        format!("PuTTY-User-Key-File-2: x Private-MAC: {}", fill(200, LOWER_HEX)),
    ]);
    // Assignments: keyword case and Unicode folding, suffixes, quotes, spaces, separators.
    let v = "Zx9#kQ2!vLp7Wm";
    cases.extend([
        format!("PASSWORD={v}"),
        format!("pa\u{17f}sword={v}"),
        format!("to\u{212a}en={v}"),
        format!("api\u{212a}ey: {v}"),
        format!("my_db_password_for_prod={v}"),
        format!("password{}={v}", "x".repeat(20)),
        format!("password{}={v}", "x".repeat(21)),
        format!("password\u{a0}=\u{2003}{v}"),
        format!("password    ={v}"),
        format!("password     ={v}"),
        format!("password=    {v}"),
        format!("password=     {v}"),
        "password==Zx9#kQ2!vLp".to_string(),
        "password:=Zx9#kQ2!vLp7".to_string(),
        format!("\"secret\": \"{v}\""),
        format!("'token' = '{v}'"),
        format!("auth_key\"'={v}"),
        format!("passwd={v}{}", "q".repeat(300)),
        format!("secret={}", "é9Zq".repeat(80)),
        format!("aws_secret_access_key={AWS_SECRET}"),
        format!("AWS_SECRET_KEY: \"{AWS_SECRET}\""),
        format!("awssecret={AWS_SECRET}x"),
        format!("aws_secret={}/a", &AWS_SECRET[..39]),
        format!("aws_secret={}/", &AWS_SECRET[..39]),
        "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE".to_string(),
        format!("aws_access_key={AWS_SECRET}"),
        format!("aws_key = \"{AWS_SECRET}\""),
        format!("AWS_SESSION_TOKEN={AWS_SECRET}"),
        format!("aws.s3.password: {AWS_SECRET}"),
        format!("a\u{17f}w_pw={AWS_SECRET}"),
        format!("aws{}_key={AWS_SECRET}", "x".repeat(20)),
        format!("aws{}_key={AWS_SECRET}", "x".repeat(21)),
        format!("aws{}key={AWS_SECRET}", "x".repeat(20)),
        format!("aws/secret={AWS_SECRET}"),
        format!("aws_bypass={AWS_SECRET}"),
        format!("aws_secret={}", "A".repeat(40)),
        format!("aws_pa\u{17f}={AWS_SECRET}"),
        format!("aw\u{17f}_\u{17f}ecret=\"{AWS_SECRET}\""),
        format!("db_pa\u{17f}={AWS_SECRET}"),
        "pa\u{17f}=Zx9#kQ2!vLp7Wm".to_string(),
    ]);
    let mut rules_found = BTreeSet::new();
    for text in &cases {
        rules_found.extend(found(text).into_iter().map(|f| f.0));
        // Each rule's own pattern over the whole text is the specification; the scanner before
        // `scan.rs` judged a match's `\b` on the match alone, so it missed
        // `aws_secret=.../a`, and nothing it found may be lost.
        assert_eq!(found(text), each_rule(text), "{text:?}");
        assert!(loses_nothing(text, oracle::previous(text)), "{text:?}");
    }
    // The edges reach every rule's positive side, not only its refusals.
    for r in RULES {
        assert!(rules_found.contains(r.id), "no edge case finds {}", r.id);
    }
}

/// The near-miss text of the bench: a rule's prefix or keyword every 13 bytes.
fn near_misses(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "AKIA{i} ghp_short{i} password=changeme secret=${{VAR}} token: 42 -----BEGIN CERTIFICATE----- eyJ{i} xoxb-1 glpat-x api_key=xxxxxxxxxxxx\n"
            )
        })
        .collect()
}

#[test]
fn the_near_miss_text_has_no_secret() {
    let text = near_misses(2_000);
    assert_eq!(found(&text), Found::new());
    assert_eq!(before(&text), Found::new());
    let keyed = Scanner::with_literals(["sk-test-0123456789abcdef", "local-key-9876543210"]);
    assert!(keyed.scan_text(&text).is_empty());
}

/// The second near-miss text of the bench: the provider rules beyond the first eight, each
/// prefix or keyword with too little after it.
fn new_misses(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "sk-ant-api03-short{i} sk-proj-{i} task-force sk_live_{i} rk_test_x AIza{i} GOCSPX-{i} npm_{i} pypi-Ag{i} xapp-1 xox{i} hooks.slack.com/services/T0 glcbt-{i} GR1348941{i} ABSK{i} A3T{i} PuTTY-User-Key-File- _authToken=${{NPM_TOKEN}} AccountKey={i} abc8Q~short ~/path storage_key: none aws_session_token: {i}\n"
            )
        })
        .collect()
}

#[test]
fn the_new_near_miss_text_has_no_secret() {
    let text = new_misses(2_000);
    assert_eq!(found(&text), Found::new());
    assert_eq!(each_rule(&text), Found::new());
}

/// A text of 1 to 14 random fragments: real secrets, their prefixes and keywords, separators,
/// Unicode look-alikes and runs of each rule's characters at its length limits.
fn generated(x: &mut u64) -> String {
    const FRAGMENTS: &[&str] = &[
        "AKIA",
        "ASIA",
        "AKIAIOSFODNN7EXAMPLE",
        "ABIA",
        "ACCA",
        "A3T",
        "ghp_",
        "gho_",
        "github_pat_",
        "glpat-",
        "glcbt-",
        "glptt-",
        "glrt-t1_",
        "GR1348941",
        "_gitlab_session=",
        "xoxb-",
        "xox",
        "xoxe.xoxp-",
        "xapp-1-",
        "hooks.slack.com/",
        "services/",
        "workflows/",
        "https://hooks.slack.com/services/",
        "sk-",
        "sk-ant-",
        "sk-ant-api03-",
        "sk-ant-admin01-",
        "sk-ant-oat01-",
        "sk-proj-",
        "sk-svcacct-",
        "T3BlbkFJ",
        "AA",
        "ABSK",
        "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t",
        "AIza",
        "GOCSPX-",
        "sk_live_",
        "rk_test_",
        "sk_",
        "npm_",
        "_authToken",
        "_authToken=",
        "pypi-AgEIcHlwaS5vcmc",
        "pypi-Ag",
        "AccountKey",
        "storage_key",
        "Q~",
        "7Q~",
        "~",
        "==",
        "PuTTY-User-Key-File-2: ",
        "Private-MAC: ",
        "aws_session_token",
        "awsKey",
        "aws",
        "pw",
        "eyJ",
        "eyJhbGciOiJIUzI1NiJ9",
        ".",
        "-----BEGIN",
        "-----END",
        " PRIVATE KEY",
        " BLOCK",
        "-----",
        " RSA",
        "password",
        "PassWord",
        "passwd",
        "secret",
        "token",
        "api_key",
        "apikey",
        "access_key",
        "auth_key",
        "aws_secret_access_key",
        "AWS_SECRET",
        "awssecretkey",
        "_ID",
        "=",
        ":",
        "==",
        " ",
        "     ",
        "\t",
        "\n",
        "\"",
        "'",
        ",",
        "{",
        "$",
        "${",
        "_",
        "-",
        "/",
        "+",
        "(",
        ")",
        "<",
        ">",
        "\\",
        ";",
        "\u{17f}",
        "\u{212a}",
        "\u{a0}",
        "é",
        "\u{2003}",
        "日本",
        "\u{85}",
        "Zx9#kQ2!vLp7Wm",
        AWS_SECRET,
        "changeme",
        "xxxxxxxxxxxx",
    ];
    let mut next = |n: usize| {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        (*x % n as u64) as usize
    };
    let run = |next: &mut dyn FnMut(usize) -> usize, n: usize, set: &[u8]| -> String {
        (0..n).map(|_| set[next(set.len())] as char).collect()
    };
    let mut s = String::new();
    for _ in 0..1 + next(14) {
        match next(14) {
            0..=5 => s.push_str(FRAGMENTS[next(FRAGMENTS.len())]),
            6 => {
                let n = [8, 12, 15, 16, 17, 20, 22, 36, 40, 64, 65, 255, 256][next(13)];
                s.push_str(&run(&mut next, n, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"));
            }
            7 => {
                let n = [8, 12, 20, 36, 40, 41][next(6)];
                s.push_str(&run(
                    &mut next,
                    n,
                    b"abcdefghijklmnopqrstuvwxyzABCXYZ0123456789",
                ));
            }
            8 => {
                let n = [3, 8, 12, 22, 40, 100][next(6)];
                s.push_str(&run(&mut next, n, b"aB3_-/+=:."));
            }
            9 => {
                let n = [12, 20, 40, 41, 86, 110][next(6)];
                s.push_str(&run(&mut next, n, b"abcdefghijKLMNOPQRST0123456789/+"));
            }
            10 => {
                // Azure AD client secrets and their look-alikes.
                let n = [3, 30, 31, 33, 34, 35][next(6)];
                s.push_str(&run(&mut next, n, b"aZ9_~.-Q8bY7cX6"));
            }
            11 => {
                // Token bodies at the lengths of the rules that take them.
                let n = [
                    9, 10, 19, 20, 27, 28, 31, 32, 35, 39, 40, 43, 50, 58, 74, 93,
                ][next(16)];
                s.push_str(&run(&mut next, n, URL_SAFE));
            }
            12 => {
                let n = [20, 36, 37, 48][next(4)];
                s.push_str(&run(&mut next, n, ALNUM));
            }
            _ => {
                let n = [8, 31, 32, 40][next(4)];
                s.push_str(&run(&mut next, n, LOWER_HEX));
            }
        }
    }
    s
}

#[test]
fn generated_texts_lose_nothing_the_patterns_find() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut with_finds = 0;
    let mut rules_found = BTreeSet::new();
    for _ in 0..20_000 {
        let text = generated(&mut x);
        let previous = oracle::previous(&text);
        let per_rule = oracle::per_rule(&text);
        with_finds += usize::from(!per_rule.is_empty());
        rules_found.extend(per_rule.iter().map(|f| f.rule));
        assert!(
            loses_nothing(&text, previous),
            "{text:?}: before {:?}, now {:?}",
            before(&text),
            found(&text)
        );
        assert!(
            loses_nothing(&text, per_rule),
            "{text:?}: each rule alone finds more than {:?}",
            found(&text)
        );
    }
    // The generator is worth something only if it makes secrets, of many rules.
    assert!(with_finds > 1_500, "{with_finds}");
    assert!(rules_found.len() >= 15, "{rules_found:?}");
}

#[test]
fn long_runs_inside_candidates_are_measured_once() {
    // Thousands of candidates inside one run (JWT prefixes, key headers without an END line)
    // each reuse the run's end: this finishes at once instead of in quadratic time.
    let jwts = "eyJ-".repeat(50_000);
    assert_eq!(found(&jwts), Found::new());
    let keys = "-----BEGIN RSA PRIVATE KEY-----\n".repeat(5_000);
    assert_eq!(found(&keys), vec![("private-key", 0, keys.len())]);
    let chain = "token=Ab1".repeat(20_000);
    assert_eq!(found(&chain), vec![("generic-secret", 6, chain.len())]);
    // Token bodies that run on through the next prefix (up to 1,000 characters for PyPI),
    // PuTTY headers with no MAC line, GitLab prefixes whose run is too plain to count.
    let pypi = "pypi-AgEIcHlwaS5vcmc-".repeat(10_000);
    assert_eq!(found(&pypi), vec![("pypi-token", 0, pypi.len())]);
    let putty = "PuTTY-User-Key-File-2: ".repeat(5_000);
    assert_eq!(found(&putty), vec![("putty-private-key", 0, putty.len())]);
    let gitlab = "glpat--".repeat(20_000);
    assert_eq!(found(&gitlab), Found::new());
    let bedrock = "ABSK/".repeat(20_000);
    assert_eq!(found(&bedrock), Found::new());
}

#[test]
fn runtime_values_are_found_by_either_search() {
    // Few values use Teddy, many the automaton; a text shorter than Teddy's window too.
    let few = Scanner::with_literals(["sk-local-0123456789"]);
    let values: Vec<String> = (0..200).map(|i| format!("value-{i:04}-abcdef")).collect();
    let many = Scanner::with_literals(&values);
    assert_eq!(many.literal_count(), 200);
    for (s, v) in [(&few, "sk-local-0123456789"), (&many, "value-0150-abcdef")] {
        for text in [
            v.to_string(),
            format!("a {v} b {v}"),
            format!("{}{v}", "x ".repeat(200)),
        ] {
            let at: Vec<usize> = text.match_indices(v).map(|(i, _)| i).collect();
            let want: Found = at.iter().map(|&i| (API_KEY_ENV, i, i + v.len())).collect();
            assert_eq!(plain(s.scan_text(&text)), want, "{text:?}");
        }
    }
}
