//! Scope `sqs`: `sqs` (the attribute projection, the attempts reconciliation, the schema-version
//! gate), `delay` (per-message delays and release visibility) and `version_gate_sqs` (how a
//! gated delivery settles).
//!
//! Every case runs the real `SqsTransport` over the crate's recording `FakeSqs`. The transport
//! reports facts (the declared version, the receive count); what they mean comes from
//! `babelqueue-core` (`classify`: the gate and the attempts reconciliation), and settle outcomes
//! from the real `App` (the decision tables); nothing here decides.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use babelqueue_core::classify::{Class, classify};
use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, Outcome, Transport};
use babelqueue_transport_sqs::fake::FakeSqs;
use babelqueue_transport_sqs::projection::{self, AttributeValue, Attributes};
use babelqueue_transport_sqs::{SqsOptions, SqsTransport};
use serde_json::Value;

use super::{Ctx, incoming_bodies, str_field, unknown_urn_field};
use crate::Case;
use crate::hop::block_on;

const QUEUE: &str = "orders";

fn transport(fifo: bool) -> (FakeSqs, SqsTransport) {
    let fake = FakeSqs::new();
    let transport = SqsTransport::new(fake.clone(), SqsOptions::default().fifo(fifo));
    (fake, transport)
}

fn order_body() -> Result<Vec<u8>, String> {
    let envelope = Envelope::builder("urn:babel:orders:created")
        .queue(QUEUE)
        .data(&serde_json::json!({"order_id": 1042}))
        .build()
        .map_err(|e| e.to_string())?;
    Ok(envelope.encode().map_err(|e| e.to_string())?.into_bytes())
}

fn text(body: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(body).map_err(|_| "the body is not UTF-8".to_string())
}

/// Section `sqs`.
pub(super) fn sqs(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    match case.group.map(|(name, _)| name) {
        Some("attribute_projection") => attribute_projection(ctx, case.value),
        Some("attempts_reconciliation") => attempts_reconciliation(case.value),
        Some("schema_version_gate") => {
            let block = case.group.map(|(_, block)| block).ok_or("no gate block")?;
            schema_version_gate(ctx, block, case.value)
        }
        other => Err(format!("unknown sqs sub-block {other:?}")),
    }
}

fn attribute_projection(ctx: &Ctx<'_>, case: &Value) -> Result<(), String> {
    let body = ctx.fixture(case, "envelope_file")?;
    let got = projection::attributes(&body);
    let want = case
        .get("message_attributes")
        .and_then(Value::as_object)
        .ok_or("case has no message_attributes object")?;
    let got_keys: Vec<&String> = got.keys().collect();
    let mut want_keys: Vec<&String> = want.keys().collect();
    want_keys.sort();
    if got_keys != want_keys {
        return Err(format!(
            "attribute names {got_keys:?}, expected {want_keys:?}"
        ));
    }
    for (name, expected) in want {
        let attribute = &got[name];
        let data_type = str_field(expected, "DataType")?;
        let value = str_field(expected, "StringValue")?;
        if attribute.data_type != data_type || attribute.string_value.as_deref() != Some(value) {
            return Err(format!(
                "{name} is {attribute:?}, expected DataType {data_type} StringValue {value:?}"
            ));
        }
    }
    Ok(())
}

/// Seeds one message with `ApproximateReceiveCount` = the case's count, pops it through the
/// transport (which hands the body over raw, with the count as a fact) and reads the body the
/// runtime reconciles from it.
fn attempts_reconciliation(case: &Value) -> Result<(), String> {
    let body_attempts = case
        .get("body_attempts")
        .and_then(Value::as_i64)
        .ok_or("case has no integer body_attempts")?;
    let expected = case
        .get("expected_attempts")
        .and_then(Value::as_i64)
        .ok_or("case has no integer expected_attempts")?;
    let count = case
        .get("approximate_receive_count")
        .and_then(Value::as_str);
    let mut envelope = Envelope::decode(&order_body()?)
        .map_err(|e| e.to_string())?
        .envelope;
    envelope.set_attempts(body_attempts);
    let body = envelope.encode().map_err(|e| e.to_string())?;
    let (fake, transport) = transport(false);
    fake.seed(QUEUE, &body, Attributes::new(), count);
    let delivery = block_on(transport.pop(QUEUE, Duration::ZERO))
        .map_err(|e| e.to_string())?
        .ok_or("the transport returned no delivery")?;
    if delivery.body() != body.as_bytes() {
        return Err("the transport rewrote the body it received".into());
    }
    let Class::Readable {
        body: reconciled, ..
    } = classify(delivery.body(), delivery.facts(), QUEUE)
    else {
        return Err("the delivery is not classified as a readable envelope".into());
    };
    let got = Envelope::decode(&reconciled)
        .map_err(|e| format!("the reconciled body does not decode: {e}"))?
        .envelope
        .attempts();
    if got != expected {
        return Err(format!("attempts {got}, expected {expected}"));
    }
    if got == body_attempts && *reconciled != *body.as_bytes() {
        return Err("the body changed although attempts did not".into());
    }
    Ok(())
}

fn schema_version_gate(ctx: &Ctx<'_>, block: &Value, case: &Value) -> Result<(), String> {
    let body = ctx.fixture(block, "fixture")?;
    let property = str_field(block, "property")?;
    let mut attributes = Attributes::new();
    let value = if case.get("absent").and_then(Value::as_bool) == Some(true) {
        None
    } else {
        let value = str_field(case, "value")?;
        attributes.insert(property.to_owned(), AttributeValue::string(value));
        Some(value)
    };
    let (fake, transport) = transport(false);
    fake.seed(QUEUE, text(&body)?, attributes, Some("1"));
    let delivery = block_on(transport.pop(QUEUE, Duration::ZERO))
        .map_err(|e| e.to_string())?
        .ok_or("the transport returned no delivery")?;
    match (
        str_field(case, "expect")?,
        classify(delivery.body(), delivery.facts(), QUEUE),
    ) {
        ("decode", Class::Readable { body, .. }) => Envelope::decode(&body)
            .map(|_| ())
            .map_err(|e| format!("passed the gate but does not decode: {e}")),
        ("reject", Class::Gated { declared }) => {
            if Some(declared.as_str()) != value {
                return Err(format!(
                    "rejected as {declared:?}, expected the raw value {value:?}"
                ));
            }
            if delivery.body() != body.as_slice() {
                return Err("a gated delivery must keep its raw body".into());
            }
            Ok(())
        }
        (want, class) => Err(format!(
            "{value:?}: classified {}, expected {want}",
            match class {
                Class::Gated { .. } => "gated",
                Class::Poison(_) => "poison",
                Class::Readable { .. } => "readable",
            }
        )),
    }
}

/// Section `delay`.
pub(super) fn delay(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    match case.group.map(|(name, _)| name) {
        None => publish_delay(case.value),
        Some("release_visibility") => release_visibility(case.value),
        other => Err(format!("unknown delay sub-block {other:?}")),
    }
}

fn seconds(case: &Value, field: &str) -> Result<u64, String> {
    case.get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("case has no non-negative integer `{field}`"))
}

fn publish_delay(case: &Value) -> Result<(), String> {
    let fifo = str_field(case, "queue_type")? == "fifo";
    let queue = if fifo { "orders.fifo" } else { QUEUE };
    let delay = Duration::from_secs(seconds(case, "delay_seconds")?);
    let (fake, transport) = transport(fifo);
    let app = App::builder(transport)
        .queue(queue)
        .build()
        .map_err(|e| e.to_string())?;
    let envelope = app
        .envelope("urn:babel:orders:created")
        .build()
        .map_err(|e| e.to_string())?;
    let result = block_on(app.publish_delayed(queue, &envelope, delay));
    let sent = fake.sent();
    match case.get("expect") {
        Some(Value::String(s)) if s == "reject" => match result {
            Ok(()) => Err(format!("a {delay:?} delay was accepted, expected an error")),
            Err(_) if !sent.is_empty() => {
                Err("the delay was refused but a message was sent".into())
            }
            Err(e) if e.kind() == babelqueue_core::ErrorKind::Transport => Ok(()),
            Err(e) => Err(format!("refused with the wrong kind of error: {e}")),
        },
        Some(expect) => {
            let want = expect
                .get("delay_seconds_attribute")
                .and_then(Value::as_i64)
                .ok_or("expect has no delay_seconds_attribute")?;
            result.map_err(|e| format!("the publish failed: {e}"))?;
            match sent.as_slice() {
                [one] if one.delay_seconds.map(i64::from) == Some(want) => Ok(()),
                [one] => Err(format!(
                    "DelaySeconds {:?}, expected {want}",
                    one.delay_seconds
                )),
                many => Err(format!("{} SendMessage calls, expected 1", many.len())),
            }
        }
        None => Err("case has no expect".into()),
    }
}

/// A handler fails once with the case's delay as the back-off: the runtime releases through
/// the transport, which must send exactly one ChangeMessageVisibility and nothing else.
fn release_visibility(case: &Value) -> Result<(), String> {
    let delay = seconds(case, "delay_seconds")?;
    let want = case
        .get("expect")
        .and_then(|e| e.get("visibility_timeout"))
        .and_then(Value::as_i64)
        .ok_or("expect has no visibility_timeout")?;
    let (fake, transport) = transport(false);
    let app = App::builder(transport)
        .queue(QUEUE)
        .max_attempts(1_000)
        .retry_backoff(Duration::from_secs(delay))
        .poll_timeout(Duration::ZERO)
        .handle("urn:babel:orders:created", |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("release me"))
        })
        .build()
        .map_err(|e| e.to_string())?;
    block_on(async {
        app.publish(
            "urn:babel:orders:created",
            &serde_json::json!({"order_id": 1}),
        )
        .await
        .map_err(|e| e.to_string())?;
        let delivery = app
            .transport()
            .pop(QUEUE, Duration::ZERO)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("nothing to receive")?;
        match app.dispatch(delivery).await {
            Outcome::Retried => Ok(()),
            other => Err(format!("outcome {other:?}, expected Retried")),
        }
    })?;
    let changes = fake.visibility_changes();
    match changes.as_slice() {
        [(_, _, timeout)] if i64::from(*timeout) == want => {}
        _ => {
            return Err(format!(
                "ChangeMessageVisibility calls {changes:?}, expected one with {want}"
            ));
        }
    }
    if !fake.deleted().is_empty() || fake.sent().len() != 1 {
        return Err(format!(
            "a release must neither delete ({:?}) nor re-send ({} sends)",
            fake.deleted(),
            fake.sent().len()
        ));
    }
    Ok(())
}

/// Section `version_gate_sqs`: every case against each of the three incoming bodies.
pub(super) fn version_gate_sqs(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    for (name, body) in incoming_bodies(ctx)? {
        gated_settle(case.value, body).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

fn gated_settle(case: &Value, body: &str) -> Result<(), String> {
    let strategy = unknown_urn_field(case)?;
    let dead_letter = str_field(case, "dead_letter")? == "on";
    let write_fails = case.get("dlq_write").and_then(Value::as_str) == Some("fails");
    let expect = case.get("expect").ok_or("case has no expect")?;
    // This SDK always has a dead-letter writer, so `outcome` (never `outcome_no_writer`) applies.
    let want = str_field(expect, "outcome")?;

    let (fake, transport) = transport(false);
    let mut attributes = Attributes::new();
    attributes.insert("bq-schema-version".into(), AttributeValue::number("2"));
    let mut receive_count = "1";
    if let Some(bq_attempts) = case.get("bq_attempts").and_then(Value::as_str) {
        attributes.insert("bq-attempts".into(), AttributeValue::number(bq_attempts));
        receive_count = "8";
    }
    let handle = fake.seed(QUEUE, body, attributes, Some(receive_count));
    let dlq = FakeSqs::url("orders-dlq");
    if write_fails {
        fake.fail_sends_to("orders-dlq", true);
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let app = App::builder(transport)
        .queue(QUEUE)
        .max_attempts(3)
        .dead_letter(dead_letter)
        .on_unknown_urn(strategy)
        .poll_timeout(Duration::ZERO)
        .rewind_pause(Duration::ZERO)
        .handle("urn:babelqueue:order.created", move |_ctx: Context| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .map_err(|e| e.to_string())?;
    let summary = block_on(app.consume(Consume::new().max_messages(1).handle_signals(false)))
        .map_err(|e| e.to_string())?;
    if summary.processed != 1 {
        return Err(format!(
            "{} deliveries settled, expected 1",
            summary.processed
        ));
    }

    let sent = fake.sent();
    let deleted = fake.deleted();
    if calls.load(Ordering::SeqCst) != 0 {
        return Err("a handler ran for a version-gated delivery".into());
    }
    if !fake.visibility_changes().is_empty() {
        return Err(format!(
            "a gated delivery is never released, got {:?}",
            fake.visibility_changes()
        ));
    }
    if sent.iter().any(|s| s.queue_url != dlq) {
        return Err(format!("only {dlq} may be written, got {sent:?}"));
    }
    let acked = deleted == [(FakeSqs::url(QUEUE), handle)];
    match want {
        "ack" if acked && sent.is_empty() => Ok(()),
        "dlq_raw" if acked && sent.len() == 1 => {
            if expect.get("record").and_then(Value::as_str) == Some("incoming_body")
                && sent[0].body != body
            {
                return Err(format!(
                    "the record is {:?}, expected the incoming body byte for byte",
                    sent[0].body
                ));
            }
            Ok(())
        }
        "unsettled" if deleted.is_empty() && sent.is_empty() && write_fails => Ok(()),
        "native" if deleted.is_empty() && sent.is_empty() => Ok(()),
        "ack" | "dlq_raw" | "unsettled" | "native" => Err(format!(
            "expected {want}: got {} write(s) {:?} and DeleteMessage {deleted:?}",
            sent.len(),
            sent.iter().map(|s| &s.queue_url).collect::<Vec<_>>()
        )),
        other => Err(format!("unknown outcome {other:?}")),
    }
}
