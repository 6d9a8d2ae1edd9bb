//! The TLS files of an `amqps://` connection: the URL's `ca_file`, `cert_file` and `key_file`
//! over [`AmqpOptions`]'s, read once and handed to the [`LapinClient`].

use std::path::{Path, PathBuf};

use crate::client::LapinClient;
use crate::error::AmqpError;
use crate::transport::AmqpOptions;
use crate::url::AmqpUrl;

/// The files to read: what the URL names wins over the options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    pub(crate) ca_file: Option<PathBuf>,
    pub(crate) cert_file: Option<PathBuf>,
    pub(crate) key_file: Option<PathBuf>,
}

impl TlsFiles {
    pub(crate) fn of(url: &AmqpUrl, options: &AmqpOptions) -> TlsFiles {
        // The certificate and its key come as a pair, from the URL or from the options.
        let (cert_file, key_file) = if url.cert_file.is_some() {
            (url.cert_file.clone(), url.key_file.clone())
        } else {
            (options.cert_file.clone(), options.key_file.clone())
        };
        TlsFiles {
            ca_file: url.ca_file.clone().or_else(|| options.ca_file.clone()),
            cert_file,
            key_file,
        }
    }

    /// `client` with the CA certificates and the client certificate of these files.
    pub(crate) fn apply(&self, mut client: LapinClient) -> Result<LapinClient, AmqpError> {
        if let Some(path) = &self.ca_file {
            let pem = std::fs::read_to_string(path).map_err(|e| {
                AmqpError::Tls(format!("cannot read the CA file {}: {e}", path.display()))
            })?;
            client = client.with_tls_ca_pem(pem).map_err(|e| naming(e, path))?;
        }
        match (&self.cert_file, &self.key_file) {
            (None, None) => {}
            (Some(cert), Some(key)) => {
                let read = |path: &Path, what: &str| {
                    std::fs::read(path).map_err(|e| {
                        AmqpError::Tls(format!("cannot read the {what} {}: {e}", path.display()))
                    })
                };
                client = client
                    .with_client_certificate_pem(
                        read(cert, "client certificate")?,
                        read(key, "client key")?,
                    )
                    .map_err(|e| naming(e, cert))?;
            }
            _ => {
                return Err(AmqpError::Tls(
                    "cert_file and key_file go together (mutual TLS)".to_owned(),
                ));
            }
        }
        Ok(client)
    }
}

/// A TLS error with the file it is about.
fn naming(e: AmqpError, path: &Path) -> AmqpError {
    match e {
        AmqpError::Tls(text) => AmqpError::Tls(format!("{text} ({})", path.display())),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(url: &str, options: &AmqpOptions) -> TlsFiles {
        TlsFiles::of(&AmqpUrl::parse(url).unwrap(), options)
    }

    #[test]
    fn the_url_names_the_files_and_wins_over_the_options() {
        let options = AmqpOptions::default()
            .ca_file("/opt/ca.pem")
            .client_certificate("/opt/me.pem", "/opt/me.key");
        let f = files(
            "amqps://h?ca_file=%2Fu%2Fca.pem&cert_file=/u/me.pem&key_file=/u/me.key",
            &options,
        );
        assert_eq!(f.ca_file, Some(PathBuf::from("/u/ca.pem")));
        assert_eq!(
            (f.cert_file, f.key_file),
            (Some("/u/me.pem".into()), Some("/u/me.key".into()))
        );
        let f = files("amqps://h", &options);
        assert_eq!(f.ca_file, Some(PathBuf::from("/opt/ca.pem")));
        assert_eq!(f.key_file, Some(PathBuf::from("/opt/me.key")));
        let err = AmqpUrl::parse("amqps://h?cert_file=/c.pem").unwrap_err();
        assert!(err.to_string().contains("go together"), "{err}");
        assert!(AmqpUrl::parse("amqps://h?ca_file=").is_err());
    }

    #[test]
    fn a_client_certificate_reaches_the_client_when_its_key_fits() {
        let (cert, key, other) = babelqueue_testkit::tls::client_files("amqp");
        let client = || LapinClient::new(AmqpUrl::parse("amqps://h").unwrap().uri, "t");
        let with = TlsFiles {
            cert_file: Some(cert.clone()),
            key_file: Some(key.clone()),
            ..TlsFiles::default()
        };
        let shown = format!("{:?}", with.apply(client()).unwrap());
        assert!(shown.contains("client_certificate: true"), "{shown}");
        assert!(format!("{:?}", client()).contains("client_certificate: false"));
        for (cert_file, key_file, needle) in [
            (Some(&cert), Some(&other), "do not fit"),
            (Some(&cert), Some(&cert), "client key cannot be read"),
            (Some(&key), Some(&key), "client certificate"),
            (Some(&cert), None, "go together"),
            (
                Some(&cert.with_file_name("missing.pem")),
                Some(&key),
                "missing.pem",
            ),
        ] {
            let files = TlsFiles {
                cert_file: cert_file.cloned(),
                key_file: key_file.cloned(),
                ..TlsFiles::default()
            };
            let err = files.apply(client()).unwrap_err();
            assert!(err.to_string().contains(needle), "{needle}: {err}");
            assert!(!err.to_string().contains("PRIVATE KEY"), "{err}");
            assert!(!err.is_transient());
        }
    }
}
