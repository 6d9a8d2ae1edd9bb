//! The decision tables: from the facts of one delivery to a settle [`Plan`].
//!
//! Every rule about retries, poison bodies, unknown URNs and the schema-version gate lives
//! here, as pure functions (no I/O, no clock; jitter comes from the sampler passed in). The
//! runtime gathers the facts, asks these functions, and carries out the plan through the
//! transport's capabilities; transports never decide.

use std::time::Duration;

use babelqueue_envelope::{Envelope, Reason};

use crate::handler::Action;
use crate::policy::{Policy, UnknownUrn};
use crate::transport::{DeadLetterNamer, TransportPoison};

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
        /// How long it stays invisible (honoured by transports that release natively).
        delay: Duration,
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
    /// A transport-classified poison record, dead-lettering off, and the transport cannot
    /// redeliver (Kafka without retry tiers): degrade to delete.
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

/// The record a dead-letter write carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// The decoded envelope with a `dead_letter` block.
    Annotated {
        /// `failed`, `unknown_urn` or `poison` (rejected by its handler).
        reason: Reason,
        /// `attempts` of the copy and of the block.
        attempts: i64,
        /// The failure's message and type name, when there was a failure.
        error: Option<(String, String)>,
    },
    /// The incoming body, byte-identical, no block (a version-gated delivery).
    Raw,
    /// The ADR-0035 poison record (byte-level splice, else a `raw` wrapper).
    Poison {
        /// The attempts counted for the poison body.
        attempts: i64,
        /// Why it is poison (`None`: the block says only `Undecodable BabelQueue body`).
        cause: Option<String>,
        /// The block's `original_queue`.
        original_queue: String,
    },
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

/// The facts about the consumed queue and the transport the tables read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The queue the delivery was consumed from.
    pub queue: String,
    /// The dead-letter queue for it ([`dead_letter_queue`]).
    pub dead_letter_queue: String,
    /// Whether the transport can settle natively ([`NativeSettler`](crate::NativeSettler)).
    pub native_settler: bool,
    /// Whether the transport can redeliver (`false` for Kafka without retry tiers).
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

/// Deliveries a poison body has had: the larger of the broker's count and the integer
/// `attempts` of the body (a bare `{"attempts":N}` a previous retry left), never below 0.
pub fn poison_attempts(native_attempts: i64, body: &[u8]) -> i64 {
    let body_attempts = Envelope::parse_object(body)
        .ok()
        .and_then(|e| e.get("attempts").and_then(|a| a.as_i64()))
        .unwrap_or(0);
    native_attempts.max(body_attempts).max(0)
}

/// A handler failed (or an unknown URN takes the `fail` strategy) on a delivery whose envelope
/// carried `attempts_before`.
///
/// A negative `attempts_before` counts as 0: a negative count is a valid envelope (not poison),
/// but it must not buy extra deliveries (`-5` under `max_attempts` 3 would otherwise run the
/// handler eight times, and `i64::MIN` would never reach the dead-letter queue).
pub fn failure(
    policy: &Policy,
    facts: &Facts,
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
            Action::RetryAfter(delay) => delay,
            _ => crate::policy::seconds_to_duration(policy.backoff.seconds_with(counted, sampler)),
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
    facts: &Facts,
    urn: &str,
    attempts_before: i64,
    sampler: Sampler<'_>,
) -> Plan {
    match policy.on_unknown_urn {
        UnknownUrn::Delete => Plan::Ack,
        UnknownUrn::Release if !urn.is_empty() => Plan::Release {
            body: ReleaseBody::Unchanged,
            delay: policy.unknown_urn_release_delay,
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

/// A body that is not a readable envelope (classified by the runtime), delivered
/// `poison_attempts` times before (see [`poison_attempts`]).
pub fn poison(
    policy: &Policy,
    facts: &Facts,
    poison_attempts: i64,
    cause: &str,
    sampler: Sampler<'_>,
) -> Plan {
    if policy.on_unknown_urn == UnknownUrn::Delete {
        return Plan::Drop(DropReason::PoisonDeleted {
            cause: cause.to_owned(),
        });
    }
    if policy.dlq_on() {
        return Plan::DeadLetter {
            queue: facts.dead_letter_queue.clone(),
            record: Record::Poison {
                attempts: poison_attempts,
                cause: Some(cause.to_owned()),
                original_queue: facts.queue.clone(),
            },
            on_failure: OnWriteFailure::Leave(Unsettle::Rewind),
        };
    }
    if facts.native_settler {
        return Plan::Native {
            reason: "poison",
            description: format!("the body does not decode into a valid envelope: {cause}"),
        };
    }
    bounded_retry(policy, poison_attempts, sampler)
}

fn bounded_retry(policy: &Policy, attempts: i64, sampler: Sampler<'_>) -> Plan {
    let counted = attempts.saturating_add(1);
    if counted < policy.max_attempts {
        let delay =
            crate::policy::seconds_to_duration(policy.backoff.seconds_with(counted, sampler));
        Plan::Release {
            body: ReleaseBody::Bare(counted),
            delay,
        }
    } else {
        Plan::Drop(DropReason::RetriesExhausted { attempts: counted })
    }
}

/// A delivery the transport's schema-version gate rejected. Decided on the first delivery,
/// whatever the attempts say; never decoded, never retried.
pub fn gated(policy: &Policy, facts: &Facts) -> Plan {
    if policy.on_unknown_urn == UnknownUrn::Delete {
        return Plan::Ack;
    }
    if policy.dlq_on() {
        return Plan::DeadLetter {
            queue: facts.dead_letter_queue.clone(),
            record: Record::Raw,
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

/// A poison record a poison-classifying transport handed over (Kafka).
pub fn transport_poison(
    policy: &Policy,
    facts: &Facts,
    poison: &TransportPoison,
    sampler: Sampler<'_>,
) -> Plan {
    if policy.on_unknown_urn == UnknownUrn::Delete {
        return Plan::Drop(DropReason::PoisonDeleted {
            cause: poison.cause.clone(),
        });
    }
    if policy.dlq_on() {
        return Plan::DeadLetter {
            queue: facts.dead_letter_queue.clone(),
            record: Record::Poison {
                attempts: poison.attempts,
                cause: Some(poison.cause.clone()),
                original_queue: poison.original_queue.clone(),
            },
            on_failure: OnWriteFailure::Leave(Unsettle::Rewind),
        };
    }
    if !facts.can_redeliver {
        return Plan::Drop(DropReason::PoisonCannotRetry);
    }
    bounded_retry(policy, poison.attempts, sampler)
}

/// A Redis reservation whose body is poison: dead-lettered in every configuration (neither
/// `delete` nor dead-lettering off drops it).
pub fn non_numeric_attempts(facts: &Facts) -> Plan {
    Plan::DeadLetter {
        queue: facts.dead_letter_queue.clone(),
        record: Record::Poison {
            attempts: 0,
            cause: None,
            original_queue: facts.queue.clone(),
        },
        on_failure: OnWriteFailure::Leave(Unsettle::Rewind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Backoff, Jitter};

    fn facts(native: bool) -> Facts {
        Facts {
            queue: "orders".into(),
            dead_letter_queue: "orders.dlq".into(),
            native_settler: native,
            can_redeliver: true,
        }
    }

    fn policy(strategy: UnknownUrn, dead_letter: bool) -> Policy {
        Policy {
            on_unknown_urn: strategy,
            dead_letter,
            ..Policy::default()
        }
    }

    fn no_jitter(_: f64, high: f64) -> f64 {
        high
    }

    fn handler_failure() -> Failure {
        Failure {
            message: "boom".into(),
            exception: "RuntimeError".into(),
            action: Action::Retry,
            unknown_urn: false,
        }
    }

    #[test]
    fn retry_then_dead_letter_then_drop() {
        let p = Policy {
            backoff: Backoff {
                base: 0.5,
                multiplier: 3.0,
                max: 0.0,
                jitter: Jitter::None,
            },
            ..policy(UnknownUrn::Fail, true)
        };
        let f = facts(false);
        assert_eq!(
            failure(&p, &f, 0, &handler_failure(), &mut no_jitter),
            Plan::Release {
                body: ReleaseBody::Counted(1),
                delay: Duration::from_millis(500)
            }
        );
        assert_eq!(
            failure(&p, &f, 1, &handler_failure(), &mut no_jitter),
            Plan::Release {
                body: ReleaseBody::Counted(2),
                delay: Duration::from_millis(1500)
            }
        );
        assert_eq!(
            failure(&p, &f, 2, &handler_failure(), &mut no_jitter),
            Plan::DeadLetter {
                queue: "orders.dlq".into(),
                record: Record::Annotated {
                    reason: Reason::Failed,
                    attempts: 3,
                    error: Some(("boom".into(), "RuntimeError".into()))
                },
                on_failure: OnWriteFailure::Leave(Unsettle::Rewind),
            }
        );
        let off = policy(UnknownUrn::Fail, false);
        assert_eq!(
            failure(&off, &f, 2, &handler_failure(), &mut no_jitter),
            Plan::Drop(DropReason::RetriesExhausted { attempts: 3 })
        );
        // max_attempts 1 (or 0): the first failure is final.
        let once = Policy {
            max_attempts: 1,
            ..policy(UnknownUrn::Fail, true)
        };
        assert!(matches!(
            failure(&once, &f, 0, &handler_failure(), &mut no_jitter),
            Plan::DeadLetter { .. }
        ));
        // Saturating count.
        assert_eq!(
            failure(&off, &f, i64::MAX, &handler_failure(), &mut no_jitter),
            Plan::Drop(DropReason::RetriesExhausted { attempts: i64::MAX })
        );
    }

    #[test]
    fn negative_attempts_count_as_zero_on_the_retry_path() {
        let p = policy(UnknownUrn::Fail, true);
        let f = facts(false);
        for before in [-1, -5, i64::MIN] {
            assert_eq!(
                failure(&p, &f, before, &handler_failure(), &mut no_jitter),
                Plan::Release {
                    body: ReleaseBody::Counted(1),
                    delay: Duration::ZERO
                },
                "{before}"
            );
        }
        let once = Policy {
            max_attempts: 1,
            ..policy(UnknownUrn::Fail, false)
        };
        for before in [-5, i64::MIN] {
            assert_eq!(
                failure(&once, &f, before, &handler_failure(), &mut no_jitter),
                Plan::Drop(DropReason::RetriesExhausted { attempts: 1 }),
                "{before}: the first failure is final at max_attempts 1"
            );
            assert_eq!(
                unknown_urn(&once, &f, "urn:x", before, &mut no_jitter),
                Plan::Drop(DropReason::RetriesExhausted { attempts: 1 }),
            );
        }
    }

    #[test]
    fn handler_outcomes() {
        let p = policy(UnknownUrn::Fail, true);
        let later = Failure {
            action: Action::RetryAfter(Duration::from_secs(9)),
            ..handler_failure()
        };
        assert_eq!(
            failure(&p, &facts(false), 0, &later, &mut no_jitter),
            Plan::Release {
                body: ReleaseBody::Counted(1),
                delay: Duration::from_secs(9)
            }
        );
        let reject = Failure {
            action: Action::Reject,
            ..handler_failure()
        };
        assert!(matches!(
            failure(&p, &facts(false), 0, &reject, &mut no_jitter),
            Plan::DeadLetter {
                record: Record::Annotated {
                    reason: Reason::Poison,
                    attempts: 1,
                    ..
                },
                ..
            }
        ));
        let off = policy(UnknownUrn::Fail, false);
        assert!(matches!(
            failure(&off, &facts(true), 0, &reject, &mut no_jitter),
            Plan::Native {
                reason: "rejected",
                ..
            }
        ));
        assert!(matches!(
            failure(&off, &facts(false), 0, &reject, &mut no_jitter),
            Plan::Drop(DropReason::Rejected { .. })
        ));
    }

    #[test]
    fn unknown_urn_strategies() {
        let f = facts(false);
        assert_eq!(
            unknown_urn(
                &policy(UnknownUrn::Delete, true),
                &f,
                "urn:x",
                0,
                &mut no_jitter
            ),
            Plan::Ack
        );
        assert_eq!(
            unknown_urn(
                &Policy {
                    unknown_urn_release_delay: Duration::from_secs(2),
                    ..policy(UnknownUrn::Release, false)
                },
                &f,
                "urn:x",
                4,
                &mut no_jitter
            ),
            Plan::Release {
                body: ReleaseBody::Unchanged,
                delay: Duration::from_secs(2)
            }
        );
        // release with an empty URN falls to the fail path
        assert_eq!(
            unknown_urn(
                &policy(UnknownUrn::Release, false),
                &f,
                "",
                0,
                &mut no_jitter
            ),
            Plan::Release {
                body: ReleaseBody::Counted(1),
                delay: Duration::ZERO
            }
        );
        assert_eq!(
            unknown_urn(
                &policy(UnknownUrn::DeadLetter, false),
                &f,
                "urn:x",
                4,
                &mut no_jitter
            ),
            Plan::DeadLetter {
                queue: "orders.dlq".into(),
                record: Record::Annotated {
                    reason: Reason::UnknownUrn,
                    attempts: 4,
                    error: None
                },
                on_failure: OnWriteFailure::Fail,
            }
        );
        let Plan::DeadLetter {
            record:
                Record::Annotated {
                    reason,
                    error: Some((message, exception)),
                    ..
                },
            ..
        } = unknown_urn(
            &policy(UnknownUrn::Fail, true),
            &f,
            "urn:x",
            2,
            &mut no_jitter,
        )
        else {
            panic!("fail exhausts into the DLQ")
        };
        assert_eq!(
            (reason, message.as_str(), exception.as_str()),
            (
                Reason::UnknownUrn,
                "No handler mapped for URN [urn:x].",
                "UnknownUrnError"
            )
        );
    }

    /// The poison table (runtime-classified bodies).
    #[test]
    fn poison_table() {
        let with_native = facts(true);
        let plain = facts(false);
        for strategy in [
            UnknownUrn::Fail,
            UnknownUrn::Release,
            UnknownUrn::DeadLetter,
            UnknownUrn::Delete,
        ] {
            for dead_letter in [true, false] {
                for f in [&with_native, &plain] {
                    let p = policy(strategy, dead_letter);
                    let plan = poison(&p, f, 0, "cause", &mut no_jitter);
                    let want = if strategy == UnknownUrn::Delete {
                        "drop"
                    } else if dead_letter || strategy == UnknownUrn::DeadLetter {
                        "dlq"
                    } else if f.native_settler {
                        "native"
                    } else {
                        "retry"
                    };
                    let got = match plan {
                        Plan::Drop(DropReason::PoisonDeleted { .. }) => "drop",
                        Plan::DeadLetter {
                            record: Record::Poison { original_queue, .. },
                            ..
                        } if original_queue == "orders" => "dlq",
                        Plan::Native {
                            reason: "poison", ..
                        } => "native",
                        Plan::Release {
                            body: ReleaseBody::Bare(1),
                            ..
                        } => "retry",
                        other => panic!("{other:?}"),
                    };
                    assert_eq!(
                        got, want,
                        "{strategy} dlq={dead_letter} native={}",
                        f.native_settler
                    );
                }
            }
        }
        // bounded: delivered exactly max_attempts times
        let p = policy(UnknownUrn::Fail, false);
        assert!(matches!(
            poison(&p, &plain, 1, "c", &mut no_jitter),
            Plan::Release {
                body: ReleaseBody::Bare(2),
                ..
            }
        ));
        assert_eq!(
            poison(&p, &plain, 2, "c", &mut no_jitter),
            Plan::Drop(DropReason::RetriesExhausted { attempts: 3 })
        );
    }

    /// The version-gate table (V-4), every row.
    #[test]
    fn gate_table() {
        for strategy in [
            UnknownUrn::Fail,
            UnknownUrn::Release,
            UnknownUrn::DeadLetter,
            UnknownUrn::Delete,
        ] {
            for dead_letter in [true, false] {
                for native in [true, false] {
                    let plan = gated(&policy(strategy, dead_letter), &facts(native));
                    let want = if strategy == UnknownUrn::Delete {
                        "ack"
                    } else if dead_letter || strategy == UnknownUrn::DeadLetter {
                        "dlq_raw"
                    } else if native {
                        "native"
                    } else {
                        "drop"
                    };
                    let got = match plan {
                        Plan::Ack => "ack",
                        Plan::DeadLetter {
                            record: Record::Raw,
                            on_failure: OnWriteFailure::Leave(Unsettle::AbandonOrRewind),
                            ..
                        } => "dlq_raw",
                        Plan::Native {
                            reason: "unsupported schema version",
                            ..
                        } => "native",
                        Plan::Drop(DropReason::Undeliverable) => "drop",
                        other => panic!("{other:?}"),
                    };
                    assert_eq!(got, want, "{strategy} dlq={dead_letter} native={native}");
                }
            }
        }
    }

    #[test]
    fn transport_poison_and_non_numeric() {
        let tp = TransportPoison {
            attempts: 1,
            cause: "not utf-8".into(),
            original_queue: "orders".into(),
        };
        let no_tiers = Facts {
            can_redeliver: false,
            ..facts(false)
        };
        assert_eq!(
            transport_poison(
                &policy(UnknownUrn::Fail, false),
                &no_tiers,
                &tp,
                &mut no_jitter
            ),
            Plan::Drop(DropReason::PoisonCannotRetry)
        );
        assert!(matches!(
            transport_poison(
                &policy(UnknownUrn::Fail, false),
                &facts(false),
                &tp,
                &mut no_jitter
            ),
            Plan::Release {
                body: ReleaseBody::Bare(2),
                ..
            }
        ));
        assert!(matches!(
            transport_poison(
                &policy(UnknownUrn::Fail, true),
                &no_tiers,
                &tp,
                &mut no_jitter
            ),
            Plan::DeadLetter {
                record: Record::Poison { attempts: 1, .. },
                ..
            }
        ));
        assert!(matches!(
            transport_poison(
                &policy(UnknownUrn::Delete, true),
                &facts(false),
                &tp,
                &mut no_jitter
            ),
            Plan::Drop(DropReason::PoisonDeleted { .. })
        ));
        assert!(matches!(
            non_numeric_attempts(&facts(false)),
            Plan::DeadLetter {
                record: Record::Poison {
                    attempts: 0,
                    cause: None,
                    ..
                },
                ..
            }
        ));
    }

    #[test]
    fn dead_letter_queue_naming() {
        struct Sqs;
        impl DeadLetterNamer for Sqs {
            fn dead_letter_queue_name(&self, queue: &str, suffix: Option<&str>) -> String {
                format!("{queue}{}", suffix.unwrap_or("-dlq"))
            }
        }
        let p = Policy::default();
        assert_eq!(dead_letter_queue(&p, "orders", None), "orders.dlq");
        assert_eq!(dead_letter_queue(&p, "orders", Some(&Sqs)), "orders-dlq");
        let suffixed = Policy {
            dead_letter_suffix: Some(".dead".into()),
            ..Policy::default()
        };
        assert_eq!(dead_letter_queue(&suffixed, "orders", None), "orders.dead");
        let explicit = Policy {
            dead_letter_queue: Some("all.dlq".into()),
            ..Policy::default()
        };
        assert_eq!(
            dead_letter_queue(&explicit, "orders", Some(&Sqs)),
            "all.dlq"
        );
    }

    #[test]
    fn poison_attempt_count() {
        assert_eq!(poison_attempts(0, b"not json"), 0);
        assert_eq!(poison_attempts(2, b"{\"attempts\":1}"), 2);
        assert_eq!(poison_attempts(0, b"{\"attempts\":4}"), 4);
        assert_eq!(poison_attempts(0, b"{\"attempts\":true}"), 0);
        assert_eq!(poison_attempts(0, b"{\"attempts\":-3}"), 0);
    }
}
