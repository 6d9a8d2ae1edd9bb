//! The decision tables, row by row.

use super::*;
use crate::classify::Cause;
use crate::policy::{Backoff, Jitter};
use babelqueue_envelope::PoisonCause;

fn body_poison(attempts: i64) -> Poison {
    Poison {
        cause: Cause::Body(PoisonCause::NoIdentity),
        attempts,
        original_queue: "orders".into(),
        always_dead_lettered: false,
    }
}

fn facts(native: bool) -> QueueFacts {
    QueueFacts {
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
            delay: Some(Duration::from_millis(500))
        }
    );
    assert_eq!(
        failure(&p, &f, 1, &handler_failure(), &mut no_jitter),
        Plan::Release {
            body: ReleaseBody::Counted(2),
            delay: Some(Duration::from_millis(1500))
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
                delay: None
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
            delay: Some(Duration::from_secs(9))
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
            delay: Some(Duration::from_secs(2))
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
            delay: None
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
                let plan = poison(&p, f, &body_poison(0), &mut no_jitter);
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
        poison(&p, &plain, &body_poison(1), &mut no_jitter),
        Plan::Release {
            body: ReleaseBody::Bare(2),
            ..
        }
    ));
    assert_eq!(
        poison(&p, &plain, &body_poison(2), &mut no_jitter),
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
                        record: Record::Gated,
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
fn poison_that_cannot_retry_or_must_be_dead_lettered() {
    let no_tiers = QueueFacts {
        can_redeliver: false,
        ..facts(false)
    };
    let p = Poison {
        attempts: 1,
        original_queue: "orders.retry".into(),
        ..body_poison(1)
    };
    assert_eq!(
        poison(
            &policy(UnknownUrn::Fail, false),
            &no_tiers,
            &p,
            &mut no_jitter
        ),
        Plan::Drop(DropReason::PoisonCannotRetry)
    );
    assert!(matches!(
        poison(&policy(UnknownUrn::Fail, true), &no_tiers, &p, &mut no_jitter),
        Plan::DeadLetter {
            record: Record::Poison { attempts: 1, ref original_queue, cause: Some(PoisonCause::NoIdentity) },
            ..
        } if original_queue == "orders.retry"
    ));
    // Redis: dead-lettered in every configuration, delete and dead-lettering off included.
    let always = Poison {
        cause: Cause::NotCounted,
        attempts: 0,
        always_dead_lettered: true,
        ..p.clone()
    };
    for strategy in [UnknownUrn::Delete, UnknownUrn::Fail] {
        assert!(matches!(
            poison(
                &policy(strategy, false),
                &facts(false),
                &always,
                &mut no_jitter
            ),
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
