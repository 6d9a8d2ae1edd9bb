//! RabbitMQ's management HTTP API, for the one figure AMQP does not say: how many messages of a
//! queue are delivered and not acknowledged (`messages_unacknowledged`). Read by [`Stats`]
//! only, when [`AmqpOptions::management_url`](crate::AmqpOptions::management_url) is set.
//!
//! The management plugin samples queue figures every `collect_statistics_interval` (5 s by
//! default), so the in-flight count lags the broker by up to that long; the ready count stays
//! the exact one a passive `queue.declare` answers.
//!
//! [`Stats`]: babelqueue_core::Stats

use std::fmt;
use std::time::Duration;

use babelqueue_core::redact::redact;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use crate::error::AmqpError;

/// The figures of one queue the management API reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ManagedQueue {
    /// `messages_unacknowledged`: delivered to consumers, not acknowledged; `None` until the
    /// plugin has sampled the queue once (a queue declared a moment ago).
    pub unacknowledged: Option<u64>,
}

/// A management API client for one vhost.
#[derive(Clone)]
pub(crate) struct Management {
    http: reqwest::Client,
    /// The API's base URL, without credentials.
    base: url::Url,
    user: String,
    password: String,
    vhost: String,
}

impl fmt::Debug for Management {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Management")
            .field("base", &self.base.as_str())
            .field("user", &self.user)
            .field("vhost", &self.vhost)
            .finish_non_exhaustive()
    }
}

impl Management {
    /// A client for `management_url` (`http://` or `https://`, e.g.
    /// `http://guest:guest@127.0.0.1:15672`). The URL's user and password win; without them
    /// the AMQP URL's (`user`, `password`) are used, as RabbitMQ's users are the same for both.
    pub(crate) fn new(
        management_url: &str,
        vhost: &str,
        user: &str,
        password: &str,
        timeout: Duration,
    ) -> Result<Management, AmqpError> {
        let shown = redact(management_url);
        let mut base = url::Url::parse(management_url)
            .map_err(|e| AmqpError::Url(format!("management URL {shown:?}: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(AmqpError::Url(format!(
                "management URL {shown:?} is not an http:// or https:// URL with a host"
            )));
        }
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let (user, password) = if base.username().is_empty() {
            (user.to_owned(), password.to_owned())
        } else {
            (
                decode(base.username()),
                decode(base.password().unwrap_or("")),
            )
        };
        // The credentials travel as a basic-auth header, never in the URL kept or shown.
        let _ = base.set_username("");
        let _ = base.set_password(None);
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| AmqpError::Other(format!("management HTTP client: {e}")))?;
        Ok(Management {
            http,
            base,
            user,
            password,
            vhost: vhost.to_owned(),
        })
    }

    /// The API URL of `queue` in the vhost (`/api/queues/{vhost}/{queue}`, both
    /// percent-encoded: vhost `/` is `%2F`).
    pub(crate) fn queue_url(&self, queue: &str) -> String {
        let base = self.base.as_str().trim_end_matches('/');
        format!(
            "{base}/api/queues/{}/{}?columns=name,messages_unacknowledged",
            utf8_percent_encode(&self.vhost, NON_ALPHANUMERIC),
            utf8_percent_encode(queue, NON_ALPHANUMERIC)
        )
    }

    /// The figures of `queue`; `None` when it does not exist.
    pub(crate) async fn queue(&self, queue: &str) -> Result<Option<ManagedQueue>, AmqpError> {
        let url = self.queue_url(queue);
        let what = || format!("the management API on {} (queue {queue:?})", self.base);
        let response = self
            .http
            .get(&url)
            .basic_auth(&self.user, Some(&self.password))
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    AmqpError::Timeout(format!("{}: {e}", what()))
                } else {
                    AmqpError::Connection(format!("{}: {e}", what()))
                }
            })?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(AmqpError::Auth(format!(
                "{} refused user {:?} ({status})",
                what(),
                self.user
            )));
        }
        if !status.is_success() {
            return Err(AmqpError::Refused(format!("{} answered {status}", what())));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| AmqpError::Connection(format!("{}: {e}", what())))?;
        parse(&body).map(Some)
    }
}

/// The figures of a queue object of the management API. A figure the plugin has not sampled
/// yet (a queue declared a moment ago) is absent from the object: `None`, not 0.
pub(crate) fn parse(body: &[u8]) -> Result<ManagedQueue, AmqpError> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        AmqpError::Other(format!(
            "the management API answered something that is not JSON: {e}"
        ))
    })?;
    if !value.is_object() {
        return Err(AmqpError::Other(
            "the management API answered JSON that is not a queue object".to_owned(),
        ));
    }
    Ok(ManagedQueue {
        unacknowledged: value
            .get("messages_unacknowledged")
            .and_then(serde_json::Value::as_u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn management(url: &str, vhost: &str) -> Management {
        Management::new(url, vhost, "amqp-user", "amqp-pass", Duration::from_secs(1))
            .expect("a management client")
    }

    #[test]
    fn the_queue_url_encodes_the_vhost_and_the_queue() {
        let m = management("http://127.0.0.1:15672", "/");
        assert_eq!(
            m.queue_url("orders.dlq"),
            "http://127.0.0.1:15672/api/queues/%2F/orders%2Edlq?columns=name,messages_unacknowledged"
        );
        let m = management("https://rabbit.example:443/admin/", "shop a");
        assert_eq!(
            m.queue_url("q"),
            "https://rabbit.example/admin/api/queues/shop%20a/q?columns=name,messages_unacknowledged"
        );
    }

    #[test]
    fn credentials_come_from_the_management_url_else_from_the_amqp_url() {
        let own = management("http://ops:s%40cret@127.0.0.1:15672", "/");
        assert_eq!(
            (own.user.as_str(), own.password.as_str()),
            ("ops", "s@cret")
        );
        assert_eq!(own.base.as_str(), "http://127.0.0.1:15672/");
        let borrowed = management("http://127.0.0.1:15672", "/");
        assert_eq!(
            (borrowed.user.as_str(), borrowed.password.as_str()),
            ("amqp-user", "amqp-pass")
        );
    }

    #[test]
    fn no_password_reaches_debug() {
        let m = management("http://ops:hunter2@127.0.0.1:15672", "/");
        let shown = format!("{m:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("amqp-pass"), "{shown}");
    }

    #[test]
    fn a_url_that_is_not_http_is_a_configuration_error_without_its_password() {
        for bad in ["amqp://u:hunter2@127.0.0.1:15672", "not a url", "http://"] {
            let e =
                Management::new(bad, "/", "u", "p", Duration::from_secs(1)).expect_err("refused");
            assert_eq!(
                e.kind(),
                babelqueue_core::TransportErrorKind::Config,
                "{bad}"
            );
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn a_queue_object_is_read_and_an_unsampled_figure_is_unknown() {
        let q = parse(br#"{"name":"q","messages_unacknowledged":7}"#).expect("parsed");
        assert_eq!(q.unacknowledged, Some(7));
        assert_eq!(
            parse(br#"{"name":"q"}"#).expect("parsed").unacknowledged,
            None
        );
        assert!(parse(b"<html>").is_err());
        assert!(parse(b"[1]").is_err());
    }
}
