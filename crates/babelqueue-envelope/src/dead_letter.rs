//! Dead-letter records.
//!
//! Three shapes reach a dead-letter queue, one [`Record`] kind each, and this module builds
//! every one of them (the runtime, the CLI and the conformance runner all come here):
//!
//! * [`Record::Annotated`]: a decodable message that failed (or has no handler, or was
//!   rejected by its handler): the decoded envelope with `attempts` set and a `dead_letter`
//!   block appended ([`annotated_record`]);
//! * [`Record::Gated`]: a message rejected by the schema-version gate: the incoming body, byte
//!   for byte, with no block;
//! * [`Record::Poison`]: a poison body: the ADR-0035 record ([`poison_record`]), a byte-level
//!   splice of the block into a strict JSON object, else `{"raw": …, "dead_letter": …}` (base64
//!   plus `"raw_encoding":"base64"` when the bytes are not UTF-8; never U+FFFD).
//!
//! Which record a delivery gets is the runtime's decision; the bytes are built here.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;

use crate::json::scan::is_json_ws;
use crate::json::{RawJson, write};
use crate::{Envelope, Error, PoisonCause, SOURCE_LANG};

/// Why a message was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The handler failed until the attempts ran out.
    Failed,
    /// No handler is registered for the URN.
    UnknownUrn,
    /// The body is not a readable envelope.
    Poison,
}

impl Reason {
    /// The wire value: `failed`, `unknown_urn` or `poison`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Failed => "failed",
            Reason::UnknownUrn => "unknown_urn",
            Reason::Poison => "poison",
        }
    }
}

/// The `dead_letter` block: `reason`, `error`, `exception`, `failed_at`, `original_queue`,
/// `attempts`, `lang`, always all seven, in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Why.
    pub reason: Reason,
    /// The failure's message (`null` when there is none).
    pub error: Option<String>,
    /// The failure's type name (`null` when there is none).
    pub exception: Option<String>,
    /// When, in epoch milliseconds.
    pub failed_at: i64,
    /// The queue the message came from.
    pub original_queue: String,
    /// The attempts counted when it was dead-lettered.
    pub attempts: i64,
    /// The SDK that wrote the block (`"rust"`).
    pub lang: String,
}

impl DeadLetter {
    /// A block with no error text, stamped `failed_at` = `failed_at_millis`.
    pub fn new(
        reason: Reason,
        original_queue: impl Into<String>,
        attempts: i64,
        failed_at_millis: i64,
    ) -> Self {
        DeadLetter {
            reason,
            error: None,
            exception: None,
            failed_at: failed_at_millis,
            original_queue: original_queue.into(),
            attempts,
            lang: String::from(SOURCE_LANG),
        }
    }

    /// A block stamped with the current time.
    #[cfg(feature = "std")]
    pub fn now(reason: Reason, original_queue: impl Into<String>, attempts: i64) -> Self {
        DeadLetter::new(reason, original_queue, attempts, crate::now_millis())
    }

    /// Sets the failure's message and type name.
    #[must_use]
    pub fn with_error(mut self, error: impl Into<String>, exception: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self.exception = Some(exception.into());
        self
    }

    /// The block for a poison body: reason `poison`, error `Undecodable BabelQueue body: <cause>`
    /// (only `Undecodable BabelQueue body` when the cause is not a body defect, such as an
    /// attempt the broker could not count), exception `BabelQueueError`.
    pub fn poison(
        cause: Option<&PoisonCause>,
        original_queue: impl Into<String>,
        attempts: i64,
        failed_at_millis: i64,
    ) -> Self {
        let mut error = String::from("Undecodable BabelQueue body");
        if let Some(cause) = cause {
            error.push_str(": ");
            error.push_str(&crate::verdict::cause_text(cause));
        }
        DeadLetter::new(Reason::Poison, original_queue, attempts, failed_at_millis)
            .with_error(error, "BabelQueueError")
    }

    /// The compact JSON text of the block.
    pub fn to_raw(&self) -> RawJson {
        let mut out = String::with_capacity(160);
        self.write_into(&mut out);
        // The block is built from valid pieces; parsing it back only records its kind.
        RawJson::parse(&out).unwrap_or_else(|_| RawJson::empty_object())
    }

    fn write_into(&self, out: &mut String) {
        let optional = |out: &mut String, value: &Option<String>| match value {
            Some(text) => write::push_string(out, text),
            None => out.push_str("null"),
        };
        out.push_str("{\"reason\":");
        write::push_string(out, self.reason.as_str());
        out.push_str(",\"error\":");
        optional(out, &self.error);
        out.push_str(",\"exception\":");
        optional(out, &self.exception);
        out.push_str(",\"failed_at\":");
        out.push_str(&alloc::string::ToString::to_string(&self.failed_at));
        out.push_str(",\"original_queue\":");
        write::push_string(out, &self.original_queue);
        out.push_str(",\"attempts\":");
        out.push_str(&alloc::string::ToString::to_string(&self.attempts));
        out.push_str(",\"lang\":");
        write::push_string(out, &self.lang);
        out.push('}');
    }
}

impl Envelope {
    /// A copy of this envelope with `block` as its `dead_letter` member (replacing an existing
    /// one in place, else appended last). Identity, `data`, `meta` and unknown members are kept.
    pub fn annotate(&self, block: &DeadLetter) -> Envelope {
        let mut copy = self.clone();
        copy.set("dead_letter", block.to_raw());
        copy
    }
}

/// The dead-letter record for a poison body (ADR-0035).
///
/// ```
/// use babelqueue_envelope::{DeadLetter, Reason, poison_record};
///
/// let block = DeadLetter::new(Reason::Poison, "orders", 0, 1_750_000_000_000);
/// let spliced = poison_record(b" {\"n\":1e400} ", &block);
/// assert!(spliced.starts_with(b"{\"n\":1e400,\"dead_letter\":{\"reason\":\"poison\""));
///
/// let wrapped = poison_record(b"not json", &block);
/// assert!(wrapped.starts_with(b"{\"raw\":\"not json\",\"dead_letter\":"));
///
/// let base64 = poison_record(&[0xff, 0xfe], &block);
/// assert!(base64.starts_with(b"{\"raw\":\"//4=\",\"raw_encoding\":\"base64\",\"dead_letter\":"));
/// ```
pub fn poison_record(body: &[u8], block: &DeadLetter) -> Vec<u8> {
    let mut block_text = String::with_capacity(192);
    block.write_into(&mut block_text);
    let mut out = String::with_capacity(body.len() + block_text.len() + 32);
    match core::str::from_utf8(body) {
        Ok(text) if crate::is_spliceable(body) => {
            let trimmed = text.trim_matches(|c: char| c.is_ascii() && is_json_ws(c as u8));
            let interior = &trimmed[1..trimmed.len() - 1];
            if interior.bytes().all(is_json_ws) {
                out.push_str("{\"dead_letter\":");
            } else {
                out.push_str(&trimmed[..trimmed.len() - 1]);
                out.push_str(",\"dead_letter\":");
            }
        }
        Ok(text) => {
            out.push_str("{\"raw\":");
            write::push_string(&mut out, text);
            out.push_str(",\"dead_letter\":");
        }
        Err(_) => {
            out.push_str("{\"raw\":\"");
            base64_into(body, &mut out);
            out.push_str("\",\"raw_encoding\":\"base64\",\"dead_letter\":");
        }
    }
    out.push_str(&block_text);
    out.push('}');
    out.into_bytes()
}

/// The record for a decodable message: `envelope` with `attempts` set to the block's count and
/// `block` appended (replacing an existing `dead_letter` in place). Identity, `data`, `meta`
/// and unknown members are kept.
pub fn annotated_record(envelope: &Envelope, block: &DeadLetter) -> Result<Vec<u8>, Error> {
    let mut copy = envelope.clone();
    copy.set_attempts(block.attempts);
    Ok(copy.annotate(block).encode()?.into_bytes())
}

/// The record a dead-letter write carries: its kind, and what its `dead_letter` block says.
/// The runtime decides which one a delivery gets; [`Record::render`] builds the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A decodable message: the decoded envelope with a block ([`annotated_record`]).
    Annotated {
        /// `failed`, `unknown_urn`, or `poison` (rejected by its handler).
        reason: Reason,
        /// `attempts` of the copy and of the block.
        attempts: i64,
        /// The failure's message and type name, when there was a failure.
        error: Option<(String, String)>,
    },
    /// A schema-version-gated delivery: the incoming body, byte for byte, no block.
    Gated,
    /// A poison body: the ADR-0035 splice or wrapper ([`poison_record`]).
    Poison {
        /// Why it is poison (`None`: the block says only `Undecodable BabelQueue body`).
        cause: Option<PoisonCause>,
        /// The attempts counted for it.
        attempts: i64,
        /// The block's `original_queue`.
        original_queue: String,
    },
}

impl Record {
    /// The bytes of the record for `body`, consumed from `consumed_queue` and decoded as
    /// `envelope` (when it was readable), stamped `failed_at_millis`.
    ///
    /// An annotated record's `original_queue` is the envelope's `meta.queue` when it names one,
    /// else `consumed_queue`.
    pub fn render(
        &self,
        body: &[u8],
        envelope: Option<&Envelope>,
        consumed_queue: &str,
        failed_at_millis: i64,
    ) -> Result<Vec<u8>, Error> {
        match self {
            Record::Gated => Ok(body.to_vec()),
            Record::Poison {
                cause,
                attempts,
                original_queue,
            } => {
                let block = DeadLetter::poison(
                    cause.as_ref(),
                    original_queue.clone(),
                    *attempts,
                    failed_at_millis,
                );
                Ok(poison_record(body, &block))
            }
            Record::Annotated {
                reason,
                attempts,
                error,
            } => {
                let owned;
                let envelope = match envelope {
                    Some(envelope) => envelope,
                    None => {
                        owned = Envelope::default();
                        &owned
                    }
                };
                let original_queue = envelope
                    .queue()
                    .filter(|q| !q.is_empty())
                    .map_or_else(|| String::from(consumed_queue), Cow::into_owned);
                let mut block =
                    DeadLetter::new(*reason, original_queue, *attempts, failed_at_millis);
                if let Some((message, exception)) = error {
                    block = block.with_error(message.clone(), exception.clone());
                }
                annotated_record(envelope, &block)
            }
        }
    }
}

/// Standard padded base64 (RFC 4648 §4), the encoding every SDK's `raw_encoding: "base64"`
/// record uses.
pub(crate) fn base64_into(bytes: &[u8], out: &mut String) {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode_string(bytes, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        let mut out = String::new();
        base64_into(bytes, &mut out);
        out
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        assert_eq!(b64(b""), "");
        assert_eq!(b64(b"f"), "Zg==");
        assert_eq!(b64(b"fo"), "Zm8=");
        assert_eq!(b64(b"foo"), "Zm9v");
        assert_eq!(b64(b"foob"), "Zm9vYg==");
        assert_eq!(b64(b"fooba"), "Zm9vYmE=");
        assert_eq!(b64(b"foobar"), "Zm9vYmFy");
        assert_eq!(b64(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn block_keys_are_in_the_fixed_order() {
        let block = DeadLetter::new(Reason::UnknownUrn, "orders", 2, 7);
        assert_eq!(
            block.to_raw().as_str(),
            r#"{"reason":"unknown_urn","error":null,"exception":null,"failed_at":7,"original_queue":"orders","attempts":2,"lang":"rust"}"#
        );
    }

    #[test]
    fn one_render_per_record_kind() {
        let body =
            br#"{"job":"urn:x","data":{"n":12345678901234567890},"meta":{"queue":"orders"}}"#;
        let envelope = Envelope::decode_lenient(body).envelope;
        let annotated = Record::Annotated {
            reason: Reason::Failed,
            attempts: 3,
            error: Some(("boom".into(), "RuntimeError".into())),
        }
        .render(body, Some(&envelope), "orders.retry", 7)
        .unwrap();
        assert_eq!(
            core::str::from_utf8(&annotated).unwrap(),
            r#"{"job":"urn:x","data":{"n":12345678901234567890},"meta":{"queue":"orders"},"attempts":3,"dead_letter":{"reason":"failed","error":"boom","exception":"RuntimeError","failed_at":7,"original_queue":"orders","attempts":3,"lang":"rust"}}"#
        );
        assert_eq!(
            Record::Gated.render(b"\xff raw", None, "q", 7).unwrap(),
            b"\xff raw"
        );
        let poison = |cause| Record::Poison {
            cause,
            attempts: 2,
            original_queue: "orders".into(),
        };
        let typed = poison(Some(PoisonCause::NoIdentity))
            .render(b"{}", None, "q", 7)
            .unwrap();
        assert_eq!(
            core::str::from_utf8(&typed).unwrap(),
            r#"{"dead_letter":{"reason":"poison","error":"Undecodable BabelQueue body: the body carries no valid 'job' or 'urn' identity","exception":"BabelQueueError","failed_at":7,"original_queue":"orders","attempts":2,"lang":"rust"}}"#
        );
        let bare = poison(None).render(b"x", None, "q", 7).unwrap();
        assert!(
            core::str::from_utf8(&bare)
                .unwrap()
                .contains(r#""error":"Undecodable BabelQueue body","#)
        );
    }

    #[test]
    fn empty_objects_get_only_the_block() {
        let block = DeadLetter::new(Reason::Poison, "q", 0, 1);
        let record = poison_record(b" { \n } ", &block);
        assert!(record.starts_with(b"{\"dead_letter\":{"));
    }
}
