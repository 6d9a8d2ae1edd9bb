//! The two re-emit paths the suite exercises, computed with the runtime's own pure steps
//! (classify → decide → render, the functions `babelqueue-core` runs for every delivery), with
//! no transport and no `App`: the retry hop (a failing handler, an unreachable `max_attempts`)
//! and the dead-letter copy written once retries run out.

use babelqueue_core::classify::{Class, classify};
use babelqueue_core::decide::{self, Failure, Plan, QueueFacts};
use babelqueue_core::{Action, Envelope, Facts, Policy, UnknownUrn};

const QUEUE: &str = "conformance";

pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

fn queue_facts() -> QueueFacts {
    QueueFacts {
        queue: QUEUE.to_owned(),
        dead_letter_queue: format!("{QUEUE}.dlq"),
        native_settler: false,
        can_redeliver: true,
    }
}

/// The readable envelope of `body`, as the runtime classifies it.
fn readable(body: &[u8]) -> Result<(Vec<u8>, Envelope), String> {
    match classify(body, &Facts::default(), QUEUE) {
        Class::Readable { body, envelope, .. } => Ok((body.into_owned(), envelope)),
        Class::Poison(p) => Err(format!("the body is poison: {}", p.cause)),
        Class::Gated { declared } => Err(format!("the body is gated ({declared})")),
    }
}

fn no_jitter(_: f64, high: f64) -> f64 {
    high
}

/// decode → attempts + 1 → encode, as the runtime's retry path does it.
pub(crate) fn retry(body: &[u8]) -> Result<Vec<u8>, String> {
    let (reconciled, envelope) = readable(body)?;
    let policy = Policy {
        max_attempts: 1_000_000,
        ..Policy::default()
    };
    let failure = Failure {
        message: "conformance retry hop".to_owned(),
        exception: "HandlerError".to_owned(),
        action: Action::Retry,
        unknown_urn: false,
    };
    match decide::failure(
        &policy,
        &queue_facts(),
        envelope.attempts(),
        &failure,
        &mut no_jitter,
    ) {
        Plan::Release { body: release, .. } => release
            .render(&reconciled, Some(&envelope))
            .map_err(|e| e.to_string()),
        other => Err(format!("the runtime planned {other:?}, expected a release")),
    }
}

/// The dead-letter copy the runtime writes when this delivery exhausts its attempts.
pub(crate) fn dead_letter(
    body: &[u8],
    why: &str,
    _original_queue: &str,
) -> Result<Vec<u8>, String> {
    let (reconciled, envelope) = readable(body)?;
    let policy = Policy {
        max_attempts: envelope.attempts().saturating_add(1),
        dead_letter: true,
        on_unknown_urn: UnknownUrn::Fail,
        ..Policy::default()
    };
    let facts = queue_facts();
    let attempts = envelope.attempts();
    let plan = match why {
        "failed" => {
            let failure = Failure {
                message: "conformance failure".to_owned(),
                exception: "ConformanceError".to_owned(),
                action: Action::Retry,
                unknown_urn: false,
            };
            decide::failure(&policy, &facts, attempts, &failure, &mut no_jitter)
        }
        "unknown_urn" => {
            decide::unknown_urn(&policy, &facts, &envelope.urn(), attempts, &mut no_jitter)
        }
        other => {
            return Err(format!(
                "the runtime writes no annotated record for reason {other:?}"
            ));
        }
    };
    match plan {
        Plan::DeadLetter { record, .. } => record
            .render(
                &reconciled,
                Some(&envelope),
                QUEUE,
                babelqueue_core::envelope::now_millis(),
            )
            .map_err(|e| e.to_string()),
        other => Err(format!(
            "the runtime planned {other:?}, expected a dead-letter"
        )),
    }
}
