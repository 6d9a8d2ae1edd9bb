//! Dead-letter records.
//!
//! Three shapes reach a dead-letter queue, and this module builds each of them:
//!
//! * a decodable message that failed (or has no handler): the decoded envelope with a
//!   `dead_letter` block appended ([`Envelope::annotate`]);
//! * a message rejected by a transport's schema-version gate: the incoming body, byte for byte,
//!   with no block;
//! * a poison body: the ADR-0035 record ([`poison_record`]), a byte-level splice of the block
//!   into a strict JSON object, else `{"raw": …, "dead_letter": …}` (base64 plus
//!   `"raw_encoding":"base64"` when the bytes are not UTF-8; never U+FFFD).
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

    /// The block for a poison body: reason `poison`, error `Undecodable BabelQueue body: <cause>`,
    /// exception `BabelQueueError`, `original_queue` the consumed queue.
    pub fn poison(
        cause: &PoisonCause,
        consumed_queue: impl Into<String>,
        attempts: i64,
        failed_at_millis: i64,
    ) -> Self {
        let mut error = String::from("Undecodable BabelQueue body: ");
        error.push_str(&crate::verdict::cause_text(cause));
        DeadLetter::new(Reason::Poison, consumed_queue, attempts, failed_at_millis)
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

/// The record a dead-letter write carries.
#[derive(Debug, Clone, Copy)]
pub enum DeadLetterRecord<'a> {
    /// A decodable message: the envelope with the block appended.
    Annotated {
        /// The decoded envelope (attempts already counted).
        envelope: &'a Envelope,
        /// The block.
        block: &'a DeadLetter,
    },
    /// A schema-version-gated delivery: the incoming body, byte-identical, no block.
    Gated {
        /// The incoming body.
        body: &'a [u8],
    },
    /// A poison body: the ADR-0035 splice or wrapper.
    Poison {
        /// The incoming body.
        body: &'a [u8],
        /// The block.
        block: &'a DeadLetter,
    },
}

impl DeadLetterRecord<'_> {
    /// The bytes to write to the dead-letter queue.
    pub fn to_bytes(&self) -> Result<Cow<'_, [u8]>, Error> {
        match self {
            DeadLetterRecord::Annotated { envelope, block } => {
                Ok(Cow::Owned(envelope.annotate(block).encode()?.into_bytes()))
            }
            DeadLetterRecord::Gated { body } => Ok(Cow::Borrowed(body)),
            DeadLetterRecord::Poison { body, block } => Ok(Cow::Owned(poison_record(body, block))),
        }
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard padded base64 (RFC 4648 §4).
pub(crate) fn base64_into(bytes: &[u8], out: &mut String) {
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextet = |shift: u32| char::from(BASE64[((n >> shift) & 63) as usize]);
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { '=' });
    }
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
    fn empty_objects_get_only_the_block() {
        let block = DeadLetter::new(Reason::Poison, "q", 0, 1);
        let record = poison_record(b" { \n } ", &block);
        assert!(record.starts_with(b"{\"dead_letter\":{"));
    }
}
