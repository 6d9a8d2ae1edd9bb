//! Mutual TLS against a live server that requires a client certificate: `scripts/brokers.sh up
//! redis` starts one on `BQ_REDIS_MTLS_URL` (`rediss://127.0.0.1:6381`, `--tls-auth-clients
//! yes`) and `scripts/brokers.sh env` names the files: the CA (`BQ_REDIS_TLS_CA`), a client
//! certificate it signed (`BQ_REDIS_TLS_CLIENT_CERT`, `_KEY`) and one of a CA the server does
//! not trust (`BQ_REDIS_TLS_FOREIGN_CERT`, `_KEY`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use babelqueue_core::{Transport, TransportError, TransportErrorKind};
use babelqueue_testkit::{broker_or_skip, skip_or_fail};
use babelqueue_transport_redis::{FredClient, RedisError, RedisTransport, TlsFiles};

use super::{purge, queue};

/// What the mutual-TLS tests need from `scripts/brokers.sh env`.
struct Mtls {
    url: String,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    foreign_cert: PathBuf,
    foreign_key: PathBuf,
}

impl Mtls {
    /// The URL with the TLS query keys: the CA, and the client certificate when one is given.
    fn url(&self, client: Option<(&PathBuf, &PathBuf)>) -> String {
        let mut url = format!("{}?ca_file={}", self.url, self.ca.display());
        if let Some((cert, key)) = client {
            url.push_str(&format!(
                "&cert_file={}&key_file={}",
                cert.display(),
                key.display()
            ));
        }
        url
    }

    /// `host:port` of the server.
    fn endpoint(&self) -> &str {
        self.url.trim_start_matches("rediss://")
    }
}

/// The environment of the mutual-TLS server and a raw client of it (with the trusted client
/// certificate), or `None` (skip) when either is missing and brokers are not required.
async fn mtls() -> Option<(Mtls, FredClient)> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (Some(url), Some(ca), Some(cert), Some(key), Some(foreign_cert), Some(foreign_key)) = (
        var("BQ_REDIS_MTLS_URL"),
        var("BQ_REDIS_TLS_CA"),
        var("BQ_REDIS_TLS_CLIENT_CERT"),
        var("BQ_REDIS_TLS_CLIENT_KEY"),
        var("BQ_REDIS_TLS_FOREIGN_CERT"),
        var("BQ_REDIS_TLS_FOREIGN_KEY"),
    ) else {
        skip_or_fail(
            "the mutual-TLS Redis (BQ_REDIS_MTLS_URL, BQ_REDIS_TLS_CA, BQ_REDIS_TLS_CLIENT_CERT/KEY, \
             BQ_REDIS_TLS_FOREIGN_CERT/KEY from `scripts/brokers.sh env`) is not set",
        );
        return None;
    };
    let env = Mtls {
        url,
        ca: ca.into(),
        cert: cert.into(),
        key: key.into(),
        foreign_cert: foreign_cert.into(),
        foreign_key: foreign_key.into(),
    };
    let files = TlsFiles {
        ca_file: Some(env.ca.clone()),
        cert_file: Some(env.cert.clone()),
        key_file: Some(env.key.clone()),
    };
    let raw = broker_or_skip(
        &format!("mutual-TLS Redis at {}", env.url),
        FredClient::connect_with_tls(&env.url, &files),
    )
    .await?;
    Some((env, raw))
}

#[tokio::test]
async fn mtls_round_trip_with_the_client_certificate_of_the_url() {
    let Some((env, raw)) = mtls().await else {
        return;
    };
    let q = queue("mtls");
    let body = "{\"job\":\"urn:babel:orders:created\",\"data\":{\"city\":\"İstanbul ☕\",\"n\":\"\\u0000\"}}";
    let t = RedisTransport::connect(&env.url(Some((&env.cert, &env.key))))
        .await
        .expect("mutual TLS with ca_file, cert_file and key_file in the URL");
    t.publish(&q, body.as_bytes()).await.unwrap();
    let d = t.pop(&q, Duration::from_secs(1)).await.unwrap().unwrap();
    assert_eq!(d.body(), body.as_bytes(), "byte for byte");
    t.ack(&d).await.unwrap();
    assert!(
        t.pop(&q, Duration::from_millis(100))
            .await
            .unwrap()
            .is_none(),
        "acknowledged, gone"
    );
    // the builder's files reach the same server the same way
    let t = RedisTransport::builder(env.url.clone())
        .ca_file(&env.ca)
        .client_certificate(&env.cert, &env.key)
        .connect()
        .await
        .expect("mutual TLS with the builder's files");
    t.publish(&q, b"{\"job\":\"urn:y\"}").await.unwrap();
    let d = t.pop(&q, Duration::from_secs(1)).await.unwrap().unwrap();
    assert_eq!(d.body(), b"{\"job\":\"urn:y\"}");
    t.ack(&d).await.unwrap();
    purge(&raw, &q).await;
}

#[tokio::test]
async fn mtls_without_a_trusted_client_certificate_is_a_connection_error_naming_the_server() {
    let Some((env, _raw)) = mtls().await else {
        return;
    };
    for (case, url, cause) in [
        (
            "no client certificate",
            env.url(None),
            "the server ended the TLS handshake: certificate required (the server requires a \
             client certificate: cert_file and key_file)",
        ),
        (
            "a client certificate of a foreign CA",
            env.url(Some((&env.foreign_cert, &env.foreign_key))),
            "the server ended the TLS handshake: unknown ca (the server does not accept the \
             client certificate)",
        ),
    ] {
        let started = Instant::now();
        let error: RedisError =
            tokio::time::timeout(Duration::from_secs(10), RedisTransport::connect(&url))
                .await
                .unwrap_or_else(|_| panic!("{case}: no answer within 10 s"))
                .map(|_| ())
                .expect_err(case);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{case}: refused only after {:?}",
            started.elapsed()
        );
        assert_eq!(
            error.kind(),
            TransportErrorKind::Connection,
            "{case}: {error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&format!("cannot connect to {}", env.endpoint()))
                && text.ends_with(cause),
            "{case}: {text}"
        );
        assert!(!text.contains("PRIVATE KEY"), "{case}: {text}");
        let runtime = TransportError::from(error);
        assert_eq!(runtime.kind(), TransportErrorKind::Connection, "{case}");
    }
}
