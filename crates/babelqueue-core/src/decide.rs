//! The decision tables: from the facts of one delivery to a settle [`Plan`].
//!
//! Every rule about retries, poison bodies, unknown URNs and the schema-version gate lives
//! here, as pure functions (no I/O, no clock; jitter comes from the sampler passed in). The
//! runtime gathers the facts, asks these functions, and carries out the plan through the
//! transport's capabilities; transports never decide.

use std::time::Duration;

pub use babelqueue_envelope::Record;
use babelqueue_envelope::{Envelope, Reason};

use crate::classify::Poison;
use crate::failure::Action;
use crate::policy::{Policy, UnknownUrn};
use crate::transport::DeadLetterNamer;

/// What to do with a delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Acknowledge: the message is done.
    Ack,
    /// Acknowledge and drop, with a warning saying why.
    Drop(DropReason),
    /// Give the message back for another delivery (native release, else publish a copy to the
    /// consumed queue and acknowledge). A failure leaves it unsettled and rewinds it.
    Release {
        /// What goes back.
        body: ReleaseBody,
        /// How long it stays invisible: `None` when no delay is configured (the broker's own
        /// rule applies); honoured where the transport can delay.
        delay: Option<Duration>,
    },
    /// Write a record to a dead-letter queue, then settle.
    DeadLetter {
        /// The dead-letter queue.
        queue: String,
        /// The record.
        record: Record,
        /// What to do when the write fails.
        on_failure: OnWriteFailure,
    },
    /// Leave it to the broker's own mechanism: not acknowledged, not re-published.
    Native {
        /// Why (`poison`, `unsupported schema version`, `rejected`).
        reason: &'static str,
        /// A sentence for the broker's records.
        description: String,
    },
    /// Neither acknowledge nor retry; make it come back.
    LeaveUnsettled(Unsettle),
}

/// Why a message is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// Retries are exhausted and no dead-letter queue is configured.
    RetriesExhausted {
        /// The attempts counted.
        attempts: i64,
    },
    /// A poison body under `on_unknown_urn = delete`.
    PoisonDeleted {
        /// Why it is poison.
        cause: String,
    },
    /// A version-gated message, no dead-letter queue, no native mechanism.
    Undeliverable,
    /// A poison record, dead-lettering off, and the transport cannot redeliver (Kafka without
    /// retry tiers): degrade to delete.
    PoisonCannotRetry,
    /// The handler rejected the message, no dead-letter queue, no native mechanism.
    Rejected {
        /// The handler's message.
        message: String,
    },
}

/// The body a release sends back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseBody {
    /// The incoming body unchanged (normalised only when it carries a forbidden key or a `urn`
    /// alias).
    Unchanged,
    /// The decoded envelope with `attempts` set to this value.
    Counted(i64),
    /// A bare `{"attempts":N}` (the bounded retry of a poison body, which stays poison).
    Bare(i64),
}

impl ReleaseBody {
    /// The `attempts` the release carries when it counts one (`None` for
    /// [`ReleaseBody::Unchanged`]).
    pub fn attempts(&self) -> Option<i64> {
        match *self {
            ReleaseBody::Unchanged => None,
            ReleaseBody::Counted(n) | ReleaseBody::Bare(n) => Some(n),
        }
    }

    /// The bytes of the release for `body` (with `attempts` already reconciled), decoded as
    /// `envelope` when it was readable.
    pub fn render(
        &self,
        body: &[u8],
        envelope: Option<&Envelope>,
    ) -> Result<Vec<u8>, babelqueue_envelope::Error> {
        match *self {
            ReleaseBody::Unchanged => Ok(normalised(body)),
            ReleaseBody::Counted(n) => {
                let mut copy = envelope.cloned().unwrap_or_default();
                copy.set_attempts(n);
                Ok(copy.encode()?.into_bytes())
            }
            ReleaseBody::Bare(n) => Ok(format!("{{\"attempts\":{n}}}").into_bytes()),
        }
    }
}

/// A raw body to re-publish: byte for byte, unless it is an object carrying a forbidden key or
/// a top-level `urn`, which are then dropped/folded by a decode → encode.
pub fn normalised(body: &[u8]) -> Vec<u8> {
    match Envelope::parse_object(body) {
        Ok(parsed) if parsed.forbidden_key().is_some() => Envelope::decode_lenient(body)
            .envelope
            .encode()
            .map_or_else(|_| body.to_vec(), String::into_bytes),
        _ => body.to_vec(),
    }
}

/// What to do when a dead-letter write fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnWriteFailure {
    /// Leave the delivery unsettled (see [`Unsettle`]); never acknowledge, never retry.
    Leave(Unsettle),
    /// Treat the failed write as a handler failure (the `dead_letter` unknown-URN strategy).
    Fail,
}

/// How an unsettled delivery is made to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsettle {
    /// Rewind where the transport can, after a short pause; otherwise the broker's lock or
    /// visibility timeout brings it back.
    Rewind,
    /// Abandon on a transport that abandons and does not rewind (ASB), else as `Rewind`.
    AbandonOrRewind,
}

/// A handler failure, or an unknown URN under the `fail` strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The failure's message (the DLQ block's `error`).
    pub message: String,
    /// The failure's type name (the DLQ block's `exception`).
    pub exception: String,
    /// What the handler asked for.
    pub action: Action,
    /// Whether this is the `fail` strategy of an unknown URN (DLQ reason `unknown_urn`).
    pub unknown_urn: bool,
}

impl Failure {
    /// The failure of an unknown URN under the `fail` strategy.
    pub fn unknown_urn(urn: &str) -> Failure {
        let shown = if urn.is_empty() { "(empty)" } else { urn };
        Failure {
            message: format!("No handler mapped for URN [{shown}]."),
            exception: "UnknownUrnError".to_owned(),
            action: Action::Retry,
            unknown_urn: true,
        }
    }

    /// The bounded-retry failure of a poison body.
    pub fn poison(cause: &str) -> Failure {
        Failure {
            message: format!("The message is poison: {cause}"),
            exception: "UnknownUrnError".to_owned(),
            action: Action::Retry,
            unknown_urn: true,
        }
    }
}

/// What the tables need to know about the consumed queue and the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFacts {
    /// The queue the delivery was consumed from.
    pub queue: String,
    /// The dead-letter queue for it ([`dead_letter_queue`]).
    pub dead_letter_queue: String,
    /// Whether the transport can settle natively ([`NativeSettler`](crate::NativeSettler)).
    pub native_settler: bool,
    /// Whether the transport can redeliver at all (`false` for
    /// [`Redelivery::Impossible`](crate::Redelivery::Impossible): Kafka without retry tiers).
    pub can_redeliver: bool,
}

/// A source of uniform draws in `[low, high]` for jitter.
pub type Sampler<'a> = &'a mut (dyn FnMut(f64, f64) -> f64 + Send);

/// The dead-letter queue for `consumed`: the configured queue, else the transport's naming rule,
/// else `<consumed><suffix>` with `.dlq` when no suffix is set. Based on the consumed queue, not
/// `meta.queue`.
pub fn dead_letter_queue(
    policy: &Policy,
    consumed: &str,
    namer: Option<&dyn DeadLetterNamer>,
) -> String {
    if let Some(queue) = policy
        .dead_letter_queue
        .as_deref()
        .filter(|q| !q.is_empty())
    {
        return queue.to_owned();
    }
    if let Some(namer) = namer {
        return namer.dead_letter_queue_name(consumed, policy.dead_letter_suffix.as_deref());
    }
    format!(
        "{consumed}{}",
        policy.dead_letter_suffix.as_deref().unwrap_or(".dlq")
    )
}

/// A handler failed (or an unknown URN takes the `fail` strategy) on a delivery whose envelope
/// carried `attempts_before`.
///
/// A negative `attempts_before` counts as 0: a negative count is a valid envelope (not poison),
/// but it must not buy extra deliveries (`-5` under `max_attempts` 3 would otherwise run the
/// handler eight times, and `i64::MIN` would never reach the dead-letter queue).
pub fn failure(
    policy: &Policy,
    facts: &QueueFacts,
    attempts_before: i64,
    failure: &Failure,
    sampler: Sampler<'_>,
) -> Plan {
    let counted = attempts_before.max(0).saturating_add(1);
    if failure.action == Action::Reject {
        if policy.dead_letter {
            return Plan::DeadLetter {
                queue: facts.dead_letter_queue.clone(),
                record: Record::Annotated {
                    reason: Reason::Poison,
                    attempts: counted,
                    error: Some((failure.message.clone(), failure.exception.clone())),
                },
                on_failure: OnWriteFailure::Leave(Unsettle::Rewind),
            };
        }
        if facts.native_settler {
            return Plan::Native {
                reason: "rejected",
                description: format!("the handler rejected the message: {}", failure.message),
            };
        }
        return Plan::Drop(DropReason::Rejected {
            message: failure.message.clone(),
        });
    }
    if counted < policy.max_attempts {
        let delay = match failure.action {
            Action::RetryAfter(delay) => Some(delay),
            _ => backoff(policy, counted, sampler),
        };
        return Plan::Release {
            body: ReleaseBody::Counted(counted),
            delay,
        };
    }
    if policy.dead_letter {
        let reason = if failure.unknown_urn {
            Reason::UnknownUrn
        } else {
            Reason::Failed
        };
        return Plan::DeadLetter {
            queue: facts.dead_letter_queue.clone(),
            record: Record::Annotated {
                reason,
                attempts: counted,
                error: Some((failure.message.clone(), failure.exception.clone())),
            },
            on_failure: OnWriteFailure::Leave(Unsettle::Rewind),
        };
    }
    Plan::Drop(DropReason::RetriesExhausted { attempts: counted })
}

/// A valid envelope whose URN (`urn`, possibly empty) has no handler.
pub fn unknown_urn(
    policy: &Policy,
    facts: &QueueFacts,
    urn: &str,
    attempts_before: i64,
    sampler: Sampler<'_>,
) -> Plan {
    match policy.on_unknown_urn {
        UnknownUrn::Delete => Plan::Ack,
        UnknownUrn::Release if !urn.is_empty() => Plan::Release {
            body: ReleaseBody::Unchanged,
            delay: Some(policy.unknown_urn_release_delay).filter(|d| !d.is_zero()),
        },
        UnknownUrn::DeadLetter => Plan::DeadLetter {
            queue: facts.dead_letter_queue.clone(),
            record: Record::Annotated {
                reason: Reason::UnknownUrn,
                attempts: attempts_before,
                error: None,
            },
            on_failure: OnWriteFailure::Fail,
        },
        _ => failure(
            policy,
            facts,
            attempts_before,
            &Failure::unknown_urn(urn),
            sampler,
        ),
    }
}

/// A delivery [`classify`](crate::classify) found poison (the typed cause, its delivery count
/// and its original queue are in `poison`). In order:
///
/// 1. a binding that dead-letters poison in every configuration (Redis): the record;
/// 2. `on_unknown_urn = delete`: dropped;
/// 3. dead-lettering on (or the `dead_letter` strategy): the ADR-0035 record;
/// 4. a transport that settles natively: left to the broker;
/// 5. a transport that cannot redeliver (Kafka without tiers): dropped (degrade to delete);
/// 6. else the bounded retry: a bare `{"attempts":N}` until `max_attempts`.
pub fn poison(policy: &Policy, facts: &QueueFacts, poison: &Poison, sampler: Sampler<'_>) -> Plan {
    let dead_letter = || Plan::DeadLetter {
        queue: facts.dead_letter_queue.clone(),
        record: Record::Poison {
            cause: poison.cause.poison_cause().cloned(),
            attempts: poison.attempts,
            original_queue: poison.original_queue.clone(),
        },
        on_failure: OnWriteFailure::Leave(Unsettle::Rewind),
    };
    if poison.always_dead_lettered {
        return dead_letter();
    }
    if policy.on_unknown_urn == UnknownUrn::Delete {
        return Plan::Drop(DropReason::PoisonDeleted {
            cause: poison.cause.to_string(),
        });
    }
    if policy.dlq_on() {
        return dead_letter();
    }
    if facts.native_settler {
        return Plan::Native {
            reason: "poison",
            description: format!(
                "the body does not decode into a valid envelope: {}",
                poison.cause
            ),
        };
    }
    if !facts.can_redeliver {
        return Plan::Drop(DropReason::PoisonCannotRetry);
    }
    bounded_retry(policy, poison.attempts, sampler)
}

/// The delay of retry `counted` under the policy's back-off; `None` when no back-off is
/// configured (a zero base).
fn backoff(policy: &Policy, counted: i64, sampler: Sampler<'_>) -> Option<Duration> {
    (policy.backoff.base > 0.0)
        .then(|| crate::policy::seconds_to_duration(policy.backoff.seconds_with(counted, sampler)))
}

fn bounded_retry(policy: &Policy, attempts: i64, sampler: Sampler<'_>) -> Plan {
    let counted = attempts.saturating_add(1);
    if counted < policy.max_attempts {
        Plan::Release {
            body: ReleaseBody::Bare(counted),
            delay: backoff(policy, counted, sampler),
        }
    } else {
        Plan::Drop(DropReason::RetriesExhausted { attempts: counted })
    }
}

/// A delivery the transport's schema-version gate rejected. Decided on the first delivery,
/// whatever the attempts say; never decoded, never retried.
pub fn gated(policy: &Policy, facts: &QueueFacts) -> Plan {
    if policy.on_unknown_urn == UnknownUrn::Delete {
        return Plan::Ack;
    }
    if policy.dlq_on() {
        return Plan::DeadLetter {
            queue: facts.dead_letter_queue.clone(),
            record: Record::Gated,
            on_failure: OnWriteFailure::Leave(Unsettle::AbandonOrRewind),
        };
    }
    if facts.native_settler {
        return Plan::Native {
            reason: "unsupported schema version",
            description: "the message declares a schema version this consumer does not support"
                .to_owned(),
        };
    }
    Plan::Drop(DropReason::Undeliverable)
}

#[cfg(test)]
mod tests;
