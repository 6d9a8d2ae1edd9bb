//! What Service Bus said of a delivery, for tools that show the wire ([`Inspector`]).
//!
//! Service Bus stamps each message with system properties: its `MessageId` (in the AMQP
//! properties) and the `x-opt-sequence-number`, `x-opt-enqueued-time` and `x-opt-locked-until`
//! message annotations. The client takes them on receive ([`SystemProperties`]: the id moved out
//! of the message, the rest integers found in one pass over the annotations, nothing copied),
//! and the delivery's handle keeps them with the `DeliveryCount`. The view is built only when a
//! tool asks:
//!
//! * id: the `MessageId`;
//! * redelivered: `DeliveryCount` above 1;
//! * properties, by their AMQP names: `x-opt-sequence-number`, `x-opt-enqueued-time` and
//!   `x-opt-locked-until` (times in epoch milliseconds) when the message has them, then
//!   `delivery-count` (1-based, as Service Bus reports it).
//!
//! The lock token is not shown. It is no credential (SAS keys and connection strings never
//! reach a delivery), but it is not part of the message either: it is the AMQP delivery tag the
//! client keeps for settling, and it lets whoever holds the link complete or dead-letter the
//! message.

use std::fmt::Write as _;

use babelqueue_core::{BrokerView, Delivery, Inspector};
use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::{MessageAnnotations, MessageId, Properties};
use fe2o3_amqp::types::primitives::Value;

use crate::AsbTransport;
use crate::client::LockToken;

/// The annotation carrying a message's sequence number.
const SEQUENCE_NUMBER: &str = "x-opt-sequence-number";
/// The annotation carrying when the namespace enqueued the message.
const ENQUEUED_TIME: &str = "x-opt-enqueued-time";
/// The annotation carrying when the message's lock lapses.
const LOCKED_UNTIL: &str = "x-opt-locked-until";

/// The system properties Service Bus stamps on a received message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemProperties {
    /// `MessageId`.
    pub message_id: Option<String>,
    /// `SequenceNumber` (`x-opt-sequence-number`).
    pub sequence_number: Option<i64>,
    /// `EnqueuedTimeUtc` (`x-opt-enqueued-time`), in epoch milliseconds.
    pub enqueued_time: Option<i64>,
    /// `LockedUntilUtc` (`x-opt-locked-until`), in epoch milliseconds.
    pub locked_until: Option<i64>,
}

impl SystemProperties {
    /// The system properties of a received message: its `properties` (the message id is moved
    /// out of them) and its message `annotations`.
    pub(crate) fn of(
        properties: Option<Properties>,
        annotations: Option<&MessageAnnotations>,
    ) -> SystemProperties {
        let mut system = SystemProperties {
            message_id: properties.and_then(|p| p.message_id).map(|id| match id {
                MessageId::String(text) => text,
                // Service Bus ids are strings; another type is written as text (the only
                // case that allocates).
                MessageId::Ulong(n) => n.to_string(),
                MessageId::Uuid(uuid) => {
                    let h = hex(uuid.as_inner());
                    format!(
                        "{}-{}-{}-{}-{}",
                        &h[..8],
                        &h[8..12],
                        &h[12..16],
                        &h[16..20],
                        &h[20..]
                    )
                }
                MessageId::Binary(bytes) => hex(&bytes),
            }),
            ..SystemProperties::default()
        };
        for (key, value) in annotations.iter().flat_map(|a| a.0.iter()) {
            let OwnedKey::Symbol(name) = key else {
                continue;
            };
            let slot = match name.0.as_str() {
                SEQUENCE_NUMBER => &mut system.sequence_number,
                ENQUEUED_TIME => &mut system.enqueued_time,
                LOCKED_UNTIL => &mut system.locked_until,
                _ => continue,
            };
            *slot = match value {
                Value::Long(n) => Some(*n),
                Value::Timestamp(t) => Some(t.milliseconds()),
                _ => None,
            };
        }
        system
    }
}

/// `bytes` as lowercase hexadecimal.
fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// A delivery's handle: its lock, and what the namespace said of the message.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) lock: LockToken,
    system: SystemProperties,
    delivery_count: u32,
}

impl Held {
    /// The handle of a message received under `lock`.
    pub(crate) fn new(lock: LockToken, system: SystemProperties, delivery_count: u32) -> Held {
        Held {
            lock,
            system,
            delivery_count,
        }
    }

    fn view(&self) -> BrokerView {
        let s = &self.system;
        let mut view = BrokerView::new().redelivered(self.delivery_count > 1);
        if let Some(id) = &s.message_id {
            view = view.id(id.as_str());
        }
        let numbers = [
            (SEQUENCE_NUMBER, s.sequence_number),
            (ENQUEUED_TIME, s.enqueued_time),
            (LOCKED_UNTIL, s.locked_until),
        ];
        for (name, value) in numbers {
            if let Some(value) = value {
                view = view.property(name, value.to_string());
            }
        }
        view.property("delivery-count", self.delivery_count.to_string())
    }
}

impl Inspector for AsbTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        delivery
            .handle::<Held>()
            .map_or_else(BrokerView::new, Held::view)
    }
}

#[cfg(test)]
mod tests {
    use fe2o3_amqp::types::primitives::{Symbol, Timestamp};

    use super::*;

    #[test]
    fn the_system_properties_come_from_the_message_id_and_the_annotations() {
        let properties = Properties {
            message_id: Some(MessageId::String("m-1".into())),
            ..Properties::default()
        };
        let mut annotations = MessageAnnotations::default();
        for (key, value) in [
            (
                ENQUEUED_TIME,
                Value::Timestamp(Timestamp::from_milliseconds(1_749_132_727_000)),
            ),
            (SEQUENCE_NUMBER, Value::Long(42)),
            (
                LOCKED_UNTIL,
                Value::Timestamp(Timestamp::from_milliseconds(1_749_132_787_000)),
            ),
            ("x-opt-partition-key", Value::String("p".into())),
        ] {
            annotations
                .0
                .insert(OwnedKey::Symbol(Symbol::from(key)), value);
        }
        let system = SystemProperties::of(Some(properties), Some(&annotations));
        assert_eq!(
            system,
            SystemProperties {
                message_id: Some("m-1".into()),
                sequence_number: Some(42),
                enqueued_time: Some(1_749_132_727_000),
                locked_until: Some(1_749_132_787_000),
            }
        );
        assert_eq!(
            SystemProperties::of(None, None),
            SystemProperties::default()
        );
        let numeric = Properties {
            message_id: Some(MessageId::Ulong(7)),
            ..Properties::default()
        };
        assert_eq!(
            SystemProperties::of(Some(numeric), None)
                .message_id
                .as_deref(),
            Some("7")
        );
    }
}
