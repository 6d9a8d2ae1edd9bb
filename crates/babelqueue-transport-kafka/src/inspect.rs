//! What Kafka said of a delivery, for tools that show the wire ([`Inspector`]).
//!
//! The delivery's handle already knew where its record sits (a shared topic partition and the
//! offset); it also keeps the record's timestamp and timestamp type, two plain values, and the
//! delivery keeps the record's key. Nothing is formatted until a tool asks:
//!
//! * id: `topic/partition@offset` (`orders/0@42`);
//! * redelivered: never said: Kafka does not tell whether a consumer read a record before;
//! * properties: `timestamp` (epoch milliseconds) and `timestamp_type` (`CreateTime` or
//!   `LogAppendTime`) when the record has a timestamp; its key as `key` when it is UTF-8 text,
//!   else as `key_hex` (lowercase hexadecimal); nothing for a null key.

use std::fmt::Write as _;

use babelqueue_core::{BrokerView, Delivery, Inspector};

use crate::transport::{Held, KafkaTransport};

impl Inspector for KafkaTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        let Some(held) = delivery.handle::<Held>() else {
            return BrokerView::new();
        };
        let mut view = BrokerView::new().id(format!(
            "{}/{}@{}",
            held.partition.topic, held.partition.partition, held.offset
        ));
        if let Some(timestamp) = held.timestamp {
            view = view
                .property("timestamp", timestamp.to_string())
                .property("timestamp_type", held.timestamp_type.as_str());
        }
        match delivery.key() {
            None => view,
            Some(key) => match std::str::from_utf8(key) {
                Ok(text) => view.property("key", text),
                Err(_) => view.property("key_hex", hex(key)),
            },
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::Transport;

    use super::*;
    use crate::client::{Record, TimestampType};
    use crate::config::KafkaOptions;
    use crate::fake::FakeKafka;

    const ORDER: &[u8] = br#"{"job":"urn:babel:orders:created","data":{},"meta":{"id":"m-1","created_at":1749132727000},"attempts":0}"#;

    fn text(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn record(key: Option<&[u8]>, timestamp: Option<i64>, kind: TimestampType) -> Record {
        Record {
            topic: "orders".into(),
            partition: 0,
            offset: 0,
            key: key.map(<[u8]>::to_vec),
            value: Some(ORDER.to_vec()),
            headers: Vec::new(),
            timestamp,
            timestamp_type: kind,
        }
    }

    #[tokio::test]
    async fn the_position_the_timestamp_and_the_key_are_shown() {
        let kafka = FakeKafka::new();
        let t = KafkaTransport::with_client(Arc::new(kafka.clone()), &KafkaOptions::default());
        let inspector = t.capabilities().inspector().expect("an Inspector");
        // Published through the transport: the envelope's created_at is the record's
        // CreateTime, and it has no key.
        t.publish("orders", ORDER).await.unwrap();
        kafka.append(
            "orders",
            0,
            record(
                Some(b"acme"),
                Some(1_749_132_728_000),
                TimestampType::LogAppendTime,
            ),
        );
        kafka.append(
            "orders",
            0,
            record(Some(&[0xff, 0x00, 0x10]), None, TimestampType::CreateTime),
        );
        let mut views = Vec::new();
        for _ in 0..3 {
            let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
            views.push(inspector.inspect(&d));
            t.ack(&d).await.unwrap();
        }
        let ids: Vec<_> = views.iter().map(|v| v.id.as_deref().unwrap()).collect();
        assert_eq!(ids, ["orders/0@0", "orders/0@1", "orders/0@2"]);
        assert!(views.iter().all(|v| v.redelivered.is_none()));
        assert_eq!(
            views[0].properties,
            text(&[
                ("timestamp", "1749132727000"),
                ("timestamp_type", "CreateTime")
            ])
        );
        assert_eq!(
            views[1].properties,
            text(&[
                ("timestamp", "1749132728000"),
                ("timestamp_type", "LogAppendTime"),
                ("key", "acme"),
            ])
        );
        assert_eq!(views[2].properties, text(&[("key_hex", "ff0010")]));
        let foreign = Delivery::new("orders", ORDER.to_vec());
        assert_eq!(inspector.inspect(&foreign), BrokerView::new());
    }

    #[test]
    fn hex_is_lowercase_and_two_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0a, 0xff]), "000aff");
        assert_eq!(hex(&[]), "");
    }
}
