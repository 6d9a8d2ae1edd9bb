//! What SQS said of a delivery, for tools that show the wire ([`Inspector`]).
//!
//! The delivery's handle keeps the `MessageId` and the `ApproximateReceiveCount` text, both
//! moved there from the received message (the SDK had already allocated them); the view is
//! built only when a tool asks:
//!
//! * id: the `MessageId`;
//! * redelivered: `ApproximateReceiveCount` above 1 (`None` when SQS did not report the count,
//!   or reported something that is not a number);
//! * properties: `ApproximateReceiveCount`, as SQS sent it.
//!
//! The other system attributes (`SentTimestamp`, `ApproximateFirstReceiveTimestamp`,
//! `MessageGroupId`, `MessageDeduplicationId`, `SequenceNumber`) are not shown: the transport
//! asks SQS for the receive count only, and asking for more would make every `ReceiveMessage`
//! answer longer and cost the SDK an allocation per attribute and message, for a view nobody
//! reads on the consume path.

use babelqueue_core::{BrokerView, Delivery, Inspector};

use crate::transport::{Receipt, SqsTransport};

/// The system attribute the view shows.
const RECEIVE_COUNT: &str = "ApproximateReceiveCount";

impl Inspector for SqsTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        let Some(receipt) = delivery.handle::<Receipt>() else {
            return BrokerView::new();
        };
        let mut view = BrokerView::new();
        if let Some(id) = &receipt.message_id {
            view = view.id(id.as_str());
        }
        if let Some(count) = &receipt.receive_count {
            if let Ok(n) = count.trim().parse::<u64>() {
                view = view.redelivered(n > 1);
            }
            view = view.property(RECEIVE_COUNT, count.as_str());
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use babelqueue_core::{Redeliver, Redelivery, Transport};

    use super::*;
    use crate::config::SqsOptions;
    use crate::fake::FakeSqs;
    use crate::projection::Attributes;

    const ORDER: &str =
        r#"{"job":"urn:babel:orders:created","data":{},"meta":{"id":"m-1"},"attempts":0}"#;

    fn transport() -> (FakeSqs, SqsTransport) {
        let fake = FakeSqs::new();
        let transport = SqsTransport::new(fake.clone(), SqsOptions::default());
        (fake, transport)
    }

    #[tokio::test]
    async fn the_message_id_and_the_receive_count_are_shown_and_a_release_is_a_redelivery() {
        let (_fake, t) = transport();
        let inspector = t.capabilities().inspector().expect("an Inspector");
        t.publish("orders", ORDER.as_bytes()).await.unwrap();
        let first = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let view = inspector.inspect(&first);
        let id = view.id.clone().expect("the MessageId");
        assert_eq!(view.redelivered, Some(false));
        assert_eq!(
            view.properties,
            [("ApproximateReceiveCount".to_owned(), "1".to_owned())]
        );
        // A release (visibility 0) brings it back with the count one higher.
        let Redelivery::Native(redeliverer) = t.capabilities().redelivery_mode() else {
            panic!("SQS releases natively")
        };
        redeliverer
            .redeliver(&first, Redeliver::new(first.body(), None, None))
            .await
            .unwrap();
        let again = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let view = inspector.inspect(&again);
        assert_eq!(view.id.as_deref(), Some(id.as_str()), "the same message");
        assert_eq!(view.redelivered, Some(true));
        assert_eq!(
            view.properties,
            [("ApproximateReceiveCount".to_owned(), "2".to_owned())]
        );
    }

    #[tokio::test]
    async fn without_a_receive_count_nothing_is_said_of_a_redelivery() {
        let (fake, t) = transport();
        fake.seed("orders", ORDER, Attributes::new(), None);
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let inspector = t.capabilities().inspector().expect("an Inspector");
        let view = inspector.inspect(&d);
        assert!(view.id.is_some());
        assert_eq!(view.redelivered, None);
        assert!(view.properties.is_empty());
        let foreign = Delivery::new("orders", ORDER.as_bytes().to_vec());
        assert_eq!(inspector.inspect(&foreign), BrokerView::new());
    }
}
