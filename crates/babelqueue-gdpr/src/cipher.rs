//! The [`Cipher`] seam and the built-in AES-256-GCM cipher.

use std::fmt;

use aes_gcm::aead::{Aead, Generate, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroizing;

use crate::error::{CipherError, Error, ErrorKind};

/// Encrypts and decrypts one field value at a time.
///
/// [`protect`](crate::protect) hands `encrypt` the JSON text of one sensitive value and puts the
/// string it returns into `data` (as a JSON string, escaped as needed); [`unprotect`](crate::unprotect)
/// hands that string back to `decrypt` and expects the same bytes. The contract every
/// implementation keeps:
///
/// * `encrypt` may return a different string for the same plaintext on every call (a random
///   nonce is expected);
/// * `decrypt(encrypt(p)) == p`, byte for byte;
/// * `decrypt` **fails** for a string it did not produce under a key it knows, or one that was
///   altered: never garbage. Report [`ErrorKind::Authentication`] for those,
///   [`ErrorKind::Malformed`] for something that is not a ciphertext at all, and
///   [`ErrorKind::Unavailable`] when a remote service is down;
/// * both are safe to call concurrently.
///
/// The methods are `async` so an implementation can call a KMS, Vault transit or an HSM; the
/// trait is object safe (`Arc<dyn Cipher>`).
///
/// ```
/// use async_trait::async_trait;
/// use babelqueue_gdpr::{Cipher, CipherError};
///
/// /// Reverses the bytes: NOT a cipher, only the shape of one.
/// #[derive(Debug)]
/// struct Mirror;
///
/// #[async_trait]
/// impl Cipher for Mirror {
///     async fn encrypt(&self, plaintext: &[u8]) -> Result<String, CipherError> {
///         Ok(plaintext.iter().rev().map(|b| format!("{b:02x}")).collect())
///     }
///     async fn decrypt(&self, ciphertext: &str) -> Result<Vec<u8>, CipherError> {
///         let bytes: Result<Vec<u8>, _> = (0..ciphertext.len())
///             .step_by(2)
///             .map(|i| u8::from_str_radix(ciphertext.get(i..i + 2).unwrap_or("?"), 16))
///             .collect();
///         let mut bytes = bytes.map_err(|_| CipherError::malformed("not hex"))?;
///         bytes.reverse();
///         Ok(bytes)
///     }
/// }
/// ```
#[async_trait]
pub trait Cipher: Send + Sync + fmt::Debug {
    /// Protects the JSON text of one field value; returns the ciphertext as a string.
    async fn encrypt(&self, plaintext: &[u8]) -> Result<String, CipherError>;

    /// Restores the exact bytes [`Cipher::encrypt`] was given.
    async fn decrypt(&self, ciphertext: &str) -> Result<Vec<u8>, CipherError>;
}

/// The length of an AES-256 key, in bytes.
pub const KEY_LEN: usize = 32;
/// The length of the random nonce in front of every ciphertext, in bytes (96 bits).
pub const NONCE_LEN: usize = 12;
/// The length of the GCM authentication tag at the end of every ciphertext, in bytes.
pub const TAG_LEN: usize = 16;

/// A 256-bit AES key. The bytes are wiped when the key is dropped and never appear in `Debug`
/// output.
pub struct AesKey {
    bytes: Zeroizing<[u8; KEY_LEN]>,
}

impl AesKey {
    /// A key from exactly 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<AesKey, Error> {
        if bytes.len() != KEY_LEN {
            return Err(Error::InvalidKey(format!(
                "an AES-256 key is {KEY_LEN} bytes, got {}",
                bytes.len()
            )));
        }
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        key.copy_from_slice(bytes);
        Ok(AesKey { bytes: key })
    }

    /// A key from its standard base64 text (44 characters with padding), as a secret store or an
    /// environment variable would hold it.
    pub fn from_base64(text: &str) -> Result<AesKey, Error> {
        let decoded = Zeroizing::new(
            STANDARD
                .decode(text.trim())
                .map_err(|_| Error::InvalidKey("the key is not standard base64".into()))?,
        );
        AesKey::from_bytes(&decoded)
    }

    /// A fresh random key from the operating system's generator.
    pub fn generate() -> Result<AesKey, Error> {
        let bytes = <[u8; KEY_LEN]>::try_generate()
            .map(Zeroizing::new)
            .map_err(|e| Error::InvalidKey(format!("no system randomness: {e}")))?;
        Ok(AesKey { bytes })
    }

    /// The key as standard base64, for storing a generated key (wiped when dropped).
    pub fn to_base64(&self) -> Zeroizing<String> {
        Zeroizing::new(STANDARD.encode(self.bytes.as_slice()))
    }

    fn cipher(&self) -> Aes256Gcm {
        // The length is checked at construction; `new_from_slice` avoids a copy of the key.
        Aes256Gcm::new_from_slice(self.bytes.as_slice()).unwrap_or_else(|_| unreachable!())
    }
}

impl fmt::Debug for AesKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AesKey(<redacted>)")
    }
}

/// AES-256-GCM with a random 96-bit nonce per value, in the wire format of the reference SDKs'
/// AES-GCM cipher: standard base64 (with padding) of `nonce (12 bytes) ‖ ciphertext ‖ tag (16
/// bytes)`, no associated data.
///
/// The format carries no key id, so key rotation works by trial: [`AesGcmCipher::with_previous_key`]
/// adds keys that still decrypt (tried after the current key, in the order added) while every new
/// value is encrypted under the current key. A value that no key authenticates is an
/// [`ErrorKind::Authentication`] failure.
///
/// The expanded keys are wiped when the cipher is dropped and never appear in `Debug` output.
///
/// ```
/// use babelqueue_gdpr::{AesGcmCipher, AesKey, Cipher, ErrorKind};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let old = AesKey::generate()?;
/// let new = AesKey::generate()?;
/// let before = AesGcmCipher::new(&old).encrypt(b"\"alice@example.com\"").await?;
///
/// // After the rotation: new values under `new`, old ones still readable.
/// let rotated = AesGcmCipher::new(&new).with_previous_key(&old);
/// assert_eq!(rotated.decrypt(&before).await?, b"\"alice@example.com\"");
///
/// // A cipher that never knew `old` refuses the value, with a typed error.
/// let err = AesGcmCipher::new(&new).decrypt(&before).await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Authentication);
/// # Ok(()) }
/// ```
pub struct AesGcmCipher {
    current: Aes256Gcm,
    previous: Vec<Aes256Gcm>,
}

impl AesGcmCipher {
    /// A cipher that encrypts and decrypts under `key`.
    pub fn new(key: &AesKey) -> AesGcmCipher {
        AesGcmCipher {
            current: key.cipher(),
            previous: Vec::new(),
        }
    }

    /// Also decrypts values encrypted under `key` (a key being rotated out). Never encrypts with
    /// it.
    #[must_use]
    pub fn with_previous_key(mut self, key: &AesKey) -> AesGcmCipher {
        self.previous.push(key.cipher());
        self
    }

    /// How many keys decrypt (the current one and the previous ones).
    pub fn key_count(&self) -> usize {
        1 + self.previous.len()
    }

    /// Encrypts `plaintext` under the current key (synchronous form of [`Cipher::encrypt`]).
    pub fn seal(&self, plaintext: &[u8]) -> Result<String, CipherError> {
        let nonce = <[u8; NONCE_LEN]>::try_generate().map_err(|e| {
            CipherError::unavailable("no system randomness for a nonce").with_source(e)
        })?;
        let sealed = self
            .current
            .encrypt(&Nonce::from(nonce), plaintext)
            .map_err(|_| CipherError::new(ErrorKind::Cipher, "AES-GCM refused the plaintext"))?;
        let mut framed = Vec::with_capacity(NONCE_LEN + sealed.len());
        framed.extend_from_slice(&nonce);
        framed.extend_from_slice(&sealed);
        Ok(STANDARD.encode(framed))
    }

    /// Decrypts a value under any known key (synchronous form of [`Cipher::decrypt`]).
    pub fn open(&self, ciphertext: &str) -> Result<Vec<u8>, CipherError> {
        let framed = STANDARD
            .decode(ciphertext)
            .map_err(|_| CipherError::malformed("not a ciphertext: not standard base64"))?;
        if framed.len() < NONCE_LEN + TAG_LEN {
            return Err(CipherError::malformed(format!(
                "not a ciphertext: {} bytes, shorter than a nonce and a tag ({})",
                framed.len(),
                NONCE_LEN + TAG_LEN
            )));
        }
        let (nonce, sealed) = framed.split_at(NONCE_LEN);
        let nonce = Nonce::try_from(nonce).map_err(|_| CipherError::malformed("bad nonce"))?;
        std::iter::once(&self.current)
            .chain(&self.previous)
            .find_map(|key| key.decrypt(&nonce, sealed).ok())
            .ok_or_else(CipherError::authentication)
    }
}

impl fmt::Debug for AesGcmCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AesGcmCipher")
            .field("keys", &self.key_count())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Cipher for AesGcmCipher {
    async fn encrypt(&self, plaintext: &[u8]) -> Result<String, CipherError> {
        self.seal(plaintext)
    }

    async fn decrypt(&self, ciphertext: &str) -> Result<Vec<u8>, CipherError> {
        self.open(ciphertext)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> AesKey {
        AesKey::from_bytes(&[byte; KEY_LEN]).unwrap()
    }

    #[test]
    fn seals_with_a_fresh_nonce_and_opens_exactly() {
        let c = AesGcmCipher::new(&key(7));
        let a = c.seal(b"{\"x\":1}").unwrap();
        let b = c.seal(b"{\"x\":1}").unwrap();
        assert_ne!(
            a, b,
            "two encryptions of one value must differ (random nonce)"
        );
        let raw = STANDARD.decode(&a).unwrap();
        assert_eq!(raw.len(), NONCE_LEN + 7 + TAG_LEN);
        assert_eq!(c.open(&a).unwrap(), b"{\"x\":1}");
        assert_eq!(c.open(&b).unwrap(), b"{\"x\":1}");
    }

    #[test]
    fn wrong_key_tampering_and_garbage_are_typed() {
        let c = AesGcmCipher::new(&key(1));
        let sealed = c.seal(b"\"secret\"").unwrap();
        let other = AesGcmCipher::new(&key(2));
        assert_eq!(
            other.open(&sealed).unwrap_err().kind(),
            ErrorKind::Authentication
        );
        let mut raw = STANDARD.decode(&sealed).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 0x01; // flip one tag bit
        assert_eq!(
            c.open(&STANDARD.encode(&raw)).unwrap_err().kind(),
            ErrorKind::Authentication
        );
        raw[last] ^= 0x01;
        raw[NONCE_LEN] ^= 0x80; // flip one ciphertext bit
        assert_eq!(
            c.open(&STANDARD.encode(&raw)).unwrap_err().kind(),
            ErrorKind::Authentication
        );
        assert_eq!(
            c.open("alice@example.com").unwrap_err().kind(),
            ErrorKind::Malformed
        );
        assert_eq!(c.open("AAAA").unwrap_err().kind(), ErrorKind::Malformed);
    }

    #[test]
    fn rotation_decrypts_with_any_known_key_and_encrypts_with_the_current_one() {
        let old = AesGcmCipher::new(&key(1));
        let rotated = AesGcmCipher::new(&key(2)).with_previous_key(&key(1));
        assert_eq!(rotated.key_count(), 2);
        let from_old = old.seal(b"42").unwrap();
        assert_eq!(rotated.open(&from_old).unwrap(), b"42");
        let from_new = rotated.seal(b"43").unwrap();
        assert_eq!(
            old.open(&from_new).unwrap_err().kind(),
            ErrorKind::Authentication,
            "new values must be under the new key"
        );
    }

    #[test]
    fn keys_are_checked_and_never_printed() {
        assert_eq!(
            AesKey::from_bytes(&[0; 16]).unwrap_err().kind(),
            ErrorKind::InvalidKey
        );
        assert_eq!(
            AesKey::from_base64("not base64!").unwrap_err().kind(),
            ErrorKind::InvalidKey
        );
        let k = AesKey::generate().unwrap();
        let text = k.to_base64();
        let again = AesKey::from_base64(&text).unwrap();
        assert_eq!(*again.bytes, *k.bytes);
        assert_eq!(format!("{k:?}"), "AesKey(<redacted>)");
        let c = AesGcmCipher::new(&k).with_previous_key(&again);
        let shown = format!("{c:?}");
        assert_eq!(shown, "AesGcmCipher { keys: 2, .. }");
        assert!(!shown.contains(text.as_str()));
    }
}
