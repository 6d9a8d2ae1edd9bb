//! What RabbitMQ said of a delivery, for tools that show the wire ([`Inspector`]).
//!
//! A delivery's handle keeps what `basic.deliver` and the content header carried, moved there
//! from the client's delivery on receive (the basic properties, the exchange, the routing key,
//! the `redelivered` flag; the delivery tag it already kept): nothing is copied or formatted
//! until a tool asks. The view:
//!
//! * id: the `message_id` property, when the message has one;
//! * redelivered: the `redelivered` flag of `basic.deliver`;
//! * properties, in this order: `delivery_tag`, `exchange` (empty for the default exchange),
//!   `routing_key`, then each basic property that is set, by its AMQP name with `_` for `-`
//!   (`content_type`, `content_encoding`, `delivery_mode`, `priority`, `correlation_id`,
//!   `reply_to`, `expiration`, `timestamp` (epoch seconds, as AMQP carries it), `type`,
//!   `user_id`, `app_id`, `cluster_id`). The header table is the delivery's headers, and
//!   `message_id` is the id: neither is repeated here.

use babelqueue_core::{BrokerView, Delivery, Inspector};
use lapin::BasicProperties;
use lapin::types::ShortString;

use crate::transport::{AmqpTransport, Handle};

/// What a delivery's handle keeps of the broker's word, raw.
#[derive(Debug)]
pub(crate) struct Wire {
    /// The `redelivered` flag of `basic.deliver`.
    pub(crate) redelivered: bool,
    /// The exchange the message was published to.
    pub(crate) exchange: ShortString,
    /// The routing key it was published with.
    pub(crate) routing_key: ShortString,
    /// Its basic properties.
    pub(crate) properties: BasicProperties,
}

impl Wire {
    /// The view of a delivery with this wire and delivery tag.
    pub(crate) fn view(&self, tag: Option<u64>) -> BrokerView {
        let p = &self.properties;
        let mut view = BrokerView::new().redelivered(self.redelivered);
        if let Some(id) = p.message_id() {
            view = view.id(id.as_str());
        }
        if let Some(tag) = tag {
            view = view.property("delivery_tag", tag.to_string());
        }
        view = view
            .property("exchange", self.exchange.as_str())
            .property("routing_key", self.routing_key.as_str());
        let texts = [
            ("content_type", p.content_type()),
            ("content_encoding", p.content_encoding()),
        ];
        for (name, value) in texts {
            if let Some(value) = value {
                view = view.property(name, value.as_str());
            }
        }
        let numbers = [
            ("delivery_mode", p.delivery_mode().map(u64::from)),
            ("priority", p.priority().map(u64::from)),
        ];
        for (name, value) in numbers {
            if let Some(value) = value {
                view = view.property(name, value.to_string());
            }
        }
        let texts = [
            ("correlation_id", p.correlation_id()),
            ("reply_to", p.reply_to()),
            ("expiration", p.expiration()),
        ];
        for (name, value) in texts {
            if let Some(value) = value {
                view = view.property(name, value.as_str());
            }
        }
        if let Some(timestamp) = p.timestamp() {
            view = view.property("timestamp", timestamp.to_string());
        }
        let texts = [
            ("type", p.kind()),
            ("user_id", p.user_id()),
            ("app_id", p.app_id()),
            ("cluster_id", p.cluster_id()),
        ];
        for (name, value) in texts {
            if let Some(value) = value {
                view = view.property(name, value.as_str());
            }
        }
        view
    }
}

impl Inspector for AmqpTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        delivery
            .handle::<Handle>()
            .map_or_else(BrokerView::new, |handle| handle.wire.view(handle.tag))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::Transport;
    use lapin::types::{AMQPValue, FieldTable};

    use super::*;
    use crate::fake::FakeClient;
    use crate::transport::AmqpOptions;

    const ORDER: &[u8] = br#"{"job":"urn:babel:orders:created","trace_id":"t-1","data":{},"meta":{"id":"m-1","queue":"orders","lang":"rust","schema_version":1},"attempts":0}"#;

    fn text(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn every_property_that_is_set_is_shown_in_order_and_the_headers_are_not() {
        let mut headers = FieldTable::default();
        headers.insert("traceparent".into(), AMQPValue::LongString("00-a".into()));
        let properties = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("utf-8".into())
            .with_headers(headers)
            .with_delivery_mode(2)
            .with_priority(5)
            .with_correlation_id("t-1".into())
            .with_reply_to("replies".into())
            .with_expiration("60000".into())
            .with_message_id("m-1".into())
            .with_timestamp(1_749_132_727)
            .with_type("urn:babel:orders:created".into())
            .with_user_id("guest".into())
            .with_app_id("babelqueue".into())
            .with_cluster_id("c".into());
        let wire = Wire {
            redelivered: true,
            exchange: "".into(),
            routing_key: "orders".into(),
            properties,
        };
        let view = wire.view(Some(7));
        assert_eq!(view.id.as_deref(), Some("m-1"));
        assert_eq!(view.redelivered, Some(true));
        assert_eq!(
            view.properties,
            text(&[
                ("delivery_tag", "7"),
                ("exchange", ""),
                ("routing_key", "orders"),
                ("content_type", "application/json"),
                ("content_encoding", "utf-8"),
                ("delivery_mode", "2"),
                ("priority", "5"),
                ("correlation_id", "t-1"),
                ("reply_to", "replies"),
                ("expiration", "60000"),
                ("timestamp", "1749132727"),
                ("type", "urn:babel:orders:created"),
                ("user_id", "guest"),
                ("app_id", "babelqueue"),
                ("cluster_id", "c"),
            ])
        );
    }

    #[test]
    fn a_bare_message_has_no_id_and_only_its_routing() {
        let wire = Wire {
            redelivered: false,
            exchange: "events".into(),
            routing_key: "orders.created".into(),
            properties: BasicProperties::default(),
        };
        let view = wire.view(None);
        assert_eq!((view.id, view.redelivered), (None, Some(false)));
        assert_eq!(
            view.properties,
            text(&[("exchange", "events"), ("routing_key", "orders.created")])
        );
    }

    #[tokio::test]
    async fn a_received_delivery_shows_what_it_was_published_with_and_a_requeued_one_is_redelivered()
     {
        let fake = FakeClient::default();
        let t = AmqpTransport::with_client(
            Arc::new(fake.clone()),
            AmqpOptions::default()
                .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(40)),
        );
        let inspector = t.capabilities().inspector().expect("an Inspector");
        t.publish("orders", ORDER).await.unwrap();
        let first = t
            .pop("orders", Duration::from_millis(200))
            .await
            .unwrap()
            .unwrap();
        let view = inspector.inspect(&first);
        assert_eq!(view.id.as_deref(), Some("m-1"), "the message_id property");
        assert_eq!(view.redelivered, Some(false));
        assert_eq!(
            view.properties,
            text(&[
                ("delivery_tag", "1"),
                ("exchange", ""),
                ("routing_key", "orders"),
                ("content_type", "application/json"),
                ("content_encoding", "utf-8"),
                ("delivery_mode", "2"),
                ("correlation_id", "t-1"),
                ("type", "urn:babel:orders:created"),
                ("app_id", "babelqueue"),
            ])
        );
        // The channel closes unacknowledged: the broker requeues the message and says so.
        fake.kill_connections();
        let again = t
            .pop("orders", Duration::from_millis(500))
            .await
            .unwrap()
            .unwrap();
        let view = inspector.inspect(&again);
        assert_eq!(view.redelivered, Some(true));
        assert_eq!(view.id.as_deref(), Some("m-1"));
        assert_eq!(view.properties[0], text(&[("delivery_tag", "1")])[0]);
        t.ack(&again).await.unwrap();
        let foreign = Delivery::new("orders", ORDER.to_vec());
        assert_eq!(inspector.inspect(&foreign), BrokerView::new());
    }
}
