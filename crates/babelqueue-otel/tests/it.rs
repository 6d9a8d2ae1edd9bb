//! Trace propagation across REAL broker hops: Redis (`BQ_REDIS_URL`, default
//! `redis://127.0.0.1:6379`) in both layouts, and RabbitMQ (`BQ_AMQP_URL`, default
//! `amqp://guest:guest@127.0.0.1:5672/%2f`) and ActiveMQ Artemis (`BQ_ARTEMIS_URL`, default
//! `artemis://bq:bq@127.0.0.1:5673`). Start them with `scripts/brokers.sh up redis rabbitmq
//! artemis`.
//!
//! With `BQ_REQUIRE_BROKERS` set, an unreachable broker fails the test; without it the test
//! prints `SKIPPED: …` and returns.

#![allow(clippy::print_stdout)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelqueue_core::{App, Consume, Context, HandlerError, Headers, Transport};
use babelqueue_otel::{HEADER_TRACEPARENT, Otel, synthetic_span_id, uuid_of};
use babelqueue_transport_amqp::AmqpTransport;
use babelqueue_transport_artemis::ArtemisTransport;
use babelqueue_transport_redis::fred::interfaces::KeysInterface;
use babelqueue_transport_redis::{FredClient, RedisTransport};
use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracer, SdkTracerProvider, SpanData};

const URN: &str = "urn:babel:orders:created";

fn skip_or_fail(broker: &str, url: &str, why: &str) {
    assert!(
        std::env::var_os("BQ_REQUIRE_BROKERS").is_none(),
        "{broker} at {url} is required (BQ_REQUIRE_BROKERS) but not reachable: {why}"
    );
    println!("SKIPPED: {broker} not reachable at {url} ({why})");
}

fn redis_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn amqp_url() -> String {
    std::env::var("BQ_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// A raw Redis client for clean-up, or `None` (skip) when Redis is down and not required.
async fn redis() -> Option<FredClient> {
    let url = redis_url();
    match tokio::time::timeout(Duration::from_secs(3), FredClient::connect(&url)).await {
        Ok(Ok(client)) => Some(client),
        Ok(Err(e)) => {
            skip_or_fail("Redis", &url, &e.to_string());
            None
        }
        Err(_) => {
            skip_or_fail("Redis", &url, "timed out");
            None
        }
    }
}

fn queue(name: &str) -> String {
    format!("bq-it-otel-{name}-{:08x}", fastrand::u32(..))
}

struct Tracing {
    spans: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    otel: Otel<SdkTracer>,
}

fn tracing() -> Tracing {
    let spans = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    Tracing {
        otel: Otel::new(provider.tracer("it")),
        spans,
        _provider: provider,
    }
}

impl Tracing {
    fn one(&self, kind: &SpanKind) -> SpanData {
        let mut found: Vec<SpanData> = self
            .spans
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|s| &s.span_kind == kind)
            .collect();
        assert_eq!(found.len(), 1, "expected one {kind:?} span: {found:?}");
        found.remove(0)
    }
}

fn parent_source(span: &SpanData) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == "messaging.babelqueue.parent_source")
        .map(|kv| kv.value.clone())
}

/// The headers and trace_id each handler call saw.
type Seen = Arc<Mutex<Vec<(Headers, String)>>>;

/// Publishes one message through `transport` inside a producer span, consumes it with a traced
/// handler, and returns (producer span, consumer span, what the handler saw).
async fn hop(
    transport: Arc<dyn Transport>,
    queue: &str,
) -> (SpanData, SpanData, (Headers, String)) {
    let t = tracing();
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let app = App::builder_arc(transport)
        .queue(queue)
        .poll_timeout(Duration::from_millis(200))
        .handle(
            URN,
            t.otel.handler(move |ctx: Context| {
                let record = record.clone();
                async move {
                    record.lock().unwrap().push((
                        ctx.headers().clone(),
                        ctx.trace_id().unwrap_or_default().into_owned(),
                    ));
                    Ok::<(), HandlerError>(())
                }
            }),
        )
        .build()
        .unwrap();
    t.otel
        .publish(&app, URN, &serde_json::json!({"order_id": 1042}))
        .await
        .unwrap();
    let summary = app
        .consume(
            Consume::new()
                .max_messages(1)
                .idle_timeout(Duration::from_secs(10))
                .handle_signals(false),
        )
        .await
        .unwrap();
    assert_eq!(
        summary.processed, 1,
        "the message came back from the broker"
    );
    let seen = seen.lock().unwrap().remove(0);
    (t.one(&SpanKind::Producer), t.one(&SpanKind::Consumer), seen)
}

/// The consumer span is the producer span's child through the `traceparent` header the handler
/// saw, and the envelope's `trace_id` is the producer's trace id.
fn assert_linked_by_traceparent(
    producer: &SpanData,
    consumer: &SpanData,
    headers: &Headers,
    trace_id: &str,
) {
    assert_eq!(
        consumer.span_context.trace_id(),
        producer.span_context.trace_id()
    );
    assert_eq!(consumer.parent_span_id, producer.span_context.span_id());
    assert_eq!(
        parent_source(consumer),
        Some(Value::from("traceparent".to_owned()))
    );
    assert!(headers.contains_key(HEADER_TRACEPARENT), "{headers:?}");
    assert_eq!(trace_id, uuid_of(producer.span_context.trace_id()));
}

async fn purge(raw: &FredClient, keys: &[String]) {
    for key in keys {
        let _: i64 = raw.raw().del(key.as_str()).await.unwrap_or(0);
    }
}

#[tokio::test]
async fn redis_default_layout_links_the_consumer_to_the_producer_span() {
    let Some(raw) = redis().await else { return };
    let q = queue("reliable");
    let transport = RedisTransport::connect(&redis_url())
        .await
        .expect("connect");
    let (producer, consumer, (headers, trace_id)) = hop(Arc::new(transport), &q).await;

    // The same trace, and the producer span itself is the parent: the traceparent crossed
    // Redis in the frame beside the body.
    assert_eq!(
        consumer.span_context.trace_id(),
        producer.span_context.trace_id()
    );
    assert_eq!(consumer.parent_span_id, producer.span_context.span_id());
    assert!(consumer.parent_span_is_remote);
    assert_eq!(
        parent_source(&consumer),
        Some(Value::from("traceparent".to_owned()))
    );
    assert_eq!(
        headers.get(HEADER_TRACEPARENT).map(String::as_str),
        Some(
            format!(
                "00-{:032x}-{:016x}-01",
                producer.span_context.trace_id(),
                producer.span_context.span_id()
            )
            .as_str()
        )
    );
    assert_eq!(trace_id, uuid_of(producer.span_context.trace_id()));
    purge(
        &raw,
        &[
            q.clone(),
            format!("{q}:processing"),
            format!("{q}:processing:deadlines"),
        ],
    )
    .await;
}

#[tokio::test]
async fn redis_laravel_layout_degrades_to_trace_id_correlation() {
    let Some(raw) = redis().await else { return };
    let q = queue("laravel");
    let transport = RedisTransport::connect(&format!("{}?laravel=1", redis_url()))
        .await
        .expect("connect");
    let (producer, consumer, (headers, trace_id)) = hop(Arc::new(transport), &q).await;

    // Laravel reads the stored job, so no header crossed; the envelope's trace_id still puts
    // the consumer in the producer's trace, under the trace_id's synthetic parent.
    assert!(
        !headers.contains_key(HEADER_TRACEPARENT),
        "the Laravel layout carried headers: {headers:?}"
    );
    assert_eq!(trace_id, uuid_of(producer.span_context.trace_id()));
    assert_eq!(
        consumer.span_context.trace_id(),
        producer.span_context.trace_id()
    );
    assert_eq!(consumer.parent_span_id, synthetic_span_id(&trace_id));
    assert_ne!(consumer.parent_span_id, producer.span_context.span_id());
    assert_eq!(
        parent_source(&consumer),
        Some(Value::from("trace_id".to_owned()))
    );
    purge(
        &raw,
        &[
            format!("queues:{q}"),
            format!("queues:{q}:reserved"),
            format!("queues:{q}:delayed"),
            format!("queues:{q}:notify"),
        ],
    )
    .await;
}

#[tokio::test]
async fn rabbitmq_links_the_consumer_to_the_producer_span() {
    let url = amqp_url();
    let transport =
        match tokio::time::timeout(Duration::from_secs(5), AmqpTransport::connect(&url)).await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => return skip_or_fail("RabbitMQ", &url, &e.to_string()),
            Err(_) => return skip_or_fail("RabbitMQ", &url, "timed out"),
        };
    let q = queue("amqp");
    let (producer, consumer, (headers, trace_id)) = hop(Arc::new(transport), &q).await;
    assert_linked_by_traceparent(&producer, &consumer, &headers, &trace_id);
    delete_amqp_queue(&url, &q).await;
}

/// Removes a test queue with a connection of its own.
async fn delete_amqp_queue(url: &str, queue: &str) {
    let uri = babelqueue_transport_amqp::AmqpUrl::parse(url).unwrap().uri;
    let connection = lapin::Connection::connect_uri(uri, lapin::ConnectionProperties::default())
        .await
        .expect("a clean-up connection");
    let channel = connection.create_channel().await.unwrap();
    channel
        .queue_delete(queue.into(), lapin::options::QueueDeleteOptions::default())
        .await
        .expect("delete the test queue");
}

fn artemis_url() -> String {
    std::env::var("BQ_ARTEMIS_URL").unwrap_or_else(|_| "artemis://bq:bq@127.0.0.1:5673".into())
}

/// Artemis carries `traceparent` as an AMQP application property beside the `bq_` ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artemis_links_the_consumer_to_the_producer_span() {
    let url = artemis_url();
    let transport = match tokio::time::timeout(
        Duration::from_secs(10),
        ArtemisTransport::connect(&url),
    )
    .await
    {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return skip_or_fail("Artemis", &url, &e.to_string()),
        Err(_) => return skip_or_fail("Artemis", &url, "timed out"),
    };
    let transport = Arc::new(transport);
    let q = queue("artemis");
    let (producer, consumer, (headers, trace_id)) = hop(transport.clone(), &q).await;
    assert_linked_by_traceparent(&producer, &consumer, &headers, &trace_id);
    transport.close().await.unwrap();
}
