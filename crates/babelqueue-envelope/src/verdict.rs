//! The identity verdict and the strict poison classification of a raw body.
//!
//! A body is *poison* when it cannot be a BabelQueue envelope: it is not UTF-8, not exactly one
//! JSON object, a known member has the wrong type, a number inside `data` is not a finite double,
//! or (when an identity is required) it names no URN. Poison is never handed to a handler; the
//! runtime dead-letters it with its bytes intact.

use alloc::borrow::Cow;
use alloc::string::String;
use core::fmt;

use crate::ascii;
use crate::json::scan::{self, Scanner, SyntaxError};
use crate::json::{JsonKind, int64_literal, is_finite_double};

/// The three-way verdict of the Kafka binding (`kafka_poison`): readable with an identity,
/// readable without one, or poison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A readable envelope with a valid identity.
    Ok,
    /// Readable (an object, or a bare `null`), but neither `job` nor `urn` is a valid identity.
    NoIdentity,
    /// Not a readable envelope.
    Poison(PoisonCause),
}

/// Why a body is poison.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoisonCause {
    /// The bytes are not valid UTF-8 (anywhere, including inside a string).
    InvalidUtf8 {
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// Not one strict JSON value (BOM, trailing data, `NaN`, leading zeros, truncation, too deep …).
    InvalidJson(SyntaxError),
    /// Valid JSON whose root is not an object (a bare `null` included).
    RootNotObject {
        /// The root's JSON type.
        found: JsonKind,
    },
    /// A known member has the wrong type.
    WrongType {
        /// The member, dotted (`attempts`, `meta.created_at`, `dead_letter.reason`).
        member: &'static str,
        /// What the contract requires.
        expected: Expected,
    },
    /// A number inside `data` is not a finite double (e.g. `1e400`).
    NonFiniteNumber,
    /// Neither a valid string `job` nor a valid string `urn` alias (last value of a repeated
    /// member wins).
    NoIdentity,
}

/// The type a known member must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// A string or `null`.
    String,
    /// An integer literal (no fraction or exponent) that fits 64 bits, or `null`.
    Int64,
    /// An object or `null`.
    Object,
}

impl fmt::Display for PoisonCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoisonCause::InvalidUtf8 { offset } => {
                write!(
                    f,
                    "the body is not valid UTF-8 (first invalid byte at offset {offset})"
                )
            }
            PoisonCause::InvalidJson(e) => write!(f, "the body is not one JSON value: {e}"),
            PoisonCause::RootNotObject { found } => {
                let article = if matches!(found, JsonKind::Array) {
                    "an"
                } else {
                    "a"
                };
                match found {
                    JsonKind::Null => f.write_str("the JSON root is null, not an object"),
                    _ => write!(f, "the JSON root is {article} {found}, not an object"),
                }
            }
            PoisonCause::WrongType { member, expected } => {
                let what = match expected {
                    Expected::String => "a string or null",
                    Expected::Int64 => "a 64-bit integer or null",
                    Expected::Object => "an object or null",
                };
                write!(f, "member '{member}' must be {what}")
            }
            PoisonCause::NonFiniteNumber => {
                f.write_str("member 'data' holds a number that is not a finite double")
            }
            PoisonCause::NoIdentity => {
                f.write_str("the body carries no valid 'job' or 'urn' identity")
            }
        }
    }
}

/// What a readable body looked like.
enum Shape {
    NullRoot,
    Object { identity: bool },
}

const TOP: [(&str, &str, Expected); 5] = [
    ("trace_id", "trace_id", Expected::String),
    ("attempts", "attempts", Expected::Int64),
    ("data", "data", Expected::Object),
    ("meta", "meta", Expected::Object),
    ("dead_letter", "dead_letter", Expected::Object),
];

const META: [(&str, &str, Expected); 5] = [
    ("id", "meta.id", Expected::String),
    ("queue", "meta.queue", Expected::String),
    ("lang", "meta.lang", Expected::String),
    ("schema_version", "meta.schema_version", Expected::Int64),
    ("created_at", "meta.created_at", Expected::Int64),
];

const DEAD_LETTER: [(&str, &str, Expected); 7] = [
    ("reason", "dead_letter.reason", Expected::String),
    ("error", "dead_letter.error", Expected::String),
    ("exception", "dead_letter.exception", Expected::String),
    (
        "original_queue",
        "dead_letter.original_queue",
        Expected::String,
    ),
    ("lang", "dead_letter.lang", Expected::String),
    ("failed_at", "dead_letter.failed_at", Expected::Int64),
    ("attempts", "dead_letter.attempts", Expected::Int64),
];

fn type_ok(expected: Expected, kind: JsonKind, literal: &[u8]) -> bool {
    match (expected, kind) {
        (_, JsonKind::Null) => true,
        (Expected::String, JsonKind::String) | (Expected::Object, JsonKind::Object) => true,
        (Expected::Int64, JsonKind::Number) => int64_literal(literal).is_some(),
        _ => false,
    }
}

fn note(slot: &mut Option<PoisonCause>, cause: PoisonCause) {
    if slot.is_none() {
        *slot = Some(cause);
    }
}

/// Checks the members of an object whose `{` was consumed, against `table`.
fn check_members(
    s: &mut Scanner<'_>,
    depth: usize,
    table: &[(&str, &'static str, Expected)],
    violation: &mut Option<PoisonCause>,
) -> Result<(), SyntaxError> {
    let text = s.text();
    let mut first = true;
    while let Some(key) = s.next_key(first)? {
        first = false;
        let name = key.decoded(text);
        let span = s.value(depth, &mut |_| {})?;
        check_member(
            table,
            &name,
            span.kind,
            &text[span.start..span.end],
            violation,
        );
    }
    Ok(())
}

fn valid_identity(kind: JsonKind, literal: &str) -> bool {
    kind == JsonKind::String && !ascii::is_blank(&scan::unescape(&literal[1..literal.len() - 1]))
}

fn shape(text: &str) -> Result<Shape, PoisonCause> {
    let syntax = PoisonCause::InvalidJson;
    let mut s = Scanner::new(text);
    s.start().map_err(syntax)?;
    if s.peek() != Some(b'{') {
        let span = s.value(0, &mut |_| {}).map_err(syntax)?;
        s.finish().map_err(syntax)?;
        return if span.kind == JsonKind::Null {
            Ok(Shape::NullRoot)
        } else {
            Err(PoisonCause::RootNotObject { found: span.kind })
        };
    }
    s.pos += 1;
    let mut violation: Option<PoisonCause> = None;
    let (mut job, mut urn) = (false, false);
    let mut first = true;
    while let Some(key) = s.next_key(first).map_err(syntax)? {
        first = false;
        let name: Cow<'_, str> = key.decoded(text);
        let nested = match &*name {
            "meta" => Some(&META[..]),
            "dead_letter" => Some(&DEAD_LETTER[..]),
            _ => None,
        };
        if let (Some(table), Some(b'{')) = (nested, s.peek()) {
            s.pos += 1;
            check_members(&mut s, 2, table, &mut violation).map_err(syntax)?;
            continue;
        }
        let mut finite = true;
        let span = if name == "data" {
            s.value(1, &mut |literal| finite &= is_finite_double(literal))
        } else {
            s.value(1, &mut |_| {})
        }
        .map_err(syntax)?;
        let literal = &text[span.start..span.end];
        match &*name {
            "job" => job = valid_identity(span.kind, literal),
            "urn" => urn = valid_identity(span.kind, literal),
            _ => {
                if let Some(&(_, member, expected)) = TOP.iter().find(|(n, _, _)| *n == name) {
                    if !type_ok(expected, span.kind, literal.as_bytes()) {
                        note(&mut violation, PoisonCause::WrongType { member, expected });
                    } else if !finite {
                        note(&mut violation, PoisonCause::NonFiniteNumber);
                    }
                }
            }
        }
    }
    s.finish().map_err(syntax)?;
    match violation {
        Some(cause) => Err(cause),
        None => Ok(Shape::Object {
            identity: job || urn,
        }),
    }
}

fn utf8(body: &[u8]) -> Result<&str, PoisonCause> {
    core::str::from_utf8(body).map_err(|e| PoisonCause::InvalidUtf8 {
        offset: e.valid_up_to(),
    })
}

/// The Kafka-style three-way verdict of a raw body (a bare `null` is readable, without identity).
pub fn classify(body: &[u8]) -> Verdict {
    match utf8(body).and_then(shape) {
        Ok(Shape::Object { identity: true }) => Verdict::Ok,
        Ok(Shape::Object { identity: false } | Shape::NullRoot) => Verdict::NoIdentity,
        Err(cause) => Verdict::Poison(cause),
    }
}

/// Why a raw body is poison, or `None` when it is a readable envelope.
///
/// With `require_identity` the body must also carry a valid `job` or `urn`; without it (a
/// transport that routes on an out-of-band identity) only the structural checks apply. A bare
/// `null` root is poison either way.
///
/// ```
/// use babelqueue_envelope::{PoisonCause, poison_cause};
///
/// assert_eq!(poison_cause(br#"{"job":"urn:x","attempts":2}"#, true), None);
/// assert_eq!(poison_cause(br#"{"job":5,"job":"urn:x"}"#, true), None); // last value wins
/// assert!(poison_cause(br#"{"job":"urn:x","attempts":1.0}"#, true).is_some());
/// assert_eq!(poison_cause(br#"{"x":1}"#, true), Some(PoisonCause::NoIdentity));
/// assert_eq!(poison_cause(br#"{"x":1}"#, false), None);
/// ```
pub fn poison_cause(body: &[u8], require_identity: bool) -> Option<PoisonCause> {
    match utf8(body).and_then(shape) {
        Ok(Shape::Object { identity }) => {
            (require_identity && !identity).then_some(PoisonCause::NoIdentity)
        }
        Ok(Shape::NullRoot) => Some(PoisonCause::RootNotObject {
            found: JsonKind::Null,
        }),
        Err(cause) => Some(cause),
    }
}

/// Whether a body is a strict JSON object the ADR-0035 poison record can splice at byte level:
/// valid UTF-8, exactly one RFC 8259 object, no unpaired surrogate escape anywhere (keys
/// included), and no top-level `dead_letter` member.
pub fn is_spliceable(body: &[u8]) -> bool {
    let Ok(text) = core::str::from_utf8(body) else {
        return false;
    };
    let mut s = Scanner::new(text);
    if s.start().is_err() || s.peek() != Some(b'{') {
        return false;
    }
    s.pos += 1;
    let mut first = true;
    loop {
        match s.next_key(first) {
            Ok(Some(key)) => {
                first = false;
                if key.decoded(text) == "dead_letter" {
                    return false;
                }
                if s.value(1, &mut |_| {}).is_err() {
                    return false;
                }
            }
            Ok(None) => break,
            Err(_) => return false,
        }
    }
    s.finish().is_ok() && !s.unpaired_surrogate
}

/// The one-pass form of [`shape`] + `Envelope::parse_object`: the members of a body that passes
/// the strict verdict with an identity, or the cause it fails with (the same cause
/// [`poison_cause`] reports, found in the same scan order).
///
/// The flag says whether the envelope may need `Envelope::normalise` (a `timestamp` or `urn`
/// member, a `job` that is not a string, a forbidden `meta` key): when it is `false`,
/// normalising would change nothing, and the decode skips it.
pub(crate) fn parse_checked(body: &[u8]) -> Result<(crate::Envelope, bool), PoisonCause> {
    use crate::json::{Key, Object, RawJson, Seen};
    // One copy of the body, shared by every key and value read from it.
    let source: alloc::sync::Arc<str> = alloc::sync::Arc::from(utf8(body)?);
    let text: &str = &source;
    let syntax = PoisonCause::InvalidJson;
    let mut s = Scanner::shared(&source);
    s.start().map_err(syntax)?;
    if s.peek() != Some(b'{') {
        let span = s.value(0, &mut |_| {}).map_err(syntax)?;
        s.finish().map_err(syntax)?;
        return Err(PoisonCause::RootNotObject { found: span.kind });
    }
    s.pos += 1;
    let mut envelope = crate::Envelope::with_capacity(8);
    let mut violation: Option<PoisonCause> = None;
    let (mut job, mut urn) = (false, false);
    let mut normalise = false;
    let mut seen = Seen::default();
    let mut first = true;
    while let Some(key) = s.next_key(first).map_err(syntax)? {
        first = false;
        let key = Key::scanned(&s, key);
        let member = TopMember::of(&key);
        if member == TopMember::Meta && s.peek() == Some(b'{') {
            s.pos += 1;
            let meta =
                Object::read_members_visiting(&mut s, 2, &mut |k, v| match MetaMember::of(k) {
                    MetaMember::Typed(member, expected) => {
                        if !type_ok(expected, v.kind(), v.as_str().as_bytes()) {
                            note(&mut violation, PoisonCause::WrongType { member, expected });
                        }
                    }
                    MetaMember::Forbidden => normalise = true,
                    MetaMember::Other => {}
                })
                .map_err(syntax)?;
            envelope.push_meta(key, meta, &mut seen);
            continue;
        }
        let mut finite = true;
        let span = if member == TopMember::Data {
            s.value(1, &mut |literal| finite &= is_finite_double(literal))
        } else {
            s.value(1, &mut |_| {})
        }
        .map_err(syntax)?;
        let literal = &text[span.start..span.end];
        match member {
            TopMember::Job => {
                normalise |= span.kind != JsonKind::String;
                job = valid_identity(span.kind, literal);
            }
            TopMember::Urn => {
                normalise = true;
                urn = valid_identity(span.kind, literal);
            }
            TopMember::Timestamp => normalise = true,
            TopMember::DeadLetter if span.kind == JsonKind::Object => {
                // A rare member: its own members are checked on a second look at its text.
                let mut block = Scanner::new(literal);
                if block.start().is_ok() {
                    block.pos += 1;
                    check_members(&mut block, 2, &DEAD_LETTER, &mut violation).map_err(syntax)?;
                }
            }
            _ => {
                if let Some((member, expected)) = member.expected() {
                    if !type_ok(expected, span.kind, literal.as_bytes()) {
                        note(&mut violation, PoisonCause::WrongType { member, expected });
                    } else if !finite {
                        note(&mut violation, PoisonCause::NonFiniteNumber);
                    }
                }
            }
        }
        envelope.push_raw(key, RawJson::scanned(&s, span), &mut seen);
    }
    s.finish().map_err(syntax)?;
    if let Some(cause) = violation {
        return Err(cause);
    }
    if !(job || urn) {
        return Err(PoisonCause::NoIdentity);
    }
    Ok((envelope, normalise))
}

/// A top-level member the one-pass decode reads, found once per key: by the key's well-known
/// name when it has one (no text compared), else by its decoded name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TopMember {
    Job,
    Urn,
    Timestamp,
    Meta,
    Data,
    DeadLetter,
    TraceId,
    Attempts,
    Other,
}

impl TopMember {
    fn of(key: &crate::json::Key) -> TopMember {
        use crate::json::Known;
        match key.known() {
            Some(Known::Job) => TopMember::Job,
            Some(Known::Meta) => TopMember::Meta,
            Some(Known::Data) => TopMember::Data,
            Some(Known::TraceId) => TopMember::TraceId,
            Some(Known::Attempts) => TopMember::Attempts,
            Some(_) => TopMember::Other,
            None => match &*key.name() {
                "job" => TopMember::Job,
                "urn" => TopMember::Urn,
                "timestamp" => TopMember::Timestamp,
                "meta" => TopMember::Meta,
                "data" => TopMember::Data,
                "dead_letter" => TopMember::DeadLetter,
                "trace_id" => TopMember::TraceId,
                "attempts" => TopMember::Attempts,
                _ => TopMember::Other,
            },
        }
    }

    /// The type the contract requires of it: its row of [`TOP`].
    fn expected(self) -> Option<(&'static str, Expected)> {
        let row = match self {
            TopMember::TraceId => 0,
            TopMember::Attempts => 1,
            TopMember::Data => 2,
            TopMember::Meta => 3,
            TopMember::DeadLetter => 4,
            TopMember::Job | TopMember::Urn | TopMember::Timestamp | TopMember::Other => {
                return None;
            }
        };
        let (_, member, expected) = TOP[row];
        Some((member, expected))
    }
}

/// A member of an object `meta`, as the one-pass decode reads it (see [`TopMember`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetaMember {
    /// A core name, with the type the contract requires of it (a row of [`META`]).
    Typed(&'static str, Expected),
    /// One of [`FORBIDDEN_META_KEYS`](crate::FORBIDDEN_META_KEYS): the decode drops it.
    Forbidden,
    Other,
}

impl MetaMember {
    fn of(key: &crate::json::Key) -> MetaMember {
        use crate::json::Known;
        let row = |i: usize| MetaMember::Typed(META[i].1, META[i].2);
        match key.known() {
            Some(Known::Id) => row(0),
            Some(Known::Queue) => row(1),
            Some(Known::Lang) => row(2),
            Some(Known::SchemaVersion) => row(3),
            Some(Known::CreatedAt) => row(4),
            Some(Known::Attempts) => MetaMember::Forbidden,
            Some(_) => MetaMember::Other,
            None => {
                let name = key.name();
                if let Some(&(_, member, expected)) = META.iter().find(|(n, _, _)| *n == name) {
                    MetaMember::Typed(member, expected)
                } else if crate::FORBIDDEN_META_KEYS.contains(&&*name) {
                    MetaMember::Forbidden
                } else {
                    MetaMember::Other
                }
            }
        }
    }
}

fn check_member(
    table: &[(&str, &'static str, Expected)],
    name: &str,
    kind: JsonKind,
    literal: &str,
    violation: &mut Option<PoisonCause>,
) {
    if let Some(&(_, member, expected)) = table.iter().find(|(n, _, _)| *n == name)
        && !type_ok(expected, kind, literal.as_bytes())
    {
        note(violation, PoisonCause::WrongType { member, expected });
    }
}

/// A human-readable cause string, for logs and dead-letter records.
pub(crate) fn cause_text(cause: &PoisonCause) -> String {
    alloc::string::ToString::to_string(cause)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn the_one_pass_decode_reads_every_name_of_the_tables_the_verdict_reads() {
        use crate::json::Key;
        // Plain and escaped spellings find the same row: the escaped one by its decoded name.
        let spellings = |name: &str| {
            let escaped: String = name
                .chars()
                .map(|c| alloc::format!("\\u{:04x}", c as u32))
                .collect();
            let object = crate::json::Object::parse(&alloc::format!("{{\"{escaped}\":null}}"))
                .expect("an object");
            let escaped = object.iter().next().expect("a member").0.clone();
            [Key::new(name), escaped]
        };
        for (name, member, expected) in TOP {
            for key in spellings(name) {
                assert_eq!(
                    TopMember::of(&key).expected(),
                    Some((member, expected)),
                    "{name}"
                );
            }
        }
        for name in ["job", "urn", "timestamp", "x", "JOB", "id"] {
            for key in spellings(name) {
                assert_eq!(TopMember::of(&key).expected(), None, "{name}");
            }
        }
        for (name, member, expected) in META {
            for key in spellings(name) {
                assert_eq!(
                    MetaMember::of(&key),
                    MetaMember::Typed(member, expected),
                    "{name}"
                );
            }
        }
        for name in crate::FORBIDDEN_META_KEYS {
            for key in spellings(name) {
                assert_eq!(MetaMember::of(&key), MetaMember::Forbidden, "{name}");
            }
        }
        for name in ["job", "data", "trace_id", "x", "ID"] {
            for key in spellings(name) {
                assert_eq!(MetaMember::of(&key), MetaMember::Other, "{name}");
            }
        }
    }

    #[test]
    fn a_non_object_root_is_named_in_plain_english() {
        let said = |found| PoisonCause::RootNotObject { found }.to_string();
        assert_eq!(
            said(JsonKind::Array),
            "the JSON root is an array, not an object"
        );
        assert_eq!(
            said(JsonKind::String),
            "the JSON root is a string, not an object"
        );
        assert_eq!(said(JsonKind::Null), "the JSON root is null, not an object");
    }
}
