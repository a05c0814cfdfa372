//! The ruleset: which text counts as a secret, one rule per kind of credential, written for
//! git forum (not copied from any scanner's list). It covers the credentials a user of this
//! tool holds: model providers (Anthropic, OpenAI), clouds (AWS, Google, Azure), forges
//! (GitHub, GitLab), Slack, Stripe, package registries (npm, PyPI), private keys, JWTs and
//! generic high-entropy assignments. For each of these providers it has every kind of
//! credential gitleaks' default configuration has, in the same or wider shapes, with three
//! deliberate differences: a token's prefix must start a word (`(?-u:\b)`), private key
//! headers are in capitals, and a JWT's first two segments start `eyJ`.
//!
//! Each rule is a regular expression; when it has a group named `v`, only that group is the
//! secret (the `password=` before it, or the delimiter around it, stays readable), otherwise
//! the whole match is. Rules whose shape alone is not enough are confirmed by Shannon entropy
//! ([`Confirm`]), so `password=changeme`, `ghp_xxxxxxxx…` or `AKIAXXXXXXXXXXXXXXXX` pass.
//!
//! The patterns are the specification; the scanner does not run them. `scan.rs` checks each
//! rule by hand (faster on text dense with near-misses), and its unit tests compare it with
//! these patterns compiled by `regex`, so a change here needs the same change there.

/// How a match is confirmed before it counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Confirm {
    /// The shape is enough.
    Shape,
    /// The secret (the whole find, or its `v`) has at least `bits` of Shannon entropy per byte:
    /// a token issued at random passes, a placeholder of one repeated character does not.
    Random { bits: f64 },
    /// The value needs at least `bits` of Shannon entropy per byte, `classes` kinds of
    /// character (lower, upper, digit, other) with a digit among them unless there are three,
    /// and is none of: a placeholder (`${VAR}`, `xxxx`, `your-key-here`), a web address
    /// without credentials, code naming where a secret lives (`session.accessToken`).
    Entropy { bits: f64, classes: usize },
}

/// One rule of the ruleset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// The rule's id: what the redaction marker, the `secret_redacted` entry and policy's
    /// `allow` name.
    pub(crate) id: &'static str,
    /// What it finds, for people.
    pub(crate) what: &'static str,
    /// The pattern (see the module doc for the group `v`): the specification that the
    /// hand-written matcher in `scan.rs` follows; only the test oracle runs it, so the field
    /// (and each rule's value) is compiled into the tests alone.
    #[cfg(test)]
    pub(crate) pattern: &'static str,
    /// How a match is confirmed.
    pub(crate) confirm: Confirm,
}

/// The rule id of literal values handed in at runtime (the values of the variables a runtime
/// config names as `api_key_env`). A policy cannot allow it.
pub(crate) const API_KEY_ENV: &str = "api-key-env";

/// Entropy a random token of a provider's alphabet clears with a wide margin, and a filler
/// (`xxxx…`, `0000…`, `XXXX…`) does not.
const TOKEN: Confirm = Confirm::Random { bits: 3.0 };

/// The same for tokens of 40 characters and more, whose fixed prefix would otherwise carry a
/// placeholder in words (`sk-ant-api03-your-key-goes-here`, 3.8 bits) over the floor; a
/// random key of that length has 5 bits or more.
const LONG_TOKEN: Confirm = Confirm::Random { bits: 4.0 };

/// Every built-in rule, the most specific first (at one position the first rule wins).
pub(crate) const RULES: &[Rule] = &[
    Rule {
        id: "private-key",
        what: "a private key block (-----BEGIN ... PRIVATE KEY-----), PEM, OpenSSH or PGP, \
               also inside JSON such as a Google service-account file",
        // The whole block, to its END line or, cut short, to the end of the text. The header
        // may hold `_` and `-` and up to 100 characters, as gitleaks allows.
        #[cfg(test)]
        pattern: r"-----BEGIN[A-Z0-9 _-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 _-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\z)",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "putty-private-key",
        what: "a PuTTY private key file (PuTTY-User-Key-File-2: or -3:), to its Private-MAC line",
        #[cfg(test)]
        pattern: r"PuTTY-User-Key-File-[0-9]{1,3}: (?s:.*?)(?:Private-MAC: [0-9A-Fa-f]{0,128}|\z)",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "anthropic-api-key",
        what: "an Anthropic API key or OAuth token (sk-ant-api03-..., sk-ant-oat01-..., sk-ant-ort01-..., sk-ant-sid01-...)",
        // Issued keys are 93 characters and `AA` after `sk-ant-api03-`; any run of 32 to 255
        // finds them, a later version of the format and a key cut short too.
        #[cfg(test)]
        pattern: r"(?-u:\b)sk-ant-(?:api|oat|ort|sid)[0-9]{2}-[A-Za-z0-9_-]{32,255}",
        confirm: LONG_TOKEN,
    },
    Rule {
        id: "anthropic-admin-key",
        what: "an Anthropic Admin API key (sk-ant-admin01-...)",
        #[cfg(test)]
        pattern: r"(?-u:\b)sk-ant-admin[0-9]{2}-[A-Za-z0-9_-]{32,255}",
        confirm: LONG_TOKEN,
    },
    Rule {
        id: "openai-api-key",
        what: "an OpenAI key: project, service-account, admin and user keys (sk-proj-..., \
               sk-svcacct-..., sk-admin-..., sk-None-...) and the legacy sk-...T3BlbkFJ... form",
        // The current forms are 58 or 74 characters, `T3BlbkFJ`, 58 or 74 more: any run of 40
        // to 255 after the kind finds them. The legacy form is exact.
        #[cfg(test)]
        pattern: r"(?-u:\b)(?:sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{40,255}|sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}(?-u:\b))",
        confirm: LONG_TOKEN,
    },
    Rule {
        id: "aws-access-key",
        what: "an AWS access key id (AKIA..., ASIA..., ABIA..., ACCA..., A3T...)",
        #[cfg(test)]
        pattern: r"(?-u:\b)(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)",
        confirm: TOKEN,
    },
    Rule {
        id: "aws-secret-key",
        what: "an AWS secret access key or session secret in an assignment \
               (aws_secret_access_key=..., awsSessionToken: ...)",
        // `aws`, up to 20 name characters, then a word that names a secret.
        #[cfg(test)]
        pattern: r#"(?i:aws)[A-Za-z0-9_.-]{0,20}(?i:secret|key|token|password|passwd|pass|pwd|pw)["']?\s{0,4}[:=]{1,2}\s{0,4}["']?(?P<v>[A-Za-z0-9/+]{40})(?-u:\b)"#,
        confirm: Confirm::Entropy {
            bits: 3.5,
            classes: 2,
        },
    },
    Rule {
        id: "aws-bedrock-key",
        what: "an Amazon Bedrock API key, long-lived (ABSK...) or short-lived (bedrock-api-key-...)",
        #[cfg(test)]
        pattern: r"(?-u:\b)ABSK[A-Za-z0-9+/]{109,269}={0,2}|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/]{0,4096}={0,2}",
        confirm: TOKEN,
    },
    Rule {
        id: "azure-storage-key",
        what: "an Azure storage account key (AccountKey=... in a connection string, \
               account_key: or storage_key = ...)",
        #[cfg(test)]
        pattern: r#"(?i:account_?key|storage_?key)["']?\s{0,4}[:=]{1,2}\s{0,4}["']?(?P<v>[A-Za-z0-9+/]{86}==)"#,
        confirm: Confirm::Random { bits: 4.0 },
    },
    Rule {
        id: "azure-ad-client-secret",
        what: "an Azure AD (Entra ID) client secret (three characters, a digit, Q~, 31 to 34 more)",
        // The delimiters around it keep it from matching inside longer strings; only `v` is
        // the secret.
        #[cfg(test)]
        pattern: r#"(?:\A|[\\'"`\s>=:(,)])(?P<v>[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})(?:\z|[\\'"`\s<),])"#,
        confirm: TOKEN,
    },
    Rule {
        id: "google-api-key",
        what: "a Google API key (AIza...)",
        #[cfg(test)]
        pattern: r"(?-u:\b)AIza[A-Za-z0-9_-]{35,64}",
        confirm: Confirm::Random { bits: 3.5 },
    },
    Rule {
        id: "google-oauth-secret",
        what: "a Google OAuth client secret (GOCSPX-...)",
        #[cfg(test)]
        pattern: r"(?-u:\b)GOCSPX-[A-Za-z0-9_-]{28,64}",
        confirm: TOKEN,
    },
    Rule {
        id: "github-token",
        what: "a GitHub token (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)",
        #[cfg(test)]
        pattern: r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?-u:\b)",
        confirm: TOKEN,
    },
    Rule {
        id: "gitlab-token",
        what: "a GitLab token (glpat-, gldt-, glrt-, glptt-, glcbt-, gloas-, glft-, glimt-, \
               glagent-, glffct-, glsoat-, routable forms, GR1348941 runner registration, \
               _gitlab_session cookie)",
        #[cfg(test)]
        pattern: r"(?-u:\b)(?:gl(?:pat|dt|rt|ptt|cbt|oas|ft|imt|agent|ffct|soat)-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{9})?|GR1348941[A-Za-z0-9_-]{20,64})|_gitlab_session=(?P<v>[0-9a-z]{32})",
        confirm: TOKEN,
    },
    Rule {
        id: "slack-token",
        what: "a Slack token: bot, user, app, legacy and configuration tokens (xoxb-, xoxp-, \
               xoxa-, xoxr-, xoxs-, xoxo-, xoxe-, xoxe.xoxp-, xapp-)",
        #[cfg(test)]
        pattern: r"(?-u:\b)(?:xox[abeoprs]|xoxe\.xox[bp]|xapp)-[A-Za-z0-9-]{10,255}",
        confirm: Confirm::Random { bits: 2.0 },
    },
    Rule {
        id: "slack-webhook",
        what: "a Slack incoming webhook or workflow URL (hooks.slack.com/services/..., /workflows/..., /triggers/...)",
        // The path is the secret; the host stays readable. The entropy floor passes Slack's
        // own documentation example (T00000000/B00000000/XXXX...).
        #[cfg(test)]
        pattern: r"hooks\.slack\.com/(?P<v>(?:services|workflows|triggers)/[A-Za-z0-9_/+]{43,120})",
        confirm: Confirm::Random { bits: 3.5 },
    },
    Rule {
        id: "stripe-key",
        what: "a Stripe secret or restricted key, live, test or prod (sk_live_, rk_live_, sk_test_, rk_test_)",
        #[cfg(test)]
        pattern: r"(?-u:\b)[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,255}",
        confirm: Confirm::Random { bits: 2.0 },
    },
    Rule {
        id: "npm-token",
        what: "an npm access token (npm_...) or an .npmrc _authToken value",
        #[cfg(test)]
        pattern: r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)|_authToken\s{0,4}=\s{0,4}(?P<v>[A-Za-z0-9._~+/=-]{16,512})",
        confirm: Confirm::Random { bits: 2.0 },
    },
    Rule {
        id: "pypi-token",
        what: "a PyPI or TestPyPI upload token (pypi-AgEIcHlwaS5vcmc..., pypi-AgENdGVzdC5weXBpLm9yZw...)",
        #[cfg(test)]
        pattern: r"(?-u:\b)pypi-Ag(?:EIcHlwaS5vcmc|ENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,1000}",
        confirm: TOKEN,
    },
    Rule {
        id: "jwt",
        what: "a JSON Web Token (eyJ....eyJ....)",
        #[cfg(test)]
        pattern: r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        confirm: Confirm::Shape,
    },
    Rule {
        id: "generic-secret",
        what: "a password=, secret=, token= or api_key= assignment with a high-entropy value",
        #[cfg(test)]
        pattern: r#"(?i:password|passwd|secret|token|api_?key|access_?key|auth_?key)[A-Za-z0-9_-]{0,20}["']?\s{0,4}[:=]{1,2}\s{0,4}["']?(?P<v>[^\s"'`,;<>(){}\[\]\\]{12,256})"#,
        confirm: Confirm::Entropy {
            bits: 3.0,
            classes: 2,
        },
    },
];
