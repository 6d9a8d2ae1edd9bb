//! What Artemis said of a delivery, for tools that show the wire ([`Inspector`]).
//!
//! On receive the transport reads the body, the headers and its facts from the AMQP message and
//! used to drop the rest; the delivery's handle now keeps the message's header, properties and
//! message annotations ([`Wire`]), moved out of the message (nothing is copied). The view is
//! built only when a tool asks:
//!
//! * id: the `message-id` property (a string as it is, a ulong in decimal, a UUID hyphenated,
//!   binary in lowercase hexadecimal), when the message has one;
//! * redelivered: the header's `delivery-count` above 0 (0 when the message has no header);
//! * properties, by their AMQP names: from the header `durable`, `priority`, `ttl`,
//!   `first-acquirer`, `delivery-count`; each property that is set but the message id
//!   (`user-id`, `to`, `subject`, `reply-to`, `correlation-id`, `content-type`,
//!   `content-encoding`, `absolute-expiry-time`, `creation-time`, `group-id`, `group-sequence`,
//!   `reply-to-group-id`; times in epoch milliseconds); then every message annotation
//!   (`x-opt-jms-type`, `x-opt-jms-dest` …) by its key, in the order the message carries them.

use std::fmt::Write as _;

use babelqueue_core::{BrokerView, Delivery, Inspector};
use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{Header, MessageAnnotations, MessageId, Properties};
use fe2o3_amqp::types::primitives::Value;

use crate::projection::AmqpMessage;
use crate::transport::{ArtemisTransport, Held};

/// The sections of a received message a delivery's handle keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wire {
    header: Option<Header>,
    properties: Option<Properties>,
    annotations: Option<MessageAnnotations>,
}

impl Wire {
    /// The header, properties and message annotations of `message`, moved out of it.
    pub(crate) fn of(message: AmqpMessage) -> Wire {
        Wire {
            header: message.header,
            properties: message.properties,
            annotations: message.message_annotations,
        }
    }

    /// The view of a delivery with this wire.
    pub(crate) fn view(&self) -> BrokerView {
        let count = self.header.as_ref().map_or(0, |h| h.delivery_count);
        let mut view = BrokerView::new().redelivered(count > 0);
        if let Some(header) = &self.header {
            view = view
                .property("durable", header.durable.to_string())
                .property("priority", header.priority.0.to_string());
            if let Some(ttl) = header.ttl {
                view = view.property("ttl", ttl.to_string());
            }
            view = view
                .property("first-acquirer", header.first_acquirer.to_string())
                .property("delivery-count", count.to_string());
        }
        if let Some(p) = &self.properties {
            if let Some(id) = &p.message_id {
                view = view.id(message_id(id));
            }
            let texts = [
                ("user-id", p.user_id.as_ref().map(|b| bytes_text(b))),
                ("to", p.to.clone()),
                ("subject", p.subject.clone()),
                ("reply-to", p.reply_to.clone()),
                ("correlation-id", p.correlation_id.as_ref().map(message_id)),
                ("content-type", p.content_type.as_ref().map(|s| s.0.clone())),
                (
                    "content-encoding",
                    p.content_encoding.as_ref().map(|s| s.0.clone()),
                ),
                (
                    "absolute-expiry-time",
                    p.absolute_expiry_time
                        .as_ref()
                        .map(|t| t.milliseconds().to_string()),
                ),
                (
                    "creation-time",
                    p.creation_time
                        .as_ref()
                        .map(|t| t.milliseconds().to_string()),
                ),
                ("group-id", p.group_id.clone()),
                ("group-sequence", p.group_sequence.map(|n| n.to_string())),
                ("reply-to-group-id", p.reply_to_group_id.clone()),
            ];
            for (name, value) in texts {
                if let Some(value) = value {
                    view = view.property(name, value);
                }
            }
        }
        for (key, value) in self.annotations.iter().flat_map(|a| a.0.iter()) {
            let name = match key {
                OwnedKey::Symbol(symbol) => symbol.0.clone(),
                OwnedKey::Ulong(n) => n.to_string(),
            };
            view = view.property(name, value_text(value));
        }
        view
    }
}

impl Inspector for ArtemisTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        delivery
            .handle::<Held>()
            .map_or_else(BrokerView::new, |held| held.wire.view())
    }
}

/// A message id (or correlation id) as text.
fn message_id(id: &MessageId) -> String {
    match id {
        MessageId::String(text) => text.clone(),
        MessageId::Ulong(n) => n.to_string(),
        MessageId::Uuid(uuid) => uuid_text(uuid.as_inner()),
        MessageId::Binary(bytes) => hex(bytes),
    }
}

/// Bytes as UTF-8 text when they are, else as lowercase hexadecimal.
fn bytes_text(bytes: &[u8]) -> String {
    std::str::from_utf8(bytes).map_or_else(|_| hex(bytes), str::to_owned)
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// A UUID in its hyphenated form.
fn uuid_text(bytes: &[u8; 16]) -> String {
    let h = hex(bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// An annotation value as text: strings and symbols as they are, numbers and booleans as
/// written, a timestamp in epoch milliseconds, binary in hexadecimal, anything else in AMQP's
/// debug notation.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Symbol(symbol) => symbol.0.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Ubyte(n) => n.to_string(),
        Value::Ushort(n) => n.to_string(),
        Value::Uint(n) => n.to_string(),
        Value::Ulong(n) => n.to_string(),
        Value::Byte(n) => n.to_string(),
        Value::Short(n) => n.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Long(n) => n.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(f) => f.to_string(),
        Value::Char(c) => c.to_string(),
        Value::Timestamp(t) => t.milliseconds().to_string(),
        Value::Uuid(uuid) => uuid_text(uuid.as_inner()),
        Value::Binary(bytes) => hex(bytes),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::Transport;
    use fe2o3_amqp::types::primitives::{Symbol, Timestamp, Uuid};

    use super::*;
    use crate::client::{Client, Disposition};
    use crate::fake::FakeClient;
    use crate::projection;

    const ORDER: &[u8] = br#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{},"meta":{"id":"m-1","lang":"jms","schema_version":1,"created_at":1749132727000},"attempts":0}"#;

    fn text(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// A message as a JMS producer sends it through Artemis: the projection, a message id, and
    /// the annotations Artemis adds.
    fn from_jms() -> AmqpMessage {
        let mut message = projection::message(ORDER);
        let properties = message.properties.get_or_insert_with(Properties::default);
        properties.message_id = Some(MessageId::String("ID:4b1c-1".into()));
        properties.to = Some("orders".into());
        let annotations = message
            .message_annotations
            .get_or_insert_with(MessageAnnotations::default);
        annotations.0.insert(
            OwnedKey::Symbol(Symbol::from("x-opt-jms-dest")),
            Value::Byte(0),
        );
        message
    }

    #[tokio::test]
    async fn a_received_delivery_shows_its_id_header_properties_and_annotations() {
        let fake = Arc::new(FakeClient::default());
        let t = ArtemisTransport::with_client(fake.clone(), Duration::from_millis(10));
        let inspector = t.capabilities().inspector().expect("an Inspector");
        fake.send("orders", from_jms()).await.unwrap();
        let first = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let view = inspector.inspect(&first);
        assert_eq!(view.id.as_deref(), Some("ID:4b1c-1"));
        assert_eq!(view.redelivered, Some(false));
        assert_eq!(
            view.properties,
            text(&[
                ("durable", "true"),
                ("priority", "4"),
                ("first-acquirer", "false"),
                ("delivery-count", "0"),
                ("to", "orders"),
                ("correlation-id", "t-1"),
                ("creation-time", "1749132727000"),
                ("x-opt-jms-type", "urn:babel:orders:created"),
                ("x-opt-jms-dest", "0"),
            ])
        );
        // A failed delivery (modified, delivery-failed) comes back with its count raised.
        let token = &first.handle::<Held>().unwrap().token;
        fake.settle(token, Disposition::Failed).await.unwrap();
        let again = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let view = inspector.inspect(&again);
        assert_eq!(view.redelivered, Some(true));
        assert!(
            view.properties
                .contains(&("delivery-count".into(), "1".into()))
        );
        let foreign = Delivery::new("orders", ORDER.to_vec());
        assert_eq!(inspector.inspect(&foreign), BrokerView::new());
    }

    #[test]
    fn ids_of_every_amqp_type_and_odd_values_read_as_text() {
        let uuid = Uuid::from([
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc,
            0xde, 0xf0,
        ]);
        assert_eq!(
            message_id(&MessageId::Uuid(uuid)),
            "12345678-9abc-def0-1234-56789abcdef0"
        );
        assert_eq!(message_id(&MessageId::Ulong(42)), "42");
        assert_eq!(
            message_id(&MessageId::Binary(vec![0xff, 0x01].into())),
            "ff01"
        );
        assert_eq!(bytes_text(b"guest"), "guest");
        assert_eq!(bytes_text(&[0xff]), "ff");
        assert_eq!(
            value_text(&Value::Timestamp(Timestamp::from_milliseconds(7))),
            "7"
        );
        assert_eq!(value_text(&Value::Symbol(Symbol::from("a"))), "a");
        // No header: nothing said of the header, and a count of 0.
        let wire = Wire::default();
        assert_eq!(wire.view(), BrokerView::new().redelivered(false));
    }
}
