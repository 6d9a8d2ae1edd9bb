//! What JetStream said of a delivery, for tools that show the wire ([`Inspector`]).
//!
//! JetStream tells a consumer about each delivery in its ack subject, which the client parses
//! without allocating ([`Info`]); the transport reads the delivery count from it anyway, and
//! the delivery's handle now keeps the other numbers too ([`Wire`], plain copies). The stream
//! and consumer names are not copied per delivery: they are the queue's stream and the
//! transport's durable consumer, named again when a tool asks. The view:
//!
//! * id: the stream sequence;
//! * redelivered: the delivery count above 1;
//! * properties: `stream`, `consumer`, `consumer_sequence`, `delivered` (the count),
//!   `pending` (messages the server still holds for the consumer), `published` (when the
//!   server stored the message, in epoch nanoseconds as the ack subject carries it).

use async_nats::datetime::DateTime;
use async_nats::jetstream::message::Info;
use babelqueue_transport::{BrokerView, Delivery, Inspector};

use crate::transport::{Handle, NatsTransport};

/// JetStream's delivery metadata, as a delivery's handle keeps it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wire {
    /// The message's sequence in its stream.
    pub(crate) stream_sequence: u64,
    /// The delivery's sequence in the consumer.
    pub(crate) consumer_sequence: u64,
    /// How many times JetStream delivered the message (1 on the first delivery).
    pub(crate) delivered: i64,
    /// The messages the server still holds for the consumer.
    pub(crate) pending: u64,
    /// When the server stored the message.
    pub(crate) published: DateTime,
}

impl Wire {
    /// The numbers of `info`, copied.
    pub(crate) fn of(info: &Info<'_>) -> Wire {
        Wire {
            stream_sequence: info.stream_sequence,
            consumer_sequence: info.consumer_sequence,
            delivered: info.delivered,
            pending: info.pending,
            published: info.published,
        }
    }

    /// The view of a delivery with this metadata, from `stream` (when the queue names one) and
    /// `consumer`.
    pub(crate) fn view(&self, stream: Option<&str>, consumer: &str) -> BrokerView {
        let mut view = BrokerView::new()
            .id(self.stream_sequence.to_string())
            .redelivered(self.delivered > 1);
        if let Some(stream) = stream {
            view = view.property("stream", stream);
        }
        view.property("consumer", consumer)
            .property("consumer_sequence", self.consumer_sequence.to_string())
            .property("delivered", self.delivered.to_string())
            .property("pending", self.pending.to_string())
            .property(
                "published",
                self.published.unix_timestamp_nanos().to_string(),
            )
    }
}

impl Inspector for NatsTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        let Some(handle) = delivery.handle::<Handle>() else {
            return BrokerView::new();
        };
        let options = self.options();
        let stream = options.stream_name(delivery.queue()).ok();
        handle.wire.view(stream.as_deref(), &options.consumer)
    }
}

#[cfg(test)]
mod tests {
    use async_nats::jetstream;
    use babelqueue_transport::Transport;
    use bytes::Bytes;

    use super::*;
    use crate::projection::NatsOptions;

    /// The metadata of a delivery as the server's ack subject gives it.
    fn info(delivered: i64) -> Info<'static> {
        Info {
            domain: None,
            acc_hash: None,
            stream: "BQ_orders",
            consumer: "babelqueue",
            stream_sequence: 42,
            consumer_sequence: 7,
            delivered,
            pending: 3,
            published: DateTime::from_unix_timestamp_nanos(1_749_132_727_123_456_789).unwrap(),
            token: None,
        }
    }

    fn text(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_stream_sequence_is_the_id_and_the_count_says_redelivered() {
        let view = Wire::of(&info(1)).view(Some("BQ_orders"), "babelqueue");
        assert_eq!(view.id.as_deref(), Some("42"));
        assert_eq!(view.redelivered, Some(false));
        assert_eq!(
            view.properties,
            text(&[
                ("stream", "BQ_orders"),
                ("consumer", "babelqueue"),
                ("consumer_sequence", "7"),
                ("delivered", "1"),
                ("pending", "3"),
                ("published", "1749132727123456789"),
            ])
        );
        let again = Wire::of(&info(2)).view(None, "babelqueue");
        assert_eq!(again.redelivered, Some(true));
        assert_eq!(again.properties[0], text(&[("consumer", "babelqueue")])[0]);
    }

    /// A delivery received as the transport receives one: a JetStream message whose ack
    /// subject carries its metadata (ADR-15's first form), turned into a delivery by the
    /// transport's own conversion.
    #[tokio::test]
    async fn a_received_delivery_shows_the_metadata_of_its_ack_subject() {
        // Nothing listens on port 1: the client only holds the acker, it never reaches a server.
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect("nats://127.0.0.1:1")
            .await
            .unwrap();
        let t = NatsTransport::unchecked(client.clone(), NatsOptions::default());
        let message = jetstream::Message {
            message: async_nats::Message {
                subject: "bq.orders".into(),
                reply: Some("$JS.ACK.BQ_orders.babelqueue.2.42.7.1749132727123456789.3".into()),
                payload: Bytes::from_static(b"{}"),
                headers: None,
                status: None,
                description: None,
                length: 2,
            },
            context: jetstream::new(client),
        };
        let d = t.delivery("orders", message).unwrap();
        let view = t
            .capabilities()
            .inspector()
            .expect("an Inspector")
            .inspect(&d);
        assert_eq!(view.id.as_deref(), Some("42"));
        assert_eq!(view.redelivered, Some(true), "delivered twice");
        assert_eq!(
            view.properties,
            text(&[
                ("stream", "BQ_orders"),
                ("consumer", "babelqueue"),
                ("consumer_sequence", "7"),
                ("delivered", "2"),
                ("pending", "3"),
                ("published", "1749132727123456789"),
            ])
        );
        let foreign = Delivery::new("orders", b"{}".to_vec());
        assert_eq!(
            t.capabilities().inspector().unwrap().inspect(&foreign),
            BrokerView::new()
        );
    }
}
