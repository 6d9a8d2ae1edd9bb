//! A strict RFC 8259 scanner over UTF-8 text.
//!
//! `serde_json` cannot answer the questions the contract asks: it collapses repeated members,
//! reads `-0` as a float, rejects `1e400` before anyone can say *where* it was, and stops at 128
//! levels. This scanner walks the token stream without building a tree, so the classifier can
//! type-check every occurrence of a repeated member, look at number literals as written, and the
//! codec can keep values as their original (minified) text.
//!
//! The scanner never recurses: nesting is tracked on an explicit stack, bounded by
//! [`MAX_DEPTH`].

use core::fmt;

use super::JsonKind;

/// The deepest nesting of arrays and objects the codec reads (the root object is level 1).
///
/// CPython's `json` module, which the reference SDK uses, gives up at about the same depth
/// (its recursion limit); a deeper body is classified as poison.
pub const MAX_DEPTH: usize = 1000;

/// Why a text is not one strict RFC 8259 JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyntaxErrorKind {
    /// The text is empty or only whitespace.
    Empty,
    /// The text ends in the middle of a value.
    UnexpectedEnd,
    /// A character that cannot start or continue a value here (a BOM, `NaN`, a single quote …).
    UnexpectedCharacter,
    /// A number that is not in the RFC 8259 grammar (a leading zero, a bare `-`, `1.`, `1e` …).
    InvalidNumber,
    /// A backslash escape that JSON does not define.
    InvalidEscape,
    /// A raw control character (below U+0020) inside a string.
    ControlCharacter,
    /// Something follows the value (a second object, trailing words).
    TrailingData,
    /// Arrays and objects nest deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// A syntax error and the byte offset where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxError {
    /// What is wrong.
    pub kind: SyntaxErrorKind,
    /// Byte offset into the text.
    pub offset: usize,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            SyntaxErrorKind::Empty => "the text is empty or only whitespace",
            SyntaxErrorKind::UnexpectedEnd => "the text ends inside a value",
            SyntaxErrorKind::UnexpectedCharacter => "unexpected character",
            SyntaxErrorKind::InvalidNumber => "malformed number",
            SyntaxErrorKind::InvalidEscape => "invalid escape sequence",
            SyntaxErrorKind::ControlCharacter => "raw control character in a string",
            SyntaxErrorKind::TrailingData => "data after the JSON value",
            SyntaxErrorKind::TooDeep => "nesting deeper than 1000 levels",
        };
        write!(f, "{what} at byte {}", self.offset)
    }
}

/// The inner span of a string literal (without its quotes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StrSpan {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// Whether the literal holds an escape (else its text is the string itself).
    pub(crate) escaped: bool,
}

impl StrSpan {
    /// The decoded string of this span of `text` (borrowed when it holds no escape).
    #[inline]
    pub(crate) fn decoded<'t>(&self, text: &'t str) -> alloc::borrow::Cow<'t, str> {
        let inner = &text[self.start..self.end];
        if self.escaped {
            unescape(inner)
        } else {
            alloc::borrow::Cow::Borrowed(inner)
        }
    }
}

/// The span of one scanned value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ValueSpan {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: JsonKind,
    /// Whether insignificant whitespace occurs inside the span (the value is not minified).
    pub(crate) spaced: bool,
}

/// JSON whitespace (RFC 8259): space, tab, line feed, carriage return. Not VT, FF, or a BOM.
#[inline]
pub(crate) fn is_json_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Cursor over the bytes of a `str` (so every multi-byte sequence is valid UTF-8).
pub(crate) struct Scanner<'a> {
    src: &'a str,
    /// The same text, shared, when the values read are to be slices of it.
    shared: Option<&'a alloc::sync::Arc<str>>,
    b: &'a [u8],
    pub(crate) pos: usize,
    /// Set when a string literal (key or value) holds a `\uD800`–`\uDFFF` escape that is not
    /// half of an immediately adjacent high+low pair.
    pub(crate) unpaired_surrogate: bool,
}

/// The position of the first byte at or after `pos` that ends a run of plain string
/// characters (a quote, a backslash or a control character), or `b.len()`.
///
/// Eight bytes at a time: for each of the three tests, a byte that matches makes the
/// classic "has a zero byte" expression set that byte's high bit. The lowest flagged byte is
/// always a true match (a borrow only flags bytes above it), and the words are read
/// little-endian, so it is the first match in the text.
#[inline]
fn plain_run(b: &[u8], mut pos: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = b.get(pos..pos + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        let found = zero_in(w ^ (ONES * u64::from(b'"')))
            | zero_in(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH);
        if found != 0 {
            return pos + (found.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while let Some(&n) = b.get(pos) {
        if n == b'"' || n == b'\\' || n < 0x20 {
            break;
        }
        pos += 1;
    }
    pos
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Scanner {
            src: text,
            shared: None,
            b: text.as_bytes(),
            pos: 0,
            unpaired_surrogate: false,
        }
    }

    /// A scanner whose keys and values are read as slices of `text`, sharing it.
    pub(crate) fn shared(text: &'a alloc::sync::Arc<str>) -> Self {
        Scanner {
            shared: Some(text),
            ..Scanner::new(text)
        }
    }

    /// `text()[start..end]`, shared with the text when the scanner has it shared.
    pub(crate) fn text_of(&self, start: usize, end: usize) -> super::text::Text {
        match self.shared {
            Some(source) => super::text::Text::slice(source, start, end),
            None => super::text::Text::owned(alloc::string::String::from(&self.src[start..end])),
        }
    }

    /// The whole text being scanned.
    #[inline]
    pub(crate) fn text(&self) -> &'a str {
        self.src
    }

    #[inline]
    fn err(&self, kind: SyntaxErrorKind) -> SyntaxError {
        SyntaxError {
            kind,
            offset: self.pos,
        }
    }

    #[inline]
    fn end_or(&self, kind: SyntaxErrorKind) -> SyntaxError {
        if self.pos >= self.b.len() {
            self.err(SyntaxErrorKind::UnexpectedEnd)
        } else {
            self.err(kind)
        }
    }

    #[inline]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Skips whitespace; returns whether any was skipped.
    #[inline]
    pub(crate) fn skip_ws(&mut self) -> bool {
        let start = self.pos;
        while let Some(&c) = self.b.get(self.pos) {
            if is_json_ws(c) {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.pos != start
    }

    /// Checks that nothing but whitespace follows.
    pub(crate) fn finish(&mut self) -> Result<(), SyntaxError> {
        self.skip_ws();
        if self.pos == self.b.len() {
            Ok(())
        } else {
            Err(self.err(SyntaxErrorKind::TrailingData))
        }
    }

    /// Skips leading whitespace and reports an empty text.
    pub(crate) fn start(&mut self) -> Result<(), SyntaxError> {
        self.skip_ws();
        if self.pos == self.b.len() {
            Err(SyntaxError {
                kind: SyntaxErrorKind::Empty,
                offset: 0,
            })
        } else {
            Ok(())
        }
    }

    /// Consumes `expected` (after whitespace) or fails.
    #[inline]
    pub(crate) fn expect(&mut self, expected: u8) -> Result<(), SyntaxError> {
        self.skip_ws();
        if self.peek() == Some(expected) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.end_or(SyntaxErrorKind::UnexpectedCharacter))
        }
    }

    /// Scans a string literal starting at the current `"`.
    pub(crate) fn string(&mut self) -> Result<StrSpan, SyntaxError> {
        debug_assert_eq!(self.peek(), Some(b'"'));
        self.pos += 1;
        let start = self.pos;
        // Most strings hold neither an escape nor a control character: one run to the quote.
        let run = plain_run(self.b, start);
        if self.b.get(run) == Some(&b'"') {
            self.pos = run + 1;
            return Ok(StrSpan {
                start,
                end: run,
                escaped: false,
            });
        }
        // Otherwise the loop below goes on from where the run stopped (nothing before it can
        // have been a surrogate escape).
        self.pos = run;
        // `pending_high`: the previous item of this literal was a high-surrogate escape.
        let mut pending_high = false;
        let mut escaped = false;
        loop {
            let Some(&c) = self.b.get(self.pos) else {
                return Err(self.err(SyntaxErrorKind::UnexpectedEnd));
            };
            match c {
                b'"' => {
                    if pending_high {
                        self.unpaired_surrogate = true;
                    }
                    let end = self.pos;
                    self.pos += 1;
                    return Ok(StrSpan {
                        start,
                        end,
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    let Some(&e) = self.b.get(self.pos + 1) else {
                        self.pos += 1;
                        return Err(self.err(SyntaxErrorKind::UnexpectedEnd));
                    };
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                            if pending_high {
                                self.unpaired_surrogate = true;
                                pending_high = false;
                            }
                            self.pos += 2;
                        }
                        b'u' => {
                            let digits = self.b.get(self.pos + 2..self.pos + 6);
                            let code = digits.and_then(parse_hex4);
                            let Some(code) = code else {
                                self.pos += 1;
                                return Err(self.end_or(SyntaxErrorKind::InvalidEscape));
                            };
                            let high = (0xD800..=0xDBFF).contains(&code);
                            let low = (0xDC00..=0xDFFF).contains(&code);
                            if (pending_high && !low) || (low && !pending_high) {
                                self.unpaired_surrogate = true;
                            }
                            pending_high = high;
                            self.pos += 6;
                        }
                        _ => {
                            self.pos += 1;
                            return Err(self.err(SyntaxErrorKind::InvalidEscape));
                        }
                    }
                }
                0x00..=0x1F => return Err(self.err(SyntaxErrorKind::ControlCharacter)),
                _ => {
                    if pending_high {
                        self.unpaired_surrogate = true;
                        pending_high = false;
                    }
                    self.pos = plain_run(self.b, self.pos + 1);
                }
            }
        }
    }

    /// Scans a number literal starting at the current byte.
    pub(crate) fn number(&mut self) -> Result<(usize, usize), SyntaxError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return Err(self.err(SyntaxErrorKind::InvalidNumber));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.end_or(SyntaxErrorKind::InvalidNumber)),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.end_or(SyntaxErrorKind::InvalidNumber));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.end_or(SyntaxErrorKind::InvalidNumber));
            }
            self.digits();
        }
        Ok((start, self.pos))
    }

    #[inline]
    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    pub(crate) fn literal(&mut self, word: &[u8]) -> Result<(), SyntaxError> {
        if self.b.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err(SyntaxErrorKind::UnexpectedCharacter))
        }
    }

    /// Inside an object, after `{` or a member value: reads the next key and its colon, or
    /// consumes the closing `}` and returns `None`.
    pub(crate) fn next_key(&mut self, first: bool) -> Result<Option<StrSpan>, SyntaxError> {
        self.skip_ws();
        match self.peek() {
            Some(b'}') => {
                self.pos += 1;
                return Ok(None);
            }
            Some(b',') if !first => {
                self.pos += 1;
                self.skip_ws();
            }
            _ if first => {}
            _ => return Err(self.end_or(SyntaxErrorKind::UnexpectedCharacter)),
        }
        if self.peek() != Some(b'"') {
            return Err(self.end_or(SyntaxErrorKind::UnexpectedCharacter));
        }
        let key = self.string()?;
        self.expect(b':')?;
        self.skip_ws();
        Ok(Some(key))
    }

    /// Scans one value starting at the current byte (whitespace already skipped), at nesting
    /// level `depth` (the level of the container holding it; 0 for a root value).
    ///
    /// `on_number` sees every number literal inside the value, in document order.
    pub(crate) fn value<F: FnMut(&'a [u8])>(
        &mut self,
        depth: usize,
        on_number: &mut F,
    ) -> Result<ValueSpan, SyntaxError> {
        let start = self.pos;
        // Most member values are a string or a number: scanned without the container machinery.
        let scalar = match self.peek() {
            Some(b'"') => {
                self.string()?;
                Some(JsonKind::String)
            }
            Some(b'-' | b'0'..=b'9') => {
                let (s, e) = self.number()?;
                on_number(&self.b[s..e]);
                Some(JsonKind::Number)
            }
            _ => None,
        };
        if let Some(kind) = scalar {
            return Ok(ValueSpan {
                start,
                end: self.pos,
                kind,
                spaced: false,
            });
        }
        let mut kind = None;
        let mut spaced = false;
        // Open containers: `true` for an object, `false` for an array.
        let mut stack = Containers::default();
        'value: loop {
            // Parse one value.
            let Some(c) = self.peek() else {
                return Err(self.err(SyntaxErrorKind::UnexpectedEnd));
            };
            let this = match c {
                b'{' | b'[' => {
                    if depth + stack.len() + 1 > MAX_DEPTH {
                        return Err(self.err(SyntaxErrorKind::TooDeep));
                    }
                    let object = c == b'{';
                    self.pos += 1;
                    spaced |= self.skip_ws();
                    let close = if object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        if object {
                            JsonKind::Object
                        } else {
                            JsonKind::Array
                        }
                    } else {
                        if object {
                            if self.peek() != Some(b'"') {
                                return Err(self.end_or(SyntaxErrorKind::UnexpectedCharacter));
                            }
                            self.string()?;
                            spaced |= self.skip_ws();
                            if self.peek() != Some(b':') {
                                return Err(self.end_or(SyntaxErrorKind::UnexpectedCharacter));
                            }
                            self.pos += 1;
                            spaced |= self.skip_ws();
                        }
                        if kind.is_none() {
                            kind = Some(if object {
                                JsonKind::Object
                            } else {
                                JsonKind::Array
                            });
                        }
                        stack.push(object);
                        continue 'value;
                    }
                }
                b'"' => {
                    self.string()?;
                    JsonKind::String
                }
                b'-' | b'0'..=b'9' => {
                    let (s, e) = self.number()?;
                    on_number(&self.b[s..e]);
                    JsonKind::Number
                }
                b't' => {
                    self.literal(b"true")?;
                    JsonKind::Bool
                }
                b'f' => {
                    self.literal(b"false")?;
                    JsonKind::Bool
                }
                b'n' => {
                    self.literal(b"null")?;
                    JsonKind::Null
                }
                _ => return Err(self.err(SyntaxErrorKind::UnexpectedCharacter)),
            };
            if kind.is_none() {
                kind = Some(this);
            }
            // After a value: close containers or move to the next element.
            loop {
                let Some(object) = stack.last() else {
                    return Ok(ValueSpan {
                        start,
                        end: self.pos,
                        kind: kind.unwrap_or(JsonKind::Null),
                        spaced,
                    });
                };
                spaced |= self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        spaced |= self.skip_ws();
                        if object {
                            if self.peek() != Some(b'"') {
                                return Err(self.end_or(SyntaxErrorKind::UnexpectedCharacter));
                            }
                            self.string()?;
                            spaced |= self.skip_ws();
                            if self.peek() != Some(b':') {
                                return Err(self.end_or(SyntaxErrorKind::UnexpectedCharacter));
                            }
                            self.pos += 1;
                            spaced |= self.skip_ws();
                        }
                        continue 'value;
                    }
                    Some(b'}') if object => {
                        self.pos += 1;
                        stack.pop();
                    }
                    Some(b']') if !object => {
                        self.pos += 1;
                        stack.pop();
                    }
                    _ => return Err(self.end_or(SyntaxErrorKind::UnexpectedCharacter)),
                }
            }
        }
    }
}

/// The open containers of a value being scanned, one bit each (`true` for an object), on the
/// stack: no allocation, however deep (up to [`MAX_DEPTH`], which `value` enforces first).
struct Containers {
    bits: [u64; MAX_DEPTH.div_ceil(64)],
    len: usize,
}

impl Default for Containers {
    fn default() -> Containers {
        Containers {
            bits: [0; MAX_DEPTH.div_ceil(64)],
            len: 0,
        }
    }
}

impl Containers {
    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, object: bool) {
        let (word, bit) = (self.len / 64, self.len % 64);
        if let Some(w) = self.bits.get_mut(word) {
            if object {
                *w |= 1 << bit;
            } else {
                *w &= !(1 << bit);
            }
            self.len += 1;
        }
    }

    fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    fn last(&self) -> Option<bool> {
        let top = self.len.checked_sub(1)?;
        let word = self.bits.get(top / 64)?;
        Some(word & (1 << (top % 64)) != 0)
    }
}

fn parse_hex4(digits: &[u8]) -> Option<u32> {
    let mut code = 0u32;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        code = code * 16 + u32::from(v);
    }
    (digits.len() == 4).then_some(code)
}

/// Validates `text` as exactly one JSON value (surrounding whitespace allowed).
pub(crate) fn validate(text: &str) -> Result<ValueSpan, SyntaxError> {
    validate_visiting(text, &mut |_| {})
}

/// [`validate`], showing `on_number` every number literal in document order.
pub(crate) fn validate_visiting(
    text: &str,
    on_number: &mut dyn FnMut(&[u8]),
) -> Result<ValueSpan, SyntaxError> {
    let mut s = Scanner::new(text);
    s.start()?;
    let span = s.value(0, &mut |literal| on_number(literal))?;
    s.finish()?;
    Ok(span)
}

/// Appends `text` (one valid JSON value) to `out` without insignificant whitespace.
pub(crate) fn minify_into(text: &str, out: &mut alloc::string::String) {
    let mut in_string = false;
    let mut escape = false;
    let mut run_start = 0;
    let bytes = text.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        if in_string {
            if escape {
                escape = false;
            } else if c == b'\\' {
                escape = true;
            } else if c == b'"' {
                in_string = false;
            }
        } else if c == b'"' {
            in_string = true;
        } else if is_json_ws(c) {
            out.push_str(&text[run_start..i]);
            run_start = i + 1;
        }
    }
    out.push_str(&text[run_start..]);
}

/// Decodes the inner text of a string literal (escapes resolved).
///
/// A lone surrogate escape cannot live in a Rust `str`; it reads as U+FFFD here. This only
/// affects what an accessor returns: the codec keeps and re-emits the original literal.
pub(crate) fn unescape(inner: &str) -> alloc::borrow::Cow<'_, str> {
    use alloc::borrow::Cow;
    use alloc::string::String;
    if !inner.as_bytes().contains(&b'\\') {
        return Cow::Borrowed(inner);
    }
    let b = inner.as_bytes();
    let mut out = String::with_capacity(inner.len());
    let mut i = 0;
    let mut run = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        out.push_str(&inner[run..i]);
        let e = b.get(i + 1).copied().unwrap_or(b'\\');
        match e {
            b'u' => {
                let code = b.get(i + 2..i + 6).and_then(parse_hex4).unwrap_or(0xFFFD);
                i += 6;
                if (0xD800..=0xDBFF).contains(&code) {
                    let low = if b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u') {
                        b.get(i + 2..i + 6).and_then(parse_hex4)
                    } else {
                        None
                    };
                    match low {
                        Some(low @ 0xDC00..=0xDFFF) => {
                            let c = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                            out.push(char::from_u32(c).unwrap_or('\u{FFFD}'));
                            i += 6;
                        }
                        _ => out.push('\u{FFFD}'),
                    }
                } else {
                    out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                }
            }
            other => {
                out.push(match other {
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'/' => '/',
                    b'"' => '"',
                    _ => '\\',
                });
                i += 2;
            }
        }
        run = i;
    }
    out.push_str(&inner[run.min(inner.len())..]);
    Cow::Owned(out)
}

/// The UTF-16 code units the escaped string text `inner` (between its quotes) stands for,
/// without any lossy step: a lone surrogate escape (`\ud800`) stays that one code unit, where
/// [`unescape`] must turn it into U+FFFD. Two names are the same member exactly when their code
/// units are equal (`"\u006aob"` is `"job"`, but `"\ud800"` is not `"\udc00"`).
pub(crate) fn code_units(inner: &str) -> impl Iterator<Item = u16> + '_ {
    let b = inner.as_bytes();
    let mut i = 0;
    let mut pending: Option<u16> = None;
    core::iter::from_fn(move || {
        if let Some(unit) = pending.take() {
            return Some(unit);
        }
        if i >= b.len() {
            return None;
        }
        if b[i] == b'\\' {
            let e = b.get(i + 1).copied().unwrap_or(b'\\');
            if e == b'u' {
                let unit = b.get(i + 2..i + 6).and_then(parse_hex4).unwrap_or(0xFFFD);
                i += 6;
                return u16::try_from(unit).ok();
            }
            i += 2;
            return Some(u16::from(match e {
                b'b' => 0x08,
                b'f' => 0x0C,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'/' => b'/',
                b'"' => b'"',
                _ => b'\\',
            }));
        }
        let c = inner[i..].chars().next()?;
        i += c.len_utf8();
        let mut units = [0u16; 2];
        let encoded = c.encode_utf16(&mut units);
        if encoded.len() == 2 {
            pending = Some(encoded[1]);
        }
        Some(encoded[0])
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_string_span_says_whether_it_holds_an_escape() {
        for (literal, escaped, decoded) in [
            (r#""job""#, false, "job"),
            (r#""\u006aob""#, true, "job"),
            (r#""a\"b""#, true, "a\"b"),
            (r#""""#, false, ""),
        ] {
            let mut s = super::Scanner::new(literal);
            let span = s.string().expect("a string");
            assert_eq!(span.escaped, escaped, "{literal}");
            assert_eq!(span.decoded(literal), decoded, "{literal}");
        }
    }

    /// Alternating objects and arrays `levels` deep, closed in order (or, with `swap_at`, with
    /// the wrong bracket at that level).
    fn nested(levels: usize, swap_at: Option<usize>) -> alloc::string::String {
        let mut text = alloc::string::String::new();
        for level in 0..levels {
            text.push_str(if level % 3 == 0 { "[" } else { "{\"k\":" });
        }
        text.push('1');
        for level in (0..levels).rev() {
            let object = level % 3 != 0;
            let wrong = swap_at == Some(level);
            text.push(if object != wrong { '}' } else { ']' });
        }
        text
    }

    #[test]
    fn containers_are_tracked_to_the_depth_limit_across_words() {
        for levels in [1, 63, 64, 65, 128, 129, 999, 1000] {
            let text = nested(levels, None);
            let span = super::validate(&text).unwrap_or_else(|e| panic!("{levels}: {e:?}"));
            assert_eq!(span.end, text.len());
        }
        let too_deep = super::validate(&nested(1001, None)).unwrap_err();
        assert_eq!(too_deep.kind, super::SyntaxErrorKind::TooDeep);
        // A container closed with the other bracket is refused at every depth, on either side
        // of a 64-bit word boundary.
        for at in [0, 1, 62, 63, 64, 65, 500, 998] {
            assert!(
                super::validate(&nested(999, Some(at))).is_err(),
                "swapped at {at}"
            );
        }
    }
    #[test]
    fn a_plain_run_stops_at_the_first_quote_backslash_or_control_character() {
        let naive = |b: &[u8], pos: usize| {
            (pos..b.len())
                .find(|&i| b[i] == b'"' || b[i] == b'\\' || b[i] < 0x20)
                .unwrap_or(b.len())
        };
        // Every stop byte at every offset, behind plain bytes of every kind (ASCII, the bytes
        // of multi-byte characters, 0x7F, 0x20, and the bytes one above and below the stops).
        let fillers: &[u8] = &[b'a', 0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F, 0x80, 0xC3, 0xFF];
        for &stop in &[b'"', b'\\', 0x00, 0x1F, 0x0A] {
            for &filler in fillers {
                for len in 0..20 {
                    for at in 0..=len {
                        let mut text = alloc::vec![filler; len];
                        if at < len {
                            text[at] = stop;
                        }
                        for start in 0..=len.min(3) {
                            assert_eq!(
                                super::plain_run(&text, start),
                                naive(&text, start),
                                "stop {stop:#x} filler {filler:#x} len {len} at {at} from {start}"
                            );
                        }
                    }
                }
            }
        }
    }

    use super::*;
    use alloc::string::String;

    #[test]
    fn code_units_keep_lone_surrogates_apart() {
        let units = |s: &str| code_units(s).collect::<alloc::vec::Vec<u16>>();
        assert_eq!(units("\\u006aob"), units("job"));
        assert_eq!(units("\\ud83d\\ude00"), units("\u{1F600}"));
        assert_ne!(units("\\ud800"), units("\\udc00"));
        assert_ne!(units("\\ud800"), units("\u{FFFD}"));
        assert_eq!(
            units("a\\n\\\"\\\\\\/é"),
            [0x61, 0x0A, 0x22, 0x5C, 0x2F, 0xE9]
        );
    }

    fn kind(text: &str) -> Result<JsonKind, SyntaxErrorKind> {
        validate(text).map(|s| s.kind).map_err(|e| e.kind)
    }

    #[test]
    fn accepts_every_value_kind() {
        assert_eq!(kind("null"), Ok(JsonKind::Null));
        assert_eq!(kind(" true "), Ok(JsonKind::Bool));
        assert_eq!(kind("-0"), Ok(JsonKind::Number));
        assert_eq!(kind("1.5e-3"), Ok(JsonKind::Number));
        assert_eq!(kind("\"a\\u00e9\""), Ok(JsonKind::String));
        assert_eq!(kind("[1,[2,{}]]"), Ok(JsonKind::Array));
        assert_eq!(kind("{\"a\":{\"b\":[]}}"), Ok(JsonKind::Object));
    }

    #[test]
    fn rejects_what_rfc_8259_rejects() {
        for (text, want) in [
            ("", SyntaxErrorKind::Empty),
            ("   ", SyntaxErrorKind::Empty),
            ("01", SyntaxErrorKind::InvalidNumber),
            ("-", SyntaxErrorKind::UnexpectedEnd),
            ("1.", SyntaxErrorKind::UnexpectedEnd),
            ("1.e3", SyntaxErrorKind::InvalidNumber),
            ("NaN", SyntaxErrorKind::UnexpectedCharacter),
            ("-Infinity", SyntaxErrorKind::InvalidNumber),
            ("\u{feff}{}", SyntaxErrorKind::UnexpectedCharacter),
            ("{'a':1}", SyntaxErrorKind::UnexpectedCharacter),
            ("{\"a\":1}{}", SyntaxErrorKind::TrailingData),
            ("\"\\x\"", SyntaxErrorKind::InvalidEscape),
            ("\"a\nb\"", SyntaxErrorKind::ControlCharacter),
            ("{\"a\":1,}", SyntaxErrorKind::UnexpectedCharacter),
            ("[1,]", SyntaxErrorKind::UnexpectedCharacter),
            ("{\"a\" 1}", SyntaxErrorKind::UnexpectedCharacter),
            ("\u{b}1", SyntaxErrorKind::UnexpectedCharacter),
        ] {
            assert_eq!(kind(text), Err(want), "{text:?}");
        }
    }

    #[test]
    fn depth_limit_is_exact() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(validate(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(validate(&deep).unwrap_err().kind, SyntaxErrorKind::TooDeep);
    }

    #[test]
    fn detects_unpaired_surrogate_escapes() {
        for (text, unpaired) in [
            (r#""\ud83d\ude00""#, false),
            (r#""\ud800""#, true),
            (r#""\udc00""#, true),
            (r#""\ud800\u0041""#, true),
            (r#""\ud800a\udc00""#, true),
            (r#"{"\ud800":1}"#, true),
            (r#""\u00e9""#, false),
        ] {
            let mut s = Scanner::new(text);
            s.start().unwrap();
            s.value(0, &mut |_| {}).unwrap();
            assert_eq!(s.unpaired_surrogate, unpaired, "{text}");
        }
    }

    #[test]
    fn minify_keeps_strings_and_numbers() {
        let mut out = String::new();
        minify_into("{ \"a b\" : [ 1e400 , \"x \\\" y\" ] }", &mut out);
        assert_eq!(out, "{\"a b\":[1e400,\"x \\\" y\"]}");
    }

    #[test]
    fn spaced_flag_tracks_inner_whitespace() {
        assert!(!validate(" {\"a\":[1,2]} ").unwrap().spaced);
        assert!(validate("{\"a\": 1}").unwrap().spaced);
    }

    #[test]
    fn unescape_resolves_pairs_and_marks_lone_surrogates() {
        assert_eq!(unescape("plain"), "plain");
        assert_eq!(unescape(r"caf\u00e9 \/ \n"), "café / \n");
        assert_eq!(unescape(r"\ud83d\ude00"), "😀");
        assert_eq!(unescape(r"\ud800x"), "\u{FFFD}x");
    }
}
