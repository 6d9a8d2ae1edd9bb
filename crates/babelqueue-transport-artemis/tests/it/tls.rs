//! `artemis+ssl://` against the broker's TLS acceptor (127.0.0.1:5674, a certificate from the
//! test CA that `scripts/brokers.d/50-artemis.sh` makes).

use std::path::PathBuf;
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError, Transport, TransportErrorKind};
use babelqueue_transport_artemis::ArtemisTransport;

use crate::common::{broker, queue, reachable, unavailable};

fn tls_url() -> String {
    std::env::var("BQ_ARTEMIS_TLS_URL")
        .unwrap_or_else(|_| "artemis+ssl://bq:bq@localhost:5674".to_owned())
}

fn ca() -> PathBuf {
    std::env::var_os("BQ_ARTEMIS_CA").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../cache/brokers/artemis/tls/ca.pem")
        },
        PathBuf::from,
    )
}

fn with_ca(url: &str) -> String {
    with_ca_as(url, "ca_file")
}

/// `url` with the test CA under the query key `key` (`ca_file`, or its deprecated alias `ca`).
fn with_ca_as(url: &str, key: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{key}={}", ca().display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_over_tls() {
    let Some(_broker) = broker().await else {
        return;
    };
    if !reachable(&tls_url()).await || !ca().exists() {
        return unavailable(
            "artemis TLS acceptor",
            &format!("{} with CA {}", tls_url(), ca().display()),
        )
        .unwrap_or(());
    }
    for url in [
        with_ca(&tls_url()),
        with_ca_as(&tls_url().replace("@localhost:", "@127.0.0.1:"), "ca"),
    ] {
        let t = ArtemisTransport::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let q = queue("tls");
        let app = App::builder(t.clone())
            .queue(&q)
            .handle("urn:babel:tls:ping", |ctx: Context| async move {
                assert_eq!(ctx.data_as::<serde_json::Value>()?["n"], 1);
                Ok::<(), HandlerError>(())
            })
            .build()
            .unwrap();
        app.publish("urn:babel:tls:ping", &serde_json::json!({"n": 1}))
            .await
            .unwrap();
        let summary = app
            .consume(Consume::new().max_messages(1).handle_signals(false))
            .await
            .unwrap();
        assert_eq!(summary.processed, 1, "{url}");
        assert!(
            t.pop(&q, Duration::from_millis(300))
                .await
                .unwrap()
                .is_none()
        );
    }
}

/// Without the test CA the broker's certificate is not trusted: a configuration error, not a
/// transient one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused() {
    let Some(_broker) = broker().await else {
        return;
    };
    if !reachable(&tls_url()).await {
        return unavailable("artemis TLS acceptor", &tls_url()).unwrap_or(());
    }
    let err = ArtemisTransport::connect(&tls_url()).await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Config, "{err}");
    assert!(err.to_string().contains("TLS"), "{err}");
}
