//! [`FakeClient`] (behind the `fake` feature): an in-memory [`Client`] that behaves like one
//! Artemis queue per address and records everything, so the transport, the runtime's settle
//! plans and the conformance suite run without a broker.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use fe2o3_amqp::types::messaging::{ApplicationProperties, Header};
use fe2o3_amqp::types::primitives::SimpleValue;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::{Client, DeliveryToken, Disposition, Received};
use crate::error::ArtemisError;
use crate::projection::{self, AmqpMessage};

#[derive(Debug, Default)]
struct State {
    queues: HashMap<String, VecDeque<AmqpMessage>>,
    unsettled: HashMap<u64, (String, AmqpMessage)>,
    sent: Vec<(String, AmqpMessage)>,
    settled: Vec<(DeliveryToken, Disposition)>,
    failing: HashSet<String>,
    next_id: u64,
    closed: bool,
    settle_batches: Vec<usize>,
}

/// An in-memory broker behind the [`Client`] seam.
///
/// * `send` records the message and appends it to the address's queue (or fails, for an
///   address set with [`fail_sends_to`](FakeClient::fail_sends_to));
/// * `receive` takes the head of the queue and holds it unsettled; `browse` copies it;
/// * `accepted` removes it; `released` puts it back at the head, its delivery count unchanged
///   (as AMQP says for `released`); `failed` puts it back with the delivery count raised;
/// * every send and settlement is recorded, in order.
#[derive(Debug, Default)]
pub struct FakeClient {
    state: Mutex<State>,
}

impl FakeClient {
    /// An empty fake broker.
    pub fn new() -> Arc<FakeClient> {
        Arc::new(FakeClient::default())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `message` on `address`, as another producer would.
    pub fn push(&self, address: &str, message: AmqpMessage) {
        self.state()
            .queues
            .entry(address.to_owned())
            .or_default()
            .push_back(message);
    }

    /// Queues `message` on `address` after a trip through the AMQP wire encoding (encode, then
    /// decode as a receiver does), so the test sees exactly what survives the wire.
    pub fn push_wire(&self, address: &str, message: AmqpMessage) -> Result<(), String> {
        let decoded = wire_round_trip(message)?;
        self.push(address, decoded);
        Ok(())
    }

    /// Makes every send to `address` fail (`true`) or succeed again (`false`).
    pub fn fail_sends_to(&self, address: &str, fail: bool) {
        let mut state = self.state();
        if fail {
            state.failing.insert(address.to_owned());
        } else {
            state.failing.remove(address);
        }
    }

    /// Every message sent (successful or not), in order, with its address.
    pub fn sent(&self) -> Vec<(String, AmqpMessage)> {
        self.state().sent.clone()
    }

    /// The bodies of the messages sent to `address`, as bytes.
    pub fn sent_bodies(&self, address: &str) -> Vec<Vec<u8>> {
        self.state()
            .sent
            .iter()
            .filter(|(a, _)| a == address)
            .map(|(_, m)| projection::body_bytes(&m.body))
            .collect()
    }

    /// The size of every [`Client::settle_many`] call, in order.
    pub fn settle_batches(&self) -> Vec<usize> {
        self.state().settle_batches.clone()
    }

    /// Every settlement, in order.
    pub fn settlements(&self) -> Vec<(DeliveryToken, Disposition)> {
        self.state().settled.clone()
    }

    /// Messages waiting on `address`.
    pub fn len(&self, address: &str) -> usize {
        self.state().queues.get(address).map_or(0, VecDeque::len)
    }

    /// Whether nothing waits on `address`.
    pub fn is_empty(&self, address: &str) -> bool {
        self.len(address) == 0
    }

    /// Deliveries received and not settled.
    pub fn unsettled(&self) -> usize {
        self.state().unsettled.len()
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.state().closed
    }
}

/// A message as another producer (or the broker) would hand it over: `body` as an amqp-value
/// string, the given application properties (any AMQP type, null included), and the header's
/// delivery count.
pub fn incoming(
    body: &[u8],
    properties: &[(&str, SimpleValue)],
    delivery_count: u32,
) -> AmqpMessage {
    let mut message = projection::message(body);
    message.message_annotations = None;
    message.properties = None;
    message.application_properties = (!properties.is_empty()).then(|| {
        let mut map = ApplicationProperties::default();
        for (k, v) in properties {
            map.0.insert((*k).to_owned(), v.clone());
        }
        map
    });
    message.header = Some(Header {
        durable: true,
        delivery_count,
        ..Header::default()
    });
    message
}

/// Encodes the header, message annotations, properties and application properties of
/// `message` as AMQP bytes (each section with its descriptor) and decodes them back, as a
/// receiver would; the body is kept as it is.
pub fn wire_round_trip(message: AmqpMessage) -> Result<AmqpMessage, String> {
    fn again<T: Serialize + DeserializeOwned>(section: Option<T>) -> Result<Option<T>, String> {
        section
            .map(|s| {
                let bytes = serde_amqp::to_vec(&s).map_err(|e| e.to_string())?;
                serde_amqp::from_slice(&bytes).map_err(|e| e.to_string())
            })
            .transpose()
    }
    Ok(AmqpMessage {
        header: again(message.header)?,
        delivery_annotations: again(message.delivery_annotations)?,
        message_annotations: again(message.message_annotations)?,
        properties: again(message.properties)?,
        application_properties: again(message.application_properties)?,
        body: message.body,
        footer: again(message.footer)?,
    })
}

#[async_trait]
impl Client for FakeClient {
    async fn send(&self, address: &str, message: AmqpMessage) -> Result<(), ArtemisError> {
        let mut state = self.state();
        state.sent.push((address.to_owned(), message.clone()));
        if state.failing.contains(address) {
            return Err(ArtemisError::Connection {
                endpoint: "fake".into(),
                reason: format!("sending to {address:?} fails (injected)"),
            });
        }
        let mut stored = message;
        if let Some(header) = stored.header.as_mut() {
            header.delivery_count = 0;
        }
        state
            .queues
            .entry(address.to_owned())
            .or_default()
            .push_back(stored);
        Ok(())
    }

    async fn receive(
        &self,
        address: &str,
        _timeout: Duration,
    ) -> Result<Option<Received>, ArtemisError> {
        let mut state = self.state();
        if state.closed {
            return Err(ArtemisError::Closed);
        }
        let Some(message) = state.queues.get_mut(address).and_then(VecDeque::pop_front) else {
            return Ok(None);
        };
        let id = state.next_id;
        state.next_id += 1;
        state
            .unsettled
            .insert(id, (address.to_owned(), message.clone()));
        Ok(Some(Received {
            message,
            token: DeliveryToken::new(address, 1, id),
        }))
    }

    /// A copy of the head of the queue; nothing is recorded, held or changed.
    async fn browse(&self, address: &str, max: usize) -> Result<Vec<AmqpMessage>, ArtemisError> {
        let state = self.state();
        if state.closed {
            return Err(ArtemisError::Closed);
        }
        Ok(state
            .queues
            .get(address)
            .map(|q| q.iter().take(max).cloned().collect())
            .unwrap_or_default())
    }

    /// Counted as one call ([`FakeClient::settle_batches`]), then each settled.
    async fn settle_many(
        &self,
        tokens: &[DeliveryToken],
        disposition: Disposition,
    ) -> Result<(), ArtemisError> {
        self.state().settle_batches.push(tokens.len());
        let mut first_error = None;
        for token in tokens {
            if let Err(e) = self.settle(token, disposition).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn settle(
        &self,
        token: &DeliveryToken,
        disposition: Disposition,
    ) -> Result<(), ArtemisError> {
        let mut state = self.state();
        state.settled.push((token.clone(), disposition));
        let Some((address, message)) = state.unsettled.remove(&token.id()) else {
            return Err(ArtemisError::Stale {
                address: token.address().to_owned(),
            });
        };
        match disposition {
            Disposition::Accepted => {}
            Disposition::Released => state.queues.entry(address).or_default().push_front(message),
            Disposition::Failed => {
                let mut message = message;
                message
                    .header
                    .get_or_insert_with(Header::default)
                    .delivery_count += 1;
                state.queues.entry(address).or_default().push_front(message);
            }
        }
        Ok(())
    }

    async fn close(&self) -> Result<(), ArtemisError> {
        let mut state = self.state();
        state.closed = true;
        let unsettled: Vec<(String, AmqpMessage)> =
            state.unsettled.drain().map(|(_, v)| v).collect();
        for (address, mut message) in unsettled {
            if let Some(header) = message.header.as_mut() {
                header.delivery_count += 1;
            }
            state.queues.entry(address).or_default().push_front(message);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_application_property_survives_the_wire() {
        let message = incoming(b"{}", &[("bq_schema_version", SimpleValue::Null)], 3);
        let back = wire_round_trip(message).unwrap();
        let props = back.application_properties.unwrap();
        assert_eq!(props.0.get("bq_schema_version"), Some(&SimpleValue::Null));
        assert_eq!(back.header.unwrap().delivery_count, 3);
    }
}
