//! What goes into the outbox and what comes back out of it.

use std::fmt;

use babelqueue_core::{Envelope, Headers};

use crate::error::Result;

/// The queue a message goes to when its envelope names none (the reference SDKs' default).
pub const DEFAULT_QUEUE: &str = "default";

/// The id of an outbox row: the store's own key, not the envelope's `meta.id`.
///
/// Stores choose the spelling (`42` in PostgreSQL, `mem-7` in the memory store); the relay only
/// hands it back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OutboxId(String);

impl OutboxId {
    /// An id from the store's spelling.
    pub fn new(id: impl Into<String>) -> OutboxId {
        OutboxId(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OutboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<i64> for OutboxId {
    fn from(id: i64) -> OutboxId {
        OutboxId(id.to_string())
    }
}

impl From<String> for OutboxId {
    fn from(id: String) -> OutboxId {
        OutboxId(id)
    }
}

impl From<&str> for OutboxId {
    fn from(id: &str) -> OutboxId {
        OutboxId(id.to_owned())
    }
}

/// One message to store: the encoded envelope, byte for byte, the queue it goes to, and the
/// out-of-band headers (a W3C `traceparent` …) that ride beside it on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    queue: String,
    body: Vec<u8>,
    headers: Headers,
}

impl OutboxMessage {
    /// A message of already encoded bytes for `queue`, without headers. The bytes are stored
    /// and published unchanged; [`Outbox::write_message`](crate::Outbox::write_message) refuses
    /// them when a consumer would dead-letter them as poison.
    pub fn new(queue: impl Into<String>, body: impl Into<Vec<u8>>) -> OutboxMessage {
        OutboxMessage {
            queue: queue.into(),
            body: body.into(),
            headers: Headers::new(),
        }
    }

    /// Encodes `envelope` with the codec every SDK shares. The queue is the envelope's
    /// `meta.queue` when that is a non-empty string, else [`DEFAULT_QUEUE`].
    ///
    /// An envelope carrying a forbidden key (or the `urn` alias), or one its consumers would
    /// dead-letter as poison ([`Envelope::encode_checked`]), is refused.
    pub fn from_envelope(envelope: &Envelope) -> Result<OutboxMessage> {
        let body = envelope.encode_checked()?;
        let queue = envelope
            .queue()
            .filter(|q| !q.is_empty())
            .map_or_else(|| DEFAULT_QUEUE.to_owned(), |q| q.into_owned());
        Ok(OutboxMessage::new(queue, body.into_bytes()))
    }

    /// Sends the message to `queue` instead.
    #[must_use]
    pub fn to_queue(mut self, queue: impl Into<String>) -> OutboxMessage {
        self.queue = queue.into();
        self
    }

    /// Adds out-of-band headers (later calls win on equal keys). Entries with an empty key or an
    /// empty value are dropped, as every SDK's header merge does.
    #[must_use]
    pub fn with_headers(mut self, headers: &Headers) -> OutboxMessage {
        self.headers = babelqueue_core::merge_headers([&self.headers, headers]);
        self
    }

    /// The queue.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The bytes that will be published.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The out-of-band headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }
}

/// One row a store handed to the relay: the stored message plus the store's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRecord {
    id: OutboxId,
    message: OutboxMessage,
    attempts: u32,
}

impl OutboxRecord {
    /// A record of `message` stored under `id`, after `attempts` failed publishes.
    pub fn new(id: impl Into<OutboxId>, message: OutboxMessage, attempts: u32) -> OutboxRecord {
        OutboxRecord {
            id: id.into(),
            message,
            attempts,
        }
    }

    /// The row id.
    pub fn id(&self) -> &OutboxId {
        &self.id
    }

    /// The stored message.
    pub fn message(&self) -> &OutboxMessage {
        &self.message
    }

    /// How many publishes of this row failed before.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_comes_from_meta_queue_or_defaults() {
        let env = Envelope::builder("urn:babel:orders:created")
            .queue("orders")
            .build()
            .unwrap();
        let message = OutboxMessage::from_envelope(&env).unwrap();
        assert_eq!(message.queue(), "orders");
        assert_eq!(message.body(), env.encode().unwrap().as_bytes());

        for raw in [
            r#"{"job":"urn:x","trace_id":"t","data":{},"meta":{"id":"1"},"attempts":0}"#,
            r#"{"job":"urn:x","trace_id":"t","data":{},"meta":{"queue":""},"attempts":0}"#,
            r#"{"job":"urn:x","trace_id":"t","data":{},"attempts":0}"#,
        ] {
            let env = Envelope::decode(raw.as_bytes()).unwrap().envelope;
            let message = OutboxMessage::from_envelope(&env).unwrap();
            assert_eq!(message.queue(), DEFAULT_QUEUE, "{raw}");
            // A decoded envelope re-encodes to the bytes it came from.
            assert_eq!(message.body(), raw.as_bytes());
        }
        // A `meta.queue` that is not a string makes the body poison to every consumer.
        let raw = r#"{"job":"urn:x","trace_id":"t","data":{},"meta":{"queue":7},"attempts":0}"#;
        let env = Envelope::decode(raw.as_bytes()).unwrap().envelope;
        let refused = OutboxMessage::from_envelope(&env).unwrap_err();
        assert!(refused.to_string().contains("meta.queue"), "{refused}");
    }

    #[test]
    fn headers_drop_blanks_and_later_values_win() {
        let mut first = Headers::new();
        first.insert("traceparent".into(), "00-a-b-01".into());
        first.insert("x".into(), "1".into());
        let mut second = Headers::new();
        second.insert("x".into(), "2".into());
        second.insert("empty".into(), String::new());
        second.insert(String::new(), "v".into());
        let message = OutboxMessage::new("q", b"{}".to_vec())
            .with_headers(&first)
            .with_headers(&second);
        assert_eq!(message.headers().len(), 2);
        assert_eq!(message.headers()["x"], "2");
        assert_eq!(message.headers()["traceparent"], "00-a-b-01");
    }
}
