//! The byte-level checks the matcher is built from: byte classes (one bit each), word
//! boundaries, runs of a class, whitespace as Unicode `\s` has it, and the keywords of the
//! assignment rules read backwards from their `:` or `=`.

// Byte classes, one bit each in `CLASS`; each says which part of a pattern it is.
/// `[A-Z0-9]`
pub(super) const UPPER_DIGIT: u32 = 1;
/// `[A-Za-z0-9]`
pub(super) const ALNUM: u32 = 1 << 1;
/// `[A-Za-z0-9_]`, the ASCII word characters of `(?-u:\b)`.
pub(super) const WORD: u32 = 1 << 2;
/// `[A-Za-z0-9_-]`
pub(super) const WORD_DASH: u32 = 1 << 3;
/// `[A-Za-z0-9-]`
pub(super) const ALNUM_DASH: u32 = 1 << 4;
/// `[A-Za-z0-9/+]`, base64's alphabet.
pub(super) const B64: u32 = 1 << 5;
/// `[A-Z0-9 _-]`, a private key header's words.
pub(super) const HEADER: u32 = 1 << 6;
/// An ASCII byte that ends a `generic-secret` value: `\s` or one of ``"'`,;<>(){}[]\``.
pub(super) const VALUE_STOP: u32 = 1 << 7;
/// `[A-Za-z0-9_~.]`, the first three characters of an Azure AD client secret.
pub(super) const AZ_LEAD: u32 = 1 << 8;
/// `[A-Za-z0-9_~.-]`, the rest of it.
pub(super) const AZ_BODY: u32 = 1 << 9;
/// An ASCII byte allowed before an Azure AD client secret besides `\s`: ``\'"`>=:(,)``.
pub(super) const AZ_BEFORE: u32 = 1 << 10;
/// An ASCII byte allowed after it besides `\s`: ``\'"`<),``.
pub(super) const AZ_AFTER: u32 = 1 << 11;
/// `[A-Za-z0-9_.-]`, the name characters between `aws` and the word of `aws-secret-key`.
pub(super) const NAME: u32 = 1 << 12;
/// `[A-Za-z0-9_/+]`, a Slack webhook's path.
pub(super) const HOOK: u32 = 1 << 13;
/// `[A-Za-z0-9._~+/=-]`, an `.npmrc` `_authToken` value.
pub(super) const NPM_VALUE: u32 = 1 << 14;
/// `[0-9a-z]`
pub(super) const LOWER_DIGIT: u32 = 1 << 15;
/// `[0-9A-Fa-f]`
pub(super) const HEX: u32 = 1 << 16;
/// `[0-9]`
pub(super) const DIGIT: u32 = 1 << 17;

pub(super) const fn class_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        let upper = b.is_ascii_uppercase();
        let lower = b.is_ascii_lowercase();
        let digit = b.is_ascii_digit();
        let alnum = upper || lower || digit;
        let mut c = 0;
        if upper || digit {
            c |= UPPER_DIGIT;
        }
        if lower || digit {
            c |= LOWER_DIGIT;
        }
        if digit {
            c |= DIGIT;
        }
        if digit || matches!(b, b'a'..=b'f' | b'A'..=b'F') {
            c |= HEX;
        }
        if alnum {
            c |= ALNUM
                | WORD
                | WORD_DASH
                | ALNUM_DASH
                | B64
                | AZ_LEAD
                | AZ_BODY
                | NAME
                | HOOK
                | NPM_VALUE;
        }
        match b {
            b'_' => c |= WORD | WORD_DASH | AZ_LEAD | AZ_BODY | NAME | HOOK | NPM_VALUE,
            b'-' => c |= WORD_DASH | ALNUM_DASH | AZ_BODY | NAME | NPM_VALUE | HEADER,
            b'/' | b'+' => c |= B64 | HOOK | NPM_VALUE,
            b'~' => c |= AZ_LEAD | AZ_BODY | NPM_VALUE,
            b'.' => c |= AZ_LEAD | AZ_BODY | NAME | NPM_VALUE,
            b'=' => c |= NPM_VALUE,
            _ => {}
        }
        if upper || digit || b == b' ' || b == b'_' {
            c |= HEADER;
        }
        if ascii_space(b) {
            c |= VALUE_STOP;
        }
        match b {
            b'"' | b'\'' | b'`' | b',' | b';' | b'<' | b'>' | b'(' | b')' | b'{' | b'}' | b'['
            | b']' | b'\\' => c |= VALUE_STOP,
            _ => {}
        }
        match b {
            b'\\' | b'\'' | b'"' | b'`' | b'>' | b'=' | b':' | b'(' | b',' | b')' => c |= AZ_BEFORE,
            _ => {}
        }
        match b {
            b'\\' | b'\'' | b'"' | b'`' | b'<' | b')' | b',' => c |= AZ_AFTER,
            _ => {}
        }
        t[i] = c;
        i += 1;
    }
    t
}

pub(super) static CLASS: [u32; 256] = class_table();

/// ASCII whitespace as Unicode `\s` has it (tab, newline, vertical tab, form feed, return,
/// space).
pub(super) const fn ascii_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

pub(super) fn is(b: u8, class: u32) -> bool {
    CLASS[b as usize] & class != 0
}

/// `(?-u:\b)` before position `p` whose byte is a word character: `p` starts the text or the
/// byte before is no ASCII word character.
pub(super) fn boundary_before(t: &[u8], p: usize) -> bool {
    p == 0 || !is(t[p - 1], WORD)
}

/// `(?-u:\b)` after a run that ends at `e` with a word character: the text ends there or the
/// next byte is no ASCII word character.
pub(super) fn boundary_after(t: &[u8], e: usize) -> bool {
    t.get(e).is_none_or(|&b| !is(b, WORD))
}

/// How many bytes of `class` follow `from`, counting at most `cap`.
pub(super) fn run(t: &[u8], from: usize, class: u32, cap: usize) -> usize {
    let end = t.len().min(from.saturating_add(cap));
    t[from.min(end)..end]
        .iter()
        .position(|&b| !is(b, class))
        .unwrap_or(end.saturating_sub(from))
}

/// The end of the run of `class` from `from`, remembered in `cache` as `(start, end)`: any
/// position inside a measured run ends where it does, so candidates inside one long run
/// measure it once.
pub(super) fn run_end(t: &[u8], from: usize, class: u32, cache: &mut (usize, usize)) -> usize {
    if cache.0 <= from && from <= cache.1 {
        return cache.1;
    }
    let end = from + run(t, from, class, usize::MAX);
    *cache = (from, end);
    end
}

/// `=` characters after `e`, at most two (`={0,2}`).
pub(super) fn padding(t: &[u8], e: usize) -> usize {
    e + t[e.min(t.len())..]
        .iter()
        .take(2)
        .take_while(|&&b| b == b'=')
        .count()
}

/// The whitespace character (Unicode `\s`) starting at `i`, as its length in bytes.
pub(super) fn space_at(text: &str, i: usize) -> Option<usize> {
    let b = *text.as_bytes().get(i)?;
    if b < 0x80 {
        return ascii_space(b).then_some(1);
    }
    let c = text[i..].chars().next()?;
    c.is_whitespace().then(|| c.len_utf8())
}

/// The whitespace character ending at `i`, as its length in bytes.
pub(super) fn space_before(text: &str, i: usize) -> Option<usize> {
    let b = *text.as_bytes().get(i.checked_sub(1)?)?;
    if b < 0x80 {
        return ascii_space(b).then_some(1);
    }
    let c = text[..i].chars().next_back()?;
    c.is_whitespace().then(|| c.len_utf8())
}

/// `\s{0,4}` forwards from `i`: where it ends, or `None` when a fifth whitespace character
/// follows (no match can go on from there).
pub(super) fn spaces_after(text: &str, mut i: usize) -> Option<usize> {
    for _ in 0..4 {
        match space_at(text, i) {
            Some(n) => i += n,
            None => return Some(i),
        }
    }
    space_at(text, i).is_none().then_some(i)
}

/// `\s{0,4}` backwards from `i`, as [`spaces_after`].
pub(super) fn spaces_before(text: &str, mut i: usize) -> Option<usize> {
    for _ in 0..4 {
        match space_before(text, i) {
            Some(n) => i -= n,
            None => return Some(i),
        }
    }
    space_before(text, i).is_none().then_some(i)
}

pub(super) fn quote(b: u8) -> bool {
    b == b'"' || b == b'\''
}

/// Where `word` (lowercase ASCII) starts when it ends at `e` in `t`, compared
/// case-insensitively as `(?i)` does: ASCII case, and `ſ` (U+017F) for `s` and `K` (U+212A)
/// for `k`.
pub(super) fn back(t: &[u8], e: usize, word: &[u8]) -> Option<usize> {
    let mut i = e;
    for &c in word.iter().rev() {
        let b = *t.get(i.checked_sub(1)?)?;
        if b.to_ascii_lowercase() == c {
            i -= 1;
        } else if b < 0x80 {
            return None;
        } else if c == b's' && i >= 2 && t[i - 2..i] == [0xc5, 0xbf] {
            i -= 2;
        } else if c == b'k' && i >= 3 && t[i - 3..i] == [0xe2, 0x84, 0xaa] {
            i -= 3;
        } else {
            return None;
        }
    }
    Some(i)
}

/// `_?` backwards from `i`.
pub(super) fn underscore(t: &[u8], i: usize) -> usize {
    if i > 0 && t[i - 1] == b'_' { i - 1 } else { i }
}

/// Whether `(?i:aws)[A-Za-z0-9_.-]{0,20}(?i:secret|key|token|password|passwd|pass|pwd|pw)`
/// ends at `e`, whose last letter (lowercase) is `last`, read backwards: one of the words ends
/// there, and `aws` ends at most 20 name characters before it.
pub(super) fn aws_keyword_ends(t: &[u8], e: usize, last: u8) -> bool {
    let words: &[&[u8]] = match last {
        b't' => &[b"secret"],
        b'y' => &[b"key"],
        b'n' => &[b"token"],
        b'd' => &[b"password", b"passwd", b"pwd"],
        b's' => &[b"pass"],
        b'w' => &[b"pw"],
        _ => return false,
    };
    words.iter().any(|w| {
        let Some(ws) = back(t, e, w) else {
            return false;
        };
        let mut i = ws;
        loop {
            if back(t, i, b"aws").is_some() {
                return true;
            }
            if i == 0 || ws - i == 20 || !is(t[i - 1], NAME) {
                return false;
            }
            i -= 1;
        }
    })
}

/// Whether `(?i:account_?key|storage_?key)` ends at `e`.
pub(super) fn azure_keyword_ends(t: &[u8], e: usize) -> bool {
    back(t, e, b"key").is_some_and(|j| {
        let j = underscore(t, j);
        back(t, j, b"account").is_some() || back(t, j, b"storage").is_some()
    })
}

/// Whether `(?i:password|passwd|secret|token|api_?key|access_?key|auth_?key)` ends at `e`,
/// read backwards from its last letter.
pub(super) fn generic_keyword_ends(t: &[u8], e: usize) -> bool {
    let Some(last) = t[..e].last() else {
        return false;
    };
    match last.to_ascii_lowercase() {
        b'd' => back(t, e, b"word")
            .or_else(|| back(t, e, b"wd"))
            .is_some_and(|j| back(t, j, b"pass").is_some()),
        b't' => back(t, e, b"secret").is_some(),
        b'n' => back(t, e, b"token").is_some(),
        b'y' => back(t, e, b"key").is_some_and(|j| {
            let j = underscore(t, j);
            [&b"api"[..], b"access", b"auth"]
                .iter()
                .any(|w| back(t, j, w).is_some())
        }),
        _ => false,
    }
}

/// `(?-u:\b)` after a base64 value ending at `e`: its last byte is a word character and the
/// next is not, or the other way round (a value may end in `/` or `+`).
pub(super) fn boundary_after_value(t: &[u8], e: usize) -> bool {
    let last_word = is(t[e - 1], WORD);
    let next_word = t.get(e).is_some_and(|&b| is(b, WORD));
    last_word != next_word
}

/// The rest of a BEGIN or END line from `at` (just after `-----BEGIN` or `-----END`):
/// `[A-Z0-9 _-]{0,100}PRIVATE KEY(?: BLOCK)?-----`, the longest reading first, as the greedy
/// pattern has it. Its end.
pub(super) fn key_line(t: &[u8], at: usize) -> Option<usize> {
    let n = run(t, at, HEADER, 100);
    (0..=n).rev().find_map(|k| {
        // `PRIVATE KEY` starts with `P`: skip the other bytes at once.
        if t.get(at + k) != Some(&b'P') {
            return None;
        }
        let rest = t.get(at + k..)?;
        let rest = rest.strip_prefix(b"PRIVATE KEY")?;
        let tail = at + k + "PRIVATE KEY".len();
        if rest.starts_with(b" BLOCK-----") {
            Some(tail + " BLOCK-----".len())
        } else if rest.starts_with(b"-----") {
            Some(tail + "-----".len())
        } else {
            None
        }
    })
}
