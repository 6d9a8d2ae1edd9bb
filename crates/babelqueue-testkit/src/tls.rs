//! Test-only TLS material for offline client-certificate tests: a self-signed client
//! certificate with its key (EC P-256, valid for a century), and a key that does not belong to
//! it. Never use them anywhere but in tests.

use std::path::PathBuf;

/// A self-signed client certificate (PEM), CN `babelqueue-test-client`.
pub const CLIENT_CERT_PEM: &str = include_str!("../fixtures/tls/client.pem");
/// The private key of [`CLIENT_CERT_PEM`] (PKCS#8 PEM).
pub const CLIENT_KEY_PEM: &str = include_str!("../fixtures/tls/client.key");
/// A private key that does not belong to [`CLIENT_CERT_PEM`] (PKCS#8 PEM).
pub const OTHER_KEY_PEM: &str = include_str!("../fixtures/tls/other.key");

/// The three PEM files written to a fresh temporary directory: `(cert, key, other key)`.
///
/// ```
/// let (cert, key, other) = babelqueue_testkit::tls::client_files("doc");
/// assert!(std::fs::read_to_string(&cert).unwrap().contains("BEGIN CERTIFICATE"));
/// assert_ne!(std::fs::read(&key).unwrap(), std::fs::read(&other).unwrap());
/// ```
pub fn client_files(tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "bq-tls-{tag}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write a temporary PEM file");
        path
    };
    (
        write("client.pem", CLIENT_CERT_PEM),
        write("client.key", CLIENT_KEY_PEM),
        write("other.key", OTHER_KEY_PEM),
    )
}
