//! The Azure Service Bus binding sections: `asb`, `version_gate_asb`.
//!
//! Every case goes through `babelqueue-transport-asb`'s real [`AsbTransport`] over its
//! in-memory [`FakeServiceBus`] receiver. The transport reports facts (the typed
//! `bq-schema-version` property, `DeliveryCount`); `babelqueue-core`'s `classify` applies the
//! gate and the attempts reconciliation to them, and the real runtime ([`App`]) in front gives
//! the settle outcomes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use babelqueue_core::classify::{Class, classify};
use babelqueue_core::{App, Consume, Context, Envelope, HandlerError, Transport};
use babelqueue_transport_asb::fake::FakeServiceBus;
use babelqueue_transport_asb::projection::{self, ApplicationProperties};
use babelqueue_transport_asb::{AmqpValue, AsbTransport};
use serde_json::Value;

use super::{Ctx, incoming_bodies, int_field, str_field, unknown_urn_field};
use crate::Case;
use crate::hop::block_on;

const QUEUE: &str = "orders";
const DLQ: &str = "orders.dlq";

fn transport() -> (Arc<FakeServiceBus>, AsbTransport) {
    let fake = Arc::new(FakeServiceBus::new());
    (fake.clone(), AsbTransport::with_client(fake))
}

/// Whether a typed property equals an expected JSON value: a JSON string is an AMQP string;
/// a JSON integer is an AMQP integral type of that value (any width).
fn typed_equal(got: &AmqpValue, want: &Value) -> bool {
    let integral = match got {
        AmqpValue::Ubyte(n) => Some(i128::from(*n)),
        AmqpValue::Ushort(n) => Some(i128::from(*n)),
        AmqpValue::Uint(n) => Some(i128::from(*n)),
        AmqpValue::Ulong(n) => Some(i128::from(*n)),
        AmqpValue::Byte(n) => Some(i128::from(*n)),
        AmqpValue::Short(n) => Some(i128::from(*n)),
        AmqpValue::Int(n) => Some(i128::from(*n)),
        AmqpValue::Long(n) => Some(i128::from(*n)),
        _ => None,
    };
    match (want, got, integral) {
        (Value::String(w), AmqpValue::String(g), _) => w == g,
        (Value::Number(w), _, Some(g)) => w.as_i64().is_some_and(|w| i128::from(w) == g),
        _ => false,
    }
}

pub(super) fn asb(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let (group, block) = case.group.ok_or("an asb case outside any block")?;
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
            let [(queue, message)] = sent.as_slice() else {
                return Err(format!("expected one send, saw {}", sent.len()));
            };
            if queue != QUEUE || message.body != body {
                return Err("the body is not the envelope byte for byte on the queue".into());
            }
            let want = c.get("message").ok_or("no message")?;
            for (field, got) in [
                ("subject", message.subject.as_deref()),
                ("correlation_id", message.correlation_id.as_deref()),
                ("message_id", message.message_id.as_deref()),
                ("content_type", Some(message.content_type.as_str())),
            ] {
                let expected = want.get(field).and_then(Value::as_str);
                if got != expected {
                    return Err(format!("{field} is {got:?}, expected {expected:?}"));
                }
            }
            let want = c
                .get("application_properties")
                .and_then(Value::as_object)
                .ok_or("no application_properties")?;
            if message.application_properties.len() != want.len() {
                return Err(format!(
                    "application properties are {:?}, expected exactly {want:?}",
                    message.application_properties
                ));
            }
            for (key, expected) in want {
                let got = message
                    .application_properties
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v)
                    .ok_or_else(|| format!("no application property {key}"))?;
                if !typed_equal(got, expected) {
                    return Err(format!("{key} is {got:?}, expected {expected}"));
                }
            }
            // bq-created-at overflows int32: it must travel as an AMQP long.
            let created = message
                .application_properties
                .iter()
                .find(|(k, _)| k == projection::PROP_CREATED_AT);
            if !matches!(created, Some((_, AmqpValue::Long(_)))) {
                return Err(format!(
                    "bq-created-at is {created:?}, expected an AMQP long"
                ));
            }
            Ok(())
        }),
        "attempts_reconciliation" => block_on(async {
            let fixture = ctx.manifest.fixture("fixtures/order-created.json")?;
            let mut envelope = Envelope::decode(&fixture)
                .map_err(|e| e.to_string())?
                .envelope;
            envelope.set_attempts(int_field(c, "body_attempts")?);
            let body = envelope.encode().map_err(|e| e.to_string())?;
            let count =
                u32::try_from(int_field(c, "delivery_count")?).map_err(|e| e.to_string())?;
            let (fake, transport) = transport();
            fake.deliver(QUEUE, body.clone(), Vec::new(), count);
            let delivery = transport
                .pop(QUEUE, Duration::from_millis(10))
                .await
                .map_err(|e| e.to_string())?
                .ok_or("nothing received")?;
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
                .map_err(|e| e.to_string())?
                .envelope
                .attempts();
            let want = int_field(c, "expected_attempts")?;
            if got != want {
                return Err(format!("attempts {got}, expected {want}"));
            }
            if got == int_field(c, "body_attempts")? && *reconciled != *body.as_bytes() {
                return Err("the body changed although attempts did not".into());
            }
            Ok(())
        }),
        "schema_version_gate" => gate_trigger(ctx, block, c),
        other => Err(format!("unknown asb block {other}")),
    }
}

/// The typed values a gate row stands for: a string; an integer at int32 and int64 width; a
/// `value_type: float` number as a real float32 and float64; any other number as float32 and
/// float64; `null` as a present property with an AMQP null; absent as no property.
fn typed_values(c: &Value) -> Result<Vec<Option<AmqpValue>>, String> {
    if c.get("absent").and_then(Value::as_bool) == Some(true) {
        return Ok(vec![None]);
    }
    let value = c.get("value").ok_or("a gate row with no value")?;
    let float = c.get("value_type").and_then(Value::as_str) == Some("float");
    Ok(match value {
        Value::Null => vec![Some(AmqpValue::Null)],
        Value::String(s) => vec![Some(AmqpValue::String(s.clone()))],
        Value::Number(n) if !float && n.as_i64().is_some() => {
            let n = n.as_i64().unwrap_or_default();
            let mut out = vec![Some(AmqpValue::Long(n))];
            if let Ok(small) = i32::try_from(n) {
                out.push(Some(AmqpValue::Int(small)));
            }
            out
        }
        Value::Number(n) => {
            let f = n.as_f64().ok_or("a number that is not a double")?;
            #[allow(clippy::cast_possible_truncation)]
            let single = f as f32;
            vec![Some(AmqpValue::Double(f)), Some(AmqpValue::Float(single))]
        }
        other => return Err(format!("an unexpected gate value {other}")),
    })
}

fn gate_trigger(ctx: &Ctx<'_>, block: &Value, c: &Value) -> Result<(), String> {
    let body = ctx.fixture(block, "fixture")?;
    let property = str_field(block, "property")?;
    let expect = str_field(c, "expect")?;
    for value in typed_values(c)? {
        let props: ApplicationProperties = value
            .iter()
            .map(|v| (property.to_owned(), v.clone()))
            .collect();
        let verdict = block_on(async {
            let (fake, transport) = transport();
            fake.deliver(QUEUE, body.clone(), props, 1);
            let delivery = transport
                .pop(QUEUE, Duration::from_millis(10))
                .await
                .map_err(|e| e.to_string())?
                .ok_or("nothing received")?;
            if delivery.body() != body.as_slice() {
                return Err("the transport changed the body it received".into());
            }
            Ok::<_, String>(match classify(delivery.body(), delivery.facts(), QUEUE) {
                Class::Gated { .. } => "reject",
                _ => "decode",
            })
        })?;
        if verdict != expect {
            return Err(format!("{value:?}: {verdict}, expected {expect}"));
        }
    }
    Ok(())
}

pub(super) fn version_gate_asb(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let expect = c.get("expect").ok_or("no expect")?;
    let outcome = str_field(expect, "outcome")?;
    let strategy = unknown_urn_field(c)?;
    let bq_attempts = c.get("bq_attempts").and_then(Value::as_str);
    for (name, body) in incoming_bodies(ctx)? {
        let body = body.as_bytes().to_vec();
        let mut props: ApplicationProperties = vec![(
            projection::PROP_SCHEMA_VERSION.to_owned(),
            AmqpValue::Int(2),
        )];
        if let Some(a) = bq_attempts {
            props.push(("bq-attempts".to_owned(), AmqpValue::String(a.to_owned())));
        }
        let fail = |why: String| Err(format!("{name}: {why}"));
        let (calls, fake) = block_on(async {
            let (fake, transport) = transport();
            if c.get("dlq_write").and_then(Value::as_str) == Some("fails") {
                fake.fail_sends_to(DLQ);
            }
            let calls = Arc::new(AtomicUsize::new(0));
            let counter = calls.clone();
            let app = App::builder(transport)
                .queue(QUEUE)
                .dead_letter(str_field(c, "dead_letter")? == "on")
                .on_unknown_urn(strategy)
                .poll_timeout(Duration::from_millis(10))
                .rewind_pause(Duration::ZERO)
                .handle("urn:babelqueue:order.created", move |_ctx: Context| {
                    let counter = counter.clone();
                    async move {
                        counter.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), HandlerError>(())
                    }
                })
                .build()
                .map_err(|e| e.to_string())?;
            fake.deliver(
                QUEUE,
                body.clone(),
                props,
                if bq_attempts.is_some() { 8 } else { 1 },
            );
            app.consume(Consume::new().max_messages(1).handle_signals(false))
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((calls.load(Ordering::SeqCst), fake))
        })
        .map_err(|e| format!("{name}: {e}"))?;
        if calls != 0 {
            return fail("a handler ran for a version-gated delivery".into());
        }
        let sent = fake.sent();
        if sent.iter().any(|(q, _)| q != DLQ) {
            return fail("wrote outside the DLQ".into());
        }
        let (completed, abandoned, native) = (
            fake.completed().len(),
            fake.abandoned().len(),
            fake.dead_lettered(),
        );
        let settled = format!(
            "completed {completed}, abandoned {abandoned}, native dead-letters {}, writes {}",
            native.len(),
            sent.len()
        );
        let ok = match outcome {
            "ack" => completed == 1 && abandoned == 0 && native.is_empty() && sent.is_empty(),
            "dlq_raw" => {
                if sent.len() == 1 && sent[0].1.body != body {
                    return fail("the DLQ record is not the incoming body byte for byte".into());
                }
                completed == 1 && abandoned == 0 && native.is_empty() && sent.len() == 1
            }
            "unsettled" => completed == 0 && abandoned == 1 && native.is_empty() && sent.is_empty(),
            "native" => {
                if let Some(n) = native.first()
                    && (n.reason != "unsupported schema version" || n.message.body != body)
                {
                    return fail(format!(
                        "native dead-letter with reason {:?} and a changed body",
                        n.reason
                    ));
                }
                completed == 0 && abandoned == 0 && native.len() == 1 && sent.is_empty()
            }
            other => return fail(format!("unknown outcome {other}")),
        };
        if !ok {
            return fail(format!("{settled}; expected {outcome}"));
        }
    }
    Ok(())
}
