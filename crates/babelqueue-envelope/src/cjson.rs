//! What Redis's Lua `cjson` changes in the *meaning* of a JSON text it decodes and encodes
//! again.
//!
//! Laravel's Redis queue scripts run `cjson.encode(cjson.decode(job))` on the server whenever a
//! Laravel worker pops a job (to count the attempt), and the re-encoded text is what its release
//! and its recovery of an expired reservation put back. Measured against Redis 7.0.15's
//! cjson (`EVAL "return cjson.encode(cjson.decode(ARGV[1]))"`), that round trip:
//!
//! * keeps 14 significant digits of every number (`%.14g`): `123456789012345` becomes
//!   `1.2345678901234e+14`, 2^64 becomes `1.844674407371e+19`, `0.30000000000000004` becomes
//!   `0.3`, the subnormal `1e-320` becomes `9.9998886718268e-321`, `1e-400` becomes `0`;
//! * writes every empty array as `{}` (a Lua table cannot tell them apart), at any depth;
//! * keeps only the last of repeated member names;
//! * fails on a number beyond a double (`1e400`: "Cannot serialise number: must not be NaN or
//!   Inf"), on a lone surrogate escape (`"\ud800"`: "invalid unicode escape code"), and on
//!   nesting deeper than [`CJSON_MAX_DEPTH`] ("Found too many nested data structures").
//!
//! It also changes spellings that mean the same: member order, `/` written `\/`, `1.50` written
//! `1.5`, `1e2` written `100`, `\u00e9` written as the UTF-8 character, control characters
//! escaped as `\u001f`. [`cjson_changes`] reports only changes of meaning: a value that differs
//! after the round trip (compared as exact decimals, as JSON types and as member sets), or a
//! text cjson fails on.

use alloc::borrow::Cow;
use alloc::collections::BTreeSet;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write as _};

use crate::json::path;
use crate::json::scan::{Scanner, StrSpan, SyntaxError, SyntaxErrorKind};

/// The deepest nesting of arrays and objects cjson decodes and encodes (the root is level 1):
/// 1000 nested arrays round-trip, 1001 fail.
pub const CJSON_MAX_DEPTH: usize = 1000;

/// The significant digits cjson writes a number with (`encode_number_precision`, `%.14g`).
pub const CJSON_PRECISION: usize = 14;

/// The longest literal a [`CjsonFinding`] keeps (bytes; a longer one is cut at a character
/// boundary and ends with `…`).
const LITERAL_CAP: usize = 64;

/// What the cjson round trip does to one value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CjsonChange {
    /// A number whose value changes at 14 significant digits; cjson writes it as this.
    Rounded(String),
    /// An empty array: cjson writes `{}`.
    EmptyArray,
    /// A member name repeated in one object: cjson keeps only the last value.
    DuplicateMember,
    /// A number beyond a double (`1e400`): cjson decodes it as infinity and cannot encode it.
    NotFinite,
    /// A string (or member name) with a lone surrogate escape: cjson cannot decode it.
    LoneSurrogate,
    /// Nesting deeper than [`CJSON_MAX_DEPTH`]: cjson cannot decode it.
    TooDeep,
    /// Not strict JSON text: reported whole (cjson refuses it or reads it its own way).
    NotJson(SyntaxError),
    /// The text is not UTF-8.
    NotUtf8,
}

impl CjsonChange {
    /// Whether cjson fails on the text (a decode or encode error) instead of rewriting it; a
    /// text that is not strict JSON counts as one. A script that removed the job before its
    /// `cjson` call (Laravel's pop) then loses it.
    pub fn fails(&self) -> bool {
        !matches!(
            self,
            CjsonChange::Rounded(_) | CjsonChange::EmptyArray | CjsonChange::DuplicateMember
        )
    }
}

/// One change of meaning the cjson round trip makes: where, what was written, what happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CjsonFinding {
    /// The member, dotted from the root (`data.items[2].n`; a name that is empty or holds `.`,
    /// `[`, `]`, `"`, `\`, whitespace or a control character is written as its literal in
    /// brackets: `data["a.b"]`); empty for the root value.
    pub path: String,
    /// The literal as written (a number, `[]`, a quoted member name or string), cut to 64 bytes.
    pub literal: String,
    /// What cjson does to it.
    pub change: CjsonChange,
}

impl fmt::Display for CjsonFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str("the body")?;
        } else {
            f.write_str(&self.path)?;
        }
        let literal = &self.literal;
        match &self.change {
            CjsonChange::Rounded(to) => write!(f, ": {literal} becomes {to}"),
            CjsonChange::EmptyArray => write!(f, ": {literal} becomes {{}}"),
            CjsonChange::DuplicateMember => write!(
                f,
                ": the member name {literal} is repeated; only the last value is kept"
            ),
            CjsonChange::NotFinite => write!(
                f,
                ": {literal} is beyond a double; cjson cannot encode it (the round trip fails)"
            ),
            CjsonChange::LoneSurrogate => write!(
                f,
                ": {literal} holds a lone surrogate escape; cjson cannot decode it (the round trip fails)"
            ),
            CjsonChange::TooDeep => write!(
                f,
                ": nested deeper than {CJSON_MAX_DEPTH} levels; cjson cannot decode it (the round trip fails)"
            ),
            CjsonChange::NotJson(e) => write!(f, ": not strict JSON text ({e})"),
            CjsonChange::NotUtf8 => f.write_str(": not UTF-8 text"),
        }
    }
}

/// Every change of meaning `cjson.encode(cjson.decode(body))` makes to `body`, in document
/// order; empty when the round trip keeps what the body says.
///
/// ```
/// use babelqueue_envelope::{CjsonChange, cjson_changes};
///
/// let found = cjson_changes(br#"{"data":{"items":[{"n":123456789012345}],"tags":[]}}"#);
/// assert_eq!(found.len(), 2);
/// assert_eq!(found[0].path, "data.items[0].n");
/// assert_eq!(found[0].change, CjsonChange::Rounded("1.2345678901234e+14".into()));
/// assert_eq!(found[1].to_string(), "data.tags: [] becomes {}");
/// // Spellings cjson changes without changing the meaning are not reported.
/// assert!(cjson_changes(br#"{"b":1.50,"a":"x/y","e":"\u00e9","h":1e2}"#).is_empty());
/// ```
pub fn cjson_changes(body: &[u8]) -> Vec<CjsonFinding> {
    let Ok(text) = core::str::from_utf8(body) else {
        return alloc::vec![CjsonFinding {
            path: String::new(),
            literal: String::new(),
            change: CjsonChange::NotUtf8,
        }];
    };
    let mut walk = Walk {
        text,
        path: String::new(),
        found: Vec::new(),
    };
    if let Err(e) = walk.run() {
        let path = walk.path.clone();
        walk.found.push(CjsonFinding {
            path,
            literal: String::new(),
            change: CjsonChange::NotJson(e),
        });
    }
    walk.found
}

/// How cjson writes the number `literal` (RFC 8259 grammar): `%.14g` of its nearest double
/// (`1.2345678901234e+14`, `100`, `1e-05`, `-0`); `None` when it is beyond a double, which
/// cjson cannot encode.
///
/// ```
/// use babelqueue_envelope::cjson::cjson_number;
///
/// assert_eq!(cjson_number("18446744073709551616").as_deref(), Some("1.844674407371e+19"));
/// assert_eq!(cjson_number("1.50").as_deref(), Some("1.5"));
/// assert_eq!(cjson_number("1E2").as_deref(), Some("100"));
/// assert_eq!(cjson_number("1e400"), None);
/// ```
pub fn cjson_number(literal: &str) -> Option<String> {
    let value: f64 = literal.parse().ok()?;
    value.is_finite().then(|| g14(value))
}

/// `printf("%.14g", value)` for a finite `value`. Rust's `{:.13e}` rounds the exact binary
/// value half to even, as glibc's printf does.
fn g14(value: f64) -> String {
    let scientific = alloc::format!("{:.*e}", CJSON_PRECISION - 1, value);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(24);
    if mantissa.starts_with('-') {
        out.push('-');
    }
    // %g: fixed notation when -4 <= exponent < precision, else scientific; trailing zeros of
    // the fraction (and a bare point) dropped.
    let precision = i32::try_from(CJSON_PRECISION).unwrap_or(14);
    if (-4..precision).contains(&exponent) {
        let (int, frac) = if exponent >= 0 {
            let split = usize::try_from(exponent).unwrap_or(0) + 1;
            (
                Cow::Borrowed(&digits[..split]),
                Cow::Borrowed(&digits[split..]),
            )
        } else {
            let zeros = usize::try_from(-exponent - 1).unwrap_or(0);
            let mut frac = "0".repeat(zeros);
            frac.push_str(&digits);
            (Cow::Borrowed("0"), Cow::Owned(frac))
        };
        out.push_str(&int);
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
    } else {
        out.push_str(&digits[..1]);
        let frac = digits[1..].trim_end_matches('0');
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        let _ = write!(out, "{:02}", exponent.unsigned_abs());
    }
    out
}

/// A number literal as an exact decimal: `0.<digits> × 10^point`, the digits without leading
/// or trailing zeros (none for zero, whatever its sign).
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    point: i64,
}

impl Decimal {
    /// Reads a literal in the RFC 8259 grammar (already validated).
    fn of(literal: &str) -> Decimal {
        let b = literal.as_bytes();
        let negative = b.first() == Some(&b'-');
        let mantissa_end = b
            .iter()
            .position(|c| matches!(c, b'e' | b'E'))
            .unwrap_or(b.len());
        let exponent = b.get(mantissa_end + 1..).map_or(0, exponent_of);
        let mut digits = Vec::new();
        let mut int_digits: i64 = 0;
        let mut in_fraction = false;
        for &c in &b[..mantissa_end] {
            match c {
                b'.' => in_fraction = true,
                b'0'..=b'9' => {
                    if digits.is_empty() && c == b'0' {
                        // A leading zero: before the point it says nothing; after it, it moves
                        // the point.
                        if in_fraction {
                            int_digits -= 1;
                        }
                        continue;
                    }
                    digits.push(c);
                    if !in_fraction {
                        int_digits += 1;
                    }
                }
                _ => {}
            }
        }
        while digits.last() == Some(&b'0') {
            digits.pop();
        }
        if digits.is_empty() {
            return Decimal {
                negative: false,
                digits,
                point: 0,
            };
        }
        Decimal {
            negative,
            digits,
            point: int_digits.saturating_add(exponent),
        }
    }
}

/// The exponent digits after `e`/`E` (with their sign), saturating far beyond any double.
fn exponent_of(text: &[u8]) -> i64 {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let mut value: i64 = 0;
    for &d in digits {
        value = value
            .saturating_mul(10)
            .saturating_add(i64::from(d.wrapping_sub(b'0')))
            .min(i64::MAX / 4);
    }
    if negative { -value } else { value }
}

/// What cjson does to the number `literal`, or `None` when its value survives.
fn number_change(literal: &str) -> Option<CjsonChange> {
    // Fast path: without an exponent, at most 14 digits are a value between 1e-13 and 1e14
    // with at most 14 significant digits, which a double and `%.14g` carry exactly.
    let plain = !literal.bytes().any(|c| matches!(c, b'e' | b'E'));
    if plain && literal.bytes().filter(u8::is_ascii_digit).count() <= CJSON_PRECISION {
        return None;
    }
    let Some(written) = cjson_number(literal) else {
        return Some(CjsonChange::NotFinite);
    };
    (Decimal::of(literal) != Decimal::of(&written)).then_some(CjsonChange::Rounded(written))
}

/// An open container of the walk.
enum Frame<'t> {
    /// An object: the path's length outside it, and the names read so far.
    Object {
        base: usize,
        names: BTreeSet<Cow<'t, str>>,
    },
    /// An array: the path's length outside it, and the index of the element being read.
    Array { base: usize, index: usize },
}

/// One pass over a text, without recursion (nesting is on an explicit stack).
struct Walk<'t> {
    text: &'t str,
    /// The path of the value being read.
    path: String,
    found: Vec<CjsonFinding>,
}

/// A syntax error at the scanner's position (the end of the text reads as `UnexpectedEnd`).
fn unexpected(s: &Scanner<'_>) -> SyntaxError {
    let kind = if s.peek().is_none() {
        SyntaxErrorKind::UnexpectedEnd
    } else {
        SyntaxErrorKind::UnexpectedCharacter
    };
    SyntaxError {
        kind,
        offset: s.pos,
    }
}

/// `literal` cut to [`LITERAL_CAP`] bytes at a character boundary (with `…`).
fn capped(literal: &str) -> String {
    if literal.len() <= LITERAL_CAP {
        return literal.to_string();
    }
    let mut end = LITERAL_CAP;
    while !literal.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::from(&literal[..end]);
    out.push('…');
    out
}

impl<'t> Walk<'t> {
    fn report(&mut self, literal: &str, change: CjsonChange) {
        self.found.push(CjsonFinding {
            path: self.path.clone(),
            literal: capped(literal),
            change,
        });
    }

    fn run(&mut self) -> Result<(), SyntaxError> {
        let text = self.text;
        let mut s = Scanner::new(text);
        s.start()?;
        let mut stack: Vec<Frame<'t>> = Vec::new();
        loop {
            // A value starts here (whitespace skipped).
            let start = s.pos;
            match s.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if stack.len() >= CJSON_MAX_DEPTH {
                        self.report(&text[start..=start], CjsonChange::TooDeep);
                        return Ok(());
                    }
                    s.pos += 1;
                    let base = self.path.len();
                    if open == b'{' {
                        let mut names = BTreeSet::new();
                        if self.member(&mut s, true, &mut names)? {
                            stack.push(Frame::Object { base, names });
                            continue;
                        }
                    } else {
                        s.skip_ws();
                        if s.peek() == Some(b']') {
                            s.pos += 1;
                            self.report(&text[start..s.pos], CjsonChange::EmptyArray);
                        } else {
                            path::push_index(&mut self.path, 0);
                            stack.push(Frame::Array { base, index: 0 });
                            continue;
                        }
                    }
                }
                Some(b'"') => {
                    s.unpaired_surrogate = false;
                    s.string()?;
                    if s.unpaired_surrogate {
                        self.report(&text[start..s.pos], CjsonChange::LoneSurrogate);
                    }
                }
                Some(b'-' | b'0'..=b'9') => {
                    let (from, to) = s.number()?;
                    let literal = &text[from..to];
                    if let Some(change) = number_change(literal) {
                        self.report(literal, change);
                    }
                }
                Some(b't') => s.literal(b"true")?,
                Some(b'f') => s.literal(b"false")?,
                Some(b'n') => s.literal(b"null")?,
                _ => return Err(unexpected(&s)),
            }
            // The value is read: on to the next one of its container, closing those that end.
            loop {
                match stack.last_mut() {
                    None => return s.finish(),
                    Some(Frame::Object { base, names }) => {
                        self.path.truncate(*base);
                        if self.member(&mut s, false, names)? {
                            break;
                        }
                        stack.pop();
                    }
                    Some(Frame::Array { base, index }) => {
                        self.path.truncate(*base);
                        s.skip_ws();
                        match s.peek() {
                            Some(b',') => {
                                s.pos += 1;
                                s.skip_ws();
                                *index += 1;
                                path::push_index(&mut self.path, *index);
                                break;
                            }
                            Some(b']') => {
                                s.pos += 1;
                                stack.pop();
                            }
                            _ => return Err(unexpected(&s)),
                        }
                    }
                }
            }
        }
    }

    /// Reads the next member name of an object (and its colon), extends the path with it and
    /// reports a repeated or unreadable name; `false` when the object ends instead.
    fn member(
        &mut self,
        s: &mut Scanner<'t>,
        first: bool,
        names: &mut BTreeSet<Cow<'t, str>>,
    ) -> Result<bool, SyntaxError> {
        s.unpaired_surrogate = false;
        let Some(span) = s.next_key(first)? else {
            return Ok(false);
        };
        let text = self.text;
        // The name as written, quotes included.
        let literal = &text[span.start - 1..=span.end];
        self.push_name(span, literal);
        if s.unpaired_surrogate {
            self.report(literal, CjsonChange::LoneSurrogate);
        } else if !names.insert(span.decoded(text)) {
            self.report(literal, CjsonChange::DuplicateMember);
        }
        Ok(true)
    }

    /// Appends a member name, written as `literal`, to the path (see [`path::push_member`]).
    fn push_name(&mut self, span: StrSpan, literal: &str) {
        path::push_member(&mut self.path, &span.decoded(self.text), literal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec;

    /// `(path, literal, change)` of each finding.
    type Found = Vec<(String, String, CjsonChange)>;

    fn found(body: &str) -> Found {
        cjson_changes(body.as_bytes())
            .into_iter()
            .map(|f| (f.path, f.literal, f.change))
            .collect()
    }

    fn rounded(to: &str) -> CjsonChange {
        CjsonChange::Rounded(to.into())
    }

    /// One row per case of the table in docs/transports/redis.md: the member `n` holding the
    /// literal, what cjson writes (measured on Redis 7.0.15), and whether the value changes.
    #[test]
    fn numbers_change_exactly_when_14_significant_digits_do_not_hold_them() {
        let rows: &[(&str, Option<&str>, bool)] = &[
            ("12345678901234", Some("12345678901234"), false),
            ("99999999999999", Some("99999999999999"), false),
            ("123456789012345", Some("1.2345678901234e+14"), true),
            ("-123456789012345", Some("-1.2345678901234e+14"), true),
            ("123456789012340", Some("1.2345678901234e+14"), false),
            ("100000000000000", Some("1e+14"), false),
            ("999999999999999", Some("1e+15"), true),
            ("9007199254740993", Some("9.007199254741e+15"), true),
            ("18446744073709551616", Some("1.844674407371e+19"), true),
            ("12345678901234567890", Some("1.2345678901235e+19"), true),
            ("100000000000000000000", Some("1e+20"), false),
            ("0.1", Some("0.1"), false),
            ("1.50", Some("1.5"), false),
            ("1.0", Some("1"), false),
            ("1e2", Some("100"), false),
            ("1E2", Some("100"), false),
            ("1e300", Some("1e+300"), false),
            ("-0", Some("-0"), false),
            ("-0.0", Some("-0"), false),
            ("0.30000000000000004", Some("0.3"), true),
            ("3.14159265358979", Some("3.1415926535898"), true),
            ("123456789.123456789", Some("123456789.12346"), true),
            ("0.1000000000000000000000000001", Some("0.1"), true),
            ("0.10000000000000", Some("0.1"), false),
            ("12345678901234.5", Some("12345678901234"), true),
            ("1234567890123.45", Some("1234567890123.4"), true),
            ("0.0001", Some("0.0001"), false),
            ("0.00001", Some("1e-05"), false),
            ("1.5e-5", Some("1.5e-05"), false),
            ("1e-320", Some("9.9998886718268e-321"), true),
            ("5e-324", Some("4.9406564584125e-324"), true),
            ("1e-310", Some("1e-310"), false),
            (
                "2.2250738585072014e-308",
                Some("2.2250738585072e-308"),
                true,
            ),
            ("1.7976931348623157e308", Some("1.7976931348623e+308"), true),
            ("1e-400", Some("0"), true),
            ("-1e-400", Some("-0"), true),
            ("1e400", None, true),
            ("-1e400", None, true),
        ];
        for &(literal, written, changed) in rows {
            assert_eq!(cjson_number(literal).as_deref(), written, "{literal}");
            let want = match (written, changed) {
                (_, false) => vec![],
                (Some(to), true) => vec![("n".into(), literal.into(), rounded(to))],
                (None, true) => vec![("n".into(), literal.into(), CjsonChange::NotFinite)],
            };
            assert_eq!(found(&format!(r#"{{"n":{literal}}}"#)), want, "{literal}");
        }
        let huge = format!("1{}", "0".repeat(400));
        assert_eq!(cjson_number(&huge), None);
        let long = format!("1{}", "0".repeat(300));
        assert_eq!(cjson_number(&long).as_deref(), Some("1e+300"));
        assert!(found(&format!(r#"{{"n":{long}}}"#)).is_empty());
    }

    #[test]
    fn structures_strings_and_names_change_as_cjson_changes_them() {
        let none: Found = vec![];
        let row = |path: &str, literal: &str, change: CjsonChange| {
            vec![(String::from(path), String::from(literal), change)]
        };
        let rows: Vec<(&str, Found)> = vec![
            (r#"{"data":[]}"#, row("data", "[]", CjsonChange::EmptyArray)),
            (
                r#"{"data":{"a":[ ]}}"#,
                row("data.a", "[ ]", CjsonChange::EmptyArray),
            ),
            (r#"{"a":[[]]}"#, row("a[0]", "[]", CjsonChange::EmptyArray)),
            ("[]", row("", "[]", CjsonChange::EmptyArray)),
            (r#"{"a":[null]}"#, none.clone()),
            (r#"{"a":[1,null,3]}"#, none.clone()),
            (r#"{"a":{}}"#, none.clone()),
            ("{}", none.clone()),
            (
                r#"{"a":1,"a":2}"#,
                row("a", r#""a""#, CjsonChange::DuplicateMember),
            ),
            (
                r#"{"a":1,"\u0061":2}"#,
                row("a", r#""\u0061""#, CjsonChange::DuplicateMember),
            ),
            (r#"{"a":{"x":1},"b":{"x":1}}"#, none.clone()),
            (r#"{"b":1,"a":2,"c":3}"#, none.clone()),
            (r#"{"s":"a/b","t":"a\/b"}"#, none.clone()),
            (r#"{"s":"\u00e9","t":"é"}"#, none.clone()),
            ("{\"s\":\"\u{2028}\",\"t\":\"\\u2028\"}", none.clone()),
            (r#"{"s":"\u0001\u001f\u007f\t\n\u0000"}"#, none.clone()),
            (r#"{"s":"\ud83d\ude00"}"#, none.clone()),
            (
                r#"{"s":"\ud800"}"#,
                row("s", r#""\ud800""#, CjsonChange::LoneSurrogate),
            ),
            (
                r#"{"s":"\udc00x"}"#,
                row("s", r#""\udc00x""#, CjsonChange::LoneSurrogate),
            ),
            (
                r#"{"\ud800":1}"#,
                row(r#"["\ud800"]"#, r#""\ud800""#, CjsonChange::LoneSurrogate),
            ),
            (r#"{"a":true,"b":false,"c":null}"#, none.clone()),
        ];
        for (body, want) in rows {
            assert_eq!(found(body), want, "{body}");
        }
    }

    #[test]
    fn paths_are_dotted_and_every_change_is_reported_in_order() {
        let body = r#"{"job":"urn:x","data":{"items":[{"n":1},{"n":2},{"n":123456789012345}],"a.b":[],"":1e400,"x":{"y":[[],{"z":0.30000000000000004}]}},"attempts":0}"#;
        let paths: Vec<String> = cjson_changes(body.as_bytes())
            .into_iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(
            paths,
            [
                "data.items[2].n: 123456789012345 becomes 1.2345678901234e+14",
                r#"data["a.b"]: [] becomes {}"#,
                r#"data[""]: 1e400 is beyond a double; cjson cannot encode it (the round trip fails)"#,
                "data.x.y[0]: [] becomes {}",
                "data.x.y[1].z: 0.30000000000000004 becomes 0.3",
            ]
        );
    }

    #[test]
    fn cjson_fails_on_lone_surrogates_infinities_and_nesting_beyond_1000() {
        for (body, fails) in [
            (r#"{"n":1e400}"#, true),
            (r#"{"s":"\ud800"}"#, true),
            (r#"{"n":123456789012345}"#, false),
            (r#"{"a":[]}"#, false),
            (r#"{"a":1,"a":1}"#, false),
        ] {
            let found = cjson_changes(body.as_bytes());
            assert_eq!(found.len(), 1, "{body}");
            assert_eq!(found[0].change.fails(), fails, "{body}");
        }
        let nested = |levels: usize| format!("{}1{}", "[".repeat(levels), "]".repeat(levels));
        assert!(cjson_changes(nested(CJSON_MAX_DEPTH).as_bytes()).is_empty());
        let deep = cjson_changes(nested(CJSON_MAX_DEPTH + 1).as_bytes());
        assert_eq!(deep.len(), 1);
        assert_eq!(deep[0].change, CjsonChange::TooDeep);
        assert_eq!(deep[0].path, format!("{}", "[0]".repeat(CJSON_MAX_DEPTH)));
    }

    #[test]
    fn text_that_is_not_strict_json_is_reported_whole() {
        let found = cjson_changes(b"\xff");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].change, CjsonChange::NotUtf8);
        for body in [
            "",
            "{",
            r#"{"a":NaN}"#,
            r#"{"a":1}x"#,
            "[1,]",
            r#"{"a":01}"#,
        ] {
            let found = cjson_changes(body.as_bytes());
            assert!(
                matches!(
                    found.last().map(|f| &f.change),
                    Some(CjsonChange::NotJson(_))
                ),
                "{body:?}: {found:?}"
            );
            assert!(found.iter().all(|f| f.change.fails()), "{body:?}");
        }
    }

    #[test]
    fn a_long_literal_is_cut_at_a_character_boundary() {
        let body = format!(r#"{{"s":"{}\ud800"}}"#, "é".repeat(40));
        let found = cjson_changes(body.as_bytes());
        assert_eq!(found.len(), 1);
        assert!(found[0].literal.ends_with('…'));
        assert!(found[0].literal.len() <= LITERAL_CAP + '…'.len_utf8());
    }

    mod properties {
        use super::super::*;
        use alloc::format;
        use alloc::string::String;
        use proptest::prelude::*;

        /// A decimal literal of 1 to 30 significant digits (the first is not 0) with the point
        /// anywhere and an exponent that keeps it between 1e-280 and 1e280: well inside the
        /// normal doubles, where 14 significant digits always survive a double.
        fn normal_literal() -> impl Strategy<Value = (String, usize)> {
            (
                "[1-9][0-9]{0,29}",
                any::<prop::sample::Index>(),
                -250i32..250,
                any::<bool>(),
                any::<bool>(),
            )
                .prop_map(|(digits, point, exponent, negative, upper)| {
                    let significant = digits.trim_end_matches('0').len();
                    let point = point.index(digits.len() + 1);
                    let (int, frac) = digits.split_at(point);
                    let int = if int.is_empty() { "0" } else { int };
                    let sign = if negative { "-" } else { "" };
                    let e = if upper { 'E' } else { 'e' };
                    let literal = if frac.is_empty() {
                        format!("{sign}{int}{e}{exponent}")
                    } else {
                        format!("{sign}{int}.{frac}{e}{exponent}")
                    };
                    (literal, significant)
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            /// Among normal doubles the rule is "more than 14 significant digits", whatever
            /// the spelling.
            #[test]
            fn a_normal_number_changes_iff_it_has_more_than_14_significant_digits(
                (literal, significant) in normal_literal()
            ) {
                let found = cjson_changes(format!(r#"{{"n":{literal}}}"#).as_bytes());
                prop_assert_eq!(found.len(), usize::from(significant > CJSON_PRECISION), "{}", literal);
                if let Some(f) = found.first() {
                    prop_assert!(matches!(f.change, CjsonChange::Rounded(_)));
                }
            }

            /// What cjson writes, cjson keeps: a second pop changes nothing more (subnormals
            /// included).
            #[test]
            fn what_cjson_writes_survives_another_round_trip(bits in any::<u64>()) {
                let value = f64::from_bits(bits);
                prop_assume!(value.is_finite());
                let written = cjson_number(&format!("{value:e}")).unwrap_or_default();
                prop_assert_eq!(cjson_number(&written), Some(written.clone()));
                prop_assert!(cjson_changes(format!(r#"{{"n":{written}}}"#).as_bytes()).is_empty(), "{}", written);
            }

            /// Integers: changed exactly when the digits left without trailing zeros are more
            /// than 14; and what cjson writes is their double at 14 digits.
            #[test]
            fn an_integer_changes_iff_it_has_more_than_14_significant_digits(n in any::<u64>()) {
                let literal = n.to_string();
                let significant = literal.trim_end_matches('0').len();
                let found = cjson_changes(format!(r#"{{"n":{literal}}}"#).as_bytes());
                prop_assert_eq!(found.len(), usize::from(n != 0 && significant > CJSON_PRECISION));
            }
        }
    }
}
