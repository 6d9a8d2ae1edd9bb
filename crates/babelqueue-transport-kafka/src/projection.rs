//! The pure part of the binding: the `bq-*` header projection, the record timestamp, the facts
//! a consumed record reports to the runtime (the `bq-schema-version` header, the authoritative
//! `bq-attempts` count, the `bq-original-topic` of a re-injected record), and the re-injector's
//! header and due-time rules. No I/O, no rule: the runtime gates, classifies poison and
//! reconciles `attempts`. Every function here is unit-tested and driven by the conformance
//! runner.

use std::borrow::Cow;

use babelqueue_core::{Count, Declared, Facts, Headers};
use babelqueue_envelope::{Envelope, JsonKind, RawJson};

use crate::client::{Record, RecordHeader, RecordHeaders};

/// The URN.
pub const HEADER_JOB: &str = "bq-job";
/// `trace_id`.
pub const HEADER_TRACE_ID: &str = "bq-trace-id";
/// `meta.id`.
pub const HEADER_MESSAGE_ID: &str = "bq-message-id";
/// `meta.schema_version`; the consumer's schema-version gate reads it before any decode.
pub const HEADER_SCHEMA_VERSION: &str = "bq-schema-version";
/// `meta.lang`.
pub const HEADER_SOURCE_LANG: &str = "bq-source-lang";
/// `attempts`: authoritative on consume (Kafka has no delivery count of its own).
pub const HEADER_ATTEMPTS: &str = "bq-attempts";
/// On a retry-tier record: the delay in milliseconds (requested, or the tier's own on a retry).
pub const HEADER_DELAY: &str = "bq-delay";
/// On a retry-tier record: the work topic it goes back to.
pub const HEADER_ORIGINAL_TOPIC: &str = "bq-original-topic";

/// Every header the binding owns; none of them travels as an out-of-band header of a delivery.
pub const HEADERS: [&str; 8] = [
    HEADER_JOB,
    HEADER_TRACE_ID,
    HEADER_MESSAGE_ID,
    HEADER_SCHEMA_VERSION,
    HEADER_SOURCE_LANG,
    HEADER_ATTEMPTS,
    HEADER_DELAY,
    HEADER_ORIGINAL_TOPIC,
];

/// The key of a header read from a record: one of the binding's own names ([`HEADERS`]) as
/// static text, so the six headers of every BabelQueue record cost no allocation; any other
/// key copied.
pub fn header_key(key: &str) -> Cow<'static, str> {
    HEADERS
        .iter()
        .find(|own| **own == key)
        .map_or_else(|| Cow::Owned(key.to_owned()), |own| Cow::Borrowed(*own))
}

/// The header text of a scalar member: a string as is, a number as its literal when a reader
/// can take it ([`readable_number`]); nothing for other types.
fn scalar_text(raw: &RawJson) -> Option<String> {
    match raw.kind() {
        JsonKind::String => raw.as_string().map(Cow::into_owned),
        JsonKind::Number if readable_number(raw) => Some(raw.as_str().to_owned()),
        _ => None,
    }
}

/// Whether a number literal can go into a header: an integer within 64 bits, or a decimal
/// that stays finite and non-zero (unless it is zero) as a double. `1e400` (infinite as a
/// double: a reader would see `inf`, or fail), `-1e400`, `1e-400` (silently 0) and
/// `9223372036854775808` (past `i64`) are left out: a header value must mean to every
/// consumer what the body says.
fn readable_number(raw: &RawJson) -> bool {
    if raw.is_integer() {
        return raw.as_i64().is_some();
    }
    let literal = raw.as_str();
    let Ok(value) = literal.parse::<f64>() else {
        return false;
    };
    if !value.is_finite() {
        return false;
    }
    let mantissa = literal.split(['e', 'E']).next().unwrap_or_default();
    value != 0.0
        || mantissa
            .bytes()
            .all(|b| matches!(b, b'0' | b'.' | b'-' | b'+'))
}

/// The `bq-*` record headers of a body, in the contract order: `bq-job`, `bq-trace-id`,
/// `bq-message-id`, `bq-schema-version`, `bq-source-lang`, `bq-attempts`.
///
/// Read from the body as written (no key dropped, no alias folded). A body that is not a
/// non-empty JSON object gets none; a non-object `meta` gives no meta headers; empty and null
/// values are left out (`bq-schema-version` only when null); `bq-attempts` is `0` when
/// `attempts` is absent or null and is left out when it is not an integer within 64 bits. A
/// number that a reader cannot take as it is written (`1e400`, `1e-400`, an integer past 64
/// bits) is left out of every header, never written as `inf` or a rounded value.
///
/// ```
/// use babelqueue_transport_kafka::projection::project;
///
/// let body = br#"{"job":"urn:x","trace_id":"t","meta":{"id":"i","schema_version":1,"lang":"php"},"attempts":2}"#;
/// let headers: Vec<(String, String)> = project(body)
///     .into_iter()
///     .map(|h| (h.key.into_owned(), String::from_utf8(h.value.unwrap()).unwrap()))
///     .collect();
/// assert_eq!(headers, [
///     ("bq-job".into(), "urn:x".into()),
///     ("bq-trace-id".into(), "t".into()),
///     ("bq-message-id".into(), "i".into()),
///     ("bq-schema-version".into(), "1".into()),
///     ("bq-source-lang".into(), "php".into()),
///     ("bq-attempts".into(), "2".into()),
/// ]);
/// ```
pub fn project(body: &[u8]) -> Vec<RecordHeader> {
    match Envelope::parse_object(body) {
        Ok(envelope) => headers_of(&envelope),
        Err(_) => Vec::new(),
    }
}

/// [`project`] and [`record_timestamp`] of one body, from one parse of it.
pub fn project_with_timestamp(body: &[u8]) -> (Vec<RecordHeader>, Option<i64>) {
    match Envelope::parse_object(body) {
        Ok(envelope) => (headers_of(&envelope), timestamp_of(&envelope)),
        Err(_) => (Vec::new(), None),
    }
}

/// [`project`] of a body parsed as an object.
fn headers_of(envelope: &Envelope) -> Vec<RecordHeader> {
    if envelope.keys().next().is_none() {
        return Vec::new();
    }
    let mut headers = Vec::with_capacity(6);
    fn add(
        headers: &mut Vec<RecordHeader>,
        key: &'static str,
        value: Option<String>,
        keep_empty: bool,
    ) {
        if let Some(value) = value.filter(|v| keep_empty || !v.is_empty()) {
            headers.push(RecordHeader::text(key, value));
        }
    }
    let top = |name: &str| envelope.get(name).and_then(|raw| scalar_text(&raw));
    let meta = envelope.meta();
    let meta_text = |key: &str| meta.and_then(|m| m.get(key)).and_then(scalar_text);
    add(&mut headers, HEADER_JOB, top("job"), false);
    add(&mut headers, HEADER_TRACE_ID, top("trace_id"), false);
    add(&mut headers, HEADER_MESSAGE_ID, meta_text("id"), false);
    // Written when not null, even when empty (an empty one is blank: it gates nothing).
    add(
        &mut headers,
        HEADER_SCHEMA_VERSION,
        meta_text("schema_version"),
        true,
    );
    add(&mut headers, HEADER_SOURCE_LANG, meta_text("lang"), false);
    let attempts = match envelope.get("attempts") {
        None => Some(0),
        Some(raw) if raw.is_null() => Some(0),
        Some(raw) => raw.as_i64(),
    };
    if let Some(attempts) = attempts {
        headers.push(RecordHeader::text(HEADER_ATTEMPTS, attempts.to_string()));
    }
    headers
}

/// The record timestamp of a body: `meta.created_at` when it is a positive integer
/// (epoch milliseconds).
pub fn record_timestamp(body: &[u8]) -> Option<i64> {
    timestamp_of(&Envelope::parse_object(body).ok()?)
}

/// [`record_timestamp`] of a body parsed as an object.
fn timestamp_of(envelope: &Envelope) -> Option<i64> {
    envelope.created_at().filter(|ms| *ms > 0)
}

/// The first header named `name`: `None` when absent, `Some(None)` when its value is null.
pub fn header<'a, H: RecordHeaders + ?Sized>(
    headers: &'a H,
    name: &str,
) -> Option<Option<&'a [u8]>> {
    headers.first_named(name)
}

/// The first header named `name` as text (UTF-8 with replacement); `None` when absent or null.
pub fn header_text<H: RecordHeaders + ?Sized>(headers: &H, name: &str) -> Option<String> {
    header(headers, name)
        .flatten()
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The first `bq-attempts` header as an integer (ASCII whitespace around it allowed, negative
/// values read as 0); `None` when absent, null or not an integer.
pub fn header_attempts<H: RecordHeaders + ?Sized>(headers: &H) -> Option<i64> {
    attempts_of(header(headers, HEADER_ATTEMPTS))
}

/// [`header_attempts`] of a header found (`None`: absent, `Some(None)`: null).
fn attempts_of(found: Option<Option<&[u8]>>) -> Option<i64> {
    // Read in place: a value that is not UTF-8 is not an integer either (with replacement
    // characters it would not parse), so nothing is copied to find out.
    let text = std::str::from_utf8(found??).ok()?;
    let trimmed = babelqueue_envelope::ascii::trim(text);
    let digits = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if digits.is_empty() || digits.starts_with('+') {
        return None;
    }
    digits.parse::<i64>().ok().map(|n| n.max(0))
}

/// The first `bq-schema-version` header as carried: absent, null (a header without a value, never
/// the text `"null"`), or its text (UTF-8 with replacement). The runtime gates on it before
/// anything decodes the body.
pub fn declared<H: RecordHeaders + ?Sized>(headers: &H) -> Declared {
    declared_of(header(headers, HEADER_SCHEMA_VERSION))
}

/// [`declared`] of a header found (`None`: absent, `Some(None)`: null).
fn declared_of(found: Option<Option<&[u8]>>) -> Declared {
    match found {
        None => Declared::Absent,
        Some(None) => Declared::Null,
        Some(Some(bytes)) => Declared::Text(String::from_utf8_lossy(bytes).into_owned()),
    }
}

/// The count a record carries: the `bq-attempts` header, authoritative over the body (Kafka
/// has no delivery count of its own); `None` when absent or unreadable.
pub fn count<H: RecordHeaders + ?Sized>(headers: &H) -> Option<Count> {
    header_attempts(headers).map(Count::Carried)
}

/// What a consumed record reports to the runtime: [`declared`], [`count`], and the
/// `bq-original-topic` a re-injected record carries (the `original_queue` of its poison record).
pub fn facts(record: &Record) -> Facts {
    facts_of(&record.headers)
}

/// [`facts`] from a record's headers alone (all the facts come from them), read in place in
/// one pass, the first header of each name counting as in [`declared`] and [`count`].
pub fn facts_of<H: RecordHeaders + ?Sized>(headers: &H) -> Facts {
    facts_and_headers_of(headers, false).0
}

/// [`facts_of`] and a delivery's out-of-band headers (every header but the binding's own
/// [`HEADERS`] and an empty name, with a non-empty UTF-8 value, the first of a name winning),
/// out of one pass over the record's headers: each pass over a librdkafka record's headers
/// reads every name through the client again (about 1 300 instructions for the six of a
/// BabelQueue record, measured with callgrind).
pub fn facts_and_headers<H: RecordHeaders + ?Sized>(headers: &H) -> (Facts, Headers) {
    facts_and_headers_of(headers, true)
}

fn facts_and_headers_of<H: RecordHeaders + ?Sized>(headers: &H, others: bool) -> (Facts, Headers) {
    let (mut version, mut attempts, mut original) = (None, None, None);
    let mut out = Headers::new();
    headers.each(&mut |key, value| {
        let first = match key {
            HEADER_SCHEMA_VERSION => &mut version,
            HEADER_ATTEMPTS => &mut attempts,
            HEADER_ORIGINAL_TOPIC => &mut original,
            _ => {
                if others
                    && !key.is_empty()
                    && !HEADERS.contains(&key)
                    && let Some(Ok(text)) = value.map(std::str::from_utf8)
                    && !text.is_empty()
                {
                    out.entry(key.to_owned()).or_insert_with(|| text.to_owned());
                }
                return;
            }
        };
        first.get_or_insert(value);
    });
    let mut facts = Facts::default();
    facts.declared_version = declared_of(version);
    facts.count = attempts_of(attempts).map(Count::Carried);
    facts.original_queue = original
        .flatten()
        .filter(|topic| !topic.is_empty())
        .map(|topic| String::from_utf8_lossy(topic).into_owned());
    (facts, out)
}

/// A retry-tier record's headers as the re-injector writes them back: everything but
/// `bq-delay` and `bq-original-topic`, in order, values untouched.
pub fn reinject_headers(headers: &[RecordHeader]) -> Vec<RecordHeader> {
    headers
        .iter()
        .filter(|h| h.key != HEADER_DELAY && h.key != HEADER_ORIGINAL_TOPIC)
        .cloned()
        .collect()
}

/// When a parked record is due (epoch ms): its timestamp plus the tier's delay, clamped to
/// `[now, now + tier]` so neither a fast nor a slow producer clock can shorten or stretch the
/// wait past one tier; `now + tier` when the record has no timestamp.
pub fn due_at(record_ms: Option<i64>, tier_ms: u64, now_ms: i64) -> i64 {
    let tier = i64::try_from(tier_ms).unwrap_or(i64::MAX);
    let latest = now_ms.saturating_add(tier);
    match record_ms {
        None => latest,
        Some(ts) => ts.saturating_add(tier).clamp(now_ms, latest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::TimestampType;

    fn record(value: &[u8], headers: Vec<RecordHeader>) -> Record {
        Record {
            topic: "orders".into(),
            partition: 0,
            offset: 7,
            key: None,
            value: Some(value.to_vec()),
            headers,
            timestamp: None,
            timestamp_type: TimestampType::CreateTime,
        }
    }

    fn texts(headers: &[RecordHeader]) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|h| {
                (
                    h.key.to_string(),
                    String::from_utf8(h.value.clone().unwrap()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn the_binding_s_own_header_keys_are_static_text_and_others_are_copied() {
        for own in HEADERS {
            let key = header_key(&String::from(own));
            assert!(matches!(key, Cow::Borrowed(k) if k == own), "{own}");
        }
        for other in ["traceparent", "bq-jobs", "BQ-JOB", ""] {
            let key = header_key(other);
            assert!(matches!(&key, Cow::Owned(k) if k == other), "{other:?}");
        }
        // Every header the projection writes is one of them.
        let written = project(br#"{"job":"urn:babel:a:b","trace_id":"t","data":{},"meta":{"id":"i","schema_version":1,"lang":"rust"},"attempts":0}"#);
        assert_eq!(written.len(), 6);
        assert!(written.iter().all(|h| matches!(h.key, Cow::Borrowed(_))));
    }

    #[test]
    fn projection_edges() {
        assert!(project(b"not json").is_empty());
        assert!(project(b"[1]").is_empty());
        assert!(project(b"{}").is_empty());
        assert_eq!(
            texts(&project(br#"{"job":"urn:x"}"#)),
            [
                ("bq-job".into(), "urn:x".into()),
                ("bq-attempts".into(), "0".into())
            ]
        );
        // empty values left out, null schema_version left out, a zero one written
        assert_eq!(
            texts(&project(
                br#"{"job":"","trace_id":null,"meta":{"id":"","schema_version":0,"lang":null},"attempts":null}"#
            )),
            [
                ("bq-schema-version".into(), "0".into()),
                ("bq-attempts".into(), "0".into())
            ]
        );
        // a non-object meta, a non-integer attempts
        assert_eq!(
            texts(&project(br#"{"job":"urn:x","meta":"m","attempts":"3"}"#)),
            [("bq-job".into(), "urn:x".into())]
        );
        assert_eq!(
            record_timestamp(br#"{"meta":{"created_at":1749132727000}}"#),
            Some(1749132727000)
        );
        assert_eq!(record_timestamp(br#"{"meta":{"created_at":0}}"#), None);
        assert_eq!(record_timestamp(br#"{"meta":{"created_at":"1"}}"#), None);
    }

    #[test]
    fn one_parse_gives_the_projection_and_the_timestamp_as_two_would() {
        for body in [
            &br#"{"job":"urn:x","trace_id":"t","meta":{"id":"i","lang":"php","created_at":1749132727000},"attempts":2}"#[..],
            br#"{"job":"urn:x","meta":{"created_at":-5}}"#,
            br#"{"meta":{"created_at":1749132727000}}"#,
            br#"{}"#,
            br#"[1,2]"#,
            b"not json",
            b"",
        ] {
            assert_eq!(
                project_with_timestamp(body),
                (project(body), record_timestamp(body)),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    /// A number a consumer cannot read as written (infinite or zero as a double, an integer
    /// past 64 bits) never reaches a header; finite ones are written as their literal.
    #[test]
    fn out_of_range_numbers_are_left_out() {
        for huge in [
            "1e400",
            "-1e400",
            "1E400",
            "1e-400",
            "9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
        ] {
            let body = format!(
                r#"{{"job":"urn:x","trace_id":{huge},"meta":{{"id":{huge},"schema_version":{huge},"lang":{huge}}},"attempts":{huge}}}"#
            );
            let headers = texts(&project(body.as_bytes()));
            assert_eq!(headers, [("bq-job".into(), "urn:x".into())], "{huge}");
            for (_, value) in &headers {
                assert!(
                    !value.contains("inf") && !value.contains("NaN"),
                    "{huge}: {value}"
                );
            }
        }
        assert_eq!(
            texts(&project(br#"{"job":"urn:x","attempts":1e400}"#)),
            [("bq-job".into(), "urn:x".into())]
        );
        assert_eq!(
            texts(&project(
                br#"{"job":"urn:x","meta":{"schema_version":1e400}}"#
            )),
            [
                ("bq-job".into(), "urn:x".into()),
                ("bq-attempts".into(), "0".into())
            ]
        );
        // readable numbers stay as written
        assert_eq!(
            texts(&project(
                br#"{"job":"urn:x","meta":{"schema_version":2.5,"id":0.0,"lang":-0e5},"attempts":-9223372036854775808}"#
            )),
            [
                ("bq-job".into(), "urn:x".into()),
                ("bq-message-id".into(), "0.0".into()),
                ("bq-schema-version".into(), "2.5".into()),
                ("bq-source-lang".into(), "-0e5".into()),
                ("bq-attempts".into(), "-9223372036854775808".into())
            ]
        );
    }

    #[test]
    fn attempts_header() {
        let h = |v: &str| vec![RecordHeader::text(HEADER_ATTEMPTS, v)];
        assert_eq!(header_attempts(&h("3")), Some(3));
        assert_eq!(header_attempts(&h(" 3 ")), Some(3));
        assert_eq!(header_attempts(&h("+3")), Some(3));
        assert_eq!(header_attempts(&h("-2")), Some(0));
        assert_eq!(header_attempts(&h("x")), None);
        assert_eq!(header_attempts(&h("++3")), None);
        assert_eq!(header_attempts(&h("")), None);
        let null = vec![RecordHeader {
            key: HEADER_ATTEMPTS.into(),
            value: None,
        }];
        assert_eq!(header_attempts(&null), None);
        // Bytes that are not UTF-8 are no integer, whatever digits they hold.
        let raw = |v: &[u8]| {
            vec![RecordHeader {
                key: HEADER_ATTEMPTS.into(),
                value: Some(v.to_vec()),
            }]
        };
        assert_eq!(header_attempts(&raw(b"3\xff")), None);
        assert_eq!(header_attempts(&raw(b"\xff3")), None);
        assert_eq!(header_attempts(&raw(b" 4\t")), Some(4));
        // only the first header counts
        let two = vec![
            RecordHeader::text(HEADER_ATTEMPTS, "1"),
            RecordHeader::text(HEADER_ATTEMPTS, "9"),
        ];
        assert_eq!(header_attempts(&two), Some(1));
    }

    #[test]
    fn the_count_is_authoritative() {
        use babelqueue_testkit::reading::reconcile;
        let body = br#"{"job":"urn:x","attempts":5}"#;
        let carried = |v: &str| count(&[RecordHeader::text(HEADER_ATTEMPTS, v)]);
        assert_eq!(carried("1"), Some(Count::Carried(1)));
        assert_eq!(
            &*reconcile(body, carried("1")),
            br#"{"job":"urn:x","attempts":1}"#
        );
        assert_eq!(count(&[]), None);
        assert!(matches!(reconcile(body, carried("5")), Cow::Borrowed(_)));
    }

    #[test]
    fn the_declared_version_is_reported_as_carried() {
        let null = vec![RecordHeader {
            key: HEADER_SCHEMA_VERSION.into(),
            value: None,
        }];
        assert_eq!(declared(&null), Declared::Null);
        assert_eq!(declared(&null).rejected(), None);
        assert_eq!(
            declared(&[RecordHeader::text(HEADER_SCHEMA_VERSION, "2")]).rejected(),
            Some("2".into())
        );
        // the first header wins
        assert_eq!(
            declared(&[
                RecordHeader::text(HEADER_SCHEMA_VERSION, "1"),
                RecordHeader::text(HEADER_SCHEMA_VERSION, "2")
            ]),
            Declared::Text("1".into())
        );
    }

    #[test]
    fn one_pass_gives_the_facts_and_the_out_of_band_headers() {
        let headers = vec![
            RecordHeader::text(HEADER_JOB, "urn:x"),
            RecordHeader::text("tenant", "acme"),
            RecordHeader::text(HEADER_ATTEMPTS, "3"),
            RecordHeader::text("tenant", "second"),
            RecordHeader::text("", "nameless"),
            RecordHeader::text("empty", ""),
            RecordHeader::text(HEADER_SCHEMA_VERSION, "1"),
            RecordHeader::text(HEADER_ATTEMPTS, "9"),
            RecordHeader::text(HEADER_ORIGINAL_TOPIC, "orders"),
            RecordHeader {
                key: Cow::Borrowed("binary"),
                value: Some(vec![0xff, 0xfe]),
            },
            RecordHeader {
                key: Cow::Borrowed("null"),
                value: None,
            },
        ];
        let (facts, out) = facts_and_headers(headers.as_slice());
        assert_eq!(facts, facts_of(headers.as_slice()));
        assert_eq!(
            facts.count,
            Some(Count::Carried(3)),
            "the first bq-attempts"
        );
        assert_eq!(facts.declared_version, Declared::Text("1".into()));
        assert_eq!(facts.original_queue.as_deref(), Some("orders"));
        let expected: Headers = [("tenant".to_owned(), "acme".to_owned())].into();
        assert_eq!(
            out, expected,
            "the binding's own, nameless, empty, binary and null left out"
        );
    }

    #[test]
    fn facts_of_a_record() {
        use babelqueue_testkit::reading::{Class, classify};
        let f = facts(&record(
            br#"{"job":"urn:x","attempts":0}"#,
            vec![RecordHeader::text(HEADER_ATTEMPTS, "2")],
        ));
        let Class::Readable { body, .. } =
            classify(br#"{"job":"urn:x","attempts":0}"#, &f, "orders")
        else {
            panic!("readable")
        };
        assert_eq!(&*body, br#"{"job":"urn:x","attempts":2}"#);

        let f = facts(&record(
            b"not even json",
            vec![RecordHeader::text(HEADER_SCHEMA_VERSION, " 1")],
        ));
        assert!(
            matches!(classify(b"not even json", &f, "orders"), Class::Gated { ref declared } if declared == " 1")
        );

        let f = facts(&record(
            b"{}",
            vec![
                RecordHeader::text(HEADER_ATTEMPTS, "4"),
                RecordHeader::text(HEADER_ORIGINAL_TOPIC, "payments"),
            ],
        ));
        let Class::Poison(p) = classify(b"{}", &f, "orders.retry.1") else {
            panic!("poison")
        };
        assert_eq!((p.attempts, p.original_queue.as_str()), (4, "payments"));

        let mut tombstone = record(b"", vec![]);
        tombstone.value = None;
        let f = facts(&tombstone);
        let Class::Poison(p) = classify(b"", &f, "orders") else {
            panic!("a null value is poison")
        };
        assert_eq!((p.attempts, p.original_queue.as_str()), (0, "orders"));
    }

    #[test]
    fn reinjection_rules() {
        let headers = vec![
            RecordHeader::text("bq-job", "urn:x"),
            RecordHeader::text(HEADER_DELAY, "5000"),
            RecordHeader {
                key: "traceparent".into(),
                value: None,
            },
            RecordHeader::text(HEADER_ORIGINAL_TOPIC, "orders"),
            RecordHeader::text("bq-attempts", "1"),
        ];
        let kept: Vec<String> = reinject_headers(&headers)
            .into_iter()
            .map(|h| h.key.into_owned())
            .collect();
        assert_eq!(kept, ["bq-job", "traceparent", "bq-attempts"]);
        assert_eq!(due_at(None, 5000, 1_000), 6_000);
        assert_eq!(due_at(Some(900), 5000, 1_000), 5_900);
        assert_eq!(due_at(Some(0), 5000, 1_000_000), 1_000_000);
        assert_eq!(due_at(Some(9_999_999), 5000, 1_000), 6_000);
    }
}
