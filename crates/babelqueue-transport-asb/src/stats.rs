//! What Service Bus says of a queue ([`Stats`]): the runtime counts of the namespace's
//! management REST API, `GET https://<namespace>/<queue>?api-version=2021-05`, an Atom entry
//! whose `QueueDescription` holds `CountDetails`. It is authorized like the AMQP link: a SAS
//! token for that `https://` resource, or an Azure AD token for
//! `https://servicebus.azure.net/.default`.
//!
//! * `ready`: `ActiveMessageCount`, which counts the messages a receiver holds locked too
//!   (Service Bus does not tell them apart);
//! * `in_flight`: `None`, for that reason;
//! * `delayed`: `ScheduledMessageCount`;
//! * `dead_letter`: the `ActiveMessageCount` of BabelQueue's dead-letter entity `<queue>.dlq`,
//!   `None` when it does not exist; the native `$DeadLetterQueue` sub-queue's count
//!   (`DeadLetterMessageCount`) is named in `source`;
//! * `consumers`, `oldest_ready_age`: `None`.
//!
//! A queue that does not exist (404) counts nothing: `None` figures. No emulator runs on the
//! test machine, so the HTTP path is tested against a local server answering the documented
//! document, and the transport through the fake client's counts.

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use babelqueue_core::{QueueStats, Stats, TransportError};

use crate::AsbTransport;
use crate::client::{AsbOptions, TOKEN_LIFETIME, sas_token};
use crate::credential::TokenCredential;
use crate::error::AsbError;

/// The REST API version asked for.
pub const API_VERSION: &str = "2021-05";

/// The Azure AD scope of the namespace's APIs.
const AAD_SCOPE: &str = "https://servicebus.azure.net/.default";

/// The runtime counts of one entity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueCounts {
    /// `ActiveMessageCount`: deliverable now, or locked by a receiver.
    pub active: u64,
    /// `ScheduledMessageCount`: sent with a scheduled enqueue time not reached yet.
    pub scheduled: u64,
    /// `DeadLetterMessageCount`: in the entity's native `$DeadLetterQueue`.
    pub dead_lettered: u64,
}

impl QueueCounts {
    /// Counts from their three figures.
    pub fn new(active: u64, scheduled: u64, dead_lettered: u64) -> QueueCounts {
        QueueCounts {
            active,
            scheduled,
            dead_lettered,
        }
    }
}

/// The text of the first element named `name` (any namespace prefix) in `xml`, as a count.
///
/// The Atom document is read for three numeric leaves at known names, so a scan is enough
/// and no XML parser joins the dependency graph for it.
fn element(xml: &str, name: &str) -> Option<u64> {
    let mut rest = xml;
    while let Some(at) = rest.find(name) {
        let before = &rest[..at];
        let after = &rest[at + name.len()..];
        // an opening tag: `<name>` or `<prefix:name>`
        let opens = before.ends_with('<')
            || before.rsplit('<').next().is_some_and(|tag| {
                !tag.is_empty() && tag.ends_with(':') && !tag.contains(['>', '/', ' '])
            });
        if opens && let Some(body) = after.strip_prefix('>') {
            let text = body.split('<').next().unwrap_or("");
            return text.trim().parse().ok();
        }
        rest = after;
    }
    None
}

/// The counts in a `QueueDescription` Atom entry; an error when it holds none.
pub fn parse_counts(xml: &str) -> Result<QueueCounts, AsbError> {
    let active = element(xml, "ActiveMessageCount").ok_or_else(|| {
        AsbError::Client(
            "the management API's answer holds no CountDetails/ActiveMessageCount (not a queue description)"
                .to_owned(),
        )
    })?;
    Ok(QueueCounts {
        active,
        scheduled: element(xml, "ScheduledMessageCount").unwrap_or(0),
        dead_lettered: element(xml, "DeadLetterMessageCount").unwrap_or(0),
    })
}

/// The counts of `queue` at `base` (`https://<namespace>`), with `authorization` as the
/// `Authorization` header; `None` when the entity does not exist.
pub(crate) async fn fetch(
    http: &reqwest::Client,
    base: &str,
    queue: &str,
    authorization: &str,
) -> Result<Option<QueueCounts>, AsbError> {
    let url = format!(
        "{}/{queue}?api-version={API_VERSION}",
        base.trim_end_matches('/')
    );
    let what = || format!("the Service Bus management API ({base}, queue {queue:?})");
    let response = http
        .get(&url)
        .header("Authorization", authorization)
        .send()
        .await
        .map_err(|e| AsbError::Connection(format!("{}: {e}", what())))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(AsbError::Auth(format!(
            "{} refused the token ({status}); reading counts needs the Manage right",
            what()
        )));
    }
    if !status.is_success() {
        return Err(AsbError::Rejected(format!("{} answered {status}", what())));
    }
    let body = response
        .text()
        .await
        .map_err(|e| AsbError::Connection(format!("{}: {e}", what())))?;
    // An entity that does not exist may also answer 200 with an empty feed.
    if !body.contains("QueueDescription") {
        return Ok(None);
    }
    parse_counts(&body).map(Some)
}

/// The `Authorization` header for `resource` (`https://<namespace>/<queue>`): a SAS token
/// from the options' key, or an Azure AD bearer token from `credential`.
pub(crate) async fn authorization(
    config: &AsbOptions,
    credential: Option<&dyn TokenCredential>,
    resource: &str,
) -> Result<String, AsbError> {
    match credential {
        Some(credential) => Ok(format!(
            "Bearer {}",
            credential.get_token(AAD_SCOPE).await?.token
        )),
        None => {
            let expiry = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .saturating_add(TOKEN_LIFETIME)
                .as_secs();
            Ok(sas_token(resource, &config.key_name, &config.key, expiry))
        }
    }
}

fn project(own: Option<QueueCounts>, dead_letter: Option<QueueCounts>) -> QueueStats {
    let mut stats = QueueStats::new(match own {
        Some(own) => format!(
            "azure service bus: management API CountDetails (ActiveMessageCount includes locked messages; native $DeadLetterQueue: {})",
            own.dead_lettered
        ),
        None => "azure service bus: management API (no such queue)".to_owned(),
    });
    if let Some(own) = own {
        stats = stats.ready(own.active).delayed(own.scheduled);
    }
    stats.dead_letter = dead_letter.map(|d| d.active);
    stats
}

#[async_trait]
impl Stats for AsbTransport {
    async fn stats(&self, queue: &str) -> Result<QueueStats, TransportError> {
        let own = self.client.counts(queue).await?;
        let dead_letter = self.client.counts(&format!("{queue}.dlq")).await?;
        Ok(project(own, dead_letter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a `GET <queue>?api-version=2021-05` answer (trimmed).
    const ENTRY: &str = r#"<entry xmlns="http://www.w3.org/2005/Atom"><title type="text">orders</title>
<content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
<MaxDeliveryCount>10</MaxDeliveryCount><MessageCount>12</MessageCount>
<CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus">
<d2p1:ActiveMessageCount>7</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>2</d2p1:DeadLetterMessageCount>
<d2p1:ScheduledMessageCount>3</d2p1:ScheduledMessageCount><d2p1:TransferMessageCount>0</d2p1:TransferMessageCount>
</CountDetails></QueueDescription></content></entry>"#;

    #[test]
    fn the_count_details_are_read_from_the_atom_entry() {
        assert_eq!(
            parse_counts(ENTRY).expect("counts"),
            QueueCounts::new(7, 3, 2)
        );
        // unprefixed elements read the same
        let plain = "<CountDetails><ActiveMessageCount> 4 </ActiveMessageCount></CountDetails>";
        assert_eq!(
            parse_counts(plain).expect("counts"),
            QueueCounts::new(4, 0, 0)
        );
        assert!(parse_counts("<feed></feed>").is_err());
        // a name inside text or a closing tag is not an opening tag
        assert_eq!(
            element("<a>ActiveMessageCount</a>", "ActiveMessageCount"),
            None
        );
        assert_eq!(
            element("</x:ActiveMessageCount>", "ActiveMessageCount"),
            None
        );
    }

    #[test]
    fn ready_counts_the_active_messages_and_the_dead_letter_entity_is_its_own() {
        let stats = project(
            Some(QueueCounts::new(7, 3, 2)),
            Some(QueueCounts::new(5, 0, 0)),
        );
        assert_eq!(
            (
                stats.ready,
                stats.in_flight,
                stats.delayed,
                stats.dead_letter
            ),
            (Some(7), None, Some(3), Some(5))
        );
        assert!(
            stats.source.contains("$DeadLetterQueue: 2"),
            "{}",
            stats.source
        );
        let missing = project(None, None);
        assert_eq!((missing.ready, missing.dead_letter), (None, None));
    }

    /// A one-shot HTTP server on a free port answering `status` and `body`, and handing back
    /// the request it read.
    async fn answer_once(
        status: &'static str,
        body: &'static str,
    ) -> (String, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("a request");
            let mut request = vec![0u8; 8192];
            let n = socket.read(&mut request).await.expect("read");
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/atom+xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(reply.as_bytes()).await.expect("write");
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        (base, task)
    }

    fn options() -> AsbOptions {
        AsbOptions::from_connection_string(
            "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=c2VjcmV0",
        )
        .expect("a connection string")
    }

    #[tokio::test]
    async fn the_counts_are_fetched_with_a_sas_token_for_the_https_resource() {
        let (base, request) = answer_once("200 OK", ENTRY).await;
        let resource = "https://acme.servicebus.windows.net/orders";
        let auth = authorization(&options(), None, resource)
            .await
            .expect("a token");
        let counts = fetch(&reqwest::Client::new(), &base, "orders", &auth)
            .await
            .expect("counts");
        assert_eq!(counts, Some(QueueCounts::new(7, 3, 2)));
        let request = request.await.expect("the server ran");
        assert!(
            request.starts_with("GET /orders?api-version=2021-05 HTTP/1.1"),
            "{request}"
        );
        let header = request
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
            .expect("an Authorization header");
        assert!(
            header.to_ascii_lowercase().contains(
                "sharedaccesssignature sr=https%3a%2f%2facme.servicebus.windows.net%2forders"
            ),
            "{header}"
        );
        assert!(header.contains("skn=RootManageSharedAccessKey"), "{header}");
    }

    #[tokio::test]
    async fn a_missing_queue_is_none_and_a_refused_token_an_auth_error() {
        let (base, _) = answer_once("404 Not Found", "").await;
        let client = reqwest::Client::new();
        assert_eq!(
            fetch(&client, &base, "nope", "t").await.expect("none"),
            None
        );
        let (base, _) = answer_once("401 Unauthorized", "").await;
        let e = fetch(&client, &base, "orders", "t")
            .await
            .expect_err("refused");
        assert_eq!(e.kind(), babelqueue_core::TransportErrorKind::Auth, "{e}");
    }
}

#[cfg(test)]
mod fake_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use babelqueue_core::Transport;

    use crate::AsbTransport;
    use crate::fake::FakeServiceBus;

    #[tokio::test]
    async fn the_transport_reports_the_clients_counts_through_stats() {
        let fake = Arc::new(FakeServiceBus::new());
        let transport = AsbTransport::with_client(fake.clone());
        let capabilities = transport.capabilities();
        let reader = capabilities.stats_reader().expect("asb offers Stats");
        let none = reader.stats("orders").await.expect("stats");
        assert_eq!((none.ready, none.dead_letter), (None, None));
        for _ in 0..3 {
            transport.publish("orders", b"{}").await.expect("publish");
        }
        transport
            .publish("orders.dlq", b"{}")
            .await
            .expect("publish");
        let _held = transport
            .pop("orders", Duration::ZERO)
            .await
            .expect("pop")
            .expect("a delivery");
        let stats = reader.stats("orders").await.expect("stats");
        // a locked message is still active on Service Bus
        assert_eq!(
            (stats.ready, stats.in_flight, stats.dead_letter),
            (Some(3), None, Some(1))
        );
    }
}
