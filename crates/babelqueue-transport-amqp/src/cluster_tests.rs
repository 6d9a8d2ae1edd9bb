//! Quorum queues and failover, on the fake client: what is declared for each queue type, the
//! consumer's prefetch a quorum queue needs, a queue of another type, and a publish whose
//! confirm dies with its node.

use std::sync::Arc;
use std::time::Duration;

use babelqueue_core::{
    App, BatchPublisher, Consume, Context, HandlerError, Transport, TransportErrorKind,
};
use lapin::types::FieldTable;

use crate::fake::FakeClient;
use crate::topology::{QUORUM_POP_PREFETCH, QueueType, declare_arguments};
use crate::{AmqpOptions, AmqpTransport};

const URN: &str = "urn:babel:orders:created";

fn transport(fake: &FakeClient, queue_type: QueueType) -> AmqpTransport {
    AmqpTransport::with_client(
        Arc::new(fake.clone()),
        AmqpOptions::default()
            .queue_type(queue_type)
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(40)),
    )
}

fn body(n: u32) -> Vec<u8> {
    format!(r#"{{"job":"{URN}","trace_id":"t{n}","data":{{"n":{n}}},"meta":{{"id":"m{n}","queue":"q","lang":"rust","schema_version":1}},"attempts":0}}"#).into_bytes()
}

/// The work queue and its dead-letter queue (and the retry copies' queue, the same one) are
/// declared with the arguments of the transport's queue type, row by row.
#[tokio::test]
async fn every_queue_the_runtime_touches_is_declared_with_its_type() {
    for queue_type in [QueueType::Classic, QueueType::Quorum] {
        let fake = FakeClient::default();
        let t = transport(&fake, queue_type);
        let app = App::builder(t.clone())
            .queue("q")
            .max_attempts(2)
            .dead_letter(true)
            .poll_timeout(Duration::from_millis(20))
            .handle(URN, |_ctx: Context| async {
                Err::<(), _>(HandlerError::new("boom"))
            })
            .build()
            .unwrap();
        app.publish(URN, &serde_json::json!({"n": 1}))
            .await
            .unwrap();
        let summary = app
            .consume(Consume::new().max_messages(2).handle_signals(false))
            .await
            .unwrap();
        assert_eq!(summary.processed, 2, "{queue_type}: a retry, then the DLQ");
        assert_eq!(fake.bodies("q.dlq").len(), 1, "{queue_type}");
        let world = fake.world();
        let mut declared: Vec<&String> = world.declared.keys().collect();
        declared.sort();
        assert_eq!(declared, ["q", "q.dlq"], "{queue_type}");
        for queue in ["q", "q.dlq"] {
            let declared = world.declared[queue].inner();
            match queue_type {
                QueueType::Classic => assert!(declared.is_empty(), "{queue}: {declared:?}"),
                _ => {
                    assert_eq!(
                        declared.get("x-queue-type"),
                        Some(&lapin::types::AMQPValue::LongString("quorum".into())),
                        "{queue}"
                    );
                    assert_eq!(
                        declared.get("x-delivery-limit"),
                        Some(&lapin::types::AMQPValue::LongInt(i32::MAX)),
                        "{queue}"
                    );
                }
            }
        }
    }
}

/// A queue of another type stops the worker with a configuration error that names the queue,
/// its type and the option, both ways round.
#[tokio::test]
async fn a_queue_of_another_type_is_a_configuration_error_that_stops_the_worker() {
    for (existing, wanted) in [
        (QueueType::Quorum, QueueType::Classic),
        (QueueType::Classic, QueueType::Quorum),
    ] {
        let fake = FakeClient::default();
        fake.provision("q", declare_arguments(existing));
        let t = transport(&fake, wanted);
        let err = t.publish("q", &body(1)).await.unwrap_err();
        assert_eq!(err.kind(), TransportErrorKind::Config, "{err}");
        let text = err.to_string();
        for says in [
            "\"q\"".to_owned(),
            format!("a {existing} queue"),
            format!("queue_type={wanted}"),
            format!("set queue_type={existing}"),
        ] {
            assert!(text.contains(&says), "{says}: {text}");
        }
        // The worker stops at once instead of polling a queue it cannot use.
        let app = App::builder(t.clone())
            .queue("q")
            .poll_timeout(Duration::from_millis(20))
            .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
            .build()
            .unwrap();
        let stopped = tokio::time::timeout(
            Duration::from_secs(5),
            app.consume(Consume::new().handle_signals(false)),
        )
        .await
        .expect("the worker stopped");
        let err = stopped.unwrap_err().to_string();
        assert!(err.contains(&format!("a {existing} queue")), "{err}");
    }
    // Declared as it is wanted, the same queue is fine.
    let fake = FakeClient::default();
    fake.provision("q", declare_arguments(QueueType::Quorum));
    transport(&fake, QueueType::Quorum)
        .publish("q", &body(1))
        .await
        .unwrap();
    assert_eq!(fake.bodies("q").len(), 1);
}

/// Quorum queues refuse a channel-wide prefetch: on `queue_type=quorum` even a bare `pop` loop's
/// consumer has a prefetch of its own, fixed, from [`QUORUM_POP_PREFETCH`]; a classic queue's
/// starts at 1 and grows channel-wide.
#[tokio::test]
async fn quorum_consumers_have_a_prefetch_of_their_own_even_in_a_bare_pop_loop() {
    for (queue_type, first, channel_wide) in [
        (QueueType::Classic, 1, true),
        (QueueType::Quorum, QUORUM_POP_PREFETCH, false),
    ] {
        let fake = FakeClient::default();
        let t = transport(&fake, queue_type);
        for n in 0..8 {
            fake.publish_raw("q", &body(n));
        }
        // Held together, unsettled, as the contract suite's batch test holds them.
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(
                t.pop("q", Duration::from_millis(100))
                    .await
                    .unwrap()
                    .expect("a delivery while eight are held"),
            );
        }
        let world = fake.world();
        assert_eq!(
            world.subscriptions,
            [("q".to_owned(), first, channel_wide)],
            "{queue_type}"
        );
        if queue_type == QueueType::Quorum {
            assert!(
                world.prefetch_calls.is_empty(),
                "never changed while it runs"
            );
        } else {
            assert_eq!(world.prefetch_calls.last(), Some(&8), "grew with the loop");
        }
    }
}

/// The confirm of a publish dies with its node: the message is on the broker, but the
/// transport cannot know it. A single publish is sent again on a new connection (a duplicate,
/// never a loss) and succeeds only once confirmed; a batch is reported failed; a second loss
/// of the same message is an error. Never `Ok` without a confirm.
#[tokio::test]
async fn a_publish_whose_confirm_is_lost_is_sent_again_or_reported_never_assumed() {
    let fake = FakeClient::default();
    let t = transport(&fake, QueueType::Quorum);
    fake.world().lose_confirms = 1;
    t.publish("q", &body(1)).await.unwrap();
    assert_eq!(
        fake.bodies("q"),
        [body(1), body(1)],
        "sent again: twice, never zero times"
    );
    let log = fake.world().log.clone();
    assert_eq!(
        log,
        [
            "connect",
            "stored q, confirm lost",
            "connect",
            "confirmed q"
        ],
        "Ok came from the second, confirmed send"
    );
    assert_eq!(t.reconnects(), 1);

    fake.world().lose_confirms = 1;
    let batch = [body(2), body(3)];
    let slices: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    let err = t.publish_batch("q", &slices).await.unwrap_err();
    assert!(
        err.is_transient(),
        "the caller may send the batch again: {err}"
    );

    fake.world().lose_confirms = 2;
    let err = t.publish("q", &body(4)).await.unwrap_err();
    assert!(
        err.to_string().contains("closed the connection 2 times"),
        "{err}"
    );
}

/// A negative confirm (a quorum queue without a leader for a moment) is sent again on a new
/// channel until the queue takes it, within `reconnect_wait`; a batch fails at once, and its
/// resend goes out on a new channel.
#[tokio::test]
async fn a_refused_publish_is_sent_again_on_a_new_channel() {
    let fake = FakeClient::default();
    let t = transport(&fake, QueueType::Quorum);
    t.publish("q", &body(0)).await.unwrap();
    fake.world().log.clear();
    fake.world().nack_next = 3;
    t.publish("q", &body(1)).await.unwrap();
    assert_eq!(
        fake.world().log,
        [
            "nacked q",
            "new publishing channel",
            "nacked q",
            "new publishing channel",
            "nacked q",
            "new publishing channel",
            "confirmed q"
        ]
    );
    assert_eq!(fake.bodies("q"), [body(0), body(1)], "stored once");

    fake.world().log.clear();
    fake.world().nack_next = 1;
    let batch = [body(2), body(3)];
    let slices: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    let err = t.publish_batch("q", &slices).await.unwrap_err();
    assert!(
        err.to_string().contains("negative publisher confirm"),
        "{err}"
    );
    assert_eq!(fake.world().log, ["nacked q", "new publishing channel"]);
    t.publish_batch("q", &slices).await.unwrap();
    assert_eq!(fake.bodies("q").len(), 4);
}

/// A classic queue's negative confirm is its answer (a full queue with reject-publish): the
/// publish fails at once, and the next one goes out on a new channel. A quorum queue that goes
/// on refusing fails once the resend window is over.
#[tokio::test]
async fn a_refusal_that_persists_fails_the_publish() {
    let fake = FakeClient::default();
    let t = transport(&fake, QueueType::Classic);
    t.publish("q", &body(0)).await.unwrap();
    fake.world().log.clear();
    fake.world().nack_next = 1;
    let err = t.publish("q", &body(1)).await.unwrap_err();
    assert!(err.to_string().contains("negative publisher confirm"), "{err}");
    assert_eq!(fake.world().log, ["nacked q", "new publishing channel"]);
    t.publish("q", &body(2)).await.unwrap();
    assert_eq!(fake.bodies("q"), [body(0), body(2)]);

    let fake = FakeClient::default();
    let t = transport(&fake, QueueType::Quorum);
    fake.world().nack_publishes_to.insert("full".to_owned());
    let started = std::time::Instant::now();
    let err = t.publish("full", &body(3)).await.unwrap_err();
    let took = started.elapsed();
    assert!(err.to_string().contains("negative publisher confirm"), "{err}");
    assert!(
        took >= crate::topology::REFUSAL_RESEND_WINDOW
            && took < crate::topology::REFUSAL_RESEND_WINDOW + Duration::from_secs(2),
        "a quorum queue that refuses for good fails after the resend window: {took:?}"
    );
    let refused = fake.world().log.iter().filter(|l| *l == "nacked full").count();
    assert!(refused > 1, "sent again before failing: {:?}", fake.world().log);
}

/// The fake's own refusal matches RabbitMQ's wording, so the transport reads it as it reads
/// the broker's.
#[tokio::test]
async fn another_argument_stays_a_declare_mismatch() {
    let fake = FakeClient::default();
    let mut ttl = FieldTable::default();
    ttl.insert(
        "x-message-ttl".into(),
        lapin::types::AMQPValue::LongInt(60_000),
    );
    fake.provision("q", ttl);
    let err = transport(&fake, QueueType::Classic)
        .publish("q", b"{}")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Rejected, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("already exists with different arguments") && text.contains("x-message-ttl"),
        "{text}"
    );
}

/// A port on 127.0.0.1 that nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    port
}

/// With every host down, the error names each host and why, is transient (the supervisor
/// retries), and never shows the password.
#[tokio::test]
async fn when_no_host_answers_the_error_names_each_and_is_transient() {
    use crate::AmqpClient;
    let (a, b) = (closed_port(), closed_port());
    let url =
        format!("amqp://guest:hunter2@127.0.0.1:{a},127.0.0.1:{b}/%2f?connection_timeout=2000");
    let parsed = crate::AmqpUrl::parse(&url).unwrap();
    let client = crate::LapinClient::new(parsed.uri, "t").with_hosts(parsed.hosts);
    let err = client.connect().await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("none of the 2 RabbitMQ hosts answered")
            && text.contains(&format!("127.0.0.1:{a}: "))
            && text.contains(&format!("127.0.0.1:{b}: ")),
        "{text}"
    );
    assert!(!text.contains("hunter2") && !format!("{err:?}").contains("hunter2"));
    // Through the transport, the same: a connection error naming the hosts.
    let err = AmqpTransport::connect(&url).await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Connection, "{err}");
    assert!(err.to_string().contains(&format!("127.0.0.1:{b}")), "{err}");
}
