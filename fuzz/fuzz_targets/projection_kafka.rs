//! Kafka projection: `project`, `record_timestamp`, the header readers, `declared`, `count`,
//! `facts`, `reinject_headers` and `due_at` on any record value, any headers (null values and
//! invalid UTF-8 included) and any clock values, with the facts a record reports classified and
//! reconciled by the runtime (`babelqueue_core::classify`, `attempts`).
//!
//! Checked, as the module documents:
//! * only a non-empty object gets headers, all `bq-*` and UTF-8, never null;
//! * round trip: the facts of a record carrying the headers this SDK wrote are the body's own
//!   values (the `bq-schema-version` text, else absent; the `bq-attempts` count, negative read
//!   as 0; no original topic), so a readable value reaches the runtime byte for byte whenever
//!   its `attempts` is a non-negative integer or absent;
//! * on any record the facts are the first `bq-schema-version` header (absent, null or its
//!   text), the first `bq-attempts` as a `Count::Carried` when it reads as an integer, and a
//!   non-empty `bq-original-topic`; through the runtime the carried count is authoritative
//!   (a readable body gets exactly it, a poison one is counted by it, else by its own integer
//!   `attempts`) and a poison record names the original topic, else the consumed one;
//! * the re-injector drops exactly `bq-delay` and `bq-original-topic`, keeping the order;
//! * `due_at` stays within `[now, now + tier]`.
//!
//! Dropped with contract v2: `inbound`, `schema_gate` and the binding's own `reconcile` are
//! gone, and with them the routes (`Route::Gated`, `Route::TransportPoison`) the target
//! compared against: the binding reports facts, the runtime gates, classifies and reconciles,
//! and that is what is checked now. Out-of-band headers do not apply: `project` takes none.
//!
//! Input: the record value, then optionally `0xFF` and the bytes the rest comes from.
#![no_main]

use babelqueue_core::classify::Class;
use babelqueue_core::{Count, Declared};
use babelqueue_envelope::Envelope;
use babelqueue_fuzz::{check_classified, check_reconciled, integer_attempts, split_body, text};
use babelqueue_transport_kafka::client::{Record, RecordHeader};
use babelqueue_transport_kafka::projection::{
    HEADER_ATTEMPTS, HEADER_DELAY, HEADER_JOB, HEADER_ORIGINAL_TOPIC, HEADER_SCHEMA_VERSION, count,
    declared, due_at, facts, header, header_attempts, header_text, project, project_with_timestamp,
    record_timestamp, reinject_headers,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (value, params) = split_body(data);
    let mut u = Unstructured::new(params);
    let own = produce(value);
    round_trip(value, own);
    if let Ok(record) = record(value, &mut u) {
        check_record(&record);
        let reinjected = reinject_headers(&record.headers);
        let kept: Vec<&RecordHeader> = record
            .headers
            .iter()
            .filter(|h| h.key != HEADER_DELAY && h.key != HEADER_ORIGINAL_TOPIC)
            .collect();
        assert_eq!(reinjected.iter().collect::<Vec<_>>(), kept);
    }
    if let Ok((ts, tier, now)) = u.arbitrary::<(Option<i64>, u64, i64)>() {
        let due = due_at(ts, tier, now);
        let latest = now.saturating_add(i64::try_from(tier).unwrap_or(i64::MAX));
        assert!(
            (now..=latest).contains(&due),
            "{due} outside [{now}, {latest}]"
        );
    }
});

fn produce(value: &[u8]) -> Vec<RecordHeader> {
    let headers = project(value);
    assert_eq!(
        project_with_timestamp(value),
        (headers.clone(), record_timestamp(value)),
        "one parse projects as two do"
    );
    let readable = Envelope::parse_object(value)
        .ok()
        .filter(|e| e.keys().next().is_some());
    if readable.is_none() {
        assert!(
            headers.is_empty(),
            "an empty or non-object value gets no header"
        );
    }
    for h in &headers {
        assert!(h.key.starts_with("bq-"), "{}", h.key);
        let Some(text) = h.value.as_deref() else {
            panic!("projected header {} is null", h.key);
        };
        assert!(std::str::from_utf8(text).is_ok());
    }
    if let Some(ts) = record_timestamp(value) {
        assert!(ts > 0);
    }
    headers
}

fn round_trip(value: &[u8], headers: Vec<RecordHeader>) {
    let version = header_text(&headers, HEADER_SCHEMA_VERSION);
    let attempts = header_attempts(&headers);
    let record = Record {
        topic: "orders".to_owned(),
        partition: 0,
        offset: 0,
        key: None,
        value: Some(value.to_vec()),
        headers,
        timestamp: None,
    };
    let reported = facts(&record);
    assert_eq!(
        reported.declared_version,
        version.map_or(Declared::Absent, Declared::Text)
    );
    assert_eq!(reported.count, attempts.map(Count::Carried));
    assert_eq!(reported.original_queue, None);
    if let Some(n) = integer_attempts(value) {
        assert_eq!(attempts, Some(n.max(0)), "bq-attempts is the body's count");
    }
    let class = check_classified(value, &reported, &record.topic);
    let plain_attempts =
        Envelope::parse_object(value)
            .ok()
            .is_some_and(|e| match e.get("attempts") {
                None => true,
                Some(raw) => raw.as_i64().is_some_and(|n| n >= 0),
            });
    if plain_attempts && let Class::Readable { body, .. } = class {
        assert_eq!(
            &*body, value,
            "publish then consume must give the value back"
        );
    }
}

fn record(value: &[u8], u: &mut Unstructured<'_>) -> Result<Record> {
    let mut headers = Vec::new();
    for _ in 0..u.int_in_range(0..=6)? {
        let key = if u.ratio(3, 4)? {
            (*u.choose(&[
                HEADER_ATTEMPTS,
                HEADER_SCHEMA_VERSION,
                HEADER_ORIGINAL_TOPIC,
                HEADER_DELAY,
                HEADER_JOB,
            ])?)
            .to_owned()
        } else {
            text(u)?
        };
        let value = match u.int_in_range(0..=3)? {
            0 => None,
            1 => Some(u.arbitrary::<Vec<u8>>()?),
            2 => Some(u.arbitrary::<i64>()?.to_string().into_bytes()),
            _ => Some(text(u)?.into_bytes()),
        };
        headers.push(RecordHeader {
            key: key.into(),
            value,
        });
    }
    Ok(Record {
        topic: text(u)?,
        partition: u.arbitrary()?,
        offset: u.arbitrary()?,
        key: u.arbitrary()?,
        value: if u.ratio(1, 8)? {
            None
        } else {
            Some(value.to_vec())
        },
        headers,
        timestamp: u.arbitrary()?,
    })
}

/// The facts of any record, and what the runtime makes of them.
fn check_record(record: &Record) {
    // The transport hands a tombstone over as an empty body.
    let value = record.value.as_deref().unwrap_or_default();
    let reported = facts(record);
    // A record lent (as the librdkafka client hands records to the transport) and copied back
    // is the record.
    assert_eq!(record.lend().to_record(), *record);

    let first_version = header(&record.headers, HEADER_SCHEMA_VERSION);
    let want_version = match first_version {
        None => Declared::Absent,
        Some(None) => Declared::Null,
        Some(Some(bytes)) => Declared::Text(String::from_utf8_lossy(bytes).into_owned()),
    };
    assert_eq!(reported.declared_version, want_version);
    assert_eq!(declared(&record.headers), want_version);

    let carried = header_attempts(&record.headers);
    if let Some(n) = carried {
        assert!(n >= 0);
    }
    assert_eq!(reported.count, carried.map(Count::Carried));
    assert_eq!(count(&record.headers), reported.count);
    let original = header_text(&record.headers, HEADER_ORIGINAL_TOPIC).filter(|t| !t.is_empty());
    assert_eq!(reported.original_queue, original);

    // The carried count is authoritative: a readable body gets exactly it.
    let want = carried.and_then(|n| {
        let envelope = Envelope::parse_object(value).ok()?;
        match envelope.get("attempts") {
            None => (n != 0).then_some(n),
            Some(raw) if raw.is_null() => Some(n),
            Some(raw) => raw.as_i64().filter(|a| *a != n).map(|_| n),
        }
    });
    check_reconciled(value, reported.count, want);

    match check_classified(value, &reported, &record.topic) {
        Class::Gated { .. } => {}
        Class::Poison(poison) => {
            let counted = carried.unwrap_or_else(|| integer_attempts(value).unwrap_or(0).max(0));
            assert_eq!(poison.attempts, counted);
            let topic = original.unwrap_or_else(|| record.topic.clone());
            assert_eq!(poison.original_queue, topic);
        }
        Class::Readable { envelope, .. } => {
            if let Some(n) = carried {
                assert_eq!(
                    envelope.attempts(),
                    n,
                    "the header's count is authoritative"
                );
            }
        }
    }
}
