//! Wrong credentials against a real redis-server (`BQ_REDIS_URL`, default
//! `redis://127.0.0.1:6379`): the ACL user `bq-auth` (password `bq-secret`, created by
//! `scripts/brokers.sh up redis`, and again here) with a wrong password is a clear
//! [`TransportErrorKind::Auth`] error that names the server and never shows the password, and a worker
//! that meets it stops instead of polling.
//!
//! With `BQ_REQUIRE_BROKERS` set, an unreachable Redis fails the tests; without it they print
//! `SKIPPED` and return.

use std::time::{Duration, Instant};

use babelqueue_core::{TransportError, TransportErrorKind};
use babelqueue_transport_redis::fred::interfaces::ClientLike;
use babelqueue_transport_redis::fred::types::{CustomCommand, Value};
use babelqueue_transport_redis::{FredClient, RedisTransport};

fn base_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// `host:port` of the server, once the ACL user exists; `None` (skip) when Redis is down and
/// not required.
async fn server_with_acl_user() -> Option<String> {
    let base = base_url();
    let host = babelqueue_core::redact::host(&base).expect("BQ_REDIS_URL names a host");
    let client =
        babelqueue_testkit::broker_or_skip(&format!("Redis at {host}"), FredClient::connect(&base))
            .await?;
    // The same user the broker script creates; a no-op when it exists.
    let _: Value = client
        .raw()
        .custom(
            CustomCommand::new_static("ACL", None, false),
            vec![
                "SETUSER",
                "bq-auth",
                "on",
                ">bq-secret",
                "~*",
                "&*",
                "+@all",
            ],
        )
        .await
        .expect("ACL SETUSER");
    Some(host)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_an_auth_error_that_names_the_server() {
    let Some(host) = server_with_acl_user().await else {
        return;
    };
    // The right password works, so the refusal below is about the password.
    let right = RedisTransport::connect(&format!("redis://bq-auth:bq-secret@{host}"))
        .await
        .expect("bq-auth logs in with its password");
    babelqueue_core::Transport::close(&right).await.ok();

    for url in [
        format!("redis://bq-auth:wrongpw@{host}"),
        format!("redis://bq-auth:wrong%40pw@{host}/0?retry_after=30"),
        format!("redis://nobody-here:wrongpw@{host}"),
    ] {
        let started = Instant::now();
        let error = tokio::time::timeout(Duration::from_secs(10), RedisTransport::connect(&url))
            .await
            .expect("a refused login fails at once, without reconnecting")
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(error.kind(), TransportErrorKind::Auth, "{url}: {error:?}");
        assert!(!error.is_transient());
        let text = format!("{error}\n{error:?}");
        assert!(
            text.contains(&host) && text.contains("refused the credentials"),
            "{text}"
        );
        let runtime = TransportError::from(error);
        assert_eq!(runtime.kind(), TransportErrorKind::Auth);
        let text = format!("{text}\n{runtime}\n{runtime:?}");
        for secret in ["wrongpw", "wrong@pw", "wrong%40pw"] {
            assert!(!text.contains(secret), "{url}: {text}");
        }
    }
}
