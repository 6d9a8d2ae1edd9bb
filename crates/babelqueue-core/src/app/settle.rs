//! Carrying a settle [`Plan`] out with the transport's capabilities (which capability wins is
//! documented on [`crate::transport`]).

use std::sync::atomic::Ordering;
use std::time::Duration;

use babelqueue_envelope::Envelope;

use super::{Inner, LOG, Outcome};
use crate::decide::{
    self, DropReason, Failure, OnWriteFailure, Plan, QueueFacts, ReleaseBody, Unsettle,
};
use crate::error::{Error, TransportError};
use crate::send;
use crate::transport::Outgoing;
use crate::transport::{Delivery, Redeliver, Redelivered, Redelivery};
use crate::{attempts, classify};

/// What the runtime holds of a delivery while it settles it: the decoded envelope and the body
/// with `attempts` reconciled, for a readable one.
pub(super) struct Held {
    /// The reconciled body (`None` when it is the delivery's, unchanged) and the envelope.
    readable: Option<(Option<Vec<u8>>, Envelope)>,
}

impl Held {
    /// A delivery that was not decoded (gated or poison): its records use the raw body.
    pub(super) fn raw(_delivery: &Delivery) -> Held {
        Held { readable: None }
    }

    /// A readable delivery: its reconciled body (`None` when unchanged) and its envelope.
    pub(super) fn readable(body: Option<Vec<u8>>, envelope: Envelope) -> Held {
        Held {
            readable: Some((body, envelope)),
        }
    }

    fn envelope(&self) -> Option<&Envelope> {
        self.readable.as_ref().map(|(_, e)| e)
    }

    fn body<'a>(&'a self, delivery: &'a Delivery) -> &'a [u8] {
        match &self.readable {
            Some((Some(body), _)) => body,
            _ => delivery.body(),
        }
    }
}

impl Inner {
    pub(super) fn execute<'a>(
        &'a self,
        delivery: &'a Delivery,
        held: &'a Held,
        facts: &'a QueueFacts,
        plan: Plan,
        sampler: decide::Sampler<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send + 'a>> {
        Box::pin(async move {
            let queue = delivery.queue();
            match plan {
                Plan::Ack => {
                    self.ack(delivery).await;
                    Outcome::Acked
                }
                Plan::Drop(reason) => {
                    tracing::warn!(target: LOG, queue, "Dropping a message on queue {queue:?}: {}", describe_drop(&reason, delivery));
                    self.ack(delivery).await;
                    Outcome::Dropped
                }
                Plan::Release { body, delay } => {
                    let retry = !matches!(body, ReleaseBody::Unchanged);
                    let written = match body.render(held.body(delivery), held.envelope()) {
                        Ok(bytes) => self
                            .release(delivery, Redeliver::new(&bytes, body.attempts(), delay))
                            .await
                            .map_err(Error::from),
                        Err(e) => Err(Error::from(e)),
                    };
                    match written {
                        Ok(()) if retry => Outcome::Retried,
                        Ok(()) => Outcome::Released,
                        Err(e) => {
                            tracing::error!(target: LOG, queue, error = %e,
                                "Re-publishing a message for retry on queue {queue:?} failed; it was NOT acknowledged and will be redelivered");
                            self.leave_unsettled(delivery, Unsettle::Rewind).await;
                            Outcome::Unsettled
                        }
                    }
                }
                Plan::DeadLetter {
                    queue: dlq,
                    record,
                    on_failure,
                } => {
                    let rendered = record.render(
                        held.body(delivery),
                        held.envelope(),
                        queue,
                        babelqueue_envelope::now_millis(),
                    );
                    let written = match rendered {
                        Ok(bytes) => self
                            .write_dead_letter(delivery, &dlq, &bytes)
                            .await
                            .map_err(Error::from),
                        Err(e) => Err(Error::from(e)),
                    };
                    match (written, on_failure) {
                        (Ok(()), _) => Outcome::DeadLettered,
                        (Err(e), OnWriteFailure::Leave(unsettle)) => {
                            tracing::error!(target: LOG, queue, dead_letter_queue = %dlq, error = %e,
                                "Dead-lettering a message from queue {queue:?} to {dlq:?} failed; it was NOT acknowledged \
                                 or retried, and will come back (the write is tried again then); the worker keeps running");
                            self.leave_unsettled(delivery, unsettle).await;
                            Outcome::Unsettled
                        }
                        (Err(e), OnWriteFailure::Fail) => {
                            tracing::error!(target: LOG, queue, dead_letter_queue = %dlq, error = %e,
                                "Dead-lettering an unknown-URN message failed; taking the retry path");
                            let failure = Failure {
                                message: e.to_string(),
                                exception: "TransportError".to_owned(),
                                action: crate::handler::Action::Retry,
                                unknown_urn: true,
                            };
                            let attempts = held.envelope().map_or(0, Envelope::attempts);
                            let plan =
                                decide::failure(&self.policy, facts, attempts, &failure, sampler);
                            self.execute(delivery, held, facts, plan, sampler).await
                        }
                    }
                }
                Plan::Native {
                    reason,
                    description,
                } => {
                    tracing::warn!(target: LOG, queue, reason,
                        "Left to the broker's native mechanism (not acknowledged, not retried): queue {queue:?}, reason {reason}");
                    if let Some(settler) = self.transport.capabilities().native_settler()
                        && let Err(e) = settler.settle_native(delivery, reason, &description).await
                    {
                        tracing::error!(target: LOG, queue, error = %e,
                            "Native settle of a message on queue {queue:?} failed; it stays unacknowledged and will be redelivered");
                    }
                    Outcome::Native
                }
                Plan::LeaveUnsettled(unsettle) => {
                    self.leave_unsettled(delivery, unsettle).await;
                    Outcome::Unsettled
                }
            }
        })
    }

    /// Sends the acknowledgements the consume loop gathered, in one step when the transport
    /// can ([`BatchAcker`](crate::BatchAcker)), else one by one; empties `gathered`.
    pub(super) async fn ack_gathered(&self, gathered: &mut Vec<Delivery>) {
        if gathered.is_empty() {
            return;
        }
        match self.transport.capabilities().batch_acker() {
            Some(batch) => {
                if let Err(e) = batch.ack_batch(gathered).await {
                    tracing::error!(target: LOG, error = %e, count = gathered.len(),
                        "Failed to acknowledge {} processed messages; those not acknowledged were NOT released and will be redelivered by the broker",
                        gathered.len());
                }
            }
            None => {
                for delivery in gathered.iter() {
                    self.ack(delivery).await;
                }
            }
        }
        gathered.clear();
    }

    pub(super) async fn ack(&self, delivery: &Delivery) {
        if let Err(e) = self.transport.ack(delivery).await {
            tracing::error!(target: LOG, queue = delivery.queue(), error = %e,
                "Failed to acknowledge a processed message on queue {:?}; it was NOT released and will be redelivered by the broker",
                delivery.queue());
        }
    }

    /// Sends `delivery` back for another delivery: the broker's own mechanism, else a copy
    /// (delayed where the transport can) and then the acknowledgement of the original. A
    /// transport that cannot redeliver refuses, and the delivery is left unsettled.
    async fn release(
        &self,
        delivery: &Delivery,
        redeliver: Redeliver<'_>,
    ) -> Result<(), TransportError> {
        match self.transport.capabilities().redelivery_mode() {
            Redelivery::Native(redeliverer) => {
                if redeliverer.keeps_original()
                    && !classify::redelivery_reproduces(
                        delivery.body(),
                        delivery.facts(),
                        delivery.queue(),
                        &redeliver,
                    )
                {
                    return self.copy_in_place_of(delivery, redeliver).await;
                }
                match redeliverer.redeliver(delivery, redeliver).await? {
                    Redelivered::Settled => {}
                    Redelivered::Copied => self.ack(delivery).await,
                }
                Ok(())
            }
            Redelivery::Impossible => Err(TransportError::unsupported(format!(
                "the {} transport cannot redeliver a message with this configuration",
                self.transport.name()
            ))),
            Redelivery::Copy => {
                send::on_behalf(
                    self.transport.as_ref(),
                    delivery,
                    delivery.queue(),
                    redeliver.body,
                    redeliver.delay,
                )
                .await?;
                self.ack(delivery).await;
                Ok(())
            }
        }
    }

    /// The runtime's body in place of a broker redelivery that would not read as counted:
    /// published at once with the delivery's headers (the broker's own redelivery would have
    /// kept them), then the original acknowledged. Sent at once because the brokers whose
    /// redelivery keeps the original (JetStream) have no delayed publish.
    async fn copy_in_place_of(
        &self,
        delivery: &Delivery,
        redeliver: Redeliver<'_>,
    ) -> Result<(), TransportError> {
        let asked = Outgoing::new(delivery.queue(), redeliver.body)
            .headers(delivery.headers())
            .facts(delivery.facts())
            .key(delivery.key());
        send::copy(self.transport.as_ref(), &asked).await?;
        if let Some(delay) = redeliver.delay.filter(|d| !d.is_zero()) {
            tracing::debug!(target: LOG, queue = delivery.queue(), ?delay,
                "The retry of a message whose attempts are ahead of the broker's count was published as a copy, at once");
        }
        self.ack(delivery).await;
        Ok(())
    }

    async fn write_dead_letter(
        &self,
        delivery: &Delivery,
        queue: &str,
        body: &[u8],
    ) -> Result<(), TransportError> {
        if let Some(writer) = self.transport.capabilities().dead_letter_writer() {
            return writer.dead_letter(delivery, queue, body).await;
        }
        send::on_behalf(self.transport.as_ref(), delivery, queue, body, None).await?;
        self.ack(delivery).await;
        Ok(())
    }

    async fn leave_unsettled(&self, delivery: &Delivery, unsettle: Unsettle) {
        let capabilities = self.transport.capabilities();
        if unsettle == Unsettle::AbandonOrRewind
            && capabilities.rewinder().is_none()
            && let Some(abandoner) = capabilities.abandoner()
        {
            if let Err(e) = abandoner.abandon(delivery).await {
                tracing::error!(target: LOG, queue = delivery.queue(), error = %e, "Failed to abandon an unsettled message");
                return;
            }
            self.pause(self.rewind_pause).await;
            return;
        }
        if let Some(rewinder) = capabilities.rewinder() {
            // A version-gated delivery is never written back to its queue (the contract allows
            // only its dead-letter write), so it is rewound in place; any other message whose
            // settle write failed moves behind the others where the broker can.
            let rewound = match unsettle {
                Unsettle::AbandonOrRewind => rewinder.rewind(delivery).await,
                Unsettle::Rewind => {
                    let counted = attempts::reconcile(delivery.body(), delivery.facts().count);
                    rewinder.rewind_behind(delivery, &counted).await
                }
            };
            if let Err(e) = rewound {
                tracing::error!(target: LOG, queue = delivery.queue(), error = %e, "Failed to rewind an unsettled message");
                return;
            }
            self.pause(self.rewind_pause).await;
        }
    }

    /// Gives back a message whose handler never completed: rewound where possible, else
    /// released unchanged with no delay and no attempt counted.
    pub(super) async fn release_unprocessed(&self, delivery: &Delivery) {
        if let Some(rewinder) = self.transport.capabilities().rewinder() {
            if let Err(e) = rewinder.rewind(delivery).await {
                tracing::error!(target: LOG, queue = delivery.queue(), error = %e,
                    "Failed to rewind an unprocessed message at shutdown; the broker will redeliver it");
            }
            return;
        }
        let body = decide::normalised(delivery.body());
        if let Err(e) = self
            .release(delivery, Redeliver::new(&body, None, None))
            .await
        {
            tracing::error!(target: LOG, queue = delivery.queue(), error = %e,
                "Failed to release an unprocessed message at shutdown; it is left unsettled and the broker will redeliver it");
        }
    }

    /// Sleeps, waking early on a stop request.
    pub(super) async fn pause(&self, pause: Duration) {
        if self.stop.flag.load(Ordering::SeqCst) {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = self.stop.notify.notified() => {}
        }
    }
}

fn describe_drop(reason: &DropReason, delivery: &Delivery) -> String {
    match reason {
        DropReason::RetriesExhausted { attempts } => {
            format!(
                "after {attempts} attempts: retries are exhausted and no dead-letter queue is configured"
            )
        }
        DropReason::PoisonDeleted { cause } => {
            format!("a poison message (on_unknown_urn=delete): {cause}")
        }
        DropReason::Undeliverable => format!(
            "an undeliverable message ({} body bytes): it can never be handled and no dead-letter queue is configured",
            delivery.body().len()
        ),
        DropReason::PoisonCannotRetry => {
            "a poison record: the transport cannot redeliver it and dead-lettering is off \
             (degrade-to-delete); enable dead_letter to keep it"
                .to_owned()
        }
        DropReason::Rejected { message } => {
            format!("rejected by its handler ({message}) and no dead-letter queue is configured")
        }
    }
}
