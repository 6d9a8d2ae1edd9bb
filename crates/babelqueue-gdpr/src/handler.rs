//! The per-URN side: a [`Protector`] finds each message's schema, and [`unprotected`] decrypts
//! before a handler runs.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use babelqueue_core::schema::SchemaProvider;
use babelqueue_core::{Context, Handler, HandlerError, HandlerFuture};
use babelqueue_envelope::{Envelope, RawJson};
use serde_json::Value;

use crate::cipher::Cipher;
use crate::error::{Error, ErrorKind, Result};
use crate::marks::Marks;
use crate::protect::{protect, unprotect};

/// Protects and unprotects messages by URN: the schema registered for a message's URN (in the
/// same [`SchemaProvider`] payload validation uses) says which fields are sensitive, and one
/// [`Cipher`] encrypts them.
///
/// A URN without a schema, or whose schema marks nothing, passes through unchanged. Compiled
/// marks are cached per URN for as long as the provider hands out the same schema.
pub struct Protector {
    cipher: Arc<dyn Cipher>,
    schemas: Arc<dyn SchemaProvider>,
    compiled: Mutex<HashMap<String, Compiled>>,
}

/// The schema a URN's marks were compiled from, and the marks.
type Compiled = (Arc<Value>, Arc<Marks>);

impl fmt::Debug for Protector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Protector")
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

impl Protector {
    /// A protector over `schemas`, encrypting with `cipher`.
    pub fn new(cipher: Arc<dyn Cipher>, schemas: Arc<dyn SchemaProvider>) -> Protector {
        Protector {
            cipher,
            schemas,
            compiled: Mutex::new(HashMap::new()),
        }
    }

    /// The cipher.
    pub fn cipher(&self) -> &Arc<dyn Cipher> {
        &self.cipher
    }

    /// The marks of `urn`'s schema; `None` when no schema is registered for it.
    pub fn marks(&self, urn: &str) -> Result<Option<Arc<Marks>>> {
        let schema = self.schemas.schema_for(urn).map_err(|e| Error::Schema {
            urn: urn.to_owned(),
            message: e.to_string(),
        })?;
        let Some(schema) = schema else {
            return Ok(None);
        };
        let mut compiled = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, marks)) = compiled.get(urn)
            && Arc::ptr_eq(seen, &schema)
        {
            return Ok(Some(marks.clone()));
        }
        let marks = Arc::new(Marks::from_schema(&schema));
        compiled.insert(urn.to_owned(), (schema, marks.clone()));
        Ok(Some(marks))
    }

    /// Encrypts the sensitive fields of `data`, a message of `urn` (see [`protect`]).
    pub async fn protect(&self, urn: &str, data: &RawJson) -> Result<RawJson> {
        match self.marks(urn)? {
            Some(marks) => protect(data, &marks, self.cipher.as_ref()).await,
            None => Ok(data.clone()),
        }
    }

    /// Decrypts the protected fields of `data`, a message of `urn` (see [`unprotect`]).
    pub async fn unprotect(&self, urn: &str, data: &RawJson) -> Result<RawJson> {
        match self.marks(urn)? {
            Some(marks) => unprotect(data, &marks, self.cipher.as_ref()).await,
            None => Ok(data.clone()),
        }
    }

    /// Encrypts the sensitive fields of `envelope.data` in place (producer side, after building
    /// the envelope and before publishing it). Only `data` changes: `job`, `trace_id`, `meta` and
    /// `attempts` stay as they are. On an error the envelope is left unchanged.
    pub async fn protect_envelope(&self, envelope: &mut Envelope) -> Result<()> {
        let urn = envelope.urn().into_owned();
        self.rewrite(&urn, envelope, true).await.map(drop)
    }

    /// Decrypts the protected fields of `envelope.data` in place, using the envelope's own URN.
    /// On an error the envelope is left unchanged.
    pub async fn unprotect_envelope(&self, envelope: &mut Envelope) -> Result<()> {
        let urn = envelope.urn().into_owned();
        self.rewrite(&urn, envelope, false).await.map(drop)
    }

    /// Rewrites `data` of `envelope` as a message of `urn`; returns whether it changed.
    async fn rewrite(&self, urn: &str, envelope: &mut Envelope, encrypt: bool) -> Result<bool> {
        let Some(data) = envelope.data().filter(|d| !d.is_null()) else {
            return Ok(false);
        };
        let Some(marks) = self.marks(urn)? else {
            return Ok(false);
        };
        if marks.is_empty() {
            return Ok(false);
        }
        let cipher = self.cipher.as_ref();
        let new = if encrypt {
            protect(data, &marks, cipher).await?
        } else {
            unprotect(data, &marks, cipher).await?
        };
        if &new == data {
            return Ok(false);
        }
        envelope.set("data", new);
        Ok(true)
    }
}

/// A handler that decrypts the protected fields of a message before running `inner`.
///
/// The schema is the one registered for the URN the message was routed by. When a protected
/// field cannot be decrypted (wrong key, altered value, a value that is not a ciphertext,
/// plaintext that is not JSON, or a schema that cannot be loaded) the inner handler does **not**
/// run: the message fails with exception `DecryptError` (`SchemaError` for a schema that cannot
/// be loaded), so the runtime retries it with its back-off and dead-letters it once its attempts
/// are spent. The dead-letter record names the field, never its value.
pub struct Unprotected<H> {
    protector: Arc<Protector>,
    inner: Arc<H>,
}

impl<H> fmt::Debug for Unprotected<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unprotected")
            .field("protector", &self.protector)
            .finish_non_exhaustive()
    }
}

/// Wraps `handler` so it sees `data` with its protected fields decrypted (see [`Unprotected`]).
pub fn unprotected<H: Handler>(protector: Arc<Protector>, handler: H) -> Unprotected<H> {
    Unprotected {
        protector,
        inner: Arc::new(handler),
    }
}

/// The handler failure for an error of this crate.
pub fn handler_error(error: Error) -> HandlerError {
    let exception = if error.kind() == ErrorKind::Schema {
        "SchemaError"
    } else {
        "DecryptError"
    };
    HandlerError::from(error).with_exception(exception)
}

impl<H: Handler> Handler for Unprotected<H> {
    fn call(&self, ctx: Context) -> HandlerFuture {
        let protector = self.protector.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let urn = ctx.urn().into_owned();
            let mut envelope = ctx.envelope().clone();
            match protector.rewrite(&urn, &mut envelope, false).await {
                Ok(true) => inner.call(ctx.with_envelope(envelope)).await,
                Ok(false) => inner.call(ctx).await,
                Err(e) => Err(handler_error(e)),
            }
        })
    }
}
