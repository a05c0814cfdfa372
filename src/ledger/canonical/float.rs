//! Python's two float texts the ledger hashes and stores, written into a caller's `String`
//! without a temporary: `repr(x)` (the `ts` of an entry's JSON) and `'%.6f' % x` (the `ts` of
//! the entry-hash preimage). `verify --deep` formats both once per entry, so they sit on its
//! hot path; the general `format!` route cost five allocations and an arbitrary-precision
//! rounding per entry.
//!
//! `%.6f` is computed exactly with integers where that is easy (a non-negative `x` below
//! 2^53: the value times 10^6 fits in 128 bits), rounding half to even on the exact binary
//! value as Python and Rust both do; anything else goes through Rust's own exact formatting,
//! which agrees with Python there too. The shortest round-trip digits of `repr` come from
//! Rust's `{:e}` (written into a stack buffer); only their placement is ours.

use std::fmt::Write as _;

/// Up to 40 bytes of text on the stack, for `{:e}` of an `f64` (at most 24 bytes).
struct Stack {
    buf: [u8; 40],
    len: usize,
}

impl std::fmt::Write for Stack {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Appends `n` in decimal (`itoa`: no formatting machinery on the hot path).
fn push_u64(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Appends Python's text for a NaN or an infinity (`nan`, `inf`, `-inf`, the same under `repr`
/// and `%.6f`); whether `x` was one.
fn push_non_finite(out: &mut String, x: f64) -> bool {
    if x.is_nan() {
        out.push_str("nan");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
    } else {
        return false;
    }
    true
}

/// Appends Python's `'%.6f' % x` (`nan`, `inf`, `-inf` for those).
pub(crate) fn push_fixed6(out: &mut String, x: f64) {
    if push_non_finite(out, x) {
        return;
    }
    match micros_half_even(x) {
        Some(q) => {
            push_u64(out, q / 1_000_000);
            out.push('.');
            let frac = q % 1_000_000;
            let start = out.len();
            push_u64(out, frac);
            let written = out.len() - start;
            if written < 6 {
                out.insert_str(start, &"000000"[written..]);
            }
        }
        None => {
            let _ = write!(out, "{x:.6}");
        }
    }
}

/// `x * 10^6` rounded half to even, for a non-negative `x` (not negative zero) below 2^53.
fn micros_half_even(x: f64) -> Option<u64> {
    if !(x.is_sign_positive() && x < 9_007_199_254_740_992.0) {
        return None;
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let (m, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), exp - 1075)
    };
    // x = m * 2^e exactly; m < 2^53.
    let scaled = m as u128 * 1_000_000;
    let q = if e >= 0 {
        scaled << e
    } else {
        let s = (-e) as u32;
        if s >= 128 {
            // scaled < 2^73, far below half of 2^s: rounds to zero.
            0
        } else {
            let q = scaled >> s;
            let rem = scaled & ((1u128 << s) - 1);
            let half = 1u128 << (s - 1);
            if rem > half || (rem == half && q & 1 == 1) {
                q + 1
            } else {
                q
            }
        }
    };
    u64::try_from(q).ok()
}

/// Appends Python's `repr(x)`: the shortest round-trip digits, fixed notation when the
/// decimal exponent is in (-4, 16], scientific otherwise (forum-spec §1.3).
pub(crate) fn push_repr(out: &mut String, x: f64) {
    if push_non_finite(out, x) {
        return;
    }
    if x.is_sign_negative() {
        out.push('-');
    }
    if x == 0.0 {
        out.push_str("0.0");
        return;
    }
    // Rust's `{:e}` prints the shortest round-trip digits: `d1.d2…dnE<exp>`.
    let mut sci = Stack {
        buf: [0; 40],
        len: 0,
    };
    write!(sci, "{:e}", x.abs()).expect("an f64 in LowerExp fits in 40 bytes");
    let sci = std::str::from_utf8(&sci.buf[..sci.len]).expect("LowerExp writes ASCII");
    let (mantissa, exp) = sci
        .split_once('e')
        .expect("LowerExp always has an exponent");
    let exp: i32 = exp.parse().expect("LowerExp exponent is an integer");
    let (first, rest) = mantissa.split_at(1);
    let rest = rest.strip_prefix('.').unwrap_or(rest);
    let n = 1 + rest.len() as i32;
    let decpt = exp + 1;
    let digit_at = |i: i32| -> char {
        if i == 0 {
            first.as_bytes()[0] as char
        } else {
            rest.as_bytes()[(i - 1) as usize] as char
        }
    };
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            for _ in 0..-decpt {
                out.push('0');
            }
            out.push_str(first);
            out.push_str(rest);
        } else if decpt >= n {
            out.push_str(first);
            out.push_str(rest);
            for _ in 0..decpt - n {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            for i in 0..decpt {
                out.push(digit_at(i));
            }
            out.push('.');
            for i in decpt..n {
                out.push(digit_at(i));
            }
        }
    } else {
        let e = decpt - 1;
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let _ = write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
}

/// Whether `text` is certainly Python's `repr` of the float it parses to, told from the text
/// alone: a plain decimal `I.F` (optionally negative) in the form `repr` writes (no leading
/// zero but a lone `0`, no trailing zero but a lone `0`, `0.0` for zero, at least 1e-4) with at
/// most 15 digits. Any two decimals of at most 15 significant digits parse to different
/// doubles (that is what 15 = DBL_DIG means), so no other string of as few digits, and no
/// shorter one, reads back as the same double: the text is its double's shortest round-trip
/// form, which `repr` writes in just this layout between 1e-4 and 1e16. `false` means "not
/// known": the caller compares with the written `repr` instead.
pub(crate) fn is_short_decimal(text: &str) -> bool {
    let t = text.strip_prefix('-').unwrap_or(text);
    let Some((int, frac)) = t.split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return false;
    }
    if int.len() > 1 && int.starts_with('0') {
        return false;
    }
    if frac.len() > 1 && frac.ends_with('0') {
        return false;
    }
    if int == "0" {
        if frac == "0" {
            return true;
        }
        // Below 1e-4 repr switches to scientific notation.
        if frac.starts_with("0000") {
            return false;
        }
        return frac.trim_start_matches('0').len() <= 15;
    }
    // Counting every digit of the integer part (trailing zeros there are not significant)
    // only sends more texts to the slow check.
    let frac_digits = if frac == "0" { 0 } else { frac.len() };
    int.len() + frac_digits <= 15
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed6(x: f64) -> String {
        let mut s = String::new();
        push_fixed6(&mut s, x);
        s
    }

    /// Every text the quick test accepts is the `repr` of what it parses to; the texts it
    /// declines include every non-canonical spelling.
    #[test]
    fn short_decimals_are_their_own_repr() {
        let mut texts: Vec<String> = [
            "0.0",
            "-0.0",
            "1001.0",
            "0.0001",
            "0.1",
            "123456789012345.0",
            "1.5",
            "-2.25",
            "999999999999999.0",
            "0.000123456789012345",
            "1733000000.12345",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (x >> 20) as f64 / 10f64.powi((x % 12) as i32);
            let mut r = String::new();
            push_repr(&mut r, v);
            texts.push(r);
        }
        let mut accepted = 0;
        for t in &texts {
            let v: f64 = t.parse().unwrap();
            let mut r = String::new();
            push_repr(&mut r, v);
            if is_short_decimal(t) {
                assert_eq!(&r, t, "{t} was taken for its own repr");
                accepted += 1;
            }
        }
        assert!(accepted > texts.len() / 2, "{accepted} of {}", texts.len());
        for t in [
            "1001",
            "1001.",
            ".5",
            "01.5",
            "1.50",
            "0.00001",
            "1e3",
            "1.0e3",
            "+1.0",
            "1.5 ",
            "1234567890123456.0",
            "0.1234567890123456",
            "-01.0",
            "00.0",
            "1.00",
        ] {
            assert!(!is_short_decimal(t), "{t}");
        }
    }

    /// The integer route agrees with Rust's exact formatting everywhere it applies: ties
    /// (odd multiples of 1/128 are exact halves of a millionth), tiny and subnormal values,
    /// values near 2^53, and a spread of timestamps.
    #[test]
    fn fixed6_agrees_with_exact_formatting() {
        let mut xs = vec![
            0.0,
            -0.0,
            1e-300,
            f64::MIN_POSITIVE,
            5e-324,
            4.9999995e-7,
            5e-7,
            1.5e-6,
            0.25,
            1001.0,
            1_733_000_000.123_456_7,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            1e20,
            -1.0,
            -1_733_000_000.5,
        ];
        xs.extend((1..2000).map(|j| j as f64 / 128.0));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            xs.push((x >> 11) as f64 / (1u64 << 20) as f64);
            xs.push(f64::from_bits(x >> 2));
        }
        for x in xs.into_iter().filter(|x| x.is_finite()) {
            assert_eq!(fixed6(x), format!("{x:.6}"), "{x:e}");
        }
        assert_eq!(fixed6(f64::NAN), "nan");
        assert_eq!(fixed6(f64::NEG_INFINITY), "-inf");
        assert_eq!(fixed6(f64::INFINITY), "inf");
        let repr = |x: f64| {
            let mut s = String::new();
            push_repr(&mut s, x);
            s
        };
        assert_eq!(
            (repr(f64::NAN), repr(f64::INFINITY), repr(f64::NEG_INFINITY)),
            ("nan".into(), "inf".into(), "-inf".into())
        );
    }
}
