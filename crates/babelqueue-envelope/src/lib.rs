//! The BabelQueue wire envelope.
//!
//! Every BabelQueue SDK (PHP/Laravel, Symfony, Go, Python, Java, .NET, Node and this one)
//! exchanges one frozen JSON shape, routed by URN rather than by a class name:
//!
//! ```json
//! {"job":"urn:babel:orders:created","trace_id":"…","data":{"order_id":1042},
//!  "meta":{"id":"…","queue":"orders","lang":"rust","schema_version":1,"created_at":1749132727000},
//!  "attempts":0}
//! ```
//!
//! This crate is the codec: it builds envelopes, encodes and decodes them byte-compatibly with
//! the other SDKs, classifies bodies that are not envelopes (poison), and builds the records
//! written to dead-letter queues. It has no runtime and no I/O, and it works under `no_std` +
//! `alloc` (disable the default `std` feature; then build envelopes with
//! [`Builder::build_with`], which takes the randomness and the clock as arguments).
//!
//! ```
//! use babelqueue_envelope::{Envelope, poison_cause};
//!
//! // Produce.
//! let envelope = Envelope::builder("urn:babel:orders:created")
//!     .queue("orders")
//!     .data(&serde_json::json!({"order_id": 1042}))
//!     .build()?;
//! let body = envelope.encode()?;
//!
//! // Consume: classify first, then decode.
//! assert_eq!(poison_cause(body.as_bytes(), true), None);
//! let mut received = Envelope::decode(body.as_bytes())?.envelope;
//! assert_eq!(received.urn(), "urn:babel:orders:created");
//!
//! // Retry hop: attempts + 1, everything else (unknown keys included) kept.
//! received.set_attempts(received.attempts() + 1);
//! assert!(received.encode()?.ends_with(r#""attempts":1}"#));
//! # Ok::<(), babelqueue_envelope::Error>(())
//! ```
//!
//! # The rules, in one place
//!
//! * Whitespace is the closed ASCII set (space, `\t`, `\n`, `\v`, `\f`, `\r`): the producer trims
//!   the URN and `trace_id` with it; Unicode spaces are content. Decode never trims.
//! * `data` is always an object and is carried as its original JSON text, so integers beyond 64
//!   bits, `1e400`, key order and string escapes survive a retry hop byte for byte.
//! * Decode keeps unknown members, resolves repeated members last-wins, matches names
//!   case-sensitively, drops the forbidden legacy keys (`/timestamp`, `/meta/max_retries`,
//!   `/meta/attempts`, `/meta/source`, `/meta/ts`) with one warning each, and folds the `urn`
//!   alias into `job`. Encode refuses those keys and the alias.
//! * [`poison_cause`] is the strict classifier: invalid UTF-8, not exactly one JSON object, a
//!   wrongly typed known member (every occurrence of a repeated one), an integer member that is
//!   not a 64-bit integer literal (`-0` is one, `1.0` and `1e3` are not), a non-finite number
//!   inside `data`, nesting beyond [`MAX_DEPTH`], or no identity.
//!
//! A lone surrogate escape (`"\ud800"`) is valid JSON text and is *not* poison here (as in the
//! reference SDK); string accessors read it as U+FFFD while the raw text keeps it unchanged.

#![cfg_attr(not(feature = "std"), no_std)]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;

pub mod ascii;
pub mod cjson;
mod dead_letter;
mod envelope;
mod error;
pub mod gate;
pub mod json;
mod outgoing;
mod verdict;

pub use cjson::{CjsonChange, CjsonFinding, cjson_changes};
pub use dead_letter::{DeadLetter, Reason, Record, annotated_record, poison_record};
pub use envelope::{
    Builder, CORE_META_KEYS, DecodeWarning, Decoded, Envelope, FORBIDDEN_META_KEYS,
    FORBIDDEN_POINTERS, WarningKind,
};
pub use error::{Error, ErrorKind};
pub use json::{JsonKind, Key, MAX_DEPTH, Object, RawJson, SyntaxError, SyntaxErrorKind};
pub use outgoing::{Unpublishable, check_publishable};
pub use verdict::{Expected, PoisonCause, Verdict, classify, is_spliceable, poison_cause};

/// The envelope schema version this codec writes and accepts.
pub const SCHEMA_VERSION: i64 = 1;

/// The `meta.lang` / `dead_letter.lang` tag of this SDK.
pub const SOURCE_LANG: &str = "rust";

/// A typed message: a serializable payload with a stable URN.
///
/// ```
/// use babelqueue_envelope::{Builder, Message};
///
/// #[derive(serde::Serialize)]
/// struct OrderCreated { order_id: u64 }
///
/// impl Message for OrderCreated {
///     const URN: &'static str = "urn:babel:orders:created";
/// }
///
/// let envelope = Builder::from_message(&OrderCreated { order_id: 1042 }).build()?;
/// assert_eq!(envelope.urn(), "urn:babel:orders:created");
/// # Ok::<(), babelqueue_envelope::Error>(())
/// ```
pub trait Message: serde::Serialize {
    /// The URN consumers route this message by.
    const URN: &'static str;

    /// A trace id to continue, when this message belongs to an existing trace.
    fn trace_id(&self) -> Option<&str> {
        None
    }
}

/// Milliseconds since the Unix epoch (truncated).
#[cfg(feature = "std")]
pub fn now_millis() -> i64 {
    let elapsed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
}
