//! Scope `artemis`: the `artemis` section (the JMS-readable projection, attempts reconciliation,
//! the `bq_schema_version` gate) and `version_gate_artemis` (how a version-gated delivery is
//! settled).
//!
//! Every case goes through `babelqueue-transport-artemis`: its real `ArtemisTransport` over the
//! crate's recording `FakeClient` (messages received by the fake first cross the AMQP wire
//! encoding, so a null application property is really carried); what a delivery is (gated,
//! reconciled) is what the runtime's classifier (`babelqueue_core::classify`) makes of the facts
//! the transport reported, and, for settling, the real runtime (`App::dispatch`, which asks
//! `babelqueue_core::decide`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use babelqueue_core::classify::{Class, classify};
use babelqueue_core::{App, Context, Envelope, HandlerError, Outcome, Transport};
use babelqueue_transport_artemis::amqp_types::messaging::annotations::OwnedKey;
use babelqueue_transport_artemis::amqp_types::messaging::{AmqpValue, Body, MessageId};
use babelqueue_transport_artemis::amqp_types::primitives::{SimpleValue, Symbol, Value};
use babelqueue_transport_artemis::fake::{FakeClient, incoming, wire_round_trip};
use babelqueue_transport_artemis::{ArtemisTransport, Disposition, projection};
use serde_json::Value as Json;

use super::{Ctx, incoming_bodies, int_field, str_field, unknown_urn_field};
use crate::Case;
use crate::hop::block_on;

const QUEUE: &str = "orders";

fn transport(fake: &Arc<FakeClient>) -> ArtemisTransport {
    ArtemisTransport::with_client(fake.clone(), Duration::from_millis(10))
}

/// The `artemis` section, by sub-block.
pub(super) fn artemis(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    match case.group.map(|(name, _)| name) {
        Some("property_projection") => property_projection(ctx, case),
        Some("attempts_reconciliation") => attempts_reconciliation(ctx, case),
        Some("schema_version_gate") => schema_version_gate(ctx, case),
        other => Err(format!("no runner for the artemis block {other:?}")),
    }
}

/// Publishes the fixture through the transport and inspects the AMQP message it sent.
fn property_projection(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let body = ctx.fixture(c, "envelope_file")?;
    let fake = FakeClient::new();
    block_on(transport(&fake).publish(QUEUE, &body)).map_err(|e| e.to_string())?;
    let sent = fake.sent();
    let [(address, message)] = sent.as_slice() else {
        return Err(format!("expected one message sent, found {}", sent.len()));
    };
    if address != QUEUE {
        return Err(format!(
            "sent to {address:?}, expected the plain queue name {QUEUE:?}"
        ));
    }
    // x-opt-jms-type, under a SYMBOL key (the annotation map cannot hold a string key).
    let annotation = str_field(c, "jms_type_annotation")?;
    let want_urn = str_field(c, "jms_type")?;
    let got = message
        .message_annotations
        .as_ref()
        .and_then(|a| a.get(&OwnedKey::Symbol(Symbol::from(annotation))));
    if got != Some(&Value::String(want_urn.to_owned())) {
        return Err(format!(
            "annotation {annotation} is {got:?}, expected the string {want_urn:?}"
        ));
    }
    let props = message.properties.as_ref().ok_or("no properties section")?;
    let want_trace = str_field(c, "correlation_id")?;
    if props.correlation_id != Some(MessageId::String(want_trace.to_owned())) {
        return Err(format!(
            "correlation-id is {:?}, expected the string {want_trace:?}",
            props.correlation_id
        ));
    }
    if props.message_id.is_some() {
        return Err("a message-id was set; the message id is not projected".into());
    }
    let created_at = Envelope::decode(&body)
        .map_err(|e| e.to_string())?
        .envelope
        .created_at();
    if props.creation_time.as_ref().map(|t| t.milliseconds()) != created_at {
        return Err(format!(
            "creation-time is {:?}, expected meta.created_at {created_at:?} in ms",
            props.creation_time
        ));
    }
    // Exactly these application properties, all strings, underscore names.
    let want = c
        .get("properties")
        .and_then(Json::as_object)
        .ok_or("case has no `properties`")?;
    let got = &message
        .application_properties
        .as_ref()
        .ok_or("no application-properties section")?
        .0;
    if got.len() != want.len() {
        return Err(format!(
            "{} application properties ({:?}), expected exactly {}",
            got.len(),
            got.keys().collect::<Vec<_>>(),
            want.len()
        ));
    }
    for (name, value) in want {
        let value = value
            .as_str()
            .ok_or("expected property values are strings")?;
        match got.get(name) {
            Some(SimpleValue::String(s)) if s == value => {}
            other => {
                return Err(format!(
                    "{name} is {other:?}, expected the string {value:?}"
                ));
            }
        }
    }
    // The body: the envelope byte for byte, as one amqp-value string.
    match &message.body {
        Body::Value(AmqpValue(Value::String(text))) if text.as_bytes() == body.as_slice() => Ok(()),
        other => Err(format!(
            "the body is {other:?}, expected the fixture as an amqp-value string"
        )),
    }
}

/// Hands the transport a delivery with `delivery_count` and the fixture at `body_attempts`.
fn attempts_reconciliation(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let fixture_name = ctx
        .data
        .and_then(|d| d.pointer("/property_projection/envelope_file"))
        .and_then(Json::as_str)
        .ok_or("the artemis section names no fixture")?;
    let fixture = ctx.manifest.fixture(fixture_name)?;
    let mut envelope = Envelope::decode(&fixture)
        .map_err(|e| e.to_string())?
        .envelope;
    envelope.set_attempts(int_field(c, "body_attempts")?);
    let body = envelope.encode().map_err(|e| e.to_string())?.into_bytes();
    let count = u32::try_from(int_field(c, "delivery_count")?).map_err(|e| e.to_string())?;
    let expected = int_field(c, "expected_attempts")?;

    let fake = FakeClient::new();
    fake.push_wire(QUEUE, incoming(&body, &[], count))?;
    let delivery = block_on(transport(&fake).pop(QUEUE, Duration::ZERO))
        .map_err(|e| e.to_string())?
        .ok_or("the transport handed over nothing")?;
    if delivery.body() != body.as_slice() {
        return Err("the transport changed the body it handed over".into());
    }
    // What the runtime reads: the transport's facts, reconciled by core.
    let Class::Readable {
        body: reconciled,
        envelope,
        ..
    } = classify(delivery.body(), delivery.facts(), QUEUE)
    else {
        return Err("the delivery is not a readable envelope".into());
    };
    let got = envelope.attempts();
    if got != expected {
        return Err(format!("attempts {got}, expected {expected}"));
    }
    if got == int_field(c, "body_attempts")? && *reconciled != *body.as_slice() {
        return Err("the body was rewritten although attempts did not change".into());
    }
    Ok(())
}

/// Hands the transport the fixture with the case's `bq_schema_version` application property
/// (absent, present-but-null, or a string) after a trip through the AMQP wire encoding.
fn schema_version_gate(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let (_, group) = case.group.ok_or("no group")?;
    let property = str_field(group, "property")?;
    let body = ctx.fixture(group, "fixture")?;
    let expect = str_field(c, "expect")?;
    let absent = c.get("absent").and_then(Json::as_bool) == Some(true);
    let value = match (absent, c.get("value")) {
        (true, _) => None,
        (false, Some(Json::Null)) => Some(SimpleValue::Null),
        (false, Some(Json::String(s))) => Some(SimpleValue::String(s.clone())),
        (false, other) => return Err(format!("unexpected gate value {other:?}")),
    };
    let properties: Vec<(&str, SimpleValue)> =
        value.iter().map(|v| (property, v.clone())).collect();
    let message = wire_round_trip(incoming(&body, &properties, 0))?;
    if matches!(value, Some(SimpleValue::Null)) {
        // Present but null, on the wire: the key must still be there (never silently dropped).
        let carried = message
            .application_properties
            .as_ref()
            .and_then(|p| p.0.get(property));
        if carried != Some(&SimpleValue::Null) {
            return Err(format!(
                "the null {property} did not survive the wire: {carried:?}"
            ));
        }
    }
    let fake = FakeClient::new();
    fake.push(QUEUE, message);
    let delivery = block_on(transport(&fake).pop(QUEUE, Duration::ZERO))
        .map_err(|e| e.to_string())?
        .ok_or("the transport handed over nothing")?;
    match (expect, classify(delivery.body(), delivery.facts(), QUEUE)) {
        ("reject", Class::Gated { declared }) => {
            let want = c.get("value").and_then(Json::as_str).unwrap_or_default();
            if declared != want {
                return Err(format!(
                    "gated with declared {declared:?}, expected {want:?}"
                ));
            }
            if delivery.body() != body.as_slice() {
                return Err("a gated body was changed".into());
            }
            Ok(())
        }
        ("decode", Class::Readable { envelope, .. }) => {
            if envelope.urn() == "urn:babel:orders:created" {
                Ok(())
            } else {
                Err(format!("decoded URN {:?}", envelope.urn()))
            }
        }
        (expect, class) => Err(format!(
            "expected {expect}, the runtime classified {class:?}"
        )),
    }
}

/// `version_gate_artemis`: every row against every incoming body.
pub(super) fn version_gate(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    for (name, text) in incoming_bodies(ctx)? {
        gate_row(case.value, text.as_bytes()).map_err(|e| format!("body {name}: {e}"))?;
    }
    Ok(())
}

fn gate_row(c: &Json, body: &[u8]) -> Result<(), String> {
    let strategy = unknown_urn_field(c)?;
    let dead_letter = str_field(c, "dead_letter")? == "on";
    let write_fails = c.get("dlq_write").and_then(Json::as_str) == Some("fails");
    let expect = c
        .pointer("/expect/outcome")
        .and_then(Json::as_str)
        .ok_or("no expect.outcome")?;

    // A delivery the gate rejects ("2"), with bq_attempts and a raised delivery count on the
    // rows that carry them.
    let mut properties = vec![("bq_schema_version", SimpleValue::String("2".into()))];
    let mut count = 0;
    if let Some(attempts) = c.get("bq_attempts").and_then(Json::as_str) {
        properties.push(("bq_attempts", SimpleValue::String(attempts.into())));
        count = 8;
    }
    let fake = FakeClient::new();
    fake.push_wire(QUEUE, incoming(body, &properties, count))?;
    let dlq = format!("{QUEUE}.dlq");
    fake.fail_sends_to(&dlq, write_fails);
    let transport = transport(&fake);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let app = App::builder(transport.clone())
        .queue(QUEUE)
        .dead_letter(dead_letter)
        .on_unknown_urn(strategy)
        .max_attempts(3)
        .rewind_pause(Duration::ZERO)
        .handle_any(move |_ctx: Context| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .map_err(|e| e.to_string())?;
    let outcome = block_on(async {
        let delivery = transport
            .pop(QUEUE, Duration::ZERO)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the transport handed over nothing")?;
        let class = classify(delivery.body(), delivery.facts(), QUEUE);
        if !matches!(class, Class::Gated { .. }) {
            return Err(format!("the delivery was not gated: {class:?}"));
        }
        Ok::<_, String>(app.dispatch(delivery).await)
    })?;

    if calls.load(Ordering::SeqCst) != 0 {
        return Err("a handler ran for a version-gated delivery".into());
    }
    let sent = fake.sent();
    if let Some((address, _)) = sent.iter().find(|(a, _)| *a != dlq) {
        return Err(format!(
            "wrote to {address:?}: only the DLQ may be written (no retry, no release)"
        ));
    }
    let dlq_writes: Vec<Vec<u8>> = sent
        .iter()
        .map(|(_, m)| projection::body_bytes(&m.body))
        .collect();
    let settled: Vec<Disposition> = fake.settlements().into_iter().map(|(_, d)| d).collect();
    match expect {
        "ack" => {
            if !dlq_writes.is_empty() || settled != [Disposition::Accepted] {
                return Err(format!(
                    "expected a bare ack; {} DLQ write(s), settlements {settled:?}",
                    dlq_writes.len()
                ));
            }
            if !matches!(outcome, Outcome::Acked | Outcome::Dropped) {
                return Err(format!("the runtime reported {outcome:?} for an ack"));
            }
        }
        "dlq_raw" => {
            if dlq_writes.len() != 1 || settled != [Disposition::Accepted] {
                return Err(format!(
                    "expected one DLQ write then the ack; {} write(s), settlements {settled:?}",
                    dlq_writes.len()
                ));
            }
            if dlq_writes[0] != body {
                return Err(format!(
                    "the DLQ record is not the incoming body byte for byte: {:?}",
                    String::from_utf8_lossy(&dlq_writes[0])
                ));
            }
            if outcome != Outcome::DeadLettered {
                return Err(format!(
                    "the runtime reported {outcome:?}, expected DeadLettered"
                ));
            }
        }
        "unsettled" => {
            // The write was tried once and failed; the delivery is released (AMQP `released`),
            // never accepted, never re-published, and comes back.
            if dlq_writes.len() != 1 || settled != [Disposition::Released] {
                return Err(format!(
                    "expected one failed DLQ write then `released`; {} write(s), settlements {settled:?}",
                    dlq_writes.len()
                ));
            }
            if outcome != Outcome::Unsettled {
                return Err(format!(
                    "the runtime reported {outcome:?}, expected Unsettled"
                ));
            }
            if fake.len(QUEUE) != 1 {
                return Err("the released delivery is not back on its queue".into());
            }
        }
        other => return Err(format!("outcome {other:?} does not apply to Artemis")),
    }
    Ok(())
}
