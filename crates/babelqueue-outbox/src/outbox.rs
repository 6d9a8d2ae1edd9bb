//! The write side.

use std::fmt;

use babelqueue_core::{Envelope, Headers};

use crate::error::Result;
use crate::message::{OutboxId, OutboxMessage};
use crate::store::OutboxWriter;

/// Writes envelopes into an outbox through a writer bound to the caller's open transaction.
///
/// It encodes with the codec every SDK shares and stores the bytes unchanged; it never begins,
/// commits or rolls back a transaction: that boundary is the caller's, which is the point (the
/// business row and its message commit together, or neither does).
#[derive(Clone, Copy)]
pub struct Outbox<W> {
    writer: W,
}

impl<W> fmt::Debug for Outbox<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox").finish_non_exhaustive()
    }
}

impl<W: OutboxWriter> Outbox<W> {
    /// An outbox writing through `writer` (often a reference: `Outbox::new(&writer)`).
    pub fn new(writer: W) -> Outbox<W> {
        Outbox { writer }
    }

    /// Encodes `envelope` and stores it for the queue it names (`meta.queue`, else
    /// `"default"`). Returns the outbox row id (not `meta.id`).
    ///
    /// An envelope the codec refuses (a forbidden key), or one its consumers would dead-letter
    /// as poison (a number in `data` that is not a finite double …), stores nothing: every
    /// write runs the strict verdict every consumer runs ([`Envelope::encode_checked`]).
    pub async fn write(&self, envelope: &Envelope) -> Result<OutboxId> {
        let message = OutboxMessage::from_envelope(envelope)?;
        self.writer.save(&message).await
    }

    /// Like [`write`](Outbox::write), with out-of-band headers (a W3C `traceparent` …) that the
    /// relay publishes beside the body when the transport carries headers.
    pub async fn write_with_headers(
        &self,
        envelope: &Envelope,
        headers: &Headers,
    ) -> Result<OutboxId> {
        let message = OutboxMessage::from_envelope(envelope)?.with_headers(headers);
        self.writer.save(&message).await
    }

    /// Stores an already built message (bytes encoded elsewhere, another queue …). Bytes a
    /// consumer would dead-letter as poison are refused, and nothing is stored.
    pub async fn write_message(&self, message: &OutboxMessage) -> Result<OutboxId> {
        babelqueue_envelope::check_publishable(message.body())
            .map_err(babelqueue_envelope::Error::Unpublishable)?;
        self.writer.save(message).await
    }
}
