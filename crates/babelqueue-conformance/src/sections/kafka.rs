//! The Kafka binding: `kafka` (projection, reconciliation, schema-version gate), `backoff`
//! (retry tiers) and `kafka_poison` (verdict and fate). Every case runs the real
//! `KafkaTransport` over the crate's in-memory Kafka client, and the real runtime where a
//! settle outcome is asserted.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use babelqueue_core::classify::{Class, classify};
use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, Outcome, Transport};
use babelqueue_envelope::Verdict;
use babelqueue_transport_kafka::fake::FakeKafka;
use babelqueue_transport_kafka::{
    DEFAULT_RETRY_TIERS_MS, KafkaOptions, KafkaTransport, Record, RecordHeader, RetryTiers,
    TimestampType, TopicPartition, retry_topic,
};
use serde_json::Value;

use super::{Ctx, str_field};
use crate::Case;
use crate::hop::block_on;

const GROUP: &str = "babelqueue";

fn transport(kafka: &FakeKafka, tiers: &[u64]) -> Result<KafkaTransport, String> {
    let tiers = RetryTiers::new(tiers.to_vec()).map_err(|e| e.to_string())?;
    let config = KafkaOptions::default().with_retry_tiers(tiers);
    Ok(KafkaTransport::with_client(
        Arc::new(kafka.clone()),
        &config,
    ))
}

fn record(value: &[u8], key: Option<Vec<u8>>, headers: Vec<RecordHeader>) -> Record {
    Record {
        topic: String::new(),
        partition: 0,
        offset: 0,
        key,
        value: Some(value.to_vec()),
        headers,
        timestamp: None,
        timestamp_type: TimestampType::CreateTime,
    }
}

fn header_text(record: &Record, name: &str) -> Result<Option<String>, String> {
    let found: Vec<&RecordHeader> = record.headers.iter().filter(|h| h.key == name).collect();
    match found.as_slice() {
        [] => Ok(None),
        [h] => match &h.value {
            Some(v) => String::from_utf8(v.clone())
                .map(Some)
                .map_err(|_| format!("header {name} is not UTF-8")),
            None => Err(format!("header {name} has a null value")),
        },
        _ => Err(format!("header {name} appears {} times", found.len())),
    }
}

fn int(value: &Value, field: &str) -> Result<i64, String> {
    value
        .get(field)
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("case has no integer `{field}`"))
}

fn tiers_of(case: &Value) -> Result<Vec<u64>, String> {
    case.get("retry_tiers_ms")
        .and_then(Value::as_array)
        .ok_or("case has no retry_tiers_ms")?
        .iter()
        .map(|t| {
            t.as_u64()
                .ok_or_else(|| format!("tier {t} is not an integer"))
        })
        .collect()
}

/// Asserts the listed headers of `record` (exactly one of each, UTF-8, equal).
fn expect_headers(record: &Record, want: &Value) -> Result<(), String> {
    for (name, value) in want.as_object().ok_or("expect.headers is not an object")? {
        let want = value.as_str().ok_or("an expected header is not a string")?;
        let got = header_text(record, name)?;
        if got.as_deref() != Some(want) {
            return Err(format!("header {name} is {got:?}, expected {want:?}"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// kafka

pub(super) fn kafka(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let (group, block) = case.group.ok_or("a kafka case outside a sub-block")?;
    match group {
        "property_projection" => property_projection(ctx, case.value),
        "attempts_reconciliation" => attempts_reconciliation(case.value),
        "schema_version_gate" => schema_version_gate(ctx, block, case.value),
        other => Err(format!("unknown kafka sub-block {other:?}")),
    }
}

fn property_projection(ctx: &Ctx<'_>, case: &Value) -> Result<(), String> {
    let body = ctx.fixture(case, "envelope_file")?;
    let want = case
        .get("headers")
        .and_then(Value::as_object)
        .ok_or("case has no headers")?;
    block_on(async {
        let kafka = FakeKafka::new();
        let t = transport(&kafka, &[])?;
        t.publish("orders", &body)
            .await
            .map_err(|e| e.to_string())?;
        let written = kafka.records("orders");
        let [stored] = written.as_slice() else {
            return Err(format!("{} records written, expected 1", written.len()));
        };
        if stored.value.as_deref() != Some(&body[..]) {
            return Err("the record value is not the envelope byte for byte".into());
        }
        if stored.headers.len() != want.len() {
            let names: Vec<&str> = stored.headers.iter().map(|h| &*h.key).collect();
            return Err(format!(
                "headers {names:?}, expected exactly {:?}",
                want.keys()
            ));
        }
        expect_headers(stored, &Value::Object(want.clone()))?;
        let created_at = Envelope::decode(&body)
            .map_err(|e| e.to_string())?
            .envelope
            .created_at();
        if stored.timestamp != created_at {
            return Err(format!(
                "record timestamp {:?}, expected meta.created_at {created_at:?}",
                stored.timestamp
            ));
        }
        Ok(())
    })
}

fn attempts_reconciliation(case: &Value) -> Result<(), String> {
    let body_attempts = int(case, "body_attempts")?;
    let expected = int(case, "expected_attempts")?;
    let mut envelope = Envelope::builder("urn:babel:orders:created")
        .data(&serde_json::json!({"x": 1}))
        .build()
        .map_err(|e| e.to_string())?;
    envelope.set_attempts(body_attempts);
    let body = envelope.encode().map_err(|e| e.to_string())?;
    let headers = match case.get("header_attempts") {
        Some(Value::Null) | None => Vec::new(),
        Some(v) => vec![RecordHeader::text("bq-attempts", v.to_string())],
    };
    block_on(async {
        let kafka = FakeKafka::new();
        let t = transport(&kafka, &[])?;
        kafka.append("orders", 0, record(body.as_bytes(), None, headers));
        let delivery = t
            .pop("orders", Duration::ZERO)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the record was not delivered")?;
        // The transport reports the header; the runtime reconciles (what the handler sees).
        let Class::Readable { envelope, .. } =
            classify(delivery.body(), delivery.facts(), delivery.queue())
        else {
            return Err("the record is not readable".into());
        };
        let got = envelope.attempts();
        if got == expected {
            Ok(())
        } else {
            Err(format!("attempts {got}, expected {expected}"))
        }
    })
}

fn schema_version_gate(ctx: &Ctx<'_>, block: &Value, case: &Value) -> Result<(), String> {
    let property = str_field(block, "property")?;
    let body = ctx.fixture(block, "fixture")?;
    let headers = if case.get("absent").and_then(Value::as_bool) == Some(true) {
        Vec::new()
    } else {
        match case.get("value") {
            Some(Value::String(v)) => vec![RecordHeader::text(property.to_owned(), v.clone())],
            // A JSON null: the header is present with a null value.
            Some(Value::Null) => vec![RecordHeader {
                key: property.to_owned().into(),
                value: None,
            }],
            other => return Err(format!("unexpected gate value {other:?}")),
        }
    };
    let want = str_field(case, "expect")?;
    block_on(async {
        let kafka = FakeKafka::new();
        let t = transport(&kafka, &[])?;
        kafka.append("orders", 0, record(&body, None, headers));
        let delivery = t
            .pop("orders", Duration::ZERO)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the record was not delivered")?;
        match (
            want,
            classify(delivery.body(), delivery.facts(), delivery.queue()),
        ) {
            ("reject", Class::Gated { declared }) => {
                let value = case.get("value").and_then(Value::as_str);
                if Some(declared.as_str()) != value {
                    return Err(format!("rejected {declared:?}, expected {value:?}"));
                }
                if delivery.body() != &body[..] {
                    return Err("a gated record must be handed over raw".into());
                }
                Ok(())
            }
            ("decode", Class::Readable { envelope, .. }) => {
                if envelope.urn() == "urn:babel:orders:created" {
                    Ok(())
                } else {
                    Err("the record did not decode to the fixture".into())
                }
            }
            (want, class) => Err(format!("classified {class:?}, expected {want}")),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// backoff

pub(super) fn backoff(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    if c.get("delay_ms").is_some() {
        requested_delay(c)
    } else if c.get("attempts").is_some() || c.get("attempts_before").is_some() {
        retry_republish(c)
    } else if let Some(want) = c.get("expect_topic") {
        let n = usize::try_from(int(c, "n")?).map_err(|e| e.to_string())?;
        let got = retry_topic(str_field(c, "work_topic")?, n);
        if Some(got.as_str()) == want.as_str() {
            Ok(())
        } else {
            Err(format!("retry topic {got:?}, expected {want}"))
        }
    } else if let Some(constant) = c.get("constant") {
        if constant != "DEFAULT_RETRY_TIERS_MS" {
            return Err(format!("unknown constant {constant}"));
        }
        let got = serde_json::json!(DEFAULT_RETRY_TIERS_MS);
        if crate::check::strict_equal(&got, c.get("expect").ok_or("no expect")?) {
            Ok(())
        } else {
            Err(format!("DEFAULT_RETRY_TIERS_MS is {got}"))
        }
    } else {
        Err("unrecognised backoff case shape".into())
    }
}

/// Every record written anywhere but `except`.
fn written_except(kafka: &FakeKafka, except: &str) -> Vec<Record> {
    kafka
        .topics_written()
        .into_iter()
        .filter(|t| t != except)
        .flat_map(|t| kafka.records(&t))
        .collect()
}

fn requested_delay(c: &Value) -> Result<(), String> {
    let work = str_field(c, "work_topic")?;
    let tiers = tiers_of(c)?;
    let delay = u64::try_from(int(c, "delay_ms")?).map_err(|e| e.to_string())?;
    let expect = c.get("expect").ok_or("no expect")?;
    block_on(async {
        let kafka = FakeKafka::new();
        let app = App::builder(transport(&kafka, &tiers)?)
            .queue(work)
            .build()
            .map_err(|e| e.to_string())?;
        let envelope = app
            .envelope("urn:acme:a")
            .data(&serde_json::json!({"n": 1}))
            .build()
            .map_err(|e| e.to_string())?;
        let result = app
            .publish_delayed(work, &envelope, Duration::from_millis(delay))
            .await;
        let written = written_except(&kafka, "");
        if expect == "reject" {
            return match (result, written.is_empty()) {
                (Err(_), true) => Ok(()),
                (Ok(()), _) => Err(format!("a delay of {delay} ms must be refused")),
                (Err(_), false) => Err("a refused delay must write nothing".into()),
            };
        }
        result.map_err(|e| e.to_string())?;
        let tier_ms = expect
            .get("tier_ms")
            .and_then(Value::as_u64)
            .ok_or("no expect.tier_ms")?;
        let n = tiers
            .iter()
            .position(|t| *t == tier_ms)
            .ok_or("expect.tier_ms is not a configured tier")?
            + 1;
        let [parked] = written.as_slice() else {
            return Err(format!("{} records written, expected 1", written.len()));
        };
        let topic = retry_topic(work, n);
        if parked.topic != topic {
            return Err(format!("parked on {:?}, expected {topic:?}", parked.topic));
        }
        if parked.value.as_deref() != Some(envelope.encode().map_err(|e| e.to_string())?.as_bytes())
        {
            return Err("the parked value is not the envelope".into());
        }
        expect_headers(parked, expect.get("headers").ok_or("no expect.headers")?)
    })
}

/// The runtime retries a consumed record that had `attempts_before` attempts: its handler
/// fails, `max_attempts` is out of reach, and the transport parks it on a tier.
fn retry_republish(c: &Value) -> Result<(), String> {
    let work = str_field(c, "work_topic")?;
    let tiers = tiers_of(c)?;
    let before = c
        .get("attempts")
        .or_else(|| c.get("attempts_before"))
        .and_then(Value::as_i64)
        .ok_or("no attempts")?;
    let key = c
        .get("key")
        .and_then(Value::as_str)
        .map(|k| k.as_bytes().to_vec());
    let expect = c.get("expect").ok_or("no expect")?;
    block_on(async {
        let kafka = FakeKafka::new();
        let t = transport(&kafka, &tiers)?;
        let mut envelope = Envelope::builder("urn:acme:a")
            .queue(work)
            .data(&serde_json::json!({"n": 1}))
            .build()
            .map_err(|e| e.to_string())?;
        envelope.set_attempts(before);
        let body = envelope.encode().map_err(|e| e.to_string())?;
        let headers = babelqueue_transport_kafka::projection::project(body.as_bytes());
        kafka.append(work, 0, record(body.as_bytes(), key.clone(), headers));
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let app = App::builder(t)
            .queue(work)
            .max_attempts(i64::MAX)
            .poll_timeout(Duration::from_millis(10))
            .rewind_pause(Duration::from_millis(1))
            .handle("urn:acme:a", move |_ctx: Context| {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(HandlerError::new("conformance retry")) }
            })
            .build()
            .map_err(|e| e.to_string())?;
        let summary = app
            .consume(Consume::new().max_messages(1).handle_signals(false))
            .await
            .map_err(|e| e.to_string())?;
        if summary.processed != 1 || calls.load(Ordering::SeqCst) != 1 {
            return Err("the handler did not run exactly once".into());
        }
        let written = written_except(&kafka, work);
        let committed = kafka.committed(GROUP, work, 0);
        if expect == "reject" {
            if !written.is_empty() {
                return Err("a retry without tiers must write nothing".into());
            }
            if committed.is_some() {
                return Err("a refused retry must commit nothing".into());
            }
            if kafka.seeks() != [(TopicPartition::new(work, 0), 0)] {
                return Err(format!(
                    "the record must be sought back, seeks: {:?}",
                    kafka.seeks()
                ));
            }
            return Ok(());
        }
        let [parked] = written.as_slice() else {
            return Err(format!("{} records written, expected 1", written.len()));
        };
        let topic = str_field(expect, "topic")?;
        let n = int(expect, "n")?;
        let tier_ms = expect.get("tier_ms").and_then(Value::as_u64);
        let tier_of_n = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| tiers.get(i))
            .copied();
        if parked.topic != topic || tier_of_n != tier_ms {
            return Err(format!(
                "parked on {:?}, expected {topic:?} (tier {n}, {tier_ms:?} ms)",
                parked.topic
            ));
        }
        expect_headers(parked, expect.get("headers").ok_or("no expect.headers")?)?;
        let body_attempts = Envelope::decode(parked.value.as_deref().unwrap_or_default())
            .map_err(|e| e.to_string())?
            .envelope
            .attempts();
        if body_attempts != int(expect, "body_attempts")? {
            return Err(format!("body attempts {body_attempts}"));
        }
        if parked.key != key {
            return Err(format!(
                "record key {:?}, expected {key:?} byte for byte",
                parked.key
            ));
        }
        if committed != Some(1) {
            return Err(format!(
                "the original must be committed after the confirmed write, committed {committed:?}"
            ));
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// kafka_poison

pub(super) fn kafka_poison(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let body = str_field(case.value, "body")?.as_bytes().to_vec();
    let want = str_field(case.value, "expect")?;
    let verdict = match babelqueue_envelope::classify(&body) {
        Verdict::Ok => "ok",
        Verdict::NoIdentity => "no_identity",
        Verdict::Poison(_) => "poison",
    };
    if verdict != want {
        return Err(format!("verdict {verdict}, expected {want}"));
    }
    block_on(async {
        let kafka = FakeKafka::new();
        let t = transport(&kafka, &[])?;
        kafka.append("orders", 0, record(&body, Some(b"k".to_vec()), Vec::new()));
        let delivery = t
            .pop("orders", Duration::ZERO)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the record was not delivered")?;
        let class = classify(delivery.body(), delivery.facts(), delivery.queue());
        let poison = matches!(class, Class::Poison(_));
        if poison == (want == "ok") {
            return Err(format!("classified {class:?} for a {want} record"));
        }
        if delivery.body() != &body[..] {
            return Err("a record must be handed over raw".into());
        }
        // The fate, through the runtime: dead-lettering on, max_attempts 3.
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let urn = Envelope::decode_lenient(delivery.body())
            .envelope
            .urn()
            .into_owned();
        let app = App::builder(t)
            .queue("orders")
            .dead_letter(true)
            .max_attempts(3)
            .handle(
                if urn.is_empty() {
                    "urn:babel:orders:created".to_owned()
                } else {
                    urn
                },
                move |_ctx: Context| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<(), HandlerError>(()) }
                },
            )
            .build()
            .map_err(|e| e.to_string())?;
        let outcome = app.dispatch(delivery).await;
        let dlq = kafka.records("orders.dlq");
        if kafka.committed(GROUP, "orders", 0) != Some(1) {
            return Err("the record must be committed once settled".into());
        }
        if !poison {
            return if outcome == Outcome::Acked
                && calls.load(Ordering::SeqCst) == 1
                && dlq.is_empty()
            {
                Ok(())
            } else {
                Err(format!(
                    "an ok record: outcome {outcome:?}, {} DLQ record(s)",
                    dlq.len()
                ))
            };
        }
        if calls.load(Ordering::SeqCst) != 0 {
            return Err("a poison record reached a handler".into());
        }
        let [record] = dlq.as_slice() else {
            return Err(format!("{} DLQ records, expected 1", dlq.len()));
        };
        if record.key.as_deref() != Some(&b"k"[..]) {
            return Err("the DLQ record must keep the key".into());
        }
        check_poison_record(record.value.as_deref().unwrap_or_default(), &body)
    })
}

/// A poison DLQ record: `dead_letter.reason` poison from `orders`, and either the `raw`
/// wrapper holding the body or a splice starting with the trimmed body minus its brace.
fn check_poison_record(record: &[u8], body: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(record).map_err(|_| "the DLQ record is not UTF-8")?;
    let members = crate::check::top_level_members(text)
        .ok_or_else(|| format!("the DLQ record is not an object: {text}"))?;
    let block = members
        .iter()
        .find(|(k, _)| k == "dead_letter")
        .ok_or("the DLQ record has no dead_letter")?;
    let block: Value = serde_json::from_str(&block.1).map_err(|e| e.to_string())?;
    if block["reason"] != "poison" || block["original_queue"] != "orders" {
        return Err(format!(
            "dead_letter {block}, expected reason poison from orders"
        ));
    }
    let body = std::str::from_utf8(body).map_err(|_| "the case body is not UTF-8")?;
    if let Some((_, raw)) = members.iter().find(|(k, _)| k == "raw") {
        let raw: String = serde_json::from_str(raw).map_err(|e| e.to_string())?;
        return if raw == body {
            Ok(())
        } else {
            Err(format!("raw is {raw:?}, expected the body"))
        };
    }
    let trimmed = body.trim_matches([' ', '\t', '\n', '\r']);
    let prefix = trimmed
        .strip_suffix('}')
        .unwrap_or(trimmed)
        .trim_end_matches([' ', '\t', '\n', '\r']);
    if text.starts_with(prefix) || prefix == "{" {
        Ok(())
    } else {
        Err(format!("the splice does not start with the body: {text}"))
    }
}
