//! The broker contract ([`babelqueue_transport::transport`], re-exported whole) and the one
//! piece of it that is a runtime rule: what a copy published on behalf of a delivery carries
//! (the table is [`crate::send::shape`]).

use std::time::Duration;

pub use babelqueue_transport::transport::*;

use crate::error::TransportError;

/// Publishes `body` to `queue` on behalf of `delivery` (a retry, a release, a dead-letter
/// record, a redrive restore), deliverable after `delay` where the transport can delay, with
/// the out-of-band facts and the key the delivery carried where the transport honours them
/// ([`crate::send::on_behalf`]).
pub async fn publish_on_behalf(
    transport: &dyn Transport,
    delivery: &Delivery,
    queue: &str,
    body: &[u8],
    delay: Option<Duration>,
) -> Result<(), TransportError> {
    crate::send::on_behalf(transport, delivery, queue, body, delay).await
}

/// [`publish_on_behalf`] without a delay.
pub async fn publish_keeping_route(
    transport: &dyn Transport,
    delivery: &Delivery,
    queue: &str,
    body: &[u8],
) -> Result<(), TransportError> {
    publish_on_behalf(transport, delivery, queue, body, None).await
}
