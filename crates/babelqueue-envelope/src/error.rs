use alloc::string::String;

use crate::json::{JsonKind, SyntaxError};

/// Everything the codec can refuse.
///
/// The `Display` text is for people and logs; programs branch on [`Error::kind`] and read
/// [`Error::pointer`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URN is empty once the six ASCII whitespace characters are trimmed.
    #[error(
        "a BabelQueue message needs a non-empty URN (after trimming ASCII whitespace), so that \
         consumers can route it without knowing any class name"
    )]
    BlankUrn,
    /// A producer `meta` entry uses a core key (`id`, `queue`, `lang`, `schema_version`,
    /// `created_at`) or a forbidden one (`max_retries`, `attempts`, `source`, `ts`).
    #[error(
        "the producer meta key {pointer} is reserved (core and forbidden meta keys cannot be set)"
    )]
    ReservedMetaKey {
        /// RFC 6901 pointer of the key, e.g. `/meta/ts`.
        pointer: String,
    },
    /// The same producer `meta` key was supplied twice.
    #[error("the producer meta key {pointer} was supplied twice; extension keys must be unique")]
    DuplicateMetaKey {
        /// RFC 6901 pointer of the key, e.g. `/meta/ext`.
        pointer: String,
    },
    /// The envelope carries a key the wire contract forbids (`/timestamp`, `/meta/max_retries`,
    /// `/meta/attempts`, `/meta/source`, `/meta/ts`) or the inbound-only `/urn` alias.
    #[error(
        "refusing to encode the forbidden envelope key {pointer} (non-canonical; never written)"
    )]
    ForbiddenKey {
        /// RFC 6901 pointer of the first offending key.
        pointer: String,
    },
    /// `data` must be a JSON object.
    #[error("`data` must be a JSON object, found {found}")]
    DataNotObject {
        /// What was found instead.
        found: JsonKind,
    },
    /// The text is not one strict JSON value.
    #[error("not valid JSON: {0}")]
    InvalidJson(SyntaxError),
    /// The text is JSON, but not an object.
    #[error("expected a JSON object, found {found}")]
    NotAnObject {
        /// What was found instead.
        found: JsonKind,
    },
    /// The bytes are not valid UTF-8.
    #[error("the body is not valid UTF-8 (first invalid byte at offset {offset})")]
    InvalidUtf8 {
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// Strict decode: neither a valid string `job` nor a valid string `urn` alias.
    #[error("the envelope has neither a valid string `job` nor a valid string `urn` identity")]
    NoIdentity,
    /// A value could not be serialized to JSON.
    #[error("could not serialize to JSON: {0}")]
    Serialize(String),
    /// A producer was about to send a body that its consumers' strict verdict refuses (a
    /// number inside `data` that is not a finite double, a wrongly typed member …): nothing was
    /// sent.
    #[error("refusing to publish a body every consumer would dead-letter as poison: {0}")]
    Unpublishable(crate::Unpublishable),
    /// `data` could not be deserialized into the requested type.
    #[error("could not deserialize `data`: {0}")]
    Deserialize(String),
}

/// The broad class of an [`Error`], for code that decides what to do with one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller asked for a message the contract does not allow (blank URN, reserved or
    /// forbidden key, non-object `data`, unserializable value). Fix the producer.
    InvalidMessage,
    /// The bytes are not a BabelQueue envelope at all (not UTF-8, not JSON, not an object).
    Undecodable,
    /// The bytes are an object but carry no valid identity.
    NoIdentity,
    /// `data` does not have the shape the handler expects.
    Data,
}

impl Error {
    /// The class of the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::BlankUrn
            | Error::ReservedMetaKey { .. }
            | Error::DuplicateMetaKey { .. }
            | Error::ForbiddenKey { .. }
            | Error::DataNotObject { .. }
            | Error::Serialize(_)
            | Error::Unpublishable(_) => ErrorKind::InvalidMessage,
            Error::InvalidJson(_) | Error::NotAnObject { .. } | Error::InvalidUtf8 { .. } => {
                ErrorKind::Undecodable
            }
            Error::NoIdentity => ErrorKind::NoIdentity,
            Error::Deserialize(_) => ErrorKind::Data,
        }
    }

    /// The dotted path of the member at fault (`data.items[2].n`), for a refused publish that
    /// one member caused.
    pub fn member(&self) -> Option<&str> {
        match self {
            Error::Unpublishable(refused) => refused.member(),
            _ => None,
        }
    }

    /// The RFC 6901 pointer of the offending key, for key errors.
    pub fn pointer(&self) -> Option<&str> {
        match self {
            Error::ReservedMetaKey { pointer }
            | Error::DuplicateMetaKey { pointer }
            | Error::ForbiddenKey { pointer } => Some(pointer),
            _ => None,
        }
    }
}
