//! The envelope `trace_id` ↔ OpenTelemetry trace id mapping, shared by every BabelQueue SDK.
//!
//! A hop that only sees the envelope (a header-less transport, an SDK without OpenTelemetry)
//! still lands in the producer's trace, because both sides derive the same 128-bit trace id
//! from the `trace_id` string:
//!
//! 1. remove every `-`;
//! 2. if exactly 32 characters remain and all are hex digits (either case), and they are not all
//!    zero, those 16 bytes (big-endian) are the trace id: a UUID keeps its own bits, so
//!    [`uuid_of`] gives the same UUID back (in lower case);
//! 3. anything else (a non-UUID string, 32 characters that are not all hex, the nil UUID, an
//!    empty string) is hashed: the first 16 bytes of SHA-256 over the UTF-8 `trace_id`, or 1 if
//!    those are all zero.
//!
//! The result is never the invalid all-zero id. Hex parsing is strict: no spaces, no `0x`.
//!
//! ```
//! use babelqueue_otel::{trace_id_of, uuid_of};
//!
//! let id = trace_id_of("7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b");
//! assert_eq!(format!("{id:032x}"), "7b3f9c2ae41d4f889b2a1c0d5e6f7a8b");
//! assert_eq!(uuid_of(id), "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b");
//! // Not a UUID: hashed, deterministic, never zero.
//! assert_eq!(trace_id_of("order-1042"), trace_id_of("order-1042"));
//! ```

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
use sha2::{Digest, Sha256};

/// The prefix hashed with a `trace_id` to derive the synthetic parent span id.
const SPAN_SEED: &str = "babelqueue-span:";

/// Maps an envelope `trace_id` to an OpenTelemetry trace id (never the invalid zero id); see
/// the [module docs](self) for the rule.
pub fn trace_id_of(trace_id: &str) -> TraceId {
    if let Some(bytes) = uuid_bytes(trace_id)
        && bytes != [0; 16]
    {
        return TraceId::from_bytes(bytes);
    }
    let digest = Sha256::digest(trace_id.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    if bytes == [0; 16] {
        bytes[15] = 1;
    }
    TraceId::from_bytes(bytes)
}

/// Formats a trace id as a lower-case UUID (`8-4-4-4-12` hex digits): the `trace_id` a producer
/// stamps so that [`trace_id_of`] recovers the same trace on the other side.
pub fn uuid_of(trace_id: TraceId) -> String {
    let h = format!("{trace_id:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The span id of the synthetic parent a consumer uses when only the `trace_id` arrived: the
/// first 8 bytes of SHA-256 over `babelqueue-span:` + `trace_id`, or 1 if those are zero. Every
/// SDK derives the same one, so the consumer spans of one `trace_id` share a parent.
pub fn synthetic_span_id(trace_id: &str) -> SpanId {
    let mut hasher = Sha256::new();
    hasher.update(SPAN_SEED.as_bytes());
    hasher.update(trace_id.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    if bytes == [0; 8] {
        bytes[7] = 1;
    }
    SpanId::from_bytes(bytes)
}

/// The remote, sampled parent span context derived from a `trace_id` alone.
pub fn synthetic_parent(trace_id: &str) -> SpanContext {
    SpanContext::new(
        trace_id_of(trace_id),
        synthetic_span_id(trace_id),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    )
}

/// The 16 bytes of a hyphen-free 32-hex-digit string, either case.
fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    let mut nibbles = s.bytes().filter(|b| *b != b'-');
    for byte in &mut out {
        let high = hex_value(nibbles.next()?)?;
        let low = hex_value(nibbles.next()?)?;
        *byte = (high << 4) | low;
    }
    nibbles.next().is_none().then_some(out)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha_prefix(text: &str) -> String {
        let d = Sha256::digest(text.as_bytes());
        d[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn a_uuid_keeps_its_bits_and_round_trips() {
        let id = trace_id_of("7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b");
        assert_eq!(format!("{id:032x}"), "7b3f9c2ae41d4f889b2a1c0d5e6f7a8b");
        assert_eq!(uuid_of(id), "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b");
        // Upper case, no hyphens, or hyphens anywhere: the same 32 digits, the same id.
        for same in [
            "7B3F9C2A-E41D-4F88-9B2A-1C0D5E6F7A8B",
            "7b3f9c2ae41d4f889b2a1c0d5e6f7a8b",
            "7b3f-9c2ae41d4f889b2a1c0d5e6f7a8b--",
        ] {
            assert_eq!(trace_id_of(same), id, "{same}");
        }
    }

    #[test]
    fn anything_else_is_hashed() {
        for other in [
            "order-1042",
            "",
            // 32 characters, but one is not hex.
            "7b3f9c2ae41d4f889b2a1c0d5e6f7a8g",
            // 31 and 33 digits.
            "7b3f9c2ae41d4f889b2a1c0d5e6f7a8",
            "7b3f9c2ae41d4f889b2a1c0d5e6f7a8bc",
            // whitespace is not skipped
            " 7b3f9c2ae41d4f889b2a1c0d5e6f7a8b",
            // the nil UUID would be the invalid trace id
            "00000000-0000-0000-0000-000000000000",
        ] {
            let id = trace_id_of(other);
            assert_eq!(format!("{id:032x}"), sha_prefix(other), "{other:?}");
            assert_ne!(id, TraceId::INVALID);
        }
        // Unicode is hashed as UTF-8.
        assert_eq!(format!("{:032x}", trace_id_of("é")), sha_prefix("é"));
    }

    #[test]
    fn the_synthetic_parent_is_deterministic_remote_and_sampled() {
        let t = "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b";
        let d = Sha256::digest(format!("babelqueue-span:{t}").as_bytes());
        let want: String = d[..8].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(format!("{:016x}", synthetic_span_id(t)), want);
        let parent = synthetic_parent(t);
        assert!(parent.is_valid() && parent.is_remote() && parent.is_sampled());
        assert_eq!(parent.trace_id(), trace_id_of(t));
        assert_ne!(synthetic_span_id(t), synthetic_span_id("other"));
    }

    #[test]
    fn uuid_of_pads_small_ids() {
        assert_eq!(
            uuid_of(TraceId::from(1u128)),
            "00000000-0000-0000-0000-000000000001"
        );
    }
}
