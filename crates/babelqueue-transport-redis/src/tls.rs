//! TLS for `rediss://`: the query keys every TLS transport shares (`ca_file`, `cert_file`,
//! `key_file`), taken out of the URL before it reaches the client, and the rustls
//! configuration (aws-lc-rs) they make.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use babelqueue_core::options::{Component, decode_lossy};
use fred::rustls;
use fred::rustls::pki_types::pem::PemObject;
use fred::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::RedisError;

/// The TLS files of a `rediss://` connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// A PEM file of the CA certificates to trust, instead of the system's roots (`ca_file=`).
    pub ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate for mutual TLS (`cert_file=`).
    pub cert_file: Option<PathBuf>,
    /// A PEM file of the client certificate's private key (`key_file=`).
    pub key_file: Option<PathBuf>,
}

impl TlsFiles {
    /// Whether any file is named (else the client's default TLS, the system roots, is used).
    pub fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.cert_file.is_none() && self.key_file.is_none()
    }
}

/// Takes the TLS keys out of a client URL: the URL without them, and `files` with what the URL
/// names put over it.
pub(crate) fn take_tls_files(url: &str, mut files: TlsFiles) -> (String, TlsFiles) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), files);
    };
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let path = |value: &str| Some(PathBuf::from(decode_lossy(value, Component::Query)));
        match pair.split_once('=') {
            Some(("ca_file", value)) => files.ca_file = path(value),
            Some(("cert_file", value)) => files.cert_file = path(value),
            Some(("key_file", value)) => files.key_file = path(value),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, files)
}

/// The rustls configuration for `files`: the CA file's certificates (only those) or the
/// system's roots, and the client certificate when one is named.
pub(crate) fn client_config(files: &TlsFiles) -> Result<rustls::ClientConfig, RedisError> {
    let mut roots = rustls::RootCertStore::empty();
    match &files.ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path).map_err(|e| {
                RedisError::Config(format!("cannot read the CA file {}: {e}", path.display()))
            })?;
            for cert in certs {
                let cert = cert.map_err(|e| {
                    RedisError::Config(format!("bad certificate in {}: {e}", path.display()))
                })?;
                roots.add(cert).map_err(|e| {
                    RedisError::Config(format!("unusable certificate in {}: {e}", path.display()))
                })?;
            }
        }
        None => {
            // As the client does without any file: the system's roots (unusable ones skipped).
            let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| RedisError::Config(format!("TLS: {e}")))?
        .with_root_certificates(roots);
    match (&files.cert_file, &files.key_file) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    RedisError::Config(format!(
                        "cannot read the client certificate {}: {e}",
                        cert.display()
                    ))
                })?;
            if chain.is_empty() {
                return Err(RedisError::Config(format!(
                    "the client certificate file {} holds no certificate",
                    cert.display()
                )));
            }
            let private = private_key(key)?;
            builder.with_client_auth_cert(chain, private).map_err(|e| {
                RedisError::Config(format!(
                    "the client certificate {} and the key {} do not fit: {e}",
                    cert.display(),
                    key.display()
                ))
            })
        }
        _ => Err(RedisError::Config(
            "cert_file and key_file go together (mutual TLS)".into(),
        )),
    }
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1); its bytes never reach a message.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, RedisError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        RedisError::Config(format!(
            "cannot read the client key {}: {e}",
            path.display()
        ))
    })
}

/// The client's TLS setting for `files` (`None`: the client's own default).
pub(crate) fn tls_config(
    files: &TlsFiles,
) -> Result<Option<fred::types::config::TlsConfig>, RedisError> {
    if files.is_empty() {
        return Ok(None);
    }
    let config = client_config(files)?;
    Ok(Some(fred::types::config::TlsConnector::from(config).into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_keys_leave_the_url_and_win_over_the_builder() {
        let (url, files) = take_tls_files(
            "rediss://h:6380/2?prefix=q:&ca_file=%2Fetc%2Fca.pem&cert_file=/c.pem&key_file=/k.pem",
            TlsFiles {
                ca_file: Some("/builder/ca.pem".into()),
                ..TlsFiles::default()
            },
        );
        assert_eq!(url, "rediss://h:6380/2?prefix=q:");
        assert_eq!(files.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(files.cert_file, Some(PathBuf::from("/c.pem")));
        assert_eq!(files.key_file, Some(PathBuf::from("/k.pem")));
        let (url, files) = take_tls_files("rediss://h", TlsFiles::default());
        assert_eq!(url, "rediss://h");
        assert!(files.is_empty());
        assert!(
            tls_config(&files).unwrap().is_none(),
            "the client's default"
        );
    }

    #[test]
    fn a_client_certificate_is_presented_when_its_key_fits() {
        let (cert, key, other) = babelqueue_testkit::tls::client_files("redis");
        let files = TlsFiles {
            cert_file: Some(cert.clone()),
            key_file: Some(key.clone()),
            ..TlsFiles::default()
        };
        let config = client_config(&files).unwrap();
        assert!(config.client_auth_cert_resolver.has_certs());
        assert!(tls_config(&files).unwrap().is_some());
        // without one, none is presented
        let ca_only = TlsFiles {
            ca_file: Some(cert.clone()),
            ..TlsFiles::default()
        };
        assert!(
            !client_config(&ca_only)
                .unwrap()
                .client_auth_cert_resolver
                .has_certs()
        );
        // a key of another certificate, a lone certificate, a missing key
        for (cert_file, key_file, needle) in [
            (Some(&cert), Some(&other), "do not fit"),
            (Some(&cert), None, "go together"),
            (Some(&cert), Some(&cert), "cannot read the client key"),
        ] {
            let files = TlsFiles {
                cert_file: cert_file.cloned(),
                key_file: key_file.cloned(),
                ..TlsFiles::default()
            };
            let err = client_config(&files).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
            assert!(!err.to_string().contains("PRIVATE KEY"), "{err}");
            assert_eq!(err.kind(), babelqueue_core::TransportErrorKind::Config);
        }
    }
}
