//! What protecting and unprotecting can fail with.
//!
//! The `Display` text is for people and logs. It names the field by its path (`email`,
//! `addresses[1].line`) and never contains a field's value, its ciphertext or key material. Code
//! that needs to tell failures apart matches on [`Error::kind`].

use std::fmt;

/// The class of a failure, shared by [`Error`] and [`CipherError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The ciphertext did not authenticate under any known key: a wrong key, or a value that was
    /// altered (AES-GCM cannot tell these apart).
    Authentication,
    /// The value is not a ciphertext at all (not base64, too short for a nonce and a tag).
    Malformed,
    /// The cipher could not be reached or could not work right now (a KMS that is down, no
    /// system randomness); retrying later may succeed.
    Unavailable,
    /// Any other cipher failure.
    Cipher,
    /// A protected field decrypted to bytes that are not one JSON value.
    NotJson,
    /// Key material of the wrong length or encoding.
    InvalidKey,
    /// The schema for the message's URN could not be loaded.
    Schema,
    /// `data` is not usable JSON (or would not be after the change: nested too deep).
    InvalidData,
}

impl ErrorKind {
    /// A short lower-case name (`"authentication"`, `"malformed"`, …).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Authentication => "authentication",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Cipher => "cipher",
            ErrorKind::NotJson => "not_json",
            ErrorKind::InvalidKey => "invalid_key",
            ErrorKind::Schema => "schema",
            ErrorKind::InvalidData => "invalid_data",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a [`Cipher`](crate::Cipher) reports when it cannot encrypt or decrypt one value.
///
/// A custom cipher (a KMS, Vault transit, an HSM) builds one of these; the built-in
/// [`AesGcmCipher`](crate::AesGcmCipher) does too. The message must not contain the value or key
/// material.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CipherError {
    kind: ErrorKind,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl CipherError {
    /// A failure of class `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> CipherError {
        CipherError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The ciphertext did not authenticate: wrong key or altered value.
    pub fn authentication() -> CipherError {
        CipherError::new(
            ErrorKind::Authentication,
            "wrong key or altered ciphertext (authentication failed)",
        )
    }

    /// The value is not a ciphertext this cipher produces.
    pub fn malformed(reason: impl Into<String>) -> CipherError {
        CipherError::new(ErrorKind::Malformed, reason)
    }

    /// The cipher cannot work right now (a KMS that is down); retrying later may succeed.
    pub fn unavailable(message: impl Into<String>) -> CipherError {
        CipherError::new(ErrorKind::Unavailable, message)
    }

    /// Attaches the underlying error.
    #[must_use]
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> CipherError {
        self.source = Some(source.into());
        self
    }

    /// The class of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether retrying later may succeed (the cipher was unavailable).
    pub fn is_transient(&self) -> bool {
        self.kind == ErrorKind::Unavailable
    }
}

/// A failure to protect or unprotect a message's `data`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The cipher could not encrypt the field at `path` (nothing may be published).
    #[error("cannot encrypt the sensitive field `{path}`: {source}")]
    Encrypt {
        /// The field, as `profile.email` or `addresses[0].line`.
        path: String,
        /// What the cipher reported.
        #[source]
        source: CipherError,
    },
    /// The cipher could not decrypt the field at `path`: a wrong key, an altered value, a value
    /// that is not a ciphertext, or a cipher that is unavailable ([`Error::kind`] says which).
    #[error("cannot decrypt the protected field `{path}`: {source}")]
    Decrypt {
        /// The field, as `profile.email` or `addresses[0].line`.
        path: String,
        /// What the cipher reported.
        #[source]
        source: CipherError,
    },
    /// The field at `path` decrypted, but not to one JSON value.
    #[error("the protected field `{path}` decrypted to something that is not JSON")]
    NotJson {
        /// The field, as `profile.email` or `addresses[0].line`.
        path: String,
    },
    /// Key material of the wrong length or encoding.
    #[error("invalid key: {0}")]
    InvalidKey(String),
    /// `data` is not usable JSON, or the result would not be (nested too deep).
    #[error("invalid data: {0}")]
    InvalidData(String),
    /// The schema for `urn` could not be loaded.
    #[error("cannot load the payload schema for {urn}: {message}")]
    Schema {
        /// The message's URN.
        urn: String,
        /// Why.
        message: String,
    },
}

impl Error {
    /// The class of the failure. A wrong key and an altered ciphertext are both
    /// [`ErrorKind::Authentication`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Encrypt { source, .. } | Error::Decrypt { source, .. } => source.kind(),
            Error::NotJson { .. } => ErrorKind::NotJson,
            Error::InvalidKey(_) => ErrorKind::InvalidKey,
            Error::Schema { .. } => ErrorKind::Schema,
            Error::InvalidData(_) => ErrorKind::InvalidData,
        }
    }

    /// The field the failure is about, when there is one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Error::Encrypt { path, .. } | Error::Decrypt { path, .. } | Error::NotJson { path } => {
                Some(path)
            }
            _ => None,
        }
    }

    /// Whether retrying later may succeed (the cipher was unavailable).
    pub fn is_transient(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
