//! The Pulsar binding sections: `pulsar`, `pulsar_exhaustion`, `version_gate_pulsar`.
//!
//! Every case goes through `babelqueue-transport-pulsar`'s real [`PulsarTransport`] over its
//! in-memory [`FakePulsar`] client: what a delivery is (gated, reconciled) is what the runtime's
//! own classifier makes of the facts the transport reported, and the real runtime ([`App`]) is
//! in front for the settle outcomes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use babelqueue_core::classify::{Class, classify};
use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, Transport, UnknownUrn};
use babelqueue_transport_pulsar::fake::FakePulsar;
use babelqueue_transport_pulsar::{Properties, PulsarTransport, projection};
use serde_json::Value;

use super::{Ctx, bool_field, incoming_bodies, int_field, str_field, unknown_urn_field};
use crate::Case;
use crate::hop::block_on;

const QUEUE: &str = "orders";
const DLQ: &str = "orders.dlq";

fn transport() -> (Arc<FakePulsar>, PulsarTransport) {
    let fake = Arc::new(FakePulsar::new());
    (fake.clone(), PulsarTransport::with_client(fake))
}

fn redelivery(case: &Value) -> Result<u32, String> {
    u32::try_from(int_field(case, "redelivery_count")?).map_err(|e| e.to_string())
}

/// The fixture with `attempts` set, re-encoded by the codec.
fn with_attempts(body: &[u8], attempts: i64) -> Result<Vec<u8>, String> {
    let mut envelope = Envelope::decode(body).map_err(|e| e.to_string())?.envelope;
    envelope.set_attempts(attempts);
    Ok(envelope.encode().map_err(|e| e.to_string())?.into_bytes())
}

pub(super) fn pulsar(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let (group, block) = case.group.ok_or("a pulsar case outside any block")?;
    let c = case.value;
    match group {
        "property_projection" => block_on(async {
            let body = ctx.fixture(c, "envelope_file")?;
            let (fake, transport) = transport();
            transport
                .publish(QUEUE, &body)
                .await
                .map_err(|e| e.to_string())?;
            let sent = fake.sent();
            let [sent] = sent.as_slice() else {
                return Err(format!("expected one send, saw {}", sent.len()));
            };
            if sent.payload != body {
                return Err("the payload is not the envelope byte for byte".into());
            }
            let want: Properties = c
                .get("properties")
                .and_then(Value::as_object)
                .ok_or("no properties")?
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|v| (k.clone(), v.to_owned()))
                        .ok_or_else(|| format!("property {k} is not a string"))
                })
                .collect::<Result<_, _>>()?;
            if sent.properties != want {
                return Err(format!(
                    "properties are {:?}, expected {want:?}",
                    sent.properties
                ));
            }
            Ok(())
        }),
        "attempts_reconciliation" => block_on(async {
            let fixture = ctx.manifest.fixture("fixtures/order-created.json")?;
            let body = with_attempts(&fixture, int_field(c, "body_attempts")?)?;
            let (fake, transport) = transport();
            fake.deliver(QUEUE, body, Properties::new(), redelivery(c)?);
            let delivery = transport
                .pop(QUEUE, Duration::from_millis(10))
                .await
                .map_err(|e| e.to_string())?
                .ok_or("nothing received")?;
            // What the runtime reads: the transport's facts, reconciled by core.
            let Class::Readable { envelope, .. } =
                classify(delivery.body(), delivery.facts(), QUEUE)
            else {
                return Err("the delivery is not a readable envelope".into());
            };
            let got = envelope.attempts();
            let want = int_field(c, "expected_attempts")?;
            if got != want {
                return Err(format!("attempts {got}, expected {want}"));
            }
            Ok(())
        }),
        "schema_version_gate" => gate_trigger(ctx, block, c),
        other => Err(format!("unknown pulsar block {other}")),
    }
}

/// One `schema_version_gate` row: the property on a valid envelope, through the real `pop`.
fn gate_trigger(ctx: &Ctx<'_>, block: &Value, c: &Value) -> Result<(), String> {
    let body = ctx.fixture(block, "fixture")?;
    let property = str_field(block, "property")?;
    let mut props = Properties::new();
    let value = if c.get("absent").and_then(Value::as_bool) == Some(true) {
        None
    } else {
        let v = c
            .get("value")
            .and_then(Value::as_str)
            .ok_or("a pulsar gate value that is not a string")?;
        props.insert(property.to_owned(), v.to_owned());
        Some(v)
    };
    let expect = str_field(c, "expect")?;
    block_on(async {
        let (fake, transport) = transport();
        fake.deliver(QUEUE, body.clone(), props, 0);
        let delivery = transport
            .pop(QUEUE, Duration::from_millis(10))
            .await
            .map_err(|e| e.to_string())?
            .ok_or("nothing received")?;
        match (expect, classify(delivery.body(), delivery.facts(), QUEUE)) {
            ("decode", Class::Gated { declared }) => {
                Err(format!("gated on {declared:?}, expected a normal decode"))
            }
            ("decode", _) => Ok(()),
            ("reject", Class::Gated { declared }) => {
                if Some(declared.as_str()) != value {
                    return Err(format!("rejected {declared:?}, expected {value:?}"));
                }
                if delivery.body() != body.as_slice() {
                    return Err("a gated body was changed".into());
                }
                Ok(())
            }
            ("reject", class) => Err(format!("not gated ({class:?}), expected a rejection")),
            (other, _) => Err(format!("unknown expectation {other}")),
        }
    })
}

/// What one consume of one delivery did, observed on the fake client.
struct Observed {
    handler_calls: usize,
    sends: Vec<(String, Vec<u8>, Properties)>,
    acked: usize,
    nacked: usize,
}

struct Setup<'a> {
    body: Vec<u8>,
    props: Properties,
    redelivery_count: u32,
    max_attempts: i64,
    dead_letter: bool,
    on_unknown_urn: UnknownUrn,
    handled_urn: &'a str,
    fail_dlq: bool,
}

/// Delivers one message through the fake client and lets the real runtime consume it once.
fn consume_once(setup: Setup<'_>) -> Result<Observed, String> {
    block_on(async {
        let (fake, transport) = transport();
        if setup.fail_dlq {
            fake.fail_sends_to(DLQ);
        }
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let app = App::builder(transport)
            .queue(QUEUE)
            .max_attempts(setup.max_attempts)
            .dead_letter(setup.dead_letter)
            .on_unknown_urn(setup.on_unknown_urn)
            .poll_timeout(Duration::from_millis(10))
            .rewind_pause(Duration::ZERO)
            .handle(setup.handled_urn, move |_ctx: Context| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Err::<(), _>(HandlerError::new("conformance handler failure"))
                }
            })
            .build()
            .map_err(|e| e.to_string())?;
        let original = fake.deliver(QUEUE, setup.body, setup.props, setup.redelivery_count);
        app.consume(Consume::new().max_messages(1).handle_signals(false))
            .await
            .map_err(|e| e.to_string())?;
        Ok(Observed {
            handler_calls: calls.load(Ordering::SeqCst),
            sends: fake
                .sent()
                .into_iter()
                .map(|s| (s.topic, s.payload, s.properties))
                .collect(),
            acked: fake.acked().iter().filter(|m| **m == original).count(),
            nacked: fake.nacked().iter().filter(|m| **m == original).count(),
        })
    })
}

pub(super) fn pulsar_exhaustion(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let kind = str_field(c, "kind")?;
    let fixture = ctx.manifest.fixture("fixtures/order-created.json")?;
    let urn = Envelope::decode(&fixture)
        .map_err(|e| e.to_string())?
        .envelope
        .urn()
        .into_owned();
    let body_attempts = c.get("body_attempts").and_then(Value::as_i64);
    let body = match kind {
        "poison" => b"not json".to_vec(),
        _ => with_attempts(&fixture, body_attempts.ok_or("no body_attempts")?)?,
    };
    // What a producer would have written, with `bq-attempts` as the case says.
    let mut props = projection::properties(&body);
    props.remove(projection::PROP_ATTEMPTS);
    let bq_attempts = c.get("bq_attempts").and_then(Value::as_str);
    if let Some(value) = bq_attempts {
        props.insert(projection::PROP_ATTEMPTS.to_owned(), value.to_owned());
    }
    let redelivery_count = redelivery(c)?;
    let observed = consume_once(Setup {
        body,
        props,
        redelivery_count,
        max_attempts: c.get("max_attempts").and_then(Value::as_i64).unwrap_or(3),
        dead_letter: bool_field(c, "dead_letter")?,
        on_unknown_urn: unknown_urn_field(c)?,
        handled_urn: if kind == "failed" {
            &urn
        } else {
            "urn:babel:conformance:other"
        },
        fail_dlq: false,
    })?;
    let expect = c.get("expect").ok_or("no expect")?;
    let outcome = str_field(expect, "outcome")?;

    let want_calls = usize::from(kind == "failed");
    if observed.handler_calls != want_calls {
        return Err(format!(
            "the handler ran {} time(s), expected {want_calls}",
            observed.handler_calls
        ));
    }
    if observed.acked != 1 || observed.nacked != 0 {
        return Err(format!(
            "the original was acked {} and nacked {} time(s), expected one ack",
            observed.acked, observed.nacked
        ));
    }
    let topics: Vec<&str> = observed.sends.iter().map(|s| s.0.as_str()).collect();
    let want_topics: &[&str] = match outcome {
        "dlq" => &[DLQ],
        "retry" => &[QUEUE],
        "drop" => &[],
        other => return Err(format!("unknown outcome {other}")),
    };
    if topics != want_topics {
        return Err(format!(
            "published to {topics:?}, expected {want_topics:?} ({outcome})"
        ));
    }
    let Some((_, payload, props)) = observed.sends.first() else {
        return Ok(());
    };
    let written: Value = serde_json::from_slice(payload)
        .map_err(|e| format!("the written body is not JSON: {e}"))?;
    match outcome {
        "retry" => {
            // The oracle of the section: reconciled = valid bq-attempts, else the body's;
            // raised to the redelivery count; counted = reconciled + 1.
            let reconciled = bq_attempts
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(body_attempts.unwrap_or(0))
                .max(i64::from(redelivery_count));
            let counted = reconciled + 1;
            if written.get("attempts").and_then(Value::as_i64) != Some(counted) {
                return Err(format!(
                    "the retry carries {written}, expected attempts {counted}"
                ));
            }
            if props.get(projection::PROP_ATTEMPTS).map(String::as_str)
                != Some(counted.to_string().as_str())
            {
                return Err(format!(
                    "the retry's bq-attempts is {props:?}, expected {counted}"
                ));
            }
        }
        "dlq" => {
            let block = written
                .get("dead_letter")
                .ok_or("the record has no dead_letter")?;
            let reason = str_field(expect, "reason")?;
            if block.get("reason").and_then(Value::as_str) != Some(reason) {
                return Err(format!("dead_letter is {block}, expected reason {reason}"));
            }
            if let Some(want) = expect.get("dead_letter_attempts").and_then(Value::as_i64)
                && block.get("attempts").and_then(Value::as_i64) != Some(want)
            {
                return Err(format!("dead_letter is {block}, expected attempts {want}"));
            }
        }
        _ => {}
    }
    Ok(())
}

pub(super) fn version_gate_pulsar(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let expect = c.get("expect").ok_or("no expect")?;
    let outcome = str_field(expect, "outcome")?;
    let bq_attempts = c.get("bq_attempts").and_then(Value::as_str);
    for (name, body) in incoming_bodies(ctx)? {
        let body = body.as_bytes().to_vec();
        let mut props = Properties::new();
        props.insert(projection::PROP_SCHEMA_VERSION.to_owned(), "2".to_owned());
        props.insert(
            projection::PROP_JOB.to_owned(),
            "urn:babelqueue:order.created".to_owned(),
        );
        if let Some(a) = bq_attempts {
            props.insert(projection::PROP_ATTEMPTS.to_owned(), a.to_owned());
        }
        let observed = consume_once(Setup {
            body: body.clone(),
            props,
            redelivery_count: if bq_attempts.is_some() { 8 } else { 0 },
            max_attempts: 3,
            dead_letter: str_field(c, "dead_letter")? == "on",
            on_unknown_urn: unknown_urn_field(c)?,
            handled_urn: "urn:babelqueue:order.created",
            fail_dlq: c.get("dlq_write").and_then(Value::as_str) == Some("fails"),
        })
        .map_err(|e| format!("{name}: {e}"))?;
        let fail = |why: String| Err(format!("{name}: {why}"));
        if observed.handler_calls != 0 {
            return fail("a handler ran for a version-gated delivery".into());
        }
        if observed.sends.iter().any(|s| s.0 != DLQ) {
            return fail(format!(
                "wrote outside the DLQ: {:?}",
                observed.sends.iter().map(|s| &s.0).collect::<Vec<_>>()
            ));
        }
        match outcome {
            "ack" => {
                if observed.acked != 1 || observed.nacked != 0 || !observed.sends.is_empty() {
                    return fail(format!(
                        "acked {} nacked {} wrote {}; expected one ack and no write",
                        observed.acked,
                        observed.nacked,
                        observed.sends.len()
                    ));
                }
            }
            "dlq_raw" => {
                if observed.acked != 1 || observed.nacked != 0 || observed.sends.len() != 1 {
                    return fail(format!(
                        "acked {} nacked {} wrote {}; expected one DLQ write then one ack",
                        observed.acked,
                        observed.nacked,
                        observed.sends.len()
                    ));
                }
                let (_, payload, props) = &observed.sends[0];
                if payload != &body {
                    return fail(format!(
                        "the DLQ record is {:?}, not the incoming body byte for byte",
                        String::from_utf8_lossy(payload)
                    ));
                }
                if props
                    .get(projection::PROP_SCHEMA_VERSION)
                    .map(String::as_str)
                    != Some("2")
                {
                    return fail(format!(
                        "the DLQ copy lost its bq-schema-version: {props:?}"
                    ));
                }
            }
            "unsettled" => {
                if observed.acked != 0 || observed.nacked != 1 || !observed.sends.is_empty() {
                    return fail(format!(
                        "acked {} nacked {} wrote {}; expected a nack and nothing else",
                        observed.acked,
                        observed.nacked,
                        observed.sends.len()
                    ));
                }
            }
            other => return fail(format!("unknown outcome {other}")),
        }
    }
    Ok(())
}
