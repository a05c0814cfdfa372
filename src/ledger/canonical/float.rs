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

/// Appends `n` in decimal.
fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[i..]).expect("ASCII digits"));
}

/// Appends Python's `'%.6f' % x` (`nan`, `inf`, `-inf` for those).
pub(crate) fn push_fixed6(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("nan");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
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
    if x.is_nan() {
        out.push_str("nan");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed6(x: f64) -> String {
        let mut s = String::new();
        push_fixed6(&mut s, x);
        s
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
    }
}
