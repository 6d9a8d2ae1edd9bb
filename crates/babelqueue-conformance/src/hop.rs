//! The two re-emit paths the suite exercises: the retry hop (decode → attempts + 1 → encode) and
//! the dead-letter copy a worker writes when retries run out.

use babelqueue_envelope::{DeadLetter, Envelope, Reason};

fn reason(text: &str) -> Result<Reason, String> {
    match text {
        "failed" => Ok(Reason::Failed),
        "unknown_urn" => Ok(Reason::UnknownUrn),
        "poison" => Ok(Reason::Poison),
        other => Err(format!("unknown dead-letter reason {other:?}")),
    }
}

/// decode → attempts + 1 → encode.
pub(crate) fn retry(body: &[u8]) -> Result<Vec<u8>, String> {
    let mut envelope = Envelope::decode_lenient(body).envelope;
    envelope.set_attempts(envelope.attempts().saturating_add(1));
    envelope
        .encode()
        .map(String::into_bytes)
        .map_err(|e| e.to_string())
}

/// The dead-letter copy after one more failed delivery.
pub(crate) fn dead_letter(body: &[u8], why: &str, original_queue: &str) -> Result<Vec<u8>, String> {
    let mut envelope = Envelope::decode_lenient(body).envelope;
    let attempts = envelope.attempts().saturating_add(1);
    envelope.set_attempts(attempts);
    let block = DeadLetter::now(reason(why)?, original_queue, attempts)
        .with_error("conformance runner failure", "ConformanceError");
    envelope
        .annotate(&block)
        .encode()
        .map(String::into_bytes)
        .map_err(|e| e.to_string())
}
