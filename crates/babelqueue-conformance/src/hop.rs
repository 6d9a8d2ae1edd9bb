//! The two re-emit paths the suite exercises, run through the real runtime on `memory://`:
//! the retry hop (a handler that always fails, an unreachable `max_attempts`, and the body the
//! runtime re-publishes), and the dead-letter copy the runtime writes once retries run out.

use std::time::Duration;

use babelqueue_core::{
    App, Consume, Context, Envelope, HandlerError, MemoryTransport, Transport, UnknownUrn,
};

const QUEUE: &str = "conformance";

pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

async fn run_once(app: &App, memory: &MemoryTransport, body: &[u8]) -> Result<(), String> {
    memory
        .publish(QUEUE, body)
        .await
        .map_err(|e| e.to_string())?;
    let summary = app
        .consume(Consume::new().max_messages(1).handle_signals(false))
        .await
        .map_err(|e| e.to_string())?;
    if summary.processed == 1 {
        Ok(())
    } else {
        Err(format!(
            "the runtime settled {} deliveries, expected 1",
            summary.processed
        ))
    }
}

fn failing(memory: &MemoryTransport, max_attempts: i64, dead_letter: bool) -> Result<App, String> {
    App::builder(memory.clone())
        .queue(QUEUE)
        .max_attempts(max_attempts)
        .dead_letter(dead_letter)
        .poll_timeout(Duration::from_millis(10))
        .build()
        .map_err(|e| e.to_string())
}

/// decode → attempts + 1 → encode, as the runtime's retry path does it.
pub(crate) fn retry(body: &[u8]) -> Result<Vec<u8>, String> {
    block_on(async {
        let memory = MemoryTransport::new();
        let urn = Envelope::decode_lenient(body).envelope.urn().into_owned();
        let app = App::builder(memory.clone())
            .queue(QUEUE)
            .max_attempts(1_000_000)
            .poll_timeout(Duration::from_millis(10))
            .handle(urn, |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("conformance retry hop"))
            })
            .build()
            .map_err(|e| e.to_string())?;
        run_once(&app, &memory, body).await?;
        let mut bodies = memory.bodies(QUEUE);
        if bodies.len() != 1 {
            return Err(format!(
                "expected one re-published body, found {}",
                bodies.len()
            ));
        }
        Ok(bodies.remove(0))
    })
}

/// The dead-letter copy the runtime writes when this delivery exhausts its attempts.
pub(crate) fn dead_letter(
    body: &[u8],
    why: &str,
    _original_queue: &str,
) -> Result<Vec<u8>, String> {
    block_on(async {
        let memory = MemoryTransport::new();
        let envelope = Envelope::decode_lenient(body).envelope;
        let max = envelope.attempts().saturating_add(1);
        let app = match why {
            "failed" => App::builder(memory.clone())
                .queue(QUEUE)
                .max_attempts(max)
                .dead_letter(true)
                .poll_timeout(Duration::from_millis(10))
                .handle(envelope.urn().into_owned(), |_ctx: Context| async {
                    Err::<(), _>(
                        HandlerError::new("conformance failure").with_exception("ConformanceError"),
                    )
                })
                .build()
                .map_err(|e| e.to_string())?,
            "unknown_urn" => {
                let _ = UnknownUrn::Fail;
                failing(&memory, max, true)?
            }
            other => {
                return Err(format!(
                    "the runtime writes no annotated record for reason {other:?}"
                ));
            }
        };
        run_once(&app, &memory, body).await?;
        let mut records = memory.bodies(&format!("{QUEUE}.dlq"));
        if records.len() != 1 {
            return Err(format!(
                "expected one dead-letter record, found {}",
                records.len()
            ));
        }
        Ok(records.remove(0))
    })
}
