//! `queue_type=quorum` and host lists on the shared single RabbitMQ node (a quorum queue needs
//! no cluster): what is declared, a queue of another type, a dead host first in the URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError, Transport, TransportErrorKind};
use babelqueue_transport_amqp::AmqpTransport;
use serde_json::json;

use crate::common::{self, Raw};

const URN: &str = "urn:babel:orders:created";

/// `url` with `query` appended to its query string.
fn with(url: &str, query: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{query}")
}

/// Both ways round, RabbitMQ's refusal becomes a configuration error that names the queue,
/// its type and the option; the publishing channel it closed is reopened for the next queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_of_another_type_is_a_configuration_error_naming_it() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let raw = Raw::new(&url).await;
    let (quorum, classic) = (common::queue("is-quorum"), common::queue("is-classic"));
    raw.declare_quorum(&quorum).await;
    raw.declare(&classic).await;
    let fine = [common::queue("fine-classic"), common::queue("fine-quorum")];
    let rows = [
        (&quorum, "quorum", "classic", &fine[0]),
        (&classic, "classic", "quorum", &fine[1]),
    ];
    for (queue, existing, wanted, fine) in rows {
        let transport = AmqpTransport::connect(&with(&url, &format!("queue_type={wanted}")))
            .await
            .unwrap();
        let err = transport.publish(queue, b"{}").await.unwrap_err();
        assert_eq!(err.kind(), TransportErrorKind::Config, "{err}");
        assert!(!err.is_transient());
        let text = err.to_string();
        for says in [
            format!("queue {queue:?} already exists as a {existing} queue"),
            format!("queue_type={wanted}"),
            format!("set queue_type={existing}"),
        ] {
            assert!(text.contains(&says), "{says}: {text}");
        }
        transport.publish(fine, b"{}").await.unwrap();
        transport.close().await.unwrap();
        assert_eq!(raw.ready(fine).await, 1);
    }
    raw.delete(&[&quorum, &classic, &fine[0], &fine[1]]).await;
}

/// With `queue_type=quorum` the work queue and its dead-letter queue are quorum queues with
/// the SDK's delivery limit (a declaration with exactly those arguments is accepted, one
/// without them refused), and a retry and a dead-letter record go through them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_queues_carry_retries_and_dead_letters() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let q = common::queue("quorum-retry");
    let dlq = format!("{q}.dlq");
    let transport = AmqpTransport::connect(&with(&url, "queue_type=quorum"))
        .await
        .unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    let app = App::builder(transport.clone())
        .queue(&q)
        .max_attempts(2)
        .dead_letter(true)
        .poll_timeout(Duration::from_millis(200))
        .handle(URN, move |_ctx: Context| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(HandlerError::new("always fails")) }
        })
        .build()
        .unwrap();
    let id = app.publish(URN, &json!({"n": 1})).await.unwrap();
    let summary = tokio::time::timeout(
        Duration::from_secs(30),
        app.consume(Consume::new().max_messages(2).handle_signals(false)),
    )
    .await
    .expect("consumed")
    .unwrap();
    assert_eq!(summary.processed, 2, "{summary:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one retry");
    transport.close().await.unwrap();

    let raw = Raw::new(&url).await;
    assert_eq!(raw.ready(&q).await, 0);
    // Both are quorum queues with x-delivery-limit = 2147483647: a classic declaration is
    // refused by type, and the transport says so.
    let classic = AmqpTransport::connect(&url).await.unwrap();
    for queue in [&q, &dlq] {
        let err = classic.publish(queue, b"{}").await.unwrap_err().to_string();
        assert!(err.contains("a quorum queue"), "{queue}: {err}");
    }
    classic.close().await.unwrap();
    let records = raw.drain_passive(&dlq).await;
    assert_eq!(records.len(), 1);
    assert_eq!(common::json(&records[0])["meta"]["id"], id.as_str());
    raw.delete(&[&q, &dlq]).await;
}

/// A host that is down first in the URL: the connection goes to the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_whose_first_host_is_down_connects_to_the_next() {
    let Some(url) = common::broker().await else {
        return;
    };
    let _shared = common::shared().await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    // amqp://user:pass@HOST… → amqp://user:pass@127.0.0.1:CLOSED,HOST…
    let (before, after) = url.split_once('@').expect("the URL has credentials");
    let listed = format!("{before}@127.0.0.1:{closed},{after}");
    let q = common::queue("dead-first");
    let transport = AmqpTransport::connect(&listed).await.unwrap();
    transport.publish(&q, b"{\"n\":1}").await.unwrap();
    let got = transport
        .pop(&q, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the message");
    assert_eq!(got.body(), b"{\"n\":1}");
    transport.ack(&got).await.unwrap();
    transport.close().await.unwrap();
    Raw::new(&url).await.delete(&[&q]).await;
}
