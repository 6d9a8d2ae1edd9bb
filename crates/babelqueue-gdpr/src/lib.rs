//! GDPR field encryption for BabelQueue: the fields a payload schema marks `x-gdpr-sensitive`
//! are encrypted inside `data` before a message is published and decrypted before its handler
//! runs.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::{Arc, Mutex};
//! use babelqueue_core::schema::MapProvider;
//! use babelqueue_core::{App, Consume, Context, HandlerError, MemoryTransport, RawJson};
//! use babelqueue_gdpr::{AesGcmCipher, AesKey, Protector, unprotected};
//!
//! const URN: &str = "urn:babel:customers:registered";
//! let schemas = Arc::new(MapProvider::new([(URN.to_owned(), serde_json::json!({
//!     "type": "object",
//!     "properties": {
//!         "customer_id": {"type": "integer"},
//!         "email": {"type": "string", "x-gdpr-sensitive": "contact"}
//!     }
//! }))]));
//! // In production the key comes from a secret store: AesKey::from_base64(&secret)?
//! let cipher = Arc::new(AesGcmCipher::new(&AesKey::generate()?));
//! let gdpr = Arc::new(Protector::new(cipher, schemas));
//!
//! let seen = Arc::new(Mutex::new(String::new()));
//! let memory = MemoryTransport::new();
//! let app = App::builder(memory.clone())
//!     .queue("customers")
//!     .handle(URN, unprotected(gdpr.clone(), {
//!         let seen = seen.clone();
//!         move |ctx: Context| {
//!             let seen = seen.clone();
//!             async move {
//!                 *seen.lock().unwrap() = ctx.data().to_string();
//!                 Ok::<(), HandlerError>(())
//!             }
//!         }
//!     }))
//!     .build()?;
//!
//! // Producer: build the envelope, protect it, publish it.
//! let data = RawJson::parse(r#"{"customer_id":7,"email":"alice@example.com"}"#)?;
//! let mut envelope = app.envelope(URN).data_raw(data).build()?;
//! gdpr.protect_envelope(&mut envelope).await?;
//! app.publish_envelope("customers", &envelope, &Default::default()).await?;
//!
//! // On the wire the address is a ciphertext; every other byte is as it was.
//! let body = String::from_utf8(memory.bodies("customers").remove(0))?;
//! assert!(body.contains(r#""data":{"customer_id":7,"email":""#) && !body.contains("alice"));
//!
//! // Consumer: the handler sees the clear text.
//! app.consume(Consume::new().max_messages(1).handle_signals(false)).await?;
//! assert_eq!(*seen.lock().unwrap(), r#"{"customer_id":7,"email":"alice@example.com"}"#);
//! # Ok(()) }
//! ```
//!
//! # Pieces
//!
//! * [`Marks`]: the compiled `x-gdpr-sensitive` marks of one schema (nested objects, array
//!   items, container marks that protect a whole object or array as one value);
//! * [`protect`] / [`unprotect`]: rewrite the marked values of one `data` in its raw JSON text,
//!   leaving every other byte as it was (number literals of any size, escapes, key order), so
//!   `unprotect(protect(data)) == data` byte for byte;
//! * [`Cipher`]: the async, object-safe seam for a KMS, Vault transit or an HSM;
//!   [`AesGcmCipher`] is the built-in AES-256-GCM one, with key rotation;
//! * [`Protector`]: per-URN schemas from a core [`SchemaProvider`](babelqueue_core::schema::SchemaProvider);
//! * [`unprotected`]: a handler wrapper; a message whose protected fields cannot be decrypted is
//!   failed (retried, then dead-lettered) and never reaches the handler.
//!
//! # Wire format
//!
//! Only values inside `data` change: a marked value becomes a JSON string holding its
//! ciphertext; `job`, `trace_id`, `meta` (with `schema_version` 1) and `attempts` are untouched,
//! so an SDK without the key still carries the message. The cipher is handed the value's JSON
//! text and must give the same bytes back. [`AesGcmCipher`] writes standard base64 (padded) of
//! `nonce (12 bytes) ‖ ciphertext ‖ GCM tag (16 bytes)` with no associated data: the format of
//! the reference AES-GCM cipher the Python SDK documents, so a Python producer or consumer that
//! uses it with the same key interoperates (tested both ways against Python 1.24.0).
//!
//! # Security notes
//!
//! * Validate clear text: run schema validation before [`protect`] and after [`unprotect`]
//!   (a `minLength` on a sensitive field would judge the ciphertext otherwise).
//! * The format binds a ciphertext to its key only, not to its field or message (no associated
//!   data, as in the reference), so someone who can write to the queue can move a ciphertext
//!   from one field or message to another protected field under the same key.
//! * Key bytes and expanded AES keys are wiped on drop and never printed; error messages name
//!   fields, never values.

mod cipher;
mod error;
mod handler;
mod marks;
mod protect;

pub use cipher::{AesGcmCipher, AesKey, Cipher, KEY_LEN, NONCE_LEN, TAG_LEN};
pub use error::{CipherError, Error, ErrorKind, Result};
pub use handler::{Protector, Unprotected, handler_error, unprotected};
pub use marks::{KEYWORD, Marks};
pub use protect::{protect, unprotect};
