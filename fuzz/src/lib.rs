//! Helpers shared by the fuzz targets in `fuzz_targets/`.
//!
//! Every target reads its input the same way, so one seed corpus (the conformance bodies) is
//! meaningful to all of them: the input is a message body, optionally followed by a `0xFF` byte
//! and the *parameters* of the run (headers, delivery counts, a dead-letter block …), which the
//! target draws from an [`Unstructured`]. `0xFF` never occurs in UTF-8, so a seed that is a
//! JSON text is taken whole as the body, with default (all-zero) parameters.
//!
//! The projection targets also share [`check_classified`] and [`check_reconciled`]: what the
//! runtime makes of the facts a transport reported, checked against the rules of
//! `babelqueue_core::classify` and `babelqueue_core::attempts`.

use std::borrow::Cow;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use arbitrary::{Result, Unstructured};
use babelqueue_core::attempts::{poison_attempts, reconcile};
use babelqueue_core::classify::{Cause, Class, classify};
use babelqueue_core::{Count, Facts};
use babelqueue_envelope::{Envelope, JsonKind, ascii, poison_cause};

/// The byte that separates the body from the parameters.
pub const PARAMS_SEPARATOR: u8 = 0xFF;

/// Splits an input into `(body, parameters)` at the last [`PARAMS_SEPARATOR`].
pub fn split_body(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().rposition(|&b| b == PARAMS_SEPARATOR) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// Runs a future that never waits on I/O to completion, on the current thread.
///
/// The code under test is `async` only because its cipher seam is (a KMS would do I/O); the
/// built-in AES-GCM cipher completes on the first poll. A future that stays pending is a bug in
/// the target itself, hence the panic.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..64 {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
    }
    panic!("a future that should not wait on anything stayed pending");
}

/// Strings that steer the code under test into its special cases: contract member and header
/// names, gate values, blank and near-blank text, escapes, lone surrogates written as escapes.
const INTERESTING: &[&str] = &[
    "",
    " ",
    "\t",
    "\u{b}",
    "\u{a0}",
    "1",
    " 1",
    "01",
    "1.0",
    "2",
    "-1",
    "0",
    "9223372036854775807",
    "2147483648",
    "null",
    "true",
    "urn:babel:orders:created",
    "job",
    "urn",
    "data",
    "meta",
    "attempts",
    "trace_id",
    "dead_letter",
    "schema_version",
    "created_at",
    "lang",
    "id",
    "bq-job",
    "bq-attempts",
    "bq-schema-version",
    "bq-trace-id",
    "bq-original-topic",
    "bq_schema_version",
    "bq_attempts",
    "x-attempts",
    "x-schema-version",
    "x-source-lang",
    "traceparent",
    "__bq_frame",
    "\\ud800",
    "\"",
    "\\",
    "caf\u{e9}",
    "\u{2028}",
    "\u{1f600}",
];

/// A string: often one of the interesting ones, else arbitrary UTF-8.
pub fn text(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1, 2)? {
        Ok((*u.choose(INTERESTING)?).to_owned())
    } else {
        u.arbitrary()
    }
}

/// A string, sometimes longer than 255 bytes (the AMQP short-string limit) or than 128
/// characters (the Service Bus id limit).
pub fn long_text(u: &mut Unstructured<'_>) -> Result<String> {
    let base = text(u)?;
    if u.ratio(1, 8)? {
        let times = u.int_in_range(1..=300)?;
        Ok(base
            .repeat(times)
            .chars()
            .chain("x".repeat(260).chars())
            .collect())
    } else {
        Ok(base)
    }
}

/// Out-of-band headers (string keys and values).
pub fn headers(u: &mut Unstructured<'_>) -> Result<std::collections::BTreeMap<String, String>> {
    let mut out = std::collections::BTreeMap::new();
    let count = u.int_in_range(0..=12)?;
    for _ in 0..count {
        out.insert(long_text(u)?, long_text(u)?);
    }
    Ok(out)
}

/// A JSON tree as the structured generators build it: integers and floats apart (so the writer
/// can pick how to spell them), members as an ordered list (so names can repeat).
#[derive(Debug, Clone)]
pub enum Tree {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer (up to 2^64 - 1).
    UInt(u64),
    /// A finite double.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Tree>),
    /// An object; names may repeat.
    Object(Vec<(String, Tree)>),
}

/// Member names drawn from a small set, so repeated names (last wins) come up often.
const NAMES: &[&str] = &[
    "a", "b", "job", "urn", "data", "meta", "attempts", "A", "\u{e9}",
];

impl Tree {
    /// An arbitrary tree at most `depth` levels deep (serde_json stops at 128; stay well below).
    pub fn arbitrary(u: &mut Unstructured<'_>, depth: u32) -> Result<Tree> {
        let leaf_only = depth == 0;
        let choice = if leaf_only {
            u.int_in_range(0..=5)?
        } else {
            u.int_in_range(0..=7)?
        };
        Ok(match choice {
            0 => Tree::Null,
            1 => Tree::Bool(u.arbitrary()?),
            2 => Tree::Int(u.arbitrary()?),
            3 => Tree::UInt(u.arbitrary()?),
            4 => {
                let f: f64 = u.arbitrary()?;
                if f.is_finite() {
                    Tree::Float(f)
                } else {
                    Tree::Float(0.5)
                }
            }
            5 => Tree::Str(text(u)?),
            6 => {
                let len = u.int_in_range(0..=6)?;
                let mut items = Vec::with_capacity(len);
                for _ in 0..len {
                    items.push(Tree::arbitrary(u, depth - 1)?);
                }
                Tree::Array(items)
            }
            _ => {
                let len = u.int_in_range(0..=6)?;
                let mut members = Vec::with_capacity(len);
                for _ in 0..len {
                    let name = if u.ratio(2, 3)? {
                        (*u.choose(NAMES)?).to_owned()
                    } else {
                        text(u)?
                    };
                    members.push((name, Tree::arbitrary(u, depth - 1)?));
                }
                Tree::Object(members)
            }
        })
    }

    /// Writes the tree as valid RFC 8259 JSON, choosing whitespace, string escapes and number
    /// spellings from `u` (all of them valid), so a parser sees more than one canonical form.
    pub fn write(&self, u: &mut Unstructured<'_>, out: &mut String) -> Result<()> {
        match self {
            Tree::Null => out.push_str("null"),
            Tree::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Tree::Int(n) => out.push_str(&n.to_string()),
            Tree::UInt(n) => out.push_str(&n.to_string()),
            Tree::Float(f) => {
                let spelled = match u.int_in_range(0..=2)? {
                    0 => format!("{f:e}"),
                    1 => format!("{f:E}"),
                    _ => format!("{f:?}"),
                };
                out.push_str(&spelled);
            }
            Tree::Str(s) => write_string(s, u, out)?,
            Tree::Array(items) => {
                out.push('[');
                space(u, out)?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        space(u, out)?;
                    }
                    item.write(u, out)?;
                    space(u, out)?;
                }
                out.push(']');
            }
            Tree::Object(members) => {
                out.push('{');
                space(u, out)?;
                for (i, (name, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        space(u, out)?;
                    }
                    write_string(name, u, out)?;
                    space(u, out)?;
                    out.push(':');
                    space(u, out)?;
                    value.write(u, out)?;
                    space(u, out)?;
                }
                out.push('}');
            }
        }
        Ok(())
    }
}

/// Zero to two JSON whitespace characters.
fn space(u: &mut Unstructured<'_>, out: &mut String) -> Result<()> {
    for _ in 0..u.int_in_range(0..=2)? {
        out.push(*u.choose(&[' ', '\t', '\n', '\r'])?);
    }
    Ok(())
}

/// A string literal where each character is written raw (when JSON allows it), as a short
/// escape (when it has one) or as `\uXXXX` (a surrogate pair above the BMP), upper or lower
/// case hex.
fn write_string(s: &str, u: &mut Unstructured<'_>, out: &mut String) -> Result<()> {
    out.push('"');
    for c in s.chars() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        let raw_allowed = !matches!(c, '"' | '\\') && c >= ' ';
        match u.int_in_range(0..=3)? {
            0 | 1 if raw_allowed => out.push(c),
            2 if short.is_some() => out.push_str(short.unwrap_or_default()),
            _ => {
                let upper = u.arbitrary::<bool>()?;
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    if upper {
                        out.push_str(&format!("\\u{unit:04X}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
        }
    }
    out.push('"');
    Ok(())
}

/// Splits the text of a compact JSON array (`[a,b]`, no insignificant whitespace, as the codec's
/// `RawJson` holds it) into the texts of its elements.
pub fn compact_array_items(text: &str) -> Vec<&str> {
    let inner = &text[1..text.len() - 1];
    let mut items = Vec::new();
    if inner.is_empty() {
        return items;
    }
    let (mut depth, mut in_string, mut escaped, mut start) = (0usize, false, false, 0usize);
    for (i, b) in inner.bytes().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth -= 1,
            b',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
}

/// Standard padded base64 decoding (RFC 4648 §4), for reading back dead-letter records.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | sextet(c)?;
        }
        n <<= 6 * pad as u32;
        let three = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&three[..3 - pad]);
    }
    Some(out)
}

/// `attempts` as the reconciliation reads it: 0 when missing or null, the integer when it is
/// one within 64 bits, `None` when the body is not a JSON object or `attempts` is anything else.
pub fn body_attempts(body: &[u8]) -> Option<i64> {
    let envelope = Envelope::parse_object(body).ok()?;
    match envelope.get("attempts") {
        None => Some(0),
        Some(raw) if raw.kind() == JsonKind::Null => Some(0),
        Some(raw) => raw.as_i64(),
    }
}

/// The integer `attempts` of an object body, with no default for a missing or null one.
pub fn integer_attempts(body: &[u8]) -> Option<i64> {
    Envelope::parse_object(body)
        .ok()?
        .get("attempts")
        .and_then(|raw| raw.as_i64())
}

/// Reconciles `body` with `count` through the runtime's `attempts::reconcile` and checks the
/// outcome against the transport's documented rule: `want` is the `attempts` value the body must
/// be rewritten to, or `None` when the rule leaves it as it is (then it stays borrowed, byte
/// for byte). Returns the reconciled body.
pub fn check_reconciled(body: &[u8], count: Option<Count>, want: Option<i64>) -> Vec<u8> {
    let out = reconcile(body, count);
    match want {
        None => {
            assert!(
                matches!(out, Cow::Borrowed(_)),
                "{count:?} must leave the body alone"
            );
            assert_eq!(&*out, body, "{count:?} must leave the body alone");
        }
        Some(value) => {
            assert!(
                matches!(out, Cow::Owned(_)),
                "{count:?} must rewrite attempts to {value}"
            );
            let Ok(after) = Envelope::parse_object(&out) else {
                panic!("a reconciled object body is an object");
            };
            assert_eq!(after.attempts(), value, "{count:?}");
        }
    }
    out.into_owned()
}

/// Classifies a delivery of `body` from `queue` with `facts` as the runtime does, and checks the
/// rules every transport relies on: the gate first (a rejected declared version is reported as
/// carried); then an uncounted attempt, or a body `poison_cause` rejects, is poison (with that
/// cause, counted by `attempts::poison_attempts`, and the carried original queue, else the
/// consumed one); else the body is readable, reconciled exactly as `attempts::reconcile` does,
/// and routed by the out-of-band URN (trimmed) when there is one, else by its own.
pub fn check_classified<'a>(body: &'a [u8], facts: &Facts, queue: &str) -> Class<'a> {
    let class = classify(body, facts, queue);
    let rejected = facts.declared_version.rejected();
    match (&class, &rejected) {
        (Class::Gated { declared }, Some(want)) => {
            assert_eq!(declared, want, "the gate reports the version as carried");
            return class;
        }
        (Class::Gated { declared }, None) => {
            panic!(
                "{:?} passes the gate, yet the delivery was gated as {declared:?}",
                facts.declared_version
            )
        }
        (other, Some(want)) => panic!("the gate rejects {want:?}, yet the delivery is {other:?}"),
        (_, None) => {}
    }
    let original_queue = facts
        .original_queue
        .as_deref()
        .filter(|q| !q.is_empty())
        .unwrap_or(queue);
    match &class {
        Class::Gated { .. } => {}
        Class::Poison(poison) => {
            assert_eq!(poison.original_queue, original_queue);
            assert_eq!(
                poison.always_dead_lettered,
                facts.poison_always_dead_lettered
            );
            if facts.attempts_not_counted {
                // A body that is poison by itself keeps its own cause (core 09fedc3); a
                // readable one is poison for the uncounted attempt alone.
                match poison_cause(body, true) {
                    Some(cause) => assert_eq!(poison.cause.poison_cause(), Some(&cause)),
                    None => assert_eq!(poison.cause, Cause::NotCounted),
                }
                assert_eq!(poison.attempts, 0, "an uncounted attempt counts 0");
            } else {
                let cause = poison_cause(body, true);
                assert!(cause.is_some(), "a readable body classified as poison");
                assert_eq!(poison.cause.poison_cause(), cause.as_ref());
                assert_eq!(poison.attempts, poison_attempts(body, facts.count));
                assert!(poison.attempts >= 0);
            }
        }
        Class::Readable {
            body: readable,
            envelope,
            urn,
            routed,
        } => {
            assert!(
                !facts.attempts_not_counted,
                "an uncounted attempt is poison"
            );
            assert_eq!(poison_cause(body, true), None, "a poison body was read");
            let reconciled = reconcile(body, facts.count);
            assert_eq!(
                &**readable, &*reconciled,
                "classify and attempts::reconcile must agree"
            );
            assert_eq!(
                matches!(readable, Cow::Borrowed(_)),
                matches!(reconciled, Cow::Borrowed(_))
            );
            if let Ok(back) = Envelope::parse_object(readable) {
                assert_eq!(back.attempts(), envelope.attempts());
            }
            let own = envelope.urn();
            assert!(!own.is_empty(), "a readable body has an identity");
            let out_of_band = facts
                .urn
                .as_deref()
                .map(ascii::trim)
                .filter(|u| !u.is_empty());
            match out_of_band {
                Some(carried) => {
                    assert!(*routed);
                    assert_eq!(urn, carried);
                }
                None => {
                    assert!(!*routed);
                    assert_eq!(*urn, *own);
                }
            }
        }
    }
    class
}
