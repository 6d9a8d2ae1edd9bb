//! The broker contract ([`babelqueue_transport::transport`], re-exported whole) and the one
//! piece of it that is a runtime rule: which capability carries a copy published on behalf of
//! a delivery.

use std::time::Duration;

pub use babelqueue_transport::transport::*;

use crate::error::TransportError;

/// Publishes `body` to `queue` on behalf of `delivery` (a retry, a release, a dead-letter
/// record, a redrive restore), deliverable after `delay` where the transport can delay: a
/// broker-confirmed settle write with the delivery's key when the transport offers one (its
/// broker has no delays), else a routed publish when the delivery carries out-of-band facts
/// (an out-of-band URN, a schema-version property), else a delayed or a plain publish. A
/// transport that cannot delay sends the copy at once (the runtime warns about it at
/// start-up when a back-off is configured).
pub async fn publish_on_behalf(
    transport: &dyn Transport,
    delivery: &Delivery,
    queue: &str,
    body: &[u8],
    delay: Option<Duration>,
) -> Result<(), TransportError> {
    let capabilities = transport.capabilities();
    let delay = delay.filter(|d| !d.is_zero());
    if let Some(settle) = capabilities.settle_publisher() {
        return settle.publish_settle(queue, body, delivery.key()).await;
    }
    let facts = delivery.facts();
    let carries = facts.urn.is_some() || facts.declared_version != crate::Declared::Absent;
    if carries && let Some(routed) = capabilities.routed_publisher() {
        return routed.publish_routed(queue, body, facts, delay).await;
    }
    match (delay, capabilities.delayed_publisher()) {
        (Some(delay), Some(delayed)) => delayed.publish_delayed(queue, body, delay).await,
        _ => transport.publish(queue, body).await,
    }
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
