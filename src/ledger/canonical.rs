//! Payload values and Forum's canonical JSON (forum-spec §1).
//!
//! Forum hashes `json.dumps(payload, sort_keys=True, separators=(",", ":"))` with Python's
//! defaults (`ensure_ascii=True`, `allow_nan=True`). Reproducing those bytes needs a value model
//! that serde_json's `Value` does not offer: numbers keep their identity (`1` is an int, `1.0` a
//! float), integers of any width round-trip, floats print as Python's `repr`, and `NaN` /
//! `Infinity` are accepted the way Python's `json.loads` accepts them. Hence this small,
//! dependency-free module, the one place the project writes JSON bytes by hand.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt::Write as _;

/// Deepest nesting accepted by [`parse`]. Python's parser stops near its recursion limit (about
/// 1,000); staying below it keeps the parser's recursion well inside a thread's stack.
pub(crate) const MAX_DEPTH: usize = 512;

/// A JSON value as Forum sees it after `json.loads`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// An integer of any width, kept as normalised decimal text (`-0` becomes `0`).
    Int(Int),
    /// A Python float: any number written with `.`, `e` or `E`, including `NaN` and `Infinity`.
    Float(f64),
    Str(String),
    Array(Vec<Value>),
    /// Keys in first-insertion order; a repeated key keeps its first position and last value,
    /// as a Python `dict` does.
    Object(Vec<(String, Value)>),
}

/// Decimal text of an arbitrary-precision integer: an optional `-`, then digits without
/// leading zeros.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Int(String);

impl Int {
    /// Parses decimal digits with an optional leading `-`; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Int> {
        let (neg, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let trimmed = digits.trim_start_matches('0');
        let digits = if trimmed.is_empty() { "0" } else { trimmed };
        if neg && digits != "0" {
            Some(Int(format!("-{digits}")))
        } else {
            Some(Int(digits.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn as_i64(&self) -> Option<i64> {
        self.0.parse().ok()
    }

    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }
}

impl From<i64> for Int {
    fn from(v: i64) -> Int {
        Int(v.to_string())
    }
}

impl From<u64> for Int {
    fn from(v: u64) -> Int {
        Int(v.to_string())
    }
}

/// Why a JSON text could not be read as a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at byte {offset}")]
pub struct ParseError {
    pub message: String,
    pub(crate) offset: usize,
}

impl Value {
    /// Builds an object from pairs, applying Python's dict semantics to repeated keys.
    pub fn object<I: IntoIterator<Item = (String, Value)>>(pairs: I) -> Value {
        let mut out = Members::default();
        for (k, v) in pairs {
            out.insert(k, v);
        }
        Value::Object(out.list)
    }

    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    pub fn int(v: i64) -> Value {
        Value::Int(Int::from(v))
    }

    /// Converts a serde_json value. serde_json is built with `arbitrary_precision`, so a
    /// number arrives as the text it was written with and gets the identity Python would give
    /// it: an int of any width, or a float (`1e400` is `Infinity`, as in Python).
    pub fn from_serde(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => number_from_text(&n.to_string()),
            serde_json::Value::String(s) => Value::Str(s.clone()),
            serde_json::Value::Array(a) => Value::Array(a.iter().map(Value::from_serde).collect()),
            serde_json::Value::Object(m) => {
                Value::object(m.iter().map(|(k, v)| (k.clone(), Value::from_serde(v))))
            }
        }
    }

    /// Converts to a serde_json value. Integers of any width and finite floats stay exact
    /// numbers (floats written as Python's `repr`). `NaN` and `±Infinity` have no form in
    /// strict JSON, so serde_json cannot hold them: they become the strings `"NaN"`,
    /// `"Infinity"` and `"-Infinity"`. Surfaces that must return such a value exactly write
    /// its text instead ([`Value::has_non_finite`], [`Value::canonical`]).
    pub fn to_serde(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => {
                exact_number(i.as_str()).unwrap_or_else(|| serde_json::Value::String(i.0.clone()))
            }
            Value::Float(f) if f.is_finite() => exact_number(&python_float_repr(*f))
                .unwrap_or_else(|| serde_json::Value::String(python_float_repr(*f))),
            Value::Float(f) => serde_json::Value::String(python_float_json(*f)),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::Array(a) => serde_json::Value::Array(a.iter().map(Value::to_serde).collect()),
            Value::Object(m) => serde_json::Value::Object(
                m.iter().map(|(k, v)| (k.clone(), v.to_serde())).collect(),
            ),
        }
    }

    /// Whether the value holds a `NaN` or an infinity anywhere: a number strict JSON (and so
    /// [`Value::to_serde`]) cannot carry.
    pub(crate) fn has_non_finite(&self) -> bool {
        match self {
            Value::Float(f) => !f.is_finite(),
            Value::Array(items) => items.iter().any(Value::has_non_finite),
            Value::Object(members) => members.iter().any(|(_, v)| v.has_non_finite()),
            _ => false,
        }
    }

    /// Sets the member `key` of an object to `v` (in place if present, else last); a value
    /// that is not an object is left alone.
    pub(crate) fn set(&mut self, key: &str, v: Value) {
        if let Value::Object(members) = self {
            match members.iter_mut().find(|(k, _)| k == key) {
                Some(slot) => slot.1 = v,
                None => members.push((key.to_string(), v)),
            }
        }
    }

    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Forum's canonical form: sorted keys, no spaces, ASCII only (forum-spec §1).
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        write_canonical(self, &mut out);
        out
    }

    /// `json.dumps(value, indent=2)` with Python's defaults (ASCII-escaped, insertion order):
    /// how Forum's CLI prints JSON.
    pub fn python_pretty(&self) -> String {
        fn write(v: &Value, depth: usize, out: &mut String) {
            let pad = |n: usize, out: &mut String| out.extend(std::iter::repeat_n(' ', n * 2));
            match v {
                Value::Null => out.push_str("null"),
                Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                Value::Int(i) => out.push_str(i.as_str()),
                Value::Float(f) => out.push_str(&python_float_json(*f)),
                Value::Str(s) => write_ascii_string(s, out),
                Value::Array(items) if items.is_empty() => out.push_str("[]"),
                Value::Object(members) if members.is_empty() => out.push_str("{}"),
                Value::Array(items) => {
                    out.push_str("[\n");
                    for (n, item) in items.iter().enumerate() {
                        if n > 0 {
                            out.push_str(",\n");
                        }
                        pad(depth + 1, out);
                        write(item, depth + 1, out);
                    }
                    out.push('\n');
                    pad(depth, out);
                    out.push(']');
                }
                Value::Object(members) => {
                    out.push_str("{\n");
                    for (n, (k, item)) in members.iter().enumerate() {
                        if n > 0 {
                            out.push_str(",\n");
                        }
                        pad(depth + 1, out);
                        write_ascii_string(k, out);
                        out.push_str(": ");
                        write(item, depth + 1, out);
                    }
                    out.push('\n');
                    pad(depth, out);
                    out.push('}');
                }
            }
        }
        let mut out = String::new();
        write(self, 0, &mut out);
        out
    }

    /// `json.dumps(value, ensure_ascii=False)`: insertion order, `", "` and `": "`
    /// separators, raw non-ASCII. The line separators that Python's `splitlines` honours
    /// (U+0085, U+2028, U+2029) are escaped so a JSONL file stays one row per line
    /// (forum-spec §5.3 lists what happens otherwise).
    pub fn python_dumps(&self) -> String {
        let mut out = String::new();
        write_python(self, &mut out);
        out
    }
}

/// Objects with at most this many members find a repeated key by scanning; larger ones keep
/// an index, so building an object of n keys costs O(n), not O(n²).
const SCAN_MEMBERS: usize = 16;

/// Collects an object's members with Python's dict semantics for repeated keys (first
/// position, last value) in time linear in the number of members.
#[derive(Default)]
struct Members {
    list: Vec<(String, Value)>,
    /// Key → position in `list`, built once the object outgrows [`SCAN_MEMBERS`].
    index: Option<HashMap<String, usize>>,
}

impl Members {
    fn insert(&mut self, k: String, v: Value) {
        if let Some(index) = &mut self.index {
            match index.entry(k) {
                Entry::Occupied(slot) => self.list[*slot.get()].1 = v,
                Entry::Vacant(slot) => {
                    self.list.push((slot.key().clone(), v));
                    slot.insert(self.list.len() - 1);
                }
            }
            return;
        }
        if let Some(slot) = self.list.iter_mut().find(|(key, _)| *key == k) {
            slot.1 = v;
            return;
        }
        self.list.push((k, v));
        if self.list.len() > SCAN_MEMBERS {
            let index = self
                .list
                .iter()
                .enumerate()
                .map(|(n, (key, _))| (key.clone(), n))
                .collect();
            self.index = Some(index);
        }
    }
}

/// The value of a JSON number literal as Python reads it: a float when it has `.`, `e` or `E`
/// (overflowing to an infinity), an int of any width otherwise.
fn number_from_text(lit: &str) -> Value {
    if lit.contains(['.', 'e', 'E']) {
        Value::Float(lit.parse().unwrap_or(f64::NAN))
    } else {
        Int::parse(lit).map_or(Value::Float(f64::NAN), Value::Int)
    }
}

/// A serde_json number holding exactly the literal `lit` (serde_json keeps the text with its
/// `arbitrary_precision` feature).
fn exact_number(lit: &str) -> Option<serde_json::Value> {
    lit.parse::<serde_json::Number>()
        .ok()
        .map(serde_json::Value::Number)
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(i) => out.push_str(&i.0),
        Value::Float(f) => out.push_str(&python_float_json(*f)),
        Value::Str(s) => write_ascii_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<&(String, Value)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (n, (k, v)) in sorted.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_ascii_string(k, out);
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
    }
}

fn write_python(v: &Value, out: &mut String) {
    match v {
        Value::Str(s) => write_raw_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_python(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (n, (k, v)) in members.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_raw_string(k, out);
                out.push_str(": ");
                write_python(v, out);
            }
            out.push('}');
        }
        other => write_canonical(other, out),
    }
}

fn push_u_escape(out: &mut String, unit: u32) {
    let _ = write!(out, "\\u{unit:04x}");
}

fn push_common_escape(c: char, out: &mut String) -> bool {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        c if (c as u32) < 0x20 => push_u_escape(out, c as u32),
        _ => return false,
    }
    true
}

/// A JSON string with Python's `ensure_ascii=True` escaping (forum-spec §1.2).
pub(crate) fn write_ascii_string(s: &str, out: &mut String) {
    out.push('"');
    // Printable ASCII other than `"` and `\` passes through unchanged: copy such runs whole.
    let plain = |b: u8| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\';
    let bytes = s.as_bytes();
    let run = bytes.iter().position(|b| !plain(*b)).unwrap_or(bytes.len());
    out.push_str(&s[..run]);
    for c in s[run..].chars() {
        if push_common_escape(c, out) {
            continue;
        }
        let cp = c as u32;
        if cp > 0x7e {
            if cp > 0xffff {
                let v = cp - 0x10000;
                push_u_escape(out, 0xd800 + (v >> 10));
                push_u_escape(out, 0xdc00 + (v & 0x3ff));
            } else {
                push_u_escape(out, cp);
            }
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

fn write_raw_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        if push_common_escape(c, out) {
            continue;
        }
        if matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}') {
            push_u_escape(out, c as u32);
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

/// A float as Python's `json.dumps` writes it: `repr`, or `NaN` / `Infinity` / `-Infinity`.
pub(crate) fn python_float_json(x: f64) -> String {
    if x.is_nan() {
        "NaN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        python_float_repr(x)
    }
}

/// Python's `repr(float)`: the shortest round-trip digits, fixed notation when the decimal
/// exponent is in (-4, 16], scientific otherwise (forum-spec §1.3).
pub fn python_float_repr(x: f64) -> String {
    let mut out = String::with_capacity(24);
    float::push_repr(&mut out, x);
    out
}

/// Appends [`python_float_json`] of `x` to `out`.
pub(crate) fn push_python_float_json(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("NaN");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        float::push_repr(out, x);
    }
}

/// Whether `text` is exactly [`python_float_json`] of `x`, where `x` is what `text` parses to.
pub(crate) fn is_python_float_json(x: f64, text: &str) -> bool {
    float::is_short_decimal(text) || {
        let mut repr = String::with_capacity(24);
        push_python_float_json(&mut repr, x);
        repr == text
    }
}

/// Python's `'%.6f' % x` (`nan`, `inf`, `-inf` for those).
pub fn python_fixed6(x: f64) -> String {
    let mut out = String::with_capacity(24);
    float::push_fixed6(&mut out, x);
    out
}

/// Appends [`python_fixed6`] of `x` to `out`.
pub(crate) fn push_python_fixed6(out: &mut String, x: f64) {
    float::push_fixed6(out, x);
}

/// Reads a JSON text the way Python's `json.loads` does: `NaN`, `Infinity` and `-Infinity`
/// are accepted, numbers keep their int/float identity, repeated keys keep the last value,
/// raw control characters inside strings are refused. A lone UTF-16 surrogate escape has no
/// UTF-8 form and is refused with its own message.
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        text,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("extra data after the JSON value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn err(&self, message: &str) -> ParseError {
        ParseError {
            message: message.to_string(),
            offset: self.i,
        }
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.err("JSON nested too deeply"));
        }
        let Some(&b) = self.s.get(self.i) else {
            return Err(self.err("expected a JSON value, found the end of the text"));
        };
        match b {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => Ok(Value::Str(self.string()?)),
            b't' if self.eat("true") => Ok(Value::Bool(true)),
            b'f' if self.eat("false") => Ok(Value::Bool(false)),
            b'n' if self.eat("null") => Ok(Value::Null),
            b'N' if self.eat("NaN") => Ok(Value::Float(f64::NAN)),
            b'I' if self.eat("Infinity") => Ok(Value::Float(f64::INFINITY)),
            b'-' if self.eat("-Infinity") => Ok(Value::Float(f64::NEG_INFINITY)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.err("expected a JSON value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.i += 1;
        let mut members = Members::default();
        self.ws();
        if self.eat("}") {
            return Ok(Value::Object(members.list));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err("expected a string key"));
            }
            let k = self.string()?;
            self.ws();
            if !self.eat(":") {
                return Err(self.err("expected ':' after an object key"));
            }
            self.ws();
            let v = self.value(depth + 1)?;
            members.insert(k, v);
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(Value::Object(members.list));
            }
            return Err(self.err("expected ',' or '}' in an object"));
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Value::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("]") {
                return Ok(Value::Array(items));
            }
            return Err(self.err("expected ',' or ']' in an array"));
        }
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let s = p.i;
            while p.i < p.s.len() && p.s[p.i].is_ascii_digit() {
                p.i += 1;
            }
            p.i - s
        };
        if self.s[self.i] == b'-' {
            self.i += 1;
        }
        match self.s.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.err("expected digits in a number")),
        }
        let int_end = self.i;
        let mut is_float = false;
        // Python's number pattern: a fraction or exponent that is not complete ends the number
        // before it, leaving the rest as extra data.
        if self.s.get(self.i) == Some(&b'.') {
            let save = self.i;
            self.i += 1;
            if digits(self) == 0 {
                self.i = save;
            } else {
                is_float = true;
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            let save = self.i;
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                self.i = save;
            } else {
                is_float = true;
            }
        }
        let lit = &self.text[start..self.i];
        if is_float {
            let f: f64 = lit.parse().map_err(|_| self.err("unreadable number"))?;
            Ok(Value::Float(f))
        } else {
            let int = Int::parse(&self.text[start..int_end]).expect("digits were checked");
            Ok(Value::Int(int))
        }
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("short \\u escape"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err("bad \\u escape"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.i < self.s.len()
                && !matches!(self.s[self.i], b'"' | b'\\')
                && self.s[self.i] >= 0x20
            {
                self.i += 1;
            }
            out.push_str(&self.text[start..self.i]);
            match self.s.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.err("unterminated string"));
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xd800..0xdc00).contains(&hi) {
                                if self.s[self.i..].starts_with(b"\\u") {
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if !(0xdc00..0xe000).contains(&lo) {
                                        return Err(self.err(LONE_SURROGATE));
                                    }
                                    0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                                } else {
                                    return Err(self.err(LONE_SURROGATE));
                                }
                            } else if (0xdc00..0xe000).contains(&hi) {
                                return Err(self.err(LONE_SURROGATE));
                            } else {
                                hi
                            };
                            out.push(char::from_u32(cp).expect("surrogates were excluded"));
                        }
                        _ => {
                            self.i -= 1;
                            return Err(self.err("invalid escape in a string"));
                        }
                    }
                }
                Some(_) => return Err(self.err("raw control character in a string (escape it)")),
            }
        }
    }
}

const LONE_SURROGATE: &str =
    "lone UTF-16 surrogate escape in a string: it has no UTF-8 form and cannot be stored";

mod float;

#[cfg(test)]
mod tests;
