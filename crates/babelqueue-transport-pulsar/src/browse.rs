//! Reading a queue without consuming it (`babelqueue dlq list`), through Pulsar's admin REST
//! API.
//!
//! What "the queue" holds on Pulsar is the backlog of the transport's durable Shared
//! subscription: every message after its mark-delete position that was not individually
//! acknowledged (delivered-but-unacknowledged messages included). That is what a consumer
//! would still get, and what `dlq list` must show.
//!
//! Two broker features could read messages without a subscription of our own, and only one
//! reads that backlog:
//!
//! * a non-durable Reader from `Earliest` reads the topic's retained ledger, which also holds
//!   messages the subscription already acknowledged (as long as retention keeps them), so it
//!   would list records that were redriven or purged long ago: not the queue;
//! * the admin API's peek, `GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/subscription/{sub}/position/{n}`
//!   (1-based, individually acknowledged entries skipped), reads the n-th entry of the
//!   subscription's backlog and changes nothing: no cursor move, no dispatch, no redelivery
//!   count. This module uses it.
//!
//! A peek on a subscription that does not exist *creates* it (durably, at the earliest
//! message): a side effect. So the subscription list is read first. When the transport's
//! subscription does not exist yet, the queue is what it would start with once a consumer
//! creates it: with [`initial_position_earliest`](crate::PulsarOptions::initial_position_earliest)
//! (the default) every retained message, read with `GET .../{topic}/examinemessage?initialPosition=earliest&messagePosition={n}`
//! (which reads the ledger, creates nothing, and answers the last message again past the end);
//! else nothing. Nothing can have been acknowledged on a subscription that does not exist, so
//! the retained messages are exactly its future backlog.
//!
//! The admin API lives on the broker's web service port (8080 locally), which a `pulsar://`
//! URL does not name, so browsing needs [`PulsarOptions::admin_url`](crate::PulsarOptions::admin_url)
//! (default: `BQ_PULSAR_ADMIN_URL`). Without it the transport offers no
//! [`Browser`](babelqueue_core::Browser) and `dlq list` drains and restores, as before.
//!
//! An entry a batching producer wrote holds several messages; the peek returns the whole
//! batch (the header `X-Pulsar-num-batch-message`) and [`split_batch`] cuts it into its
//! messages. A batch partly acknowledged (batch-index acks) is listed whole.

use std::time::Duration;

use prost::Message as _;
use pulsar::message::proto::SingleMessageMetadata;

use crate::error::PulsarError;

/// The most bodies one browse reads when asked for all (`max` = 0): one HTTP request each.
pub const BROWSE_LIMIT: usize = 10_000;

/// The admin REST endpoint the transport peeks a subscription's backlog with.
#[derive(Clone)]
pub(crate) struct AdminPeek {
    http: reqwest::Client,
    base: url::Url,
    token: Option<String>,
    /// OAuth2 access tokens (shared with the client's connections), instead of `token`.
    oauth2: Option<crate::oauth2::OAuth2Provider>,
    subscription: String,
    earliest: bool,
}

impl std::fmt::Debug for AdminPeek {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminPeek")
            .field("base", &babelqueue_core::redact::redact(self.base.as_str()))
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("oauth2", &self.oauth2)
            .field("subscription", &self.subscription)
            .finish()
    }
}

impl AdminPeek {
    /// An admin client for `admin_url` (`http://` or `https://`), trusting `ca_pem` beside the
    /// platform's roots and sending `token` as a bearer token.
    pub(crate) fn new(
        admin_url: &str,
        subscription: &str,
        earliest: bool,
        token: Option<String>,
        ca_pem: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<AdminPeek, PulsarError> {
        let shown = babelqueue_core::redact::redact(admin_url);
        let base = url::Url::parse(admin_url)
            .map_err(|e| PulsarError::Config(format!("admin URL {shown:?}: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(PulsarError::Config(format!(
                "admin URL {shown:?} is not an http:// or https:// URL with a host"
            )));
        }
        let http = crate::auth::trusting(reqwest::Client::builder().timeout(timeout), ca_pem)?
            .build()
            .map_err(|e| PulsarError::Config(format!("admin HTTP client: {e}")))?;
        Ok(AdminPeek {
            http,
            base,
            token,
            oauth2: None,
            subscription: subscription.to_owned(),
            earliest,
        })
    }

    /// Sends the access tokens of `provider` as bearer tokens.
    pub(crate) fn with_oauth2(mut self, provider: crate::oauth2::OAuth2Provider) -> AdminPeek {
        self.oauth2 = Some(provider);
        self
    }

    /// Up to `max` bodies (all, bounded by [`BROWSE_LIMIT`], when 0) of the subscription's
    /// backlog on `topic`, oldest first. A topic that does not exist is empty.
    pub(crate) async fn browse(
        &self,
        topic: &str,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, PulsarError> {
        let limit = if max == 0 { BROWSE_LIMIT } else { max };
        let topic_url = topic_url(&self.base, topic)?;
        let Some(response) = self
            .get(topic, join(&topic_url, &["subscriptions"])?)
            .await?
        else {
            return Ok(Vec::new());
        };
        let names: Vec<String> = serde_json::from_slice(&read(topic, response).await?)
            .map_err(|e| PulsarError::Client(format!("the subscriptions of {topic}: {e}")))?;
        let exists = names.contains(&self.subscription);
        if !exists && !self.earliest {
            // A subscription created now would start after the last message.
            return Ok(Vec::new());
        }
        let mut bodies = Vec::new();
        let mut last_id = None;
        let mut position = 1usize;
        while bodies.len() < limit {
            let n = position.to_string();
            let url = if exists {
                join(
                    &topic_url,
                    &["subscription", &self.subscription, "position", &n],
                )?
            } else {
                let mut url = join(&topic_url, &["examinemessage"])?;
                url.query_pairs_mut()
                    .append_pair("initialPosition", "earliest")
                    .append_pair("messagePosition", &n);
                url
            };
            // 404: the topic or subscription went away, or past the end of the backlog.
            let Some(response) = self.get(topic, url).await? else {
                break;
            };
            let headers = response.headers();
            let id = header(headers, "X-Pulsar-Message-ID");
            if !exists && id.is_some() && id == last_id {
                // `examinemessage` answers the last message again past the end.
                break;
            }
            let batch = header(headers, "X-Pulsar-num-batch-message")
                .and_then(|v| v.trim().parse::<usize>().ok());
            let payload = read(topic, response).await?;
            match batch {
                Some(count) => bodies.extend(split_batch(&payload, count)?),
                None => bodies.push(payload),
            }
            last_id = id;
            position += 1;
        }
        bodies.truncate(limit);
        Ok(bodies)
    }

    /// The transport's subscription.
    pub(crate) fn subscription(&self) -> &str {
        &self.subscription
    }

    /// The body of `GET .../{topic}/stats` (the topic's counters, per subscription); `None`
    /// when the topic does not exist.
    pub(crate) async fn topic_stats(&self, topic: &str) -> Result<Option<Vec<u8>>, PulsarError> {
        let mut url = join(&topic_url(&self.base, topic)?, &["stats"])?;
        // The publish time of each subscription's oldest unacknowledged message (the broker
        // reads that one entry).
        url.query_pairs_mut()
            .append_pair("getEarliestTimeInBacklog", "true");
        match self.get(topic, url).await? {
            Some(response) => Ok(Some(read(topic, response).await?)),
            None => Ok(None),
        }
    }

    /// GETs `url`; `None` on 404, and on 412 (what `examinemessage` answers for a topic
    /// without messages).
    async fn get(
        &self,
        topic: &str,
        url: url::Url,
    ) -> Result<Option<reqwest::Response>, PulsarError> {
        let mut request = self.http.get(url);
        if let Some(provider) = &self.oauth2 {
            request = request.bearer_auth(provider.access_token().await?);
        } else if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| http_error(topic, &e))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND
            || status == reqwest::StatusCode::PRECONDITION_FAILED
        {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(status_error(topic, status));
        }
        Ok(Some(response))
    }
}

fn header(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn read(topic: &str, response: reqwest::Response) -> Result<Vec<u8>, PulsarError> {
    Ok(response
        .bytes()
        .await
        .map_err(|e| http_error(topic, &e))?
        .to_vec())
}

fn http_error(topic: &str, e: &reqwest::Error) -> PulsarError {
    let text = babelqueue_core::redact::redact(&format!("peeking {topic} over the admin API: {e}"));
    if e.is_timeout() {
        PulsarError::Timeout(text)
    } else {
        PulsarError::Connection(text)
    }
}

fn status_error(topic: &str, status: reqwest::StatusCode) -> PulsarError {
    let text = format!("peeking {topic} over the admin API: HTTP {status}");
    match status.as_u16() {
        401 => PulsarError::Auth(text),
        500..=599 => PulsarError::Connection(text),
        _ => PulsarError::Rejected(text),
    }
}

/// The peek URL of the `position`-th (1-based) backlog entry of `subscription` on `topic`
/// (see [`topic_url`]).
pub fn peek_url(
    base: &url::Url,
    topic: &str,
    subscription: &str,
    position: usize,
) -> Result<url::Url, PulsarError> {
    join(
        &topic_url(base, topic)?,
        &[
            "subscription",
            subscription,
            "position",
            &position.to_string(),
        ],
    )
}

fn join(url: &url::Url, segments: &[&str]) -> Result<url::Url, PulsarError> {
    let mut url = url.clone();
    url.path_segments_mut()
        .map_err(|()| PulsarError::Config("the admin URL cannot take a path".to_owned()))?
        .extend(segments);
    Ok(url)
}

/// The admin URL of `topic`: `persistent://tenant/ns/name`, `tenant/ns/name` or a bare name
/// in `public/default`, the way Pulsar names topics, each segment percent-encoded. A
/// `non-persistent://` topic has no backlog to read and is refused.
pub fn topic_url(base: &url::Url, topic: &str) -> Result<url::Url, PulsarError> {
    if topic.starts_with("non-persistent://") {
        return Err(PulsarError::Config(format!(
            "{topic:?} is non-persistent: it keeps no backlog to browse"
        )));
    }
    let rest = topic.strip_prefix("persistent://").unwrap_or(topic);
    let parts: Vec<&str> = rest.splitn(3, '/').collect();
    let (tenant, namespace, name) = match parts.as_slice() {
        [name] => ("public", "default", *name),
        [tenant, namespace, name] => (*tenant, *namespace, *name),
        _ => {
            return Err(PulsarError::Config(format!(
                "{topic:?} is neither a bare topic name nor tenant/namespace/topic"
            )));
        }
    };
    if [tenant, namespace, name].iter().any(|s| s.is_empty()) {
        return Err(PulsarError::Config(format!("{topic:?} has an empty part")));
    }
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| PulsarError::Config("the admin URL cannot take a path".to_owned()))?
        .pop_if_empty()
        .extend(["admin", "v2", "persistent", tenant, namespace, name]);
    Ok(url)
}

/// The messages of one batched entry, in order: `count` times a 4-byte big-endian size, a
/// `SingleMessageMetadata` of that size, then `payload_size` bytes of payload. A message the
/// producer marked compacted-out is skipped.
pub fn split_batch(entry: &[u8], count: usize) -> Result<Vec<Vec<u8>>, PulsarError> {
    let malformed =
        |what: &str| PulsarError::Client(format!("a batched entry is malformed: {what}"));
    let mut bodies = Vec::with_capacity(count);
    let mut rest = entry;
    for _ in 0..count {
        let (size, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| malformed("truncated metadata size"))?;
        let size = usize::try_from(u32::from_be_bytes(*size)).map_err(|_| malformed("size"))?;
        if tail.len() < size {
            return Err(malformed("truncated metadata"));
        }
        let (meta, tail) = tail.split_at(size);
        let meta = SingleMessageMetadata::decode(meta).map_err(|e| malformed(&e.to_string()))?;
        let len = usize::try_from(meta.payload_size).map_err(|_| malformed("negative size"))?;
        if tail.len() < len {
            return Err(malformed("truncated payload"));
        }
        let (payload, tail) = tail.split_at(len);
        if !meta.compacted_out.unwrap_or(false) {
            bodies.push(payload.to_vec());
        }
        rest = tail;
    }
    Ok(bodies)
}

#[async_trait::async_trait]
impl babelqueue_core::Browser for crate::PulsarTransport {
    /// The backlog of the transport's subscription on the queue's topic, oldest first (the
    /// client's [`browse`](crate::PulsarClient::browse)); nothing is consumed or moved.
    async fn browse(
        &self,
        queue: &str,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, babelqueue_core::TransportError> {
        self.client
            .browse(&self.topic(queue), max)
            .await
            .map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> url::Url {
        url::Url::parse("http://127.0.0.1:8080").expect("a URL")
    }

    #[test]
    fn a_bare_name_is_in_public_default() {
        let url = peek_url(&base(), "orders.dlq", "babelqueue", 3).expect("a URL");
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8080/admin/v2/persistent/public/default/orders.dlq/subscription/babelqueue/position/3"
        );
    }

    #[test]
    fn a_full_name_keeps_tenant_and_namespace_and_encodes_segments() {
        let base = url::Url::parse("https://admin.example:8443/pulsar/").expect("a URL");
        let url = peek_url(&base, "persistent://acme/jobs/a b", "sub/x", 1).expect("a URL");
        assert_eq!(
            url.as_str(),
            "https://admin.example:8443/pulsar/admin/v2/persistent/acme/jobs/a%20b/subscription/sub%2Fx/position/1"
        );
        let short = peek_url(&base, "acme/jobs/orders", "s", 2).expect("a URL");
        assert!(
            short
                .path()
                .ends_with("/persistent/acme/jobs/orders/subscription/s/position/2")
        );
    }

    #[test]
    fn non_persistent_and_odd_names_are_refused() {
        assert!(peek_url(&base(), "non-persistent://public/default/x", "s", 1).is_err());
        assert!(peek_url(&base(), "a/b", "s", 1).is_err());
        assert!(peek_url(&base(), "persistent://a//c", "s", 1).is_err());
    }

    fn single(payload: &[u8], compacted_out: bool) -> Vec<u8> {
        let meta = SingleMessageMetadata {
            payload_size: i32::try_from(payload.len()).expect("small"),
            compacted_out: Some(compacted_out),
            ..SingleMessageMetadata::default()
        };
        let meta = meta.encode_to_vec();
        let mut out = u32::try_from(meta.len())
            .expect("small")
            .to_be_bytes()
            .to_vec();
        out.extend(meta);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn a_batch_is_split_into_its_messages_byte_for_byte() {
        let mut entry = single(br#"{"job":"urn:a"}"#, false);
        entry.extend(single(b"\x00not json\xff", false));
        entry.extend(single(b"gone", true));
        entry.extend(single(b"", false));
        let bodies = split_batch(&entry, 4).expect("a batch");
        assert_eq!(
            bodies,
            vec![
                br#"{"job":"urn:a"}"#.to_vec(),
                b"\x00not json\xff".to_vec(),
                Vec::new()
            ]
        );
    }

    #[test]
    fn a_truncated_batch_is_an_error() {
        let entry = single(b"payload", false);
        assert!(split_batch(&entry[..entry.len() - 1], 1).is_err());
        assert!(split_batch(&entry, 2).is_err());
        assert!(split_batch(&[0, 0], 1).is_err());
    }

    #[tokio::test]
    async fn the_transport_browses_the_backlog_of_the_fake_without_taking_anything() {
        use babelqueue_core::Transport;
        use std::sync::Arc;
        let fake = Arc::new(crate::fake::FakePulsar::new());
        let transport = crate::PulsarTransport::with_client(fake.clone());
        let bodies: [&[u8]; 3] = [
            br#"{"job":"urn:a","attempts":0}"#,
            b"\x00not an envelope\xff",
            br#"{"job":"urn:c","attempts":2}"#,
        ];
        for body in bodies {
            transport
                .publish("orders.dlq", body)
                .await
                .expect("publish");
        }
        transport
            .publish("other", b"elsewhere")
            .await
            .expect("publish");
        // One delivered and not acknowledged: still in the backlog, in its place.
        let in_flight = transport
            .pop("orders.dlq", Duration::from_millis(5))
            .await
            .expect("pop")
            .expect("a delivery");
        let browser = transport.capabilities().browser().expect("a browser");
        let first = browser.browse("orders.dlq", 0).await.expect("browse");
        let second = browser.browse("orders.dlq", 0).await.expect("browse");
        assert_eq!(first, bodies.map(<[u8]>::to_vec).to_vec());
        assert_eq!(first, second);
        assert_eq!(
            browser.browse("orders.dlq", 2).await.expect("browse"),
            first[..2]
        );
        assert!(
            browser
                .browse("nothing", 0)
                .await
                .expect("browse")
                .is_empty()
        );
        assert!(fake.acked().is_empty() && fake.nacked().is_empty());
        // Nothing was taken: the rest comes to a consumer, nothing was redelivered.
        transport.ack(&in_flight).await.expect("ack");
        let mut rest = Vec::new();
        while let Some(d) = transport
            .pop("orders.dlq", Duration::from_millis(5))
            .await
            .expect("pop")
        {
            rest.push(d.body().to_vec());
        }
        assert_eq!(rest, first[1..]);
        assert!(fake.nacked().is_empty());
    }

    #[test]
    fn debug_masks_the_token() {
        let peek = AdminPeek::new(
            "http://127.0.0.1:8080",
            "babelqueue",
            true,
            Some("secret-jwt".into()),
            None,
            Duration::from_secs(1),
        )
        .expect("a client");
        assert!(!format!("{peek:?}").contains("secret-jwt"));
        assert!(
            AdminPeek::new(
                "pulsar://x:6650",
                "s",
                true,
                None,
                None,
                Duration::from_secs(1)
            )
            .is_err()
        );
    }
}
