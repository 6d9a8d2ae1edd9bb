//! Wrong credentials: RabbitMQ's `ACCESS_REFUSED` is a clear, non-transient Auth error that
//! never shows the password, at connect and for a worker that connects on first use.

use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, TransportError, TransportErrorKind};
use babelqueue_transport_amqp::{AmqpTransport, AmqpUrl};

use crate::common;

/// The broker's URL with the password `wrongpw`.
fn wrong(url: &str) -> String {
    let parsed = AmqpUrl::parse(url).expect("BQ_AMQP_URL parses");
    let authority = &parsed.uri.authority;
    format!(
        "amqp://{}:wrongpw@{}:{}/%2f",
        authority.userinfo.username, authority.host, authority.port
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_an_auth_error() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let bad = wrong(&url);

    let started = Instant::now();
    let error = AmqpTransport::connect(&bad).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(error.kind(), TransportErrorKind::Auth, "{error:?}");
    assert!(!error.is_transient());
    let text = format!("{error}\n{error:?}");
    assert!(text.contains("refused the credentials"), "{text}");
    let runtime = TransportError::from(error);
    assert_eq!(runtime.kind(), TransportErrorKind::Auth);
    let text = format!("{text}\n{runtime}\n{runtime:?}");
    assert!(!text.contains("wrongpw"), "{text}");

    // A worker over a transport that connects on first use stops with the same error instead
    // of polling forever.
    let lazy = AmqpTransport::lazy(&bad).expect("the URL parses");
    let app = App::builder(lazy)
        .queue(common::queue("auth"))
        .handle_any(|_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let consumed = tokio::time::timeout(
        Duration::from_secs(20),
        app.consume(
            Consume::new()
                .idle_timeout(Duration::from_secs(15))
                .handle_signals(false),
        ),
    )
    .await
    .expect("the worker stops at once");
    let err = consumed.expect_err("wrong credentials stop the worker");
    assert!(
        matches!(&err, babelqueue_core::Error::Transport(e) if e.kind() == TransportErrorKind::Auth),
        "{err:?}"
    );
    assert!(!format!("{err}\n{err:?}").contains("wrongpw"), "{err:?}");
}
