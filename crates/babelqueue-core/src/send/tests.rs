//! [`shape`], row by row: one row per part a caller may ask for and per declaration.

use std::time::Duration;

use super::*;
use crate::delivery::Headers;

/// What reached the transport, as flags: headers, delay, facts, key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    headers: bool,
    delay: Option<Duration>,
    facts: bool,
    key: Option<&'static [u8]>,
}

const SECOND: Duration = Duration::from_secs(1);

fn sent(headers: bool, delay: Option<Duration>, facts: bool, key: Option<&'static [u8]>) -> Sent {
    Sent {
        headers,
        delay,
        facts,
        key,
    }
}

/// Asks for every part `ask` names ("h" headers, "d" a 1 s delay, "z" a zero delay, "f" facts
/// carrying a URN, "e" facts carrying nothing, "k" the key `b"k"`) and shapes the request.
fn run(purpose: Purpose, ask: &str, sends: Sends) -> Result<Sent, Refused> {
    let headers = Headers::from([("traceparent".to_owned(), "00-1-2-01".to_owned())]);
    let mut carrying = Facts::default();
    carrying.urn = Some("urn:babel:orders:created".to_owned());
    let empty = Facts::default();
    let mut asked = Outgoing::new("orders", b"{}");
    for part in ask.chars() {
        asked = match part {
            'h' => asked.headers(&headers),
            'd' => asked.delay(SECOND),
            'z' => asked.delay(Duration::ZERO),
            'f' => asked.facts(&carrying),
            'e' => asked.facts(&empty),
            'k' => asked.key(Some(b"k")),
            other => panic!("unknown part {other:?}"),
        };
    }
    let out = shape(purpose, &asked, sends)?;
    assert_eq!(
        (out.queue, out.body),
        ("orders", &b"{}"[..]),
        "queue and body never change"
    );
    Ok(sent(
        out.headers.is_some(),
        out.delay,
        out.facts.is_some(),
        out.key.map(|_| &b"k"[..]),
    ))
}

#[test]
fn the_table() {
    use Purpose::{OnBehalf, Publish};
    let body = Sends::body_only();
    let all = Sends::body_only().headers().delay().facts().key();
    // Kafka: headers, delays (retry tiers), keys, confirmed settle writes.
    let kafka = Sends::body_only().headers().delay().key().confirmed();
    // RabbitMQ: headers, confirmed settle writes, no key.
    let amqp = Sends::body_only().headers().confirmed();
    // NATS: headers and carried facts, no delay.
    let nats = Sends::body_only().headers().facts();
    // Pulsar: carried facts and delays, no headers.
    let pulsar = Sends::body_only().facts().delay();
    let some = Some(SECOND);
    let rows: &[(Purpose, &str, Sends, Result<Sent, Refused>)] = &[
        // A producer's publish.
        (Publish, "", body, Ok(sent(false, None, false, None))),
        (Publish, "h", body, Ok(sent(false, None, false, None))),
        (Publish, "h", all, Ok(sent(true, None, false, None))),
        (Publish, "d", body, Err(Refused::Delay)),
        (Publish, "hd", nats, Err(Refused::Delay)),
        (Publish, "d", all, Ok(sent(false, some, false, None))),
        (
            Publish,
            "z",
            all,
            Ok(sent(false, Some(Duration::ZERO), false, None)),
        ),
        (Publish, "hd", all, Ok(sent(true, some, false, None))),
        (Publish, "hd", pulsar, Ok(sent(false, some, false, None))),
        (Publish, "hd", kafka, Ok(sent(true, some, false, None))),
        (Publish, "f", all, Ok(sent(false, None, true, None))),
        (Publish, "e", all, Ok(sent(false, None, false, None))),
        // A copy on behalf of a delivery: a delay the transport cannot honour is left out.
        (OnBehalf, "d", body, Ok(sent(false, None, false, None))),
        (OnBehalf, "d", all, Ok(sent(false, some, false, None))),
        (OnBehalf, "z", all, Ok(sent(false, None, false, None))),
        // Facts ride again where the transport carries them, with the delay when it has one.
        (OnBehalf, "f", body, Ok(sent(false, None, false, None))),
        (OnBehalf, "e", all, Ok(sent(false, None, false, None))),
        (OnBehalf, "fd", pulsar, Ok(sent(false, some, true, None))),
        (OnBehalf, "fd", nats, Ok(sent(false, None, true, None))),
        (OnBehalf, "ed", pulsar, Ok(sent(false, some, false, None))),
        // Keys ride where keys are honoured.
        (OnBehalf, "k", body, Ok(sent(false, None, false, None))),
        (OnBehalf, "k", all, Ok(sent(false, None, false, Some(b"k")))),
        // A confirmed transport's copy is a settle write: at once, the key kept, no facts.
        (
            OnBehalf,
            "fdk",
            kafka,
            Ok(sent(false, None, false, Some(b"k"))),
        ),
        (
            OnBehalf,
            "dk",
            kafka,
            Ok(sent(false, None, false, Some(b"k"))),
        ),
        (OnBehalf, "fdk", amqp, Ok(sent(false, None, false, None))),
        // Everything a transport declares, together.
        (
            OnBehalf,
            "fdk",
            all,
            Ok(sent(false, some, true, Some(b"k"))),
        ),
    ];
    for (n, (purpose, ask, sends, expected)) in rows.iter().enumerate() {
        assert_eq!(
            &run(*purpose, ask, *sends),
            expected,
            "row {n}: {purpose:?} asking {ask:?} of {sends:?}"
        );
    }
}

#[test]
fn carries_facts_only_what_rides_out_of_band() {
    let mut facts = Facts::default();
    assert!(!carries_facts(&facts));
    facts.count = Some(crate::delivery::Count::Redelivered(2));
    facts.original_queue = Some("orders".into());
    assert!(
        !carries_facts(&facts),
        "a count and an origin are not carried again"
    );
    facts.declared_version = Declared::Integer(2);
    assert!(carries_facts(&facts));
}

#[test]
fn a_refused_delay_names_itself() {
    assert_eq!(
        Refused::Delay.to_string(),
        "cannot delay a message (it declares no delay)"
    );
}

/// A transport that records what reached its `send`, as flags, declaring `sends`.
#[derive(Debug)]
struct Recording {
    sends: Sends,
    got: std::sync::Mutex<Vec<(String, Sent)>>,
}

#[async_trait::async_trait]
impl Transport for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }
    async fn publish(&self, queue: &str, _body: &[u8]) -> Result<(), TransportError> {
        self.send(&Outgoing::new(queue, b"")).await
    }
    async fn send(&self, outgoing: &Outgoing<'_>) -> Result<(), TransportError> {
        let sent = sent(
            outgoing.headers.is_some(),
            outgoing.delay,
            outgoing.facts.is_some(),
            outgoing.key.map(|_| &b"k"[..]),
        );
        let mut got = self.got.lock().unwrap_or_else(|p| p.into_inner());
        got.push((outgoing.queue.to_owned(), sent));
        Ok(())
    }
    async fn pop(
        &self,
        _queue: &str,
        _timeout: Duration,
    ) -> Result<Option<Delivery>, TransportError> {
        Ok(None)
    }
    async fn ack(&self, _delivery: &Delivery) -> Result<(), TransportError> {
        Ok(())
    }
    fn capabilities(&self) -> crate::Capabilities<'_> {
        crate::Capabilities::none().sends(self.sends)
    }
}

/// The glue around the table: a copy on behalf of a delivery asks for the delivery's facts and
/// key, and a producer's delay on a transport without delays is refused as a configuration
/// error with nothing sent.
#[tokio::test]
async fn on_behalf_asks_for_the_deliverys_facts_and_key_and_publish_refuses_a_delay() {
    let delivery = Delivery::new("orders", &b"{}"[..])
        .with_urn("urn:babel:orders:created")
        .with_key(Some(b"k".to_vec()));
    let all = Recording {
        sends: Sends::body_only().delay().facts().key(),
        got: Default::default(),
    };
    on_behalf(&all, &delivery, "orders.dlq", b"{}", Some(SECOND))
        .await
        .unwrap();
    let plain = Recording {
        sends: Sends::body_only(),
        got: Default::default(),
    };
    on_behalf(&plain, &delivery, "orders", b"{}", Some(SECOND))
        .await
        .unwrap();
    let refused = publish(&plain, &Outgoing::new("orders", b"{}").delay(SECOND))
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid configuration: the recording transport cannot delay a message (it declares no delay)"
    );
    let got = |t: &Recording| t.got.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(
        got(&all),
        [(
            "orders.dlq".to_owned(),
            sent(false, Some(SECOND), true, Some(b"k"))
        )]
    );
    assert_eq!(
        got(&plain),
        [("orders".to_owned(), sent(false, None, false, None))],
        "the refused delay sent nothing"
    );
}
