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

fn found(text: &str) -> Found {
    plain(Scanner::new().scan(text))
}

/// What the scanner before `scan.rs` reported for `text`.
fn before(text: &str) -> Found {
    plain(merge(oracle::previous(text)))
}

/// What each rule's pattern alone finds in `text`, merged.
fn each_rule(text: &str) -> Found {
    plain(merge(oracle::per_rule(text)))
}

fn covered(found: &[Finding], len: usize) -> Vec<bool> {
    let mut v = vec![false; len];
    for f in found {
        v[f.start..f.end].iter_mut().for_each(|b| *b = true);
    }
    v
}

/// Every byte `oracle` covers, the scanner covers too.
fn loses_nothing(text: &str, oracle: &[Finding]) -> bool {
    let new = Scanner::new().scan(text);
    let (old, new) = (covered(oracle, text.len()), covered(&new, text.len()));
    old.iter().zip(&new).all(|(o, n)| !*o || *n)
}

const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// One example of each rule: what leads up to the secret (kept), the secret, its rule.
fn examples() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----".into(),
            "private-key",
        ),
        ("", "AKIAIOSFODNN7EXAMPLE".into(), "aws-access-key"),
        ("", "ASIAY3FMOSBIEXAMPLE1".into(), "aws-access-key"),
        ("aws_secret_access_key = ", AWS_SECRET.into(), "aws-secret-key"),
        ("", format!("ghp_{}", &"a1B2c3D4e5".repeat(4)[..36]), "github-token"),
        ("", format!("github_pat_{}", "11ABCDEFG0123456789_abcdefXYZ"), "github-token"),
        ("", "glpat-abcdefghij0123456789".into(), "gitlab-token"),
        ("", "xoxb-123456789012-abcdefABCDEF".into(), "slack-token"),
        (
            "",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".into(),
            "jwt",
        ),
        ("password=", "Zx9#kQ2!vLp7Wm".into(), "generic-secret"),
        ("\"api_key\": \"", "Zx9#kQ2!vLp7Wm".into(), "generic-secret"),
    ]
}

#[test]
fn the_rule_indexes_name_their_rules() {
    for (i, id) in [
        (scan::PRIVATE_KEY, "private-key"),
        (scan::AWS_ACCESS_KEY, "aws-access-key"),
        (scan::AWS_SECRET_KEY, "aws-secret-key"),
        (scan::GITHUB_TOKEN, "github-token"),
        (scan::GITLAB_TOKEN, "gitlab-token"),
        (scan::SLACK_TOKEN, "slack-token"),
        (scan::JWT, "jwt"),
        (scan::GENERIC_SECRET, "generic-secret"),
    ] {
        assert_eq!(RULES[i].id, id);
    }
    assert_eq!(RULES.len(), 8, "a new rule needs its check in scan.rs");
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
        for (pre, post) in contexts {
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
    let up = |n: usize| "QZ7".repeat(100)[..n].to_string();
    let al = |n: usize| "a1B".repeat(100)[..n].to_string();
    let mut cases: Vec<String> = Vec::new();
    for n in [15, 16, 17] {
        cases.push(format!("AKIA{}", up(n)));
    }
    cases.extend([
        format!("xAKIA{}", up(16)),
        format!("_ASIA{}", up(16)),
        format!("-AKIA{}-", up(16)),
        format!("AKIA{}_", up(16)),
        format!("AKIA{}é", up(16)),
    ]);
    for n in [35, 36, 255, 256] {
        cases.push(format!("ghp_{}", al(n)));
        cases.push(format!("gho_{} x", al(n)));
    }
    cases.push(format!("ghs_{}_", al(40)));
    cases.push(format!("ghr_{}-", al(40)));
    for n in [21, 22, 255, 256] {
        cases.push(format!("github_pat_{}", &"A_1".repeat(100)[..n]));
    }
    for n in [19, 20, 64, 65, 100] {
        cases.push(format!("glpat-{}", &"a-_".repeat(40)[..n]));
    }
    for n in [9, 10, 255, 256, 300] {
        cases.push(format!("xoxp-{}", &"a-1".repeat(120)[..n]));
    }
    cases.extend([
        "eyJ1234567.eyJ12345678.sig".to_string(),
        "eyJ12345678.eyJ1234567.sig".to_string(),
        "eyJ12345678.eyJ12345678.".to_string(),
        "eyJ12345678.eyJ12345678".to_string(),
        "aeyJ12345678.eyJ12345678.x".to_string(),
        "-eyJ12345678.eyJ12345678.x-y".to_string(),
        format!("{}.eyJ12345678.x", "eyJ-".repeat(20)),
    ]);
    // Prefixes that overlap, private key headers and END lines.
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
        format!("-----BEGIN {} PRIVATE KEY-----x", "A".repeat(40)),
        format!("-----BEGIN {} PRIVATE KEY-----x", "A".repeat(41)),
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----".to_string(),
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
    ]);
    for text in &cases {
        // Each rule's own pattern over the whole text is the specification; the scanner before
        // `scan.rs` judged a match's `\b` on the match alone, so it missed
        // `aws_secret=.../a`, and nothing it found may be lost.
        assert_eq!(found(text), each_rule(text), "{text:?}");
        assert!(loses_nothing(text, &oracle::previous(text)), "{text:?}");
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
    assert!(keyed.scan(&text).is_empty());
}

/// A text of 1 to 14 random fragments: real secrets, their prefixes and keywords, separators,
/// Unicode look-alikes and runs of each rule's characters at its length limits.
fn generated(x: &mut u64) -> String {
    const FRAGMENTS: &[&str] = &[
        "AKIA",
        "ASIA",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_",
        "gho_",
        "github_pat_",
        "glpat-",
        "xoxb-",
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
        match next(10) {
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
            _ => {
                let n = [12, 20, 40, 41][next(4)];
                s.push_str(&run(&mut next, n, b"abcdefghijKLMNOPQRST0123456789/+"));
            }
        }
    }
    s
}

#[test]
fn generated_texts_lose_nothing_the_patterns_find() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut with_finds = 0;
    for _ in 0..4_000 {
        let text = generated(&mut x);
        let previous = oracle::previous(&text);
        with_finds += usize::from(!previous.is_empty());
        assert!(
            loses_nothing(&text, &previous),
            "{text:?}: before {:?}, now {:?}",
            before(&text),
            found(&text)
        );
        assert!(
            loses_nothing(&text, &oracle::per_rule(&text)),
            "{text:?}: each rule alone finds more than {:?}",
            found(&text)
        );
    }
    // The generator is worth something only if it makes secrets.
    assert!(with_finds > 300, "{with_finds}");
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
            assert_eq!(plain(s.scan(&text)), want, "{text:?}");
        }
    }
}
