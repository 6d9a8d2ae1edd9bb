//! The battery: every test, what it needs, and the helpers they share.
//!
//! A test is an async function from its [`Ctx`] to `Result<(), Stop>`: it fails by returning
//! [`Stop::Fail`] with a message that says what was expected and what came (never by
//! panicking), or finds at run time that it does not apply ([`Stop::NotApplicable`]).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{
    App, AppBuilder, Consume, Context, Delivery, Envelope, Event, Headers, Observer, Outcome,
    RawJson, Transport,
};
use tokio::time::Instant;

use crate::features::{Features, MIB};
use crate::suite::{BoxFuture, Make, TestInfo};

mod batch;
mod dead_letter;
mod delivery;
mod extras;
mod lifecycle;

/// The URN every test message carries.
pub(crate) const URN: &str = "urn:babel:testkit:contract";

/// The `data` of the round-trip and dead-letter tests, as JSON text that must survive byte for
/// byte: integers beyond 64 bits, U+2028 both escaped and literal, non-ASCII text, nesting.
pub(crate) const DATA: &str = concat!(
    r#"{"big":18446744073709551616,"neg":-9223372036854775809,"#,
    r#""huge":123456789012345678901234567890,"#,
    r#""escaped":"a\u2028b","literal":"c"#,
    "\u{2028}",
    r#"d","text":"İstanbul ☕ 𝄞 ü \"quoted\"","#,
    r#""nested":{"list":[1,2.5,"x",null,true],"empty":{}}}"#
);

/// How a test ends early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A check failed: what was expected and what came.
    Fail(String),
    /// Found at run time (from the transport's capabilities) not to apply: why.
    NotApplicable(String),
}

impl From<String> for Stop {
    fn from(message: String) -> Stop {
        Stop::Fail(message)
    }
}

pub(crate) type Check = Result<(), Stop>;

/// Fails the test with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::battery::Stop::Fail(format!($($fmt)+)));
        }
    };
}
pub(crate) use ensure;

/// `result.why("publishing")?`: a failed call as a test failure that says which call.
pub(crate) trait Why<T> {
    fn why(self, what: impl fmt::Display) -> Result<T, Stop>;
}

impl<T, E: fmt::Display> Why<T> for Result<T, E> {
    fn why(self, what: impl fmt::Display) -> Result<T, Stop> {
        self.map_err(|e| Stop::Fail(format!("{what} failed: {e}")))
    }
}

/// A test of the battery: its description, when it applies, and its body.
pub(crate) struct Test {
    pub(crate) info: TestInfo,
    /// `Err(reason)` when the features say it cannot run.
    pub(crate) applies: fn(&Features) -> Result<(), String>,
    pub(crate) run: fn(Arc<Ctx>) -> BoxFuture<Check>,
}

fn always(_: &Features) -> Result<(), String> {
    Ok(())
}

fn claimed(on: bool, feature: &str) -> Result<(), String> {
    if on {
        Ok(())
    } else {
        Err(format!("Features::{feature} is not claimed"))
    }
}

macro_rules! test {
    ($name:literal, $needs:literal, $checks:literal, $applies:expr, $run:path) => {
        Test {
            info: TestInfo {
                name: $name,
                needs: $needs,
                checks: $checks,
            },
            applies: $applies,
            run: |ctx| Box::pin($run(ctx)),
        }
    };
}

/// The battery, in the order a run reports it.
pub(crate) static TESTS: &[Test] = &[
    test!(
        "capabilities_declared",
        "-",
        "the transport's capabilities and the claimed features agree, both ways",
        always,
        extras::capabilities_declared
    ),
    test!(
        "round_trip",
        "-",
        "a raw body comes back byte for byte; an App-published envelope reaches its handler with `data` exact (2^64 integers, U+2028, non-ASCII), its id, attempts 0",
        always,
        lifecycle::round_trip
    ),
    test!(
        "pop_timeout",
        "-",
        "a pop of an empty queue returns nothing within its timeout (+ delay_tolerance)",
        always,
        lifecycle::pop_timeout
    ),
    test!(
        "ordering",
        "ordered",
        "ten messages reach one consumer (concurrency 1) in publish order",
        |f| claimed(f.ordered, "ordered"),
        lifecycle::ordering
    ),
    test!(
        "ack_removes",
        "-",
        "a handled, acknowledged message never comes back, even to a new consumer after redelivery_after",
        always,
        lifecycle::ack_removes
    ),
    test!(
        "batch_receive_and_settle",
        "-",
        "seven messages (published with BatchPublisher where offered) come back through receive(queue, 3) at most three at a time, in order where ordered; acknowledged together (BatchAcker where offered), none comes back",
        always,
        batch::batch_receive_and_settle
    ),
    test!(
        "release_counts_attempts",
        "a transport that can redeliver",
        "a handler failing once under max_attempts 2 sees attempts 0 then 1, same message id; outcomes Retried then Acked",
        always,
        delivery::release_counts_attempts
    ),
    test!(
        "unsettled_redelivered",
        "redelivery_after",
        "a delivery popped and never settled comes back to a new transport within redelivery_after (+ delay_tolerance) once the first is dropped",
        |f| {
            f
            .redelivery_after
            .map(|_| ())
            .ok_or_else(|| "Features::redelivery_after is not set (the broker never redelivers an unsettled delivery by itself)".to_owned())
        },
        delivery::unsettled_redelivered
    ),
    test!(
        "retry_backoff",
        "delayed_retry",
        "a retry with a back-off of delay_probe arrives no earlier than the back-off (less the broker's delay_granularity) and within delay_tolerance after it",
        |f| claimed(f.delayed_retry, "delayed_retry"),
        delivery::retry_backoff
    ),
    test!(
        "dead_letter_record",
        "-",
        "exhausted retries write the annotated record: data, id and URN kept, attempts 2, the seven-key dead_letter block (reason failed, error, exception, original_queue, lang rust, failed_at now)",
        always,
        dead_letter::dead_letter_record
    ),
    test!(
        "poison_invalid_utf8",
        "binary_bodies",
        "invalid UTF-8 is dead-lettered as {raw: base64, raw_encoding: base64} holding the original bytes",
        |f| if f.binary_bodies {
            Ok(())
        } else {
            Err("Features::binary_bodies is false (the broker carries only text)".to_owned())
        },
        dead_letter::poison_invalid_utf8
    ),
    test!(
        "poison_not_json",
        "-",
        "text that is not JSON is dead-lettered as {raw: <the text>} byte for byte",
        always,
        dead_letter::poison_not_json
    ),
    test!(
        "poison_no_identity",
        "-",
        "a JSON object without an identity is dead-lettered with the block spliced in, its bytes kept",
        always,
        dead_letter::poison_no_identity
    ),
    test!(
        "native_dead_letter",
        "an offered NativeSettler",
        "with the runtime's dead-lettering off, a poison body and a rejected message are left to the broker (outcome Native)",
        always,
        dead_letter::native_dead_letter
    ),
    test!(
        "native_redelivery_count",
        "native_redelivery_count, and a rewinder or redelivery_after",
        "a first delivery counts 0 earlier deliveries; the same message delivered again counts at least 1",
        |f| claimed(f.native_redelivery_count, "native_redelivery_count"),
        delivery::native_redelivery_count
    ),
    test!(
        "concurrent_consumers",
        "-",
        "two consumers on two transports handle thirty messages, each exactly once",
        always,
        extras::concurrent_consumers
    ),
    test!(
        "large_body",
        "max_body_bytes >= 1 MiB (or no limit)",
        "a body of exactly 1 MiB reaches its handler intact",
        |f| match f.max_body_bytes {
            Some(max) if max < MIB =>
                Err(format!("Features::max_body_bytes is {max}, under 1 MiB")),
            _ => Ok(()),
        },
        extras::large_body
    ),
    test!(
        "close_and_reconnect",
        "-",
        "close() succeeds; a message published before it is consumed through a new transport, which publishes and consumes too",
        always,
        lifecycle::close_and_reconnect
    ),
    test!(
        "headers",
        "declared headers (Sends::headers)",
        "traceparent, tracestate and a custom header reach the handler beside the envelope, never inside it",
        always,
        extras::headers
    ),
    test!(
        "delayed_publish",
        "declared delays (Sends::delay)",
        "a message published with a delay of delay_probe is not delivered before it (less the broker's delay_granularity), and is within delay_tolerance after",
        always,
        extras::delayed_publish
    ),
    test!(
        "take_in_place",
        "an offered Taker (with a Browser)",
        "an entry named by its body and position is taken, the second of two equal bodies when read there, every other entry left in order; a move publishes the new body to its target; a body no entry holds takes and publishes nothing",
        always,
        extras::take_in_place
    ),
    test!(
        "graceful_shutdown",
        "Unix signals (Suite::signals)",
        "SIGTERM with a handler still running at shutdown_timeout: the handler is interrupted, its message released unchanged and delivered again to a new transport",
        always,
        delivery::graceful_shutdown
    ),
];

/// [`TESTS`] as [`TestInfo`]s.
pub(crate) fn info() -> &'static [TestInfo] {
    static INFO: std::sync::OnceLock<Vec<TestInfo>> = std::sync::OnceLock::new();
    INFO.get_or_init(|| TESTS.iter().map(|t| t.info).collect())
}

/// What a test runs with.
pub(crate) struct Ctx {
    pub(crate) name: &'static str,
    pub(crate) features: Features,
    make: Make,
    transport_name: Arc<Mutex<Option<&'static str>>>,
}

impl Ctx {
    pub(crate) fn new(
        name: &'static str,
        features: Features,
        make: Make,
        transport_name: Arc<Mutex<Option<&'static str>>>,
    ) -> Ctx {
        Ctx {
            name,
            features,
            make,
            transport_name,
        }
    }

    /// A fresh connected transport from `make`.
    pub(crate) async fn connect(&self) -> Result<Arc<dyn Transport>, Stop> {
        let timeout = self.features.connect_timeout;
        let made = tokio::time::timeout(timeout, (self.make)())
            .await
            .map_err(|_| format!("make() did not return a transport within {timeout:?}"))?
            .map_err(|e| format!("make() failed: {e}"))?;
        self.transport_name
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(made.name());
        Ok(made)
    }

    /// A queue of this test's own.
    pub(crate) fn queue(&self) -> String {
        crate::unique_queue(&self.name.replace('_', "-"))
    }

    /// An app over `transport` consuming `queue`, polling as the features say.
    pub(crate) fn app(&self, transport: &Arc<dyn Transport>, queue: &str) -> AppBuilder {
        App::builder_arc(transport.clone())
            .queue(queue)
            .poll_timeout(self.features.poll_timeout)
            .rewind_pause(self.features.poll_timeout)
    }

    /// Consume `n` deliveries, or until nothing arrived for `receive_timeout`.
    pub(crate) fn consume(&self, n: u64) -> Consume {
        Consume::new()
            .max_messages(n)
            .idle_timeout(self.features.receive_timeout)
            .handle_signals(false)
    }

    /// Pops `queue` until a delivery comes or `patience` passed (a transient error is polled
    /// again; any other fails the test).
    pub(crate) async fn pop_within(
        &self,
        transport: &dyn Transport,
        queue: &str,
        patience: Duration,
    ) -> Result<Option<Delivery>, Stop> {
        let deadline = Instant::now() + patience;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let wait = left.min(self.features.poll_timeout);
            match transport.pop(queue, wait).await {
                Ok(Some(delivery)) => return Ok(Some(delivery)),
                Ok(None) => {}
                Err(e) if e.is_transient() => tokio::time::sleep(wait).await,
                Err(e) => return Err(Stop::Fail(format!("pop({queue:?}) failed: {e}"))),
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    /// Pops `queue` for a message that must come within `receive_timeout`.
    pub(crate) async fn receive(
        &self,
        transport: &dyn Transport,
        queue: &str,
        what: &str,
    ) -> Result<Delivery, Stop> {
        let patience = self.features.receive_timeout;
        self.pop_within(transport, queue, patience)
            .await?
            .ok_or_else(|| {
                Stop::Fail(format!(
                    "{what}: nothing arrived on {queue:?} within {patience:?}"
                ))
            })
    }

    /// Watches `queue` for `window`: a delivery fails the test (it is acknowledged first).
    pub(crate) async fn expect_nothing(
        &self,
        transport: &dyn Transport,
        queue: &str,
        window: Duration,
        why: &str,
    ) -> Check {
        if let Some(delivery) = self.pop_within(transport, queue, window).await? {
            let _ = transport.ack(&delivery).await;
            return Err(Stop::Fail(format!(
                "{why}, but {queue:?} delivered {}",
                preview(delivery.body())
            )));
        }
        Ok(())
    }

    /// The dead-letter queue the runtime writes for `app`'s `queue`.
    pub(crate) fn dead_letter_queue(&self, app: &App, queue: &str) -> String {
        babelqueue_core::dead_letter_queue(
            app.policy(),
            queue,
            app.transport().capabilities().dead_letter_namer(),
        )
    }
}

/// An app over `transport` consuming `queue` that reports its outcomes.
pub(crate) fn outcome_app(
    ctx: &Ctx,
    transport: &Arc<dyn Transport>,
    queue: &str,
) -> (AppBuilder, Outcomes) {
    let outcomes = Outcomes::default();
    let builder = ctx
        .app(transport, queue)
        .observer(Arc::new(outcomes.clone()));
    (builder, outcomes)
}

/// Publishes an envelope carrying [`DATA`] (and `trace_id`) through `app` to `queue`.
pub(crate) async fn publish_data(
    app: &App,
    queue: &str,
    trace_id: Option<&str>,
) -> Result<Envelope, Stop> {
    let mut builder = app
        .envelope(URN)
        .data_raw(RawJson::parse(DATA).why("parsing the test data")?);
    if let Some(trace_id) = trace_id {
        builder = builder.trace_id(trace_id);
    }
    let envelope = builder.build().why("building the envelope")?;
    app.publish_envelope(queue, &envelope, &Headers::new())
        .await
        .why("App::publish_envelope")?;
    Ok(envelope)
}

/// A task of a test (a consume loop) aborted when the test ends, whichever way: a test that
/// fails or times out leaves nothing running behind it.
pub(crate) struct Spawned<T>(pub(crate) tokio::task::JoinHandle<T>);

impl<T> Drop for Spawned<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Closes transports at the end of a test, best effort (a failed close is the
/// `close_and_reconnect` test's business, not every test's).
pub(crate) async fn close(transports: &[&Arc<dyn Transport>]) {
    for transport in transports {
        let _ = tokio::time::timeout(Duration::from_secs(5), transport.close()).await;
    }
}

/// A body for a failure message: lossy UTF-8, at most 300 characters.
pub(crate) fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut shown: String = text.chars().take(300).collect();
    if shown.len() < text.len() {
        shown.push_str(&format!("… ({} bytes)", body.len()));
    }
    format!("{shown:?}")
}

/// One handler call, as the handler saw it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) at: Instant,
    pub(crate) attempts: i64,
    pub(crate) id: String,
    pub(crate) data: String,
    pub(crate) headers: Headers,
    pub(crate) envelope_keys: Vec<String>,
}

/// Every handler call of a test.
#[derive(Debug, Clone, Default)]
pub(crate) struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    pub(crate) fn record(&self, ctx: &Context) -> usize {
        let mut calls = self.0.lock().unwrap_or_else(|p| p.into_inner());
        calls.push(Call {
            at: Instant::now(),
            attempts: ctx.attempts(),
            id: ctx.message_id().unwrap_or_default().into_owned(),
            data: ctx.data().as_str().to_owned(),
            headers: ctx.headers().clone(),
            envelope_keys: ctx.envelope().keys().map(|k| k.into_owned()).collect(),
        });
        calls.len()
    }

    pub(crate) fn all(&self) -> Vec<Call> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A handler that records each call here and succeeds.
    pub(crate) fn succeeding(
        &self,
    ) -> impl Fn(Context) -> BoxFuture<Result<(), babelqueue_core::HandlerError>>
    + Clone
    + Send
    + Sync
    + 'static {
        let calls = self.clone();
        move |c: Context| {
            calls.record(&c);
            Box::pin(async { Ok::<(), babelqueue_core::HandlerError>(()) })
        }
    }
}

/// Every outcome the runtime reported.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcomes(Arc<Mutex<Vec<Outcome>>>);

impl Outcomes {
    pub(crate) fn all(&self) -> Vec<Outcome> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Observer for Outcomes {
    fn on_event(&self, event: &Event<'_>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event.outcome);
    }
}
