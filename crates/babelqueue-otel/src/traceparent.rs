//! W3C Trace Context (`traceparent`, `tracestate`) on BabelQueue's out-of-band headers, and the
//! consumer-side choice of a parent: the header when it is valid, else the envelope's
//! `trace_id`.
//!
//! # What a valid `traceparent` is
//!
//! `version-traceid-parentid-flags`, each field lower-case hex of exactly 2, 32, 16 and 2
//! digits (the shape the conformance suite pins: `00-<32 hex>-<16 hex>-<2 hex>`), with the
//! finer W3C rules on top:
//!
//! * version `ff` is invalid; version `00` has exactly four fields; a later version may carry
//!   more fields after a `-`, which are ignored (W3C forward compatibility);
//! * an all-zero trace id or parent id is invalid;
//! * upper-case hex, surrounding whitespace, and any other deviation make the header invalid.
//!
//! An invalid header is ignored, never an error: the consumer behaves exactly as if no header
//! had arrived. `tracestate` is read only beside a valid `traceparent`; a malformed
//! `tracestate` is dropped and the `traceparent` kept.
//!
//! ```
//! use babelqueue_core::Headers;
//! use babelqueue_otel::traceparent::{Source, extract};
//!
//! let mut headers = Headers::new();
//! headers.insert(
//!     "traceparent".into(),
//!     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
//! );
//! let envelope_trace_id = "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b";
//!
//! // The header wins over the envelope's trace_id …
//! let parent = extract(&headers, Some(envelope_trace_id)).unwrap();
//! assert_eq!(parent.source, Source::Traceparent);
//! assert_eq!(format!("{:032x}", parent.span_context.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
//!
//! // … and a missing or malformed one falls back to it.
//! headers.insert("traceparent".into(), "not-a-traceparent".into());
//! let parent = extract(&headers, Some(envelope_trace_id)).unwrap();
//! assert_eq!(parent.source, Source::TraceId);
//! assert_eq!(format!("{:032x}", parent.span_context.trace_id()), "7b3f9c2ae41d4f889b2a1c0d5e6f7a8b");
//! ```

use std::fmt;
use std::str::FromStr;

use babelqueue_core::Headers;
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

use crate::mapping::synthetic_parent;

/// The header that carries the W3C parent (`traceparent`).
pub const HEADER_TRACEPARENT: &str = "traceparent";
/// The header that carries vendor trace state beside it (`tracestate`).
pub const HEADER_TRACESTATE: &str = "tracestate";

/// A parsed `traceparent` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The version byte (`0x00` today).
    pub version: u8,
    /// The trace id.
    pub trace_id: TraceId,
    /// The id of the span that sent the message (the consumer's parent).
    pub parent_id: SpanId,
    /// The trace flags (bit 0: sampled).
    pub flags: TraceFlags,
}

impl TraceParent {
    /// Parses a header value; `None` when it is not a valid `traceparent` (see the
    /// [module docs](self)).
    pub fn parse(value: &str) -> Option<TraceParent> {
        let mut fields = value.split('-');
        let version = fields.next().and_then(hex_field::<1>)?[0];
        let trace_id = TraceId::from_bytes(fields.next().and_then(hex_field::<16>)?);
        let parent_id = SpanId::from_bytes(fields.next().and_then(hex_field::<8>)?);
        let flags = fields.next().and_then(hex_field::<1>)?[0];
        let extra = fields.next().is_some();
        if version == 0xff
            || (version == 0 && extra)
            || trace_id == TraceId::INVALID
            || parent_id == SpanId::INVALID
        {
            return None;
        }
        Some(TraceParent {
            version,
            trace_id,
            parent_id,
            flags: TraceFlags::new(flags),
        })
    }

    /// The version-00 header of a span context; `None` for an invalid one.
    pub fn of(span_context: &SpanContext) -> Option<TraceParent> {
        span_context.is_valid().then(|| TraceParent {
            version: 0,
            trace_id: span_context.trace_id(),
            parent_id: span_context.span_id(),
            flags: span_context.trace_flags(),
        })
    }

    /// The remote span context this header describes (with `state` as its trace state).
    pub fn to_span_context(self, state: TraceState) -> SpanContext {
        SpanContext::new(self.trace_id, self.parent_id, self.flags, true, state)
    }
}

impl fmt::Display for TraceParent {
    /// `vv-<32 hex>-<16 hex>-ff`, lower case.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02x}-{:032x}-{:016x}-{:02x}",
            self.version,
            self.trace_id,
            self.parent_id,
            self.flags.to_u8()
        )
    }
}

/// Exactly `2 * N` lower-case hex digits.
fn hex_field<const N: usize>(field: &str) -> Option<[u8; N]> {
    let bytes = field.as_bytes();
    if bytes.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = (lower_hex(pair[0])? << 4) | lower_hex(pair[1])?;
    }
    Some(out)
}

fn lower_hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

/// Where a consumer's parent came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// A valid `traceparent` header: the parent is the producer's span itself.
    Traceparent,
    /// The envelope's `trace_id` (no header, or an invalid one): a synthetic parent in the
    /// same trace ([`synthetic_parent`]).
    TraceId,
}

impl Source {
    /// `"traceparent"` or `"trace_id"`, as the conformance suite names them.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Traceparent => "traceparent",
            Source::TraceId => "trace_id",
        }
    }
}

/// The remote parent a consumer span starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// Where it came from.
    pub source: Source,
    /// The remote parent span context.
    pub span_context: SpanContext,
}

/// A header by name: the exact key first, else any key equal to it ignoring ASCII case (a peer
/// that forwarded HTTP-style header names).
pub fn header<'h>(headers: &'h Headers, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .or_else(|| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
        .map(String::as_str)
}

/// The valid `traceparent` (with its `tracestate`) among `headers`, if any.
pub fn remote_parent(headers: &Headers) -> Option<SpanContext> {
    let parent = TraceParent::parse(header(headers, HEADER_TRACEPARENT)?)?;
    let state = header(headers, HEADER_TRACESTATE)
        .and_then(trace_state)
        .unwrap_or_default();
    Some(parent.to_span_context(state))
}

/// A `tracestate` value, or `None` when any list member is malformed. OpenTelemetry's own
/// parser checks keys and values but lets an empty key or a value with `=` through, so those
/// are refused here first.
fn trace_state(value: &str) -> Option<TraceState> {
    for member in value.split(',').map(|m| m.trim_matches([' ', '\t'])) {
        if member.is_empty() {
            continue;
        }
        let (key, val) = member.split_once('=')?;
        if key.is_empty() || val.is_empty() || val.contains('=') {
            return None;
        }
    }
    TraceState::from_str(value).ok()
}

/// Chooses a consumer's parent: a valid `traceparent` among `headers` wins; else the
/// envelope's `trace_id` (when present and not empty) gives the synthetic parent; else `None`
/// (the span then starts from the ambient context). Never fails, never changes anything.
pub fn extract(headers: &Headers, trace_id: Option<&str>) -> Option<Extracted> {
    if let Some(span_context) = remote_parent(headers) {
        return Some(Extracted {
            source: Source::Traceparent,
            span_context,
        });
    }
    trace_id.filter(|t| !t.is_empty()).map(|t| Extracted {
        source: Source::TraceId,
        span_context: synthetic_parent(t),
    })
}

/// [`extract`] for a delivery a handler is running: its headers and its envelope's `trace_id`.
pub fn extract_from(ctx: &babelqueue_core::Context) -> Option<Extracted> {
    extract(ctx.headers(), ctx.trace_id().as_deref())
}

/// Writes `traceparent` (and `tracestate`, when not empty) for `span_context` into `headers`;
/// writes nothing and returns `false` for an invalid span context.
pub fn inject(span_context: &SpanContext, headers: &mut Headers) -> bool {
    let Some(parent) = TraceParent::of(span_context) else {
        return false;
    };
    headers.insert(HEADER_TRACEPARENT.to_owned(), parent.to_string());
    let state = span_context.trace_state().header();
    if !state.is_empty() {
        headers.insert(HEADER_TRACESTATE.to_owned(), state);
    }
    true
}

/// Lets any OpenTelemetry propagator (baggage, a composite) write into BabelQueue headers.
#[derive(Debug)]
pub struct HeaderInjector<'a>(pub &'a mut Headers);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

/// Lets any OpenTelemetry propagator read BabelQueue headers (a delivery's
/// [`Context::headers`](babelqueue_core::Context::headers)).
#[derive(Debug, Clone, Copy)]
pub struct HeaderExtractor<'a>(pub &'a Headers);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        header(self.0, key)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn with(value: &str) -> Headers {
        Headers::from([(HEADER_TRACEPARENT.to_owned(), value.to_owned())])
    }

    #[test]
    fn a_valid_header_parses_and_formats_back() {
        let p = TraceParent::parse(VALID).unwrap();
        assert_eq!(p.version, 0);
        assert_eq!(
            format!("{:032x}", p.trace_id),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(format!("{:016x}", p.parent_id), "00f067aa0ba902b7");
        assert!(p.flags.is_sampled());
        assert_eq!(p.to_string(), VALID);
        // Unknown flag bits are kept, not normalised.
        let odd = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09";
        assert_eq!(TraceParent::parse(odd).unwrap().to_string(), odd);
    }

    #[test]
    fn malformed_headers_are_rejected() {
        for bad in [
            "",
            "-",
            "---",
            "not-a-traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736ab-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-001",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // upper case, whitespace, signs
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
            " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // all-zero ids, version ff
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            // a multi-byte character where a digit should be
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
            assert_eq!(remote_parent(&with(bad)), None, "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_may_carry_more_fields() {
        let v = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-whatever";
        let p = TraceParent::parse(v).unwrap();
        assert_eq!(p.version, 1);
        assert_eq!(format!("{:016x}", p.parent_id), "00f067aa0ba902b7");
    }

    #[test]
    fn the_header_wins_and_everything_else_falls_back_to_trace_id() {
        let t = "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b";
        let got = extract(&with(VALID), Some(t)).unwrap();
        assert_eq!(got.source, Source::Traceparent);
        assert!(got.span_context.is_remote());
        let got = extract(&with("garbage"), Some(t)).unwrap();
        assert_eq!(got.source, Source::TraceId);
        assert_eq!(got.span_context, synthetic_parent(t));
        assert_eq!(
            extract(&Headers::new(), Some(t)).unwrap().source,
            Source::TraceId
        );
        // Nothing to go on: the ambient context decides.
        assert_eq!(extract(&with("garbage"), None), None);
        assert_eq!(extract(&Headers::new(), Some("")), None);
    }

    #[test]
    fn the_header_name_matches_case_insensitively_as_a_fallback() {
        let h = Headers::from([("Traceparent".to_owned(), VALID.to_owned())]);
        assert!(remote_parent(&h).is_some());
    }

    #[test]
    fn tracestate_rides_along_and_a_bad_one_is_dropped() {
        let mut h = with(VALID);
        h.insert(HEADER_TRACESTATE.into(), "vendor=abc,other=1".into());
        let sc = remote_parent(&h).unwrap();
        assert_eq!(sc.trace_state().get("vendor"), Some("abc"));
        for bad in ["===", "=x", "k=", "k=a=b", "novalue", "UPPER=1", "k=v,=w"] {
            h.insert(HEADER_TRACESTATE.into(), bad.into());
            let sc = remote_parent(&h).expect("the traceparent is kept");
            assert_eq!(sc.trace_state().header(), "", "{bad:?}");
        }
        // Optional whitespace around members and empty members are allowed.
        h.insert(HEADER_TRACESTATE.into(), " a=1 ,, b=2".into());
        assert_eq!(remote_parent(&h).unwrap().trace_state().get("b"), Some("2"));
    }

    #[test]
    fn inject_writes_what_extract_reads() {
        let state = TraceState::from_key_value([("vendor", "abc")]).unwrap();
        let sc = SpanContext::new(
            TraceId::from(0x1234u128),
            SpanId::from(0x42u64),
            TraceFlags::SAMPLED,
            false,
            state,
        );
        let mut headers = Headers::new();
        assert!(inject(&sc, &mut headers));
        assert_eq!(
            headers[HEADER_TRACEPARENT],
            "00-00000000000000000000000000001234-0000000000000042-01"
        );
        assert_eq!(headers[HEADER_TRACESTATE], "vendor=abc");
        let back = remote_parent(&headers).unwrap();
        assert_eq!(
            (back.trace_id(), back.span_id(), back.trace_flags()),
            (sc.trace_id(), sc.span_id(), sc.trace_flags())
        );
        // An invalid context writes nothing.
        let mut empty = Headers::new();
        assert!(!inject(&SpanContext::empty_context(), &mut empty));
        assert!(empty.is_empty());
    }

    #[test]
    fn the_propagator_adapters_read_and_write_headers() {
        let mut headers = Headers::new();
        HeaderInjector(&mut headers).set("baggage", "k=v".into());
        let ex = HeaderExtractor(&headers);
        assert_eq!(ex.get("baggage"), Some("k=v"));
        assert_eq!(ex.get("BAGGAGE"), Some("k=v"));
        assert_eq!(ex.keys(), vec!["baggage"]);
    }
}
