//! Connecting: URL parsing, TLS (rustls with aws-lc-rs), reconnection.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio::sync::RwLock;
use tokio_postgres::Client;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use babelqueue_core::redact::{redact, scrub};

use crate::error::Error;

/// How long a connection attempt may take when the URL sets no `connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A parsed connection target: the tokio-postgres configuration and the TLS setup.
#[derive(Clone)]
pub struct Connector {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("hosts", &self.config.get_hosts())
            .field("ports", &self.config.get_ports())
            .field("dbname", &self.config.get_dbname())
            .field("user", &self.config.get_user())
            .field("ssl_mode", &self.config.get_ssl_mode())
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// Parses a `postgres://` / `postgresql://` URL or a `key=value` connection string.
    ///
    /// Besides tokio-postgres' own options, a URL may carry `sslrootcert=/path/ca.pem` or
    /// `ca_file=` (the name every BabelQueue TLS transport uses: trust that PEM bundle instead
    /// of the public web roots), `sslcert=` + `sslkey=` or `cert_file=` + `key_file=` (a PEM
    /// client certificate and its key, for mutual TLS), and `sslmode=verify-ca` or
    /// `sslmode=verify-full` (read as `require`). Server certificates are always verified,
    /// whatever the `sslmode`; with the default `prefer`, a server without TLS is reached in
    /// plain text.
    pub fn parse(url: &str) -> Result<Connector, Error> {
        let (text, files) = split_tls_options(url)?;
        let mut config: tokio_postgres::Config =
            text.parse().map_err(|e: tokio_postgres::Error| {
                Error::Config(format!(
                    "connection string {:?}: {}",
                    redact(url),
                    scrub(&e.to_string(), url)
                ))
            })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        let tls = tls(&files)?;
        Ok(Connector {
            config,
            tls: MakeRustlsConnect::new(tls),
        })
    }

    /// Whether TLS is refused, preferred or required.
    pub fn ssl_mode(&self) -> SslMode {
        self.config.get_ssl_mode()
    }

    /// `host:port` of the server(s), for messages.
    pub fn endpoint(&self) -> String {
        let ports = self.config.get_ports();
        self.config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let host = match host {
                    tokio_postgres::config::Host::Tcp(h) if h.contains(':') => format!("[{h}]"),
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    #[cfg(unix)]
                    tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
                };
                let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
                format!("{host}:{port}")
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Opens a connection; its I/O runs on a spawned tokio task until the client is dropped.
    /// Refused credentials are an [`Error::Auth`] that names the server; a server that cannot
    /// be reached is an [`Error::Connection`] that names it.
    pub async fn connect(&self) -> Result<Client, Error> {
        let (client, connection) =
            self.config
                .connect(self.tls.clone())
                .await
                .map_err(|e| match Error::from(e) {
                    Error::Auth {
                        message,
                        code,
                        source,
                        ..
                    } => Error::Auth {
                        endpoint: Some(self.endpoint()),
                        message,
                        code,
                        source,
                    },
                    Error::Connection { message, source } => Error::Connection {
                        message: format!("{message} (connecting to {})", self.endpoint()),
                        source,
                    },
                    other => other,
                })?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(target: "babelqueue::postgres", error = %e,
                    "PostgreSQL connection closed with an error");
            }
        });
        Ok(client)
    }
}

/// The TLS files a URL names (libpq's names or the ones every BabelQueue TLS transport uses).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TlsFiles {
    root_cert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

/// Takes the TLS files out of a URL (tokio-postgres does not know them) and maps the libpq
/// `sslmode` values it lacks.
fn split_tls_options(text: &str) -> Result<(String, TlsFiles), Error> {
    let mut files = TlsFiles::default();
    if !(text.starts_with("postgres://") || text.starts_with("postgresql://")) {
        return Ok((text.to_owned(), files));
    }
    let mut url = url::Url::parse(text)
        .map_err(|e| Error::Config(format!("connection URL {:?}: {e}", redact(text))))?;
    let mut kept = Vec::new();
    for (key, value) in url.query_pairs() {
        match (key.as_ref(), value.as_ref()) {
            ("sslrootcert" | "ca_file", path) => files.root_cert = Some(path.to_owned()),
            ("sslcert" | "cert_file", path) => files.cert = Some(path.to_owned()),
            ("sslkey" | "key_file", path) => files.key = Some(path.to_owned()),
            ("sslmode", "verify-ca" | "verify-full") => {
                kept.push(("sslmode".to_owned(), "require".to_owned()));
            }
            _ => kept.push((key.into_owned(), value.into_owned())),
        }
    }
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok((url.into(), files))
}

fn tls(files: &TlsFiles) -> Result<rustls::ClientConfig, Error> {
    let mut roots = rustls::RootCertStore::empty();
    match files.root_cert.as_deref() {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| Error::Config(format!("sslrootcert {path:?}: {e}")))?;
            if certs.is_empty() {
                return Err(Error::Config(format!(
                    "sslrootcert {path:?} holds no certificate"
                )));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| Error::Config(format!("sslrootcert {path:?}: {e}")))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    // The provider is named, so the process-wide default never matters.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?
        .with_root_certificates(roots);
    match (files.cert.as_deref(), files.key.as_deref()) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| Error::Config(format!("sslcert {cert:?}: {e}")))?;
            if chain.is_empty() {
                return Err(Error::Config(format!(
                    "sslcert {cert:?} holds no certificate"
                )));
            }
            // The key's bytes never reach a message.
            let private = rustls_pki_types::PrivateKeyDer::from_pem_file(key)
                .map_err(|e| Error::Config(format!("sslkey {key:?}: {e}")))?;
            builder.with_client_auth_cert(chain, private).map_err(|e| {
                Error::Config(format!(
                    "sslcert {cert:?} and sslkey {key:?} do not fit: {e}"
                ))
            })
        }
        _ => Err(Error::Config(
            "sslcert and sslkey (cert_file and key_file) go together".into(),
        )),
    }
}

/// Opens a connection to `url` (see [`Connector::parse`] for the accepted forms).
///
/// The client is yours: use it for your own business writes, and pass it (or a transaction on
/// it) to [`PgOutbox::write`](crate::PgOutbox::write).
pub async fn connect(url: &str) -> Result<Client, Error> {
    Connector::parse(url)?.connect().await
}

/// A shared client that is replaced by a new connection once the old one closed (when the store
/// was built from a URL).
pub(crate) struct Shared {
    connector: Option<Connector>,
    client: RwLock<Arc<Client>>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("connector", &self.connector)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) async fn connect(url: &str) -> Result<Shared, Error> {
        let connector = Connector::parse(url)?;
        let client = connector.connect().await?;
        Ok(Shared {
            connector: Some(connector),
            client: RwLock::new(Arc::new(client)),
        })
    }

    pub(crate) fn from_client(client: Client) -> Shared {
        Shared {
            connector: None,
            client: RwLock::new(Arc::new(client)),
        }
    }

    /// The client, reconnecting first when the connection closed.
    pub(crate) async fn client(&self) -> Result<Arc<Client>, Error> {
        {
            let client = self.client.read().await;
            if !client.is_closed() {
                return Ok(client.clone());
            }
        }
        let mut client = self.client.write().await;
        if client.is_closed() {
            let Some(connector) = &self.connector else {
                return Err(Error::connection(
                    "the connection is closed (the store was built from a client, so it cannot \
                     reconnect)",
                ));
            };
            *client = Arc::new(connector.connect().await?);
            tracing::info!(target: "babelqueue::postgres", "Reconnected to PostgreSQL");
        }
        Ok(client.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_options_are_taken_out_of_urls() {
        let (text, files) = split_tls_options(
            "postgres://u:p@db.example:5433/app?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(files.root_cert.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(
            text,
            "postgres://u:p@db.example:5433/app?sslmode=require&application_name=x"
        );
        let (text, files) = split_tls_options("postgresql://h/db?sslrootcert=ca.pem").unwrap();
        assert_eq!(
            (text.as_str(), files.root_cert.as_deref()),
            ("postgresql://h/db", Some("ca.pem"))
        );
        let (text, files) = split_tls_options("host=h user=u").unwrap();
        assert_eq!(
            (text.as_str(), files),
            ("host=h user=u", TlsFiles::default())
        );
        // the names every BabelQueue TLS transport uses, and libpq's client certificate names
        for url in [
            "postgres://h/db?ca_file=/ca.pem&cert_file=/me.pem&key_file=/me.key",
            "postgres://h/db?sslrootcert=/ca.pem&sslcert=/me.pem&sslkey=/me.key",
        ] {
            let (text, files) = split_tls_options(url).unwrap();
            assert_eq!(text, "postgres://h/db");
            assert_eq!(
                files,
                TlsFiles {
                    root_cert: Some("/ca.pem".into()),
                    cert: Some("/me.pem".into()),
                    key: Some("/me.key".into()),
                }
            );
        }
    }

    #[test]
    fn a_client_certificate_reaches_the_tls_config_when_its_key_fits() {
        let (cert, key, other) = babelqueue_testkit::tls::client_files("postgres");
        let path = |p: &std::path::Path| Some(p.display().to_string());
        let files = |cert_file: Option<String>, key_file: Option<String>| TlsFiles {
            root_cert: None,
            cert: cert_file,
            key: key_file,
        };
        let config = tls(&files(path(&cert), path(&key))).unwrap();
        assert!(config.client_auth_cert_resolver.has_certs());
        assert!(
            !tls(&TlsFiles::default())
                .unwrap()
                .client_auth_cert_resolver
                .has_certs()
        );
        for (cert_file, key_file, needle) in [
            (path(&cert), path(&other), "do not fit"),
            (path(&cert), None, "go together"),
            (path(&cert), path(&cert), "sslkey"),
        ] {
            let err = tls(&files(cert_file, key_file)).unwrap_err();
            assert!(err.to_string().contains(needle), "{needle}: {err}");
            assert!(!err.to_string().contains("PRIVATE KEY"), "{err}");
        }
        let url = format!(
            "postgres://h/db?sslmode=require&cert_file={}&key_file={}",
            cert.display(),
            key.display()
        );
        assert!(Connector::parse(&url).is_ok());
    }

    /// A port on 127.0.0.1 that nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        drop(listener);
        port
    }

    fn shown(error: &Error) -> String {
        format!("{error}\n{error:?}")
    }

    #[test]
    fn a_bad_option_never_shows_the_password() {
        for url in [
            "postgres://bq:hunter2@127.0.0.1:5432/bq?bogus=1",
            "postgres://bq:hunter2@127.0.0.1:5432/bq?connect_timeout=soon",
            "postgresql://bq:hun@ter2@[::1]:5432/bq?sslmode=sometimes",
            "postgres://bq:hunter2@127.0.0.1:notaport/bq",
            "postgres://bq:hunter2@127.0.0.1:5432/bq?sslrootcert=/nonexistent/ca.pem",
            "host=127.0.0.1 user=bq password=hunter2 port=soon",
            "host=127.0.0.1 user=bq password='hunter2' bogus=1",
            "postgres:/bq:hunter2@127.0.0.1/bq",
        ] {
            let error = Connector::parse(url).unwrap_err();
            assert_eq!(error.kind(), crate::ErrorKind::Config, "{url}: {error}");
            let text = shown(&error);
            assert!(
                !text.contains("hunter2") && !text.contains("ter2"),
                "{url}: {text}"
            );
        }
        let connector = Connector::parse("postgres://bq:hunter2@127.0.0.1/bq").unwrap();
        assert!(!format!("{connector:?}").contains("hunter2"));
    }

    #[tokio::test]
    async fn a_refused_connection_never_shows_the_password() {
        let port = closed_port();
        for url in [
            format!("postgres://bq:hunter2@127.0.0.1:{port}/bq?sslmode=disable"),
            format!("host=127.0.0.1 port={port} user=bq password=hunter2 sslmode=disable"),
        ] {
            let error = connect(&url).await.unwrap_err();
            assert_eq!(error.kind(), crate::ErrorKind::Connection, "{error:?}");
            assert!(error.is_transient());
            let text = shown(&error);
            assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
            assert!(!text.contains("hunter2"), "{url}: {text}");
            let outbox = babelqueue_outbox::Error::from(error);
            let text = format!("{outbox}\n{outbox:?}");
            assert!(!text.contains("hunter2"), "{url}: {text}");
        }
    }

    #[test]
    fn refused_credentials_are_auth_errors() {
        let error = Error::Auth {
            endpoint: Some("127.0.0.1:5432".into()),
            message: "password authentication failed for user \"bq\" (28P01)".into(),
            code: "28P01".into(),
            source: None,
        };
        assert_eq!(error.kind(), crate::ErrorKind::Auth);
        assert!(!error.is_transient());
        assert_eq!(error.sqlstate(), Some("28P01"));
        assert_eq!(
            error.to_string(),
            "PostgreSQL at 127.0.0.1:5432 refused the credentials: password authentication failed for user \"bq\" (28P01)"
        );
    }

    #[test]
    fn urls_parse_with_a_default_connect_timeout() {
        let c = Connector::parse("postgres://bq:bq@127.0.0.1:5432/bq").unwrap();
        assert_eq!(
            c.config.get_connect_timeout(),
            Some(&DEFAULT_CONNECT_TIMEOUT)
        );
        assert_eq!(c.ssl_mode(), SslMode::Prefer);
        let c = Connector::parse("postgres://h/db?connect_timeout=2&sslmode=verify-ca").unwrap();
        assert_eq!(
            c.config.get_connect_timeout(),
            Some(&Duration::from_secs(2))
        );
        assert_eq!(c.ssl_mode(), SslMode::Require);
        for bad in [
            "postgres://h/db?bogus=1",
            "postgres://h/db?sslrootcert=/nonexistent/ca.pem",
        ] {
            let e = Connector::parse(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{bad}: {e}");
        }
    }
}
