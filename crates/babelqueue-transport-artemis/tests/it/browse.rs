//! Browsing a queue on the real broker: the bodies at its head, in order, byte for byte, and
//! nothing taken, settled or counted.

use std::time::Duration;

use babelqueue_core::{Count, Transport};
use babelqueue_transport_artemis::browse;

use crate::common::{broker, queue, transport};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsing_takes_nothing() {
    let Some(_broker) = broker().await else {
        return;
    };
    let q = queue("browse");
    let t = transport().await;
    let bodies: [&[u8]; 3] = [
        br#"{"job":"urn:babel:orders:created","trace_id":"t1","data":{},"meta":{},"attempts":3}"#,
        b"not an envelope \xff\xfe, raw bytes",
        br#"{"job":"urn:babel:orders:paid","trace_id":"t3","data":{"n":3},"meta":{},"attempts":0}"#,
    ];
    for body in bodies {
        t.publish(&q, body).await.unwrap();
    }
    let browser = t.capabilities().browser().expect("Artemis browses");
    let first = browser.browse(&q, 0).await.unwrap();
    let second = browser.browse(&q, 0).await.unwrap();
    let wanted: Vec<Vec<u8>> = bodies.iter().map(|b| b.to_vec()).collect();
    assert_eq!(first, wanted, "the three bodies, in order, byte for byte");
    assert_eq!(second, wanted, "the same three again: nothing was taken");
    assert_eq!(browser.browse(&q, 2).await.unwrap(), wanted[..2], "max");

    // A worker gets all three, none counted as redelivered.
    let mut popped = Vec::new();
    while let Some(d) = t.pop(&q, Duration::from_secs(2)).await.unwrap() {
        popped.push((d.body().to_vec(), d.facts().count));
        t.ack(&d).await.unwrap();
    }
    let (got, counts): (Vec<_>, Vec<_>) = popped.into_iter().unzip();
    assert_eq!(got, wanted);
    assert_eq!(
        counts,
        [Some(Count::Redelivered(0)); 3],
        "no delivery count raised"
    );
    assert!(
        browser.browse(&q, 0).await.unwrap().is_empty(),
        "consumed now"
    );
    t.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsing_an_unknown_queue_finds_nothing() {
    let Some(_broker) = broker().await else {
        return;
    };
    let t = transport().await;
    let q = queue("browse-none");
    let started = std::time::Instant::now();
    let messages = t.client().browse(&q, browse::wanted(0)).await.unwrap();
    assert!(messages.is_empty());
    assert!(started.elapsed() < browse::BROWSE_FIRST + Duration::from_secs(5));
    t.close().await.unwrap();
}
