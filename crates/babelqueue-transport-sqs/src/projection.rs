//! The pure half of the binding: every mapping between an envelope body and SQS, with no I/O.
//!
//! * [`attributes`]: the `bq-*` MessageAttributes a body projects to on produce;
//! * [`merge_headers`]: out-of-band headers added beside them (contract first, at most 10);
//! * [`count`]: what `ApproximateReceiveCount` says about earlier deliveries, as a [`Count`]
//!   the runtime reconciles `attempts` with;
//! * [`declared`]: the `bq-schema-version` attribute as carried, the input of the runtime's
//!   schema-version gate;
//! * [`headers`]: the attributes a consumer surfaces as headers;
//! * [`visibility_timeout`], [`publish_delay`], [`wait_time_seconds`]: the clamps and limits;
//! * [`dead_letter_queue_name`], [`deduplication_id`], [`is_fifo_queue`]: naming.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use babelqueue_core::{Count, Declared, Headers};
use babelqueue_envelope::{Envelope, RawJson};

use crate::error::SqsError;

/// SQS's cap on MessageAttributes per message.
pub const MAX_ATTRIBUTES: usize = 10;
/// The longest `ChangeMessageVisibility` timeout SQS accepts (12 h).
pub const MAX_VISIBILITY_TIMEOUT: i32 = 43_200;
/// The longest per-message `DelaySeconds` SQS accepts (15 min).
pub const MAX_PUBLISH_DELAY: u64 = 900;
/// The longest long poll SQS accepts.
pub const MAX_WAIT_TIME: i32 = 20;
/// The most messages one ReceiveMessage returns.
pub const MAX_RECEIVE_BATCH: usize = 10;
/// The schema-version attribute the runtime's gate reads.
pub const SCHEMA_VERSION_ATTRIBUTE: &str = "bq-schema-version";

/// One SQS message attribute: a data type (`String`, `Number`, `Binary`, possibly with a custom
/// suffix such as `Number.int`) and its text value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeValue {
    /// `String`, `Number`, `Binary`, or one of those with a `.suffix`.
    pub data_type: String,
    /// The value; `None` for a binary attribute.
    pub string_value: Option<String>,
}

impl AttributeValue {
    /// A `String` attribute.
    pub fn string(value: impl Into<String>) -> AttributeValue {
        AttributeValue {
            data_type: "String".to_owned(),
            string_value: Some(value.into()),
        }
    }

    /// A `Number` attribute (SQS carries numbers as decimal text).
    pub fn number(value: impl Into<String>) -> AttributeValue {
        AttributeValue {
            data_type: "Number".to_owned(),
            string_value: Some(value.into()),
        }
    }
}

/// Message attributes by name.
pub type Attributes = BTreeMap<String, AttributeValue>;

/// The contract's MessageAttributes for a body, from a read-only parse (nothing dropped, nothing
/// logged): `bq-job`, `bq-trace-id`, `bq-message-id`, `bq-source-lang` (String, when a
/// non-empty string), `bq-schema-version` and `bq-created-at` (Number, when a 64-bit integer).
///
/// A body that is not an object projects nothing. A value SQS would refuse (a non-integer where
/// a Number goes, text outside SQS's character set) is left out rather than failing the send:
/// the body stays authoritative, and a dead-letter record of a malformed body must still be
/// writable.
pub fn attributes(body: &[u8]) -> Attributes {
    let mut out = Attributes::new();
    let Ok(envelope) = Envelope::parse_object(body) else {
        return out;
    };
    let meta = envelope.meta();
    let string = |raw: Option<&RawJson>| -> Option<String> {
        let text = raw?.as_string()?;
        (!text.is_empty() && is_sqs_text(&text)).then(|| text.into_owned())
    };
    let integer =
        |raw: Option<&RawJson>| -> Option<String> { raw?.as_i64().map(|n| n.to_string()) };
    let top = |name: &str| envelope.get(name).map(Cow::into_owned);
    let field = |name: &str| meta.and_then(|m| m.get(name));
    if let Some(job) = string(top("job").as_ref()) {
        out.insert("bq-job".into(), AttributeValue::string(job));
    }
    if let Some(trace) = string(top("trace_id").as_ref()) {
        out.insert("bq-trace-id".into(), AttributeValue::string(trace));
    }
    if let Some(id) = string(field("id")) {
        out.insert("bq-message-id".into(), AttributeValue::string(id));
    }
    if let Some(version) = integer(field("schema_version")) {
        out.insert(
            SCHEMA_VERSION_ATTRIBUTE.into(),
            AttributeValue::number(version),
        );
    }
    if let Some(lang) = string(field("lang")) {
        out.insert("bq-source-lang".into(), AttributeValue::string(lang));
    }
    if let Some(created) = integer(field("created_at")) {
        out.insert("bq-created-at".into(), AttributeValue::number(created));
    }
    out
}

/// The contract's attribute names, which [`attributes`] alone sets from the body.
pub const CONTRACT_ATTRIBUTES: [&str; 6] = [
    "bq-job",
    "bq-trace-id",
    "bq-message-id",
    SCHEMA_VERSION_ATTRIBUTE,
    "bq-source-lang",
    "bq-created-at",
];

/// Adds out-of-band `headers` as String attributes beside the contract ones, in key order.
///
/// Blank keys and values are skipped; a header named like a contract attribute is left out
/// whether or not the body set that attribute (an out-of-band `bq-schema-version` must not
/// pose as the body's and steer the consumer's gate, as on RabbitMQ and Artemis); once
/// [`MAX_ATTRIBUTES`] are present the remaining headers are left out (the contract attributes
/// are always kept). A header whose name or value SQS would refuse is an error, before anything
/// is sent.
pub fn merge_headers(attributes: &mut Attributes, headers: &Headers) -> Result<(), SqsError> {
    for (name, value) in headers {
        if name.is_empty() || value.is_empty() || attributes.contains_key(name) {
            continue;
        }
        if CONTRACT_ATTRIBUTES.contains(&name.as_str()) {
            tracing::debug!(target: "babelqueue::sqs", header = %name,
                "an out-of-band header named like a contract attribute is left out");
            continue;
        }
        if attributes.len() >= MAX_ATTRIBUTES {
            tracing::debug!(target: "babelqueue::sqs", header = %name,
                "SQS carries at most {MAX_ATTRIBUTES} message attributes; header left out");
            break;
        }
        check_attribute_name(name).map_err(|reason| SqsError::Attribute {
            name: name.clone(),
            reason: reason.to_owned(),
        })?;
        if !is_sqs_text(value) {
            return Err(SqsError::Attribute {
                name: name.clone(),
                reason: "the value holds a character SQS does not accept".to_owned(),
            });
        }
        attributes.insert(name.clone(), AttributeValue::string(value.clone()));
    }
    Ok(())
}

/// Whether `name` is a valid SQS message attribute name: 1..=256 characters of `A-Z a-z 0-9 _ -
/// .`, no leading or trailing `.`, no `..`, not starting with `AWS.` or `Amazon.`
/// (case-insensitive).
pub fn check_attribute_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 256 {
        return Err("a name is 1 to 256 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err("a name holds only A-Z, a-z, 0-9, '_', '-' and '.'");
    }
    if name.starts_with('.') || name.ends_with('.') || name.contains("..") {
        return Err("a name cannot start or end with '.', nor hold '..'");
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("aws.") || lower.starts_with("amazon.") {
        return Err("names starting with AWS. or Amazon. are reserved");
    }
    Ok(())
}

/// Whether SQS accepts `text` in a body or attribute value: only `#x9 | #xA | #xD | #x20` to
/// `#xD7FF | #xE000` to `#xFFFD | #x10000` to `#x10FFFF`.
pub fn is_sqs_text(text: &str) -> bool {
    first_invalid_char(text).is_none()
}

/// The byte offset and value of the first character SQS refuses, if any.
pub fn first_invalid_char(text: &str) -> Option<(usize, char)> {
    text.char_indices().find(|&(_, c)| {
        !matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
    })
}

/// A receive count as SQS reports it (`ApproximateReceiveCount`, decimal text), when it parses.
fn receive_count(count: Option<&str>) -> Option<i64> {
    count?.parse().ok()
}

/// What SQS's receive count says about earlier deliveries: [`Count::Redelivered`]
/// `ApproximateReceiveCount − 1` when the count is above 1, else nothing (absent, unparseable,
/// or a first receive).
///
/// The runtime reconciles a readable body with it (`attempts = max(body, count − 1)`, the body
/// re-encoded only when that raises it), counts a poison body by it, and reports it as
/// [`Context::native_attempts`](babelqueue_core::Context::native_attempts). Reporting nothing
/// on a first receive keeps the body byte-identical there whatever its `attempts` (a negative
/// count included).
pub fn count(receive_count_text: Option<&str>) -> Option<Count> {
    receive_count(receive_count_text)
        .filter(|&count| count > 1)
        .map(|count| Count::Redelivered(count - 1))
}

/// The `bq-schema-version` attribute as carried: its text whatever its data type (`String`,
/// `Number`, `Number.int` …), never trimmed; [`Declared::Absent`] when there is no such
/// attribute or it has no text (a binary attribute).
///
/// The runtime applies the gate to it before anything decodes the body (absent or
/// ASCII-blank passes, exactly `1` passes, anything else is rejected untrimmed, see
/// [`babelqueue_core::gate::gated`]).
pub fn declared(attributes: &Attributes) -> Declared {
    attributes
        .get(SCHEMA_VERSION_ATTRIBUTE)
        .and_then(|a| a.string_value.clone())
        .map_or(Declared::Absent, Declared::Text)
}

/// The headers a consumer sees: every attribute that has a text value (the `bq-*` ones
/// included), by name.
pub fn headers(attributes: &Attributes) -> Headers {
    attributes
        .iter()
        .filter_map(|(k, v)| v.string_value.clone().map(|s| (k.clone(), s)))
        .collect()
}

/// A clamped visibility timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visibility {
    /// The `VisibilityTimeout` to send, 0..=43200.
    pub seconds: i32,
    /// Whether the requested delay was outside 0..=43200 or not a number (worth a warning).
    pub clamped: bool,
}

/// A release delay in seconds as SQS's `VisibilityTimeout`: truncated toward zero, below 0 → 0,
/// above 43200 (or +∞) → 43200, −∞ → 0, NaN → 0. Fractions are truncated silently; every other
/// change is flagged in [`Visibility::clamped`].
pub fn visibility_timeout(delay_seconds: f64) -> Visibility {
    let max = f64::from(MAX_VISIBILITY_TIMEOUT);
    if delay_seconds.is_nan() {
        return Visibility {
            seconds: 0,
            clamped: true,
        };
    }
    let clamped = !(0.0..=max).contains(&delay_seconds);
    let truncated = delay_seconds.trunc().clamp(0.0, max);
    // Integral and within 0..=43200: the conversion is exact.
    let seconds = truncated as i32;
    Visibility { seconds, clamped }
}

/// The `DelaySeconds` of a delayed publish: `None` when there is no delay or it is 0 (the
/// parameter is then not sent). Any delay on a FIFO queue, a delay above 900 s, or one that is
/// not a whole number of seconds, is an error: a delay is never truncated or dropped.
pub fn publish_delay(delay: Option<Duration>, fifo: bool) -> Result<Option<i32>, SqsError> {
    let Some(delay) = delay else {
        return Ok(None);
    };
    if fifo {
        return Err(SqsError::Delay(format!(
            "FIFO queues take no per-message delay (asked for {delay:?}); set DelaySeconds on the queue instead"
        )));
    }
    if delay.subsec_nanos() != 0 {
        return Err(SqsError::Delay(format!(
            "SQS delays are whole seconds, got {delay:?}"
        )));
    }
    let seconds = delay.as_secs();
    if seconds > MAX_PUBLISH_DELAY {
        return Err(SqsError::Delay(format!(
            "{seconds} s is outside 0..={MAX_PUBLISH_DELAY} s"
        )));
    }
    Ok((seconds > 0).then(|| i32::try_from(seconds).unwrap_or(0)))
}

/// The long-poll `WaitTimeSeconds` for a pop that may wait `timeout`: whole seconds (truncated),
/// at most 20, and at most `cap` when one is configured.
pub fn wait_time_seconds(timeout: Duration, cap: Option<i32>) -> i32 {
    let wait = i32::try_from(timeout.as_secs().min(20)).unwrap_or(MAX_WAIT_TIME);
    match cap {
        Some(cap) if cap < wait => cap.max(0),
        _ => wait,
    }
}

/// Whether a queue name is a FIFO queue name (ends in `.fifo`).
pub fn is_fifo_queue(name: &str) -> bool {
    name.ends_with(".fifo")
}

/// The BabelQueue dead-letter queue of an SQS queue: `<queue>-dlq`, or `<base>-dlq.fifo` for a
/// FIFO queue name. An explicit suffix (empty = unset) replaces `-dlq` and goes before `.fifo`.
pub fn dead_letter_queue_name(queue: &str, suffix: Option<&str>) -> String {
    let suffix = suffix.filter(|s| !s.is_empty()).unwrap_or("-dlq");
    match queue.strip_suffix(".fifo") {
        Some(base) => format!("{base}{suffix}.fifo"),
        None => format!("{queue}{suffix}"),
    }
}

/// The FIFO `MessageDeduplicationId` of a body: its `meta.id` when that is a valid id (1..=128
/// printable ASCII characters), else the hex SHA-256 of the body, so a record without `meta.id`
/// (a gate or poison dead-letter record) can still be sent to a FIFO queue.
pub fn deduplication_id(body: &[u8]) -> String {
    let id = Envelope::parse_object(body)
        .ok()
        .and_then(|e| e.message_id().map(Cow::into_owned));
    match id {
        Some(id) if (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic()) => id,
        _ => sha256_hex(body),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &str = r#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{"order_id":1042},"meta":{"id":"m-1","queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0}"#;

    #[test]
    fn contract_projection() {
        let got = attributes(ORDER.as_bytes());
        let want = [
            ("bq-job", "String", "urn:babel:orders:created"),
            ("bq-trace-id", "String", "t-1"),
            ("bq-message-id", "String", "m-1"),
            ("bq-schema-version", "Number", "1"),
            ("bq-source-lang", "String", "php"),
            ("bq-created-at", "Number", "1749132727000"),
        ];
        assert_eq!(got.len(), want.len());
        for (name, data_type, value) in want {
            let a = &got[name];
            assert_eq!(
                (a.data_type.as_str(), a.string_value.as_deref()),
                (data_type, Some(value)),
                "{name}"
            );
        }
    }

    #[test]
    fn projection_leaves_out_what_sqs_would_refuse() {
        assert!(attributes(b"not json").is_empty());
        assert!(attributes(b"[1]").is_empty());
        let odd = br#"{"job":"","trace_id":7,"meta":{"id":"a\u0001b","schema_version":"x","created_at":1.5,"lang":null}}"#;
        assert!(attributes(odd).is_empty(), "{:?}", attributes(odd));
        // A gate record keeps its declared version (re-derived from the body).
        let v2 = br#"{"job":"urn:x","meta":{"schema_version":2}}"#;
        assert_eq!(
            attributes(v2)["bq-schema-version"],
            AttributeValue::number("2")
        );
        // Forbidden keys are neither dropped nor logged by the read-only parse.
        let forbidden = br#"{"job":"urn:x","timestamp":1,"meta":{"ts":2,"id":"i"}}"#;
        assert_eq!(attributes(forbidden).len(), 2);
    }

    #[test]
    fn headers_merge_under_the_contract_and_the_cap() {
        let mut attrs = attributes(ORDER.as_bytes());
        let headers: Headers = [
            (
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
            ("bq-job", "urn:evil"),
            ("", "x"),
            ("blank", ""),
            ("a1", "1"),
            ("a2", "2"),
            ("a3", "3"),
            ("a4", "4"),
            ("a5", "5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        merge_headers(&mut attrs, &headers).unwrap();
        assert_eq!(attrs.len(), MAX_ATTRIBUTES);
        assert_eq!(
            attrs["bq-job"].string_value.as_deref(),
            Some("urn:babel:orders:created")
        );
        // Sorted key order: a1..a4 fit, a5 and traceparent are cut.
        assert!(attrs.contains_key("a4") && !attrs.contains_key("a5"));
        assert!(!attrs.contains_key("blank"));

        // A contract name the body did not set is not taken from a header either.
        let mut bare = attributes(br#"{"job":"urn:x"}"#);
        let posing: Headers = [
            ("bq-schema-version".to_owned(), "9".to_owned()),
            ("bq-created-at".to_owned(), "1".to_owned()),
            ("x-kept".to_owned(), "1".to_owned()),
        ]
        .into();
        merge_headers(&mut bare, &posing).unwrap();
        assert_eq!(
            bare.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["bq-job", "x-kept"]
        );

        let mut small = Attributes::new();
        let tp: Headers = [("traceparent".to_owned(), "00-x".to_owned())].into();
        merge_headers(&mut small, &tp).unwrap();
        assert_eq!(small["traceparent"], AttributeValue::string("00-x"));

        for bad in ["has space", "AWS.x", "amazon.trace", ".x", "x.", "a..b"] {
            let h: Headers = [(bad.to_owned(), "v".to_owned())].into();
            let err = merge_headers(&mut Attributes::new(), &h).unwrap_err();
            assert!(matches!(err, SqsError::Attribute { .. }), "{bad}: {err}");
        }
        let h: Headers = [("ok".to_owned(), "\u{1}".to_owned())].into();
        assert!(merge_headers(&mut Attributes::new(), &h).is_err());
    }

    fn body_with(attempts: i64) -> String {
        format!(r#"{{"job":"urn:x","data":{{"ratio":1.50}},"attempts":{attempts}}}"#)
    }

    fn attempts_of(body: &[u8]) -> i64 {
        Envelope::decode(body).unwrap().envelope.attempts()
    }

    #[test]
    fn the_receive_count_is_reported_as_earlier_deliveries() {
        assert_eq!(count(Some("2")), Some(Count::Redelivered(1)));
        assert_eq!(count(Some("8")), Some(Count::Redelivered(7)));
        // A first receive, no count, an unparseable or a nonsensical one: nothing to report.
        for nothing in [Some("1"), Some("0"), Some("-4"), Some("x"), Some(""), None] {
            assert_eq!(count(nothing), None, "{nothing:?}");
        }
        // What a handler sees as `native_attempts`: max(ApproximateReceiveCount − 1, 0).
        let native = |c| count(c).map_or(0, |c| c.native());
        assert_eq!(
            [
                native(Some("1")),
                native(Some("8")),
                native(Some("x")),
                native(None)
            ],
            [0, 7, 0, 0]
        );
    }

    /// The contract's table (`attempts = max(body, ApproximateReceiveCount − 1)`), through the
    /// runtime's own reconciliation of the reported count.
    #[test]
    fn reconciliation() {
        use babelqueue_testkit::reading::reconcile;
        for (body, receive_count, want) in [
            (0, Some("1"), 0),
            (0, Some("2"), 1),
            (0, Some("3"), 2),
            (2, Some("5"), 4),
            (5, Some("1"), 5),
            (4, Some("not-a-number"), 4),
            (3, None, 3),
        ] {
            let text = body_with(body);
            let out = reconcile(text.as_bytes(), count(receive_count));
            assert_eq!(attempts_of(&out), want, "{body} {receive_count:?}");
            if want == body {
                assert!(
                    matches!(out, Cow::Borrowed(_)),
                    "unchanged bodies stay byte-identical"
                );
            }
        }
        // Number forms survive the one re-encode.
        let zero = body_with(0);
        let out = reconcile(zero.as_bytes(), count(Some("3")));
        assert!(std::str::from_utf8(&out).unwrap().contains("1.50"));
        // A negative body count is left alone when SQS has no redelivery to report.
        assert!(matches!(
            reconcile(br#"{"attempts":-3}"#, count(Some("1"))),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            reconcile(b"plain", count(Some("9"))),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn the_declared_version_is_the_text_untrimmed() {
        let with = |v: Option<&str>, data_type: &str| {
            let mut a = Attributes::new();
            a.insert(
                SCHEMA_VERSION_ATTRIBUTE.into(),
                AttributeValue {
                    data_type: data_type.into(),
                    string_value: v.map(str::to_owned),
                },
            );
            declared(&a)
        };
        assert_eq!(declared(&Attributes::new()), Declared::Absent);
        assert_eq!(with(None, "Binary"), Declared::Absent);
        assert_eq!(with(Some(" 1"), "Number"), Declared::Text(" 1".into()));
        // The runtime's gate on what is reported: the contract's trigger table.
        for pass in ["1", "", " \t", "\n\u{b}\u{c}\r"] {
            assert_eq!(with(Some(pass), "Number").rejected(), None, "{pass:?}");
        }
        for reject in [
            "2",
            "01",
            " 1",
            "1 ",
            "\u{a0}",
            "\u{85}",
            "\u{feff}",
            "1\u{3000}",
        ] {
            assert_eq!(
                with(Some(reject), "String").rejected(),
                Some(reject.to_owned())
            );
        }
        assert_eq!(
            with(Some("2"), "Number.int").rejected(),
            Some("2".to_owned())
        );
    }

    #[test]
    fn consumer_headers() {
        let mut a = attributes(ORDER.as_bytes());
        a.insert(
            "blob".into(),
            AttributeValue {
                data_type: "Binary".into(),
                string_value: None,
            },
        );
        let h = headers(&a);
        assert_eq!(h.len(), 6);
        assert_eq!(h["bq-job"], "urn:babel:orders:created");
    }

    #[test]
    fn visibility_clamp() {
        for (delay, seconds, clamped) in [
            (0.0, 0, false),
            (30.0, 30, false),
            (30.9, 30, false),
            (43200.0, 43200, false),
            (43200.5, 43200, true),
            (1e12, 43200, true),
            (f64::INFINITY, 43200, true),
            (-1.0, 0, true),
            (f64::NEG_INFINITY, 0, true),
            (f64::NAN, 0, true),
        ] {
            assert_eq!(
                visibility_timeout(delay),
                Visibility { seconds, clamped },
                "{delay}"
            );
        }
    }

    #[test]
    fn publish_delays() {
        let s = Duration::from_secs;
        assert_eq!(publish_delay(None, false).unwrap(), None);
        assert_eq!(publish_delay(None, true).unwrap(), None);
        assert_eq!(publish_delay(Some(s(0)), false).unwrap(), None);
        for n in [1, 60, 900] {
            assert_eq!(publish_delay(Some(s(n)), false).unwrap(), Some(n as i32));
        }
        for bad in [s(901), s(3600), Duration::from_millis(1500)] {
            assert!(matches!(
                publish_delay(Some(bad), false),
                Err(SqsError::Delay(_))
            ));
        }
        assert!(matches!(
            publish_delay(Some(s(0)), true),
            Err(SqsError::Delay(_))
        ));
        assert!(matches!(
            publish_delay(Some(s(30)), true),
            Err(SqsError::Delay(_))
        ));
    }

    #[test]
    fn long_poll() {
        let s = Duration::from_secs;
        assert_eq!(wait_time_seconds(s(1), None), 1);
        assert_eq!(wait_time_seconds(Duration::from_millis(999), None), 0);
        assert_eq!(wait_time_seconds(s(60), None), 20);
        assert_eq!(wait_time_seconds(s(60), Some(5)), 5);
        assert_eq!(wait_time_seconds(s(2), Some(5)), 2);
    }

    #[test]
    fn naming() {
        assert_eq!(dead_letter_queue_name("orders", None), "orders-dlq");
        assert_eq!(dead_letter_queue_name("orders", Some("")), "orders-dlq");
        assert_eq!(
            dead_letter_queue_name("orders.fifo", None),
            "orders-dlq.fifo"
        );
        assert_eq!(
            dead_letter_queue_name("orders.fifo", Some("-x")),
            "orders-x.fifo"
        );
        assert_eq!(
            dead_letter_queue_name("orders", Some("_dead")),
            "orders_dead"
        );
        assert!(is_fifo_queue("a.fifo") && !is_fifo_queue("a-fifo"));
    }

    #[test]
    fn dedup_ids() {
        assert_eq!(deduplication_id(ORDER.as_bytes()), "m-1");
        let hashed = deduplication_id(b"plain text");
        assert_eq!(hashed.len(), 64);
        assert_eq!(
            deduplication_id(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let long = format!(r#"{{"meta":{{"id":"{}"}}}}"#, "x".repeat(129));
        assert_eq!(deduplication_id(long.as_bytes()).len(), 64);
    }

    #[test]
    fn sqs_text() {
        assert!(is_sqs_text("a\tb\nc\r é 😀 \u{FFFD}"));
        assert_eq!(first_invalid_char("ab\u{1}"), Some((2, '\u{1}')));
        assert!(!is_sqs_text("\u{FFFE}"));
    }
}
