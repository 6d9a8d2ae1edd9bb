//! Browsing a queue without taking anything from it ([`Browser`], `babelqueue dlq list`).
//!
//! AMQP 1.0 has a browsing receiver: a link whose source asks for the `copy` distribution mode.
//! Artemis serves such a link with a queue *browser*: it sends the messages at the head of the
//! queue, in queue order, and leaves them where they are. The link asks for pre-settled
//! deliveries (sender settle mode `settled`), so no disposition is ever sent back: nothing is
//! accepted, released or modified, and no message's `delivery-count` rises. The link gets
//! credit for the number wanted, takes what arrives until the queue has had nothing more for
//! a short while ([`BROWSE_IDLE`]), and is then closed.
//!
//! What a browser does not see: messages another consumer holds unsettled at that moment, and
//! scheduled messages whose delivery time has not come (a retry waiting out its back-off).
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use babelqueue_core::Transport;
//! use babelqueue_transport_artemis::ArtemisTransport;
//!
//! let transport = ArtemisTransport::connect("artemis://bq:bq@127.0.0.1:5673").await?;
//! let browser = transport.capabilities().browser().expect("Artemis can browse");
//! for body in browser.browse("orders.dlq", 20).await? {
//!     eprintln!("{}", String::from_utf8_lossy(&body));
//! }
//! # Ok(()) }
//! ```

use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::{Browser, TransportError};
use fe2o3_amqp::Receiver;
use fe2o3_amqp::types::messaging::Body;
use fe2o3_amqp::types::primitives::Value;

use crate::projection::{self, AmqpMessage};
use crate::transport::ArtemisTransport;

/// The most messages one browse returns when the caller asks for all of them (`max` 0).
pub const BROWSE_LIMIT: usize = 10_000;

/// How long a browse waits for the first message of the queue (an empty queue costs this).
pub const BROWSE_FIRST: Duration = Duration::from_secs(1);

/// How long a browse waits for one more message before it takes the queue as read to its end.
pub const BROWSE_IDLE: Duration = Duration::from_millis(300);

/// How many messages a browse asking for `max` wants (`max` 0: all, up to [`BROWSE_LIMIT`]).
pub fn wanted(max: usize) -> usize {
    if max == 0 { BROWSE_LIMIT } else { max }
}

/// Reads up to `wanted` messages from an attached browsing link, then closes it. An error is
/// the reason, as text, of a link that failed (the caller maps it).
pub(crate) async fn read(
    mut receiver: Receiver,
    wanted: usize,
) -> Result<Vec<AmqpMessage>, String> {
    let credit = u32::try_from(wanted).unwrap_or(u32::MAX);
    receiver
        .set_credit(credit)
        .await
        .map_err(|e| format!("granting credit to a browser: {e}"))?;
    let mut messages = Vec::new();
    let mut failure = None;
    while messages.len() < wanted {
        let wait = if messages.is_empty() {
            BROWSE_FIRST
        } else {
            BROWSE_IDLE
        };
        match tokio::time::timeout(wait, receiver.recv::<Body<Value>>()).await {
            Err(_) => break,
            Ok(Ok(delivery)) => messages.push(delivery.into_parts().1),
            Ok(Err(e)) => {
                failure = Some(format!("browsing: {e}"));
                break;
            }
        }
    }
    // Closing a browser hands nothing back: its deliveries were settled when sent.
    match tokio::time::timeout(BROWSE_IDLE.max(Duration::from_secs(5)), receiver.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::debug!(target: "babelqueue::artemis", error = %e, "closing a browsing link")
        }
        Err(_) => {
            tracing::debug!(target: "babelqueue::artemis", "closing a browsing link timed out")
        }
    }
    failure.map_or(Ok(messages), Err)
}

/// The bodies at the head of the queue, byte for byte, in queue order, read through a browsing
/// link ([`Client::browse`](crate::Client::browse)); nothing is taken, settled or counted.
#[async_trait]
impl Browser for ArtemisTransport {
    async fn browse(&self, queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError> {
        let messages = self.client().browse(queue, wanted(max)).await?;
        Ok(messages
            .iter()
            .map(|m| projection::body_bytes(&m.body))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use babelqueue_core::Transport;

    use super::*;
    use crate::fake::{FakeClient, incoming};

    #[tokio::test]
    async fn browsing_leaves_the_queue_as_it_was() {
        let fake = FakeClient::new();
        let t = ArtemisTransport::with_client(fake.clone(), Duration::from_millis(5));
        let bodies: [&[u8]; 3] = [
            br#"{"job":"urn:babel:orders:created","attempts":0}"#,
            b"not an envelope \xff",
            br#"{"job":"urn:babel:orders:paid","attempts":2}"#,
        ];
        for body in bodies {
            t.publish("orders.dlq", body).await.unwrap();
        }
        fake.push("orders.dlq", incoming(b"redelivered", &[], 3));
        let browser = t.capabilities().browser().expect("a browser");
        let all = browser.browse("orders.dlq", 0).await.unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all[..3], bodies.map(<[u8]>::to_vec));
        assert_eq!(
            browser.browse("orders.dlq", 2).await.unwrap(),
            all[..2],
            "the head, in order"
        );
        assert!(browser.browse("nothing-here", 0).await.unwrap().is_empty());
        assert!(fake.settlements().is_empty(), "nothing settled");
        assert_eq!(fake.unsettled(), 0, "nothing held");
        assert_eq!(fake.len("orders.dlq"), 4, "nothing taken");
        let mut popped = Vec::new();
        while let Some(d) = t.pop("orders.dlq", Duration::ZERO).await.unwrap() {
            popped.push((d.body().to_vec(), d.facts().count));
            t.ack(&d).await.unwrap();
        }
        let counts: Vec<_> = popped.iter().map(|(_, c)| *c).collect();
        assert_eq!(
            counts,
            [0, 0, 0, 3].map(|n| Some(babelqueue_core::Count::Redelivered(n))),
            "no delivery count raised"
        );
        assert_eq!(popped.into_iter().map(|(b, _)| b).collect::<Vec<_>>(), all);
    }

    #[tokio::test]
    async fn a_closed_client_cannot_browse() {
        let fake = FakeClient::new();
        let t = ArtemisTransport::with_client(fake.clone(), Duration::from_millis(5));
        t.close().await.unwrap();
        let err = t
            .capabilities()
            .browser()
            .unwrap()
            .browse("orders", 0)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("closed"), "{err}");
    }

    #[test]
    fn all_is_bounded() {
        assert_eq!(wanted(0), BROWSE_LIMIT);
        assert_eq!(wanted(7), 7);
    }
}
