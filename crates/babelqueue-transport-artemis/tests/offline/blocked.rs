//! A send to an address that gets no link credit (Artemis' answer to a full address): it fails
//! within `send_credit_timeout` with a transient error naming the address, the connection stays
//! in use, the message is never transferred later, and the runtime keeps handling the messages
//! behind one whose dead-letter write failed that way.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, TransportErrorKind};
use babelqueue_envelope::Envelope;
use babelqueue_transport_artemis::projection;
use babelqueue_transport_artemis::{
    AmqpClient, ArtemisError, ArtemisOptions, ArtemisTransport, Client, Disposition,
};

use crate::peer::Peer;

const DLQ: &str = "orders.dlq";
/// Far below the 30 s the client waits for the outcome of a transferred message.
const GIVE_UP: Duration = Duration::from_secs(10);

fn client(peer: &Peer, options: &str) -> Arc<AmqpClient> {
    let config = ArtemisOptions::parse(&peer.url(options)).expect("URL");
    Arc::new(AmqpClient::new(config).expect("client"))
}

async fn eventually(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_without_credit_fails_fast_and_is_never_transferred_later() {
    let peer = Peer::start().await;
    peer.block(DLQ);
    let client = client(&peer, "send_credit_timeout_ms=1500");
    client.connect().await.expect("connect");

    // The first send waits the full bound, then fails: transient, naming the address.
    let start = Instant::now();
    let error = tokio::time::timeout(
        GIVE_UP,
        client.send(DLQ, projection::message(b"dead letter 1")),
    )
    .await
    .expect("a send without credit must fail within send_credit_timeout, not hang")
    .expect_err("no credit, no send");
    let waited = start.elapsed();
    assert!(
        matches!(&error, ArtemisError::AddressBlocked { address, .. } if address == DLQ),
        "{error:?}"
    );
    assert_eq!(error.kind(), TransportErrorKind::Timeout);
    assert!(error.is_transient(), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("\"orders.dlq\"") && text.contains("full"),
        "{text}"
    );
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(5),
        "waited {waited:?}"
    );
    // That link had the full bound and got nothing: it is detached.
    eventually("the blocked link detached", Duration::from_secs(3), || {
        peer.detached(DLQ) >= 1
    })
    .await;

    // The connection is fine: another address takes a message on it, no reconnect.
    client
        .send("orders", projection::message(b"good"))
        .await
        .expect("the connection stays in use");
    assert_eq!(peer.received("orders"), ["good"]);

    // The address is known to be blocked now: the next send gives up sooner.
    let start = Instant::now();
    let error = client
        .send(DLQ, projection::message(b"dead letter 2"))
        .await
        .expect_err("still blocked");
    assert!(
        matches!(error, ArtemisError::AddressBlocked { .. }),
        "{error}"
    );
    assert!(
        start.elapsed() < Duration::from_millis(1000),
        "a known blocked address waited {:?}",
        start.elapsed()
    );

    // The address gets room: the link still attached gets credit at once. Neither message
    // that was given up may arrive now.
    peer.unblock(DLQ);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        peer.received(DLQ).is_empty(),
        "a send that was given up was transferred later: {:?}",
        peer.received(DLQ)
    );

    client
        .send(DLQ, projection::message(b"dead letter 3"))
        .await
        .expect("credit again");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.received(DLQ), ["dead letter 3"]);
    assert!(
        peer.without_credit().is_empty(),
        "{:?}",
        peer.without_credit()
    );
    assert_eq!(client.connections_opened(), 1, "never reconnected");
    assert_eq!(peer.connections(), 1);
    client.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiving_and_settling_go_on_while_a_send_waits_for_credit() {
    let peer = Peer::start().await;
    peer.block(DLQ);
    peer.push("orders", "m1");
    let client = client(&peer, "send_credit_timeout_ms=3000");
    client.connect().await.expect("connect");

    let sending = {
        let client = client.clone();
        tokio::spawn(async move { client.send(DLQ, projection::message(b"dead letter")).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    let start = Instant::now();
    let received = client
        .receive("orders", Duration::from_secs(2))
        .await
        .expect("receive")
        .expect("a delivery");
    assert_eq!(projection::body_bytes(&received.message.body), b"m1");
    client
        .settle(&received.token, Disposition::Accepted)
        .await
        .expect("settle");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "receiving and settling waited {:?} behind a blocked send",
        start.elapsed()
    );
    assert!(
        !sending.is_finished(),
        "the send is still waiting for credit"
    );

    let error = tokio::time::timeout(GIVE_UP, sending)
        .await
        .expect("the send gives up")
        .expect("task")
        .expect_err("no credit");
    assert!(
        matches!(error, ArtemisError::AddressBlocked { .. }),
        "{error}"
    );
    eventually(
        "the accept reached the peer",
        Duration::from_secs(2),
        || peer.queued("orders").is_empty(),
    )
    .await;
    assert_eq!(client.connections_opened(), 1);
    client.close().await.expect("close");
}

const FAIL: &str = "urn:babel:orders:fails";
const OK: &str = "urn:babel:orders:created";

fn envelope(urn: &str, n: u32) -> String {
    Envelope::builder(urn)
        .queue("orders")
        .data(&serde_json::json!({ "n": n }))
        .build()
        .expect("envelope")
        .encode()
        .expect("encode")
}

fn n_of(body: &str) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    value["data"]["n"].as_u64()
}

/// The offline twin of the chaos suite's `dlq-failure` row: at concurrency 1 a failing message
/// whose dead-letter address is full does not hold up the good message behind it, and once the
/// address has room every failing message is dead-lettered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_messages_keep_flowing_while_the_dead_letter_address_is_full() {
    let peer = Peer::start().await;
    peer.block(DLQ);
    for n in 0..3 {
        peer.push("orders", &envelope(FAIL, 2 * n));
        peer.push("orders", &envelope(OK, 2 * n + 1));
    }
    let transport = ArtemisTransport::connect(&peer.url("send_credit_timeout_ms=700"))
        .await
        .expect("connect");
    let handled = Arc::new(Mutex::new(Vec::new()));
    let seen = handled.clone();
    let app = App::builder(transport.clone())
        .queue("orders")
        .max_attempts(1)
        .dead_letter(true)
        .concurrency(1)
        .rewind_pause(Duration::from_millis(100))
        .handle(OK, move |ctx: Context| {
            let seen = seen.clone();
            async move {
                let data: serde_json::Value = ctx.data_as()?;
                let n = data["n"].as_u64().unwrap_or(u64::MAX);
                seen.lock().unwrap().push(n);
                Ok::<(), HandlerError>(())
            }
        })
        .handle(FAIL, |_ctx: Context| async {
            Err::<(), _>(HandlerError::new("always fails"))
        })
        .build()
        .expect("app");
    let stop = app.stop_handle();
    let running = {
        let app = app.clone();
        tokio::spawn(async move { app.consume(Consume::new().handle_signals(false)).await })
    };

    // Every good message is handled while the dead-letter address stays full: one full wait
    // for credit, then the address is known to be blocked.
    let start = Instant::now();
    eventually("the good messages handled", Duration::from_secs(6), || {
        handled.lock().unwrap().len() >= 3
    })
    .await;
    println!(
        "3 good messages handled in {:?} with the DLQ full",
        start.elapsed()
    );
    assert!(peer.received(DLQ).is_empty(), "{:?}", peer.received(DLQ));
    assert_eq!(peer.connections(), 1, "the connection was never replaced");

    // The address has room again: each failing message reaches it once.
    peer.unblock(DLQ);
    eventually(
        "the failing messages dead-lettered",
        Duration::from_secs(15),
        || peer.received(DLQ).len() >= 3,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.stop();
    running.await.expect("task").expect("consume");

    let mut dead: Vec<u64> = peer.received(DLQ).iter().filter_map(|b| n_of(b)).collect();
    dead.sort_unstable();
    assert_eq!(
        dead,
        [0, 2, 4],
        "each failing message dead-lettered exactly once"
    );
    let mut good = handled.lock().unwrap().clone();
    good.sort_unstable();
    assert_eq!(good, [1, 3, 5], "each good message handled once");
    assert!(
        peer.queued("orders").is_empty(),
        "{:?}",
        peer.queued("orders")
    );
    assert!(
        peer.without_credit().is_empty(),
        "{:?}",
        peer.without_credit()
    );
    assert_eq!(peer.connections(), 1);
    babelqueue_core::Transport::close(&transport)
        .await
        .expect("close");
}
