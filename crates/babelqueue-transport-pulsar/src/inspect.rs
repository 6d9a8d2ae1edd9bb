//! What Pulsar said of a delivery, for tools that show the wire ([`Inspector`]).
//!
//! The client hands over, beside the payload, the parts of the message metadata a tool may
//! want ([`Metadata`]: moved out of the client's message, never copied), and the delivery's
//! handle keeps them with the message properties and the redelivery count the transport read
//! its facts from ([`Wire`]). The view is built only when a tool asks:
//!
//! * id: the message id, `ledger:entry:partition:batch` (`-1` where there is none);
//! * redelivered: the redelivery count above 0 (see the crate docs for what the native client
//!   counts: the `pulsar` crate does not report the broker's count);
//! * properties: `publish_time` (epoch milliseconds), `producer_name`, `sequence_id`, then
//!   `event_time` and `partition_key` when the message has them, then every message property
//!   the facts were not read from (`bq-job`, `bq-schema-version` and `bq-attempts` are facts),
//!   by its own name, in name order.

use babelqueue_core::{BrokerView, Delivery, Inspector};

use crate::projection::{self, Properties};
use crate::{Handle, PulsarTransport};

/// The message metadata a received message carries beside its payload and properties.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// When the broker received the message, in epoch milliseconds.
    pub publish_time: u64,
    /// The producer's name.
    pub producer_name: String,
    /// The producer's sequence id of the message.
    pub sequence_id: u64,
    /// The event time the producer set, in epoch milliseconds.
    pub event_time: Option<u64>,
    /// The partition key (the message key).
    pub partition_key: Option<String>,
}

impl Metadata {
    /// The parts of `metadata` kept, moved out of it.
    pub(crate) fn of(metadata: pulsar::proto::MessageMetadata) -> Metadata {
        Metadata {
            publish_time: metadata.publish_time,
            producer_name: metadata.producer_name,
            sequence_id: metadata.sequence_id,
            event_time: metadata.event_time,
            partition_key: metadata.partition_key,
        }
    }
}

/// What a delivery's handle keeps of the broker's word.
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    metadata: Metadata,
    properties: Properties,
    redelivery_count: u32,
}

impl Wire {
    /// The handle's part of a received message.
    pub(crate) fn new(metadata: Metadata, properties: Properties, redelivery_count: u32) -> Wire {
        Wire {
            metadata,
            properties,
            redelivery_count,
        }
    }

    /// The view of the message `id` with this wire.
    fn view(&self, id: &str) -> BrokerView {
        let m = &self.metadata;
        let mut view = BrokerView::new()
            .id(id)
            .redelivered(self.redelivery_count > 0)
            .property("publish_time", m.publish_time.to_string())
            .property("producer_name", m.producer_name.as_str())
            .property("sequence_id", m.sequence_id.to_string());
        if let Some(event_time) = m.event_time {
            view = view.property("event_time", event_time.to_string());
        }
        if let Some(key) = &m.partition_key {
            view = view.property("partition_key", key.as_str());
        }
        let facts = [
            projection::PROP_JOB,
            projection::PROP_SCHEMA_VERSION,
            projection::PROP_ATTEMPTS,
        ];
        for (name, value) in &self.properties {
            if !facts.contains(&name.as_str()) {
                view = view.property(name.as_str(), value.as_str());
            }
        }
        view
    }
}

impl Inspector for PulsarTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        delivery
            .handle::<Handle>()
            .map_or_else(BrokerView::new, |handle| {
                handle.wire.view(&handle.message.id)
            })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::Transport;

    use super::*;
    use crate::fake::FakePulsar;

    #[test]
    fn the_metadata_is_moved_out_of_the_clients_message() {
        let metadata = pulsar::proto::MessageMetadata {
            producer_name: "standalone-0-7".into(),
            sequence_id: 12,
            publish_time: 1_749_132_727_000,
            event_time: Some(1_749_132_726_000),
            partition_key: Some("acme".into()),
            ..Default::default()
        };
        let view = Wire::new(Metadata::of(metadata), Properties::new(), 0).view("9:3:-1:-1");
        assert_eq!(view.id.as_deref(), Some("9:3:-1:-1"));
        assert_eq!(view.redelivered, Some(false));
        let want = [
            ("publish_time", "1749132727000"),
            ("producer_name", "standalone-0-7"),
            ("sequence_id", "12"),
            ("event_time", "1749132726000"),
            ("partition_key", "acme"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(view.properties, want);
    }

    #[tokio::test]
    async fn a_received_delivery_shows_its_id_metadata_and_properties_and_a_nack_redelivers() {
        let fake = Arc::new(FakePulsar::new());
        let t = PulsarTransport::with_client(fake);
        let inspector = t.capabilities().inspector().expect("an Inspector");
        let body = br#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{},"meta":{"id":"m-1","lang":"rust","schema_version":1},"attempts":0}"#;
        t.publish("orders", body).await.unwrap();
        let first = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let view = inspector.inspect(&first);
        assert_eq!(view.id.as_deref(), Some("1:0:-1:-1"));
        assert_eq!(view.redelivered, Some(false));
        let names: Vec<&str> = view.properties.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names[..3],
            ["publish_time", "producer_name", "sequence_id"],
            "{view:?}"
        );
        // The facts' properties are not repeated; the others are shown by their names.
        assert!(!names.contains(&projection::PROP_JOB), "{names:?}");
        assert!(names.contains(&"bq-message-id"), "{names:?}");
        // Negatively acknowledged: it comes back, counted as a redelivery.
        t.capabilities()
            .rewinder()
            .expect("a Rewinder")
            .rewind(&first)
            .await
            .unwrap();
        let again = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let view = inspector.inspect(&again);
        assert_eq!(view.id.as_deref(), Some("1:0:-1:-1"));
        assert_eq!(view.redelivered, Some(true));
        assert_eq!(
            inspector.inspect(&Delivery::new("orders", body.to_vec())),
            BrokerView::new()
        );
    }
}
