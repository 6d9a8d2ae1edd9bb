//! The workers' rates on the overview: the console scrapes two real workers' `/metrics`
//! (`babelqueue::prometheus`, as `consume --metrics-listen` serves it) and shows each queue's
//! counts summed over both and its rates between two scrapes; a worker that does not answer is
//! named with its error and left out of the sums.

#[path = "it/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use babelqueue::prometheus::Prometheus;
use babelqueue::{App, Consume, Context, HandlerError, MemoryTransport, Transport};
use babelqueue_console::{Console, Source, WorkerEndpoint};
use common::get;

const URN: &str = "urn:babel:orders:created";

/// Publishes `n` messages to `queue` and consumes them with `app`; those whose `fail` is true
/// fail their handler (and, with no retries, are dead-lettered).
async fn run(app: &App, n: u64, failing: u64) {
    for i in 0..n {
        app.publish(URN, &serde_json::json!({ "n": i, "fail": i < failing }))
            .await
            .expect("publish");
    }
    app.consume(Consume::new().max_messages(n).handle_signals(false))
        .await
        .expect("consume");
}

fn worker(memory: &MemoryTransport, queue: &str, prometheus: &Prometheus) -> App {
    App::builder(memory.clone())
        .queue(queue)
        .max_attempts(1)
        .dead_letter(true)
        .observer(prometheus.observer())
        .handle(URN, |ctx: Context| async move {
            #[derive(serde::Deserialize)]
            struct Body {
                fail: bool,
            }
            if ctx.data_as::<Body>()?.fail {
                Err(HandlerError::new("boom"))
            } else {
                Ok(())
            }
        })
        .build()
        .expect("app")
}

fn row<'a>(rows: &'a serde_json::Value, queue: &str) -> &'a serde_json::Value {
    rows.as_array()
        .expect("rows")
        .iter()
        .find(|r| r["queue"] == queue)
        .unwrap_or_else(|| panic!("no row {queue} in {rows}"))
}

#[tokio::test]
async fn the_overview_shows_what_the_workers_report_summed_and_per_second() {
    // One recorder per process: both "workers" share it, so two endpoints serving it count
    // every message twice, which is what two workers reporting the same queue look like.
    let prometheus = Prometheus::install().expect("installed");
    let first = prometheus
        .serve("127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("serving");
    let second = prometheus
        .serve("127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("serving");
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");

    let memory = MemoryTransport::new();
    let app = worker(&memory, "rated", &prometheus);
    run(&app, 5, 0).await;

    let source = Source::new(
        "memory://",
        Arc::new(memory.clone()) as Arc<dyn Transport>,
        ["rated", "quiet"],
    )
    .expect("a source");
    let endpoints = [
        first.local_addr().to_string(),
        format!("http://{}/metrics", second.local_addr()),
        gone.to_string(),
    ]
    .iter()
    .map(|e| WorkerEndpoint::parse(e).expect("an endpoint"))
    .collect();
    let console = Console::new(vec![source]).workers(endpoints);
    let router = console.router();

    // Each endpoint's two scrapes fall between `started` and the second sample's end.
    let started = std::time::Instant::now();
    console.sample().await;
    let rows = get(&router, "/api/v1/queues").await.json();
    let rated = &row(&rows, "rated")["rates"];
    assert_eq!(rated["workers"], 2, "{rated}");
    assert_eq!(rated["consumed_total"], 10.0, "{rated}");
    assert!(
        rated["consumed_per_sec"].is_null(),
        "one scrape gives no rate: {rated}"
    );
    assert!(
        row(&rows, "quiet")["rates"].is_null(),
        "no worker reports it: {rows}"
    );

    run(&app, 7, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    console.sample().await;
    let elapsed = started.elapsed().as_secs_f64();
    let rows = get(&router, "/api/v1/queues").await.json();
    let rated = &row(&rows, "rated")["rates"];
    assert_eq!(rated["consumed_total"], 24.0, "{rated}");
    assert_eq!(rated["failed_total"], 4.0, "{rated}");
    assert_eq!(rated["dead_lettered_total"], 4.0, "{rated}");
    let per_sec = rated["consumed_per_sec"].as_f64().expect("a rate");
    // 14 counted (7 by each endpoint) over the time between the two scrapes, which is at
    // least the 200 ms pause and at most the whole step.
    assert!(
        per_sec >= 14.0 / elapsed - 0.01 && per_sec <= 14.0 / 0.2,
        "{per_sec}"
    );
    let failed = rated["failed_per_sec"].as_f64().expect("a rate");
    assert!(
        (failed * 7.0 - per_sec * 2.0).abs() < 1e-6,
        "{failed} vs {per_sec}"
    );

    // Nothing more consumed: the rate falls to 0, the totals stay.
    console.sample().await;
    let rows = get(&router, "/api/v1/queues").await.json();
    let rated = &row(&rows, "rated")["rates"];
    assert_eq!(rated["consumed_per_sec"], 0.0, "{rated}");
    assert_eq!(rated["consumed_total"], 24.0, "{rated}");

    let workers = get(&router, "/api/v1/workers").await.json();
    let workers = workers.as_array().expect("workers");
    assert_eq!(workers.len(), 3);
    assert_eq!(
        workers[0]["queues"],
        serde_json::json!(["rated"]),
        "{workers:?}"
    );
    assert!(workers[0]["error"].is_null(), "{workers:?}");
    assert!(
        workers[2]["error"]
            .as_str()
            .expect("an error")
            .contains("no answer"),
        "{workers:?}"
    );
    assert!(workers[2]["scraped_at_ms"].is_null(), "{workers:?}");

    let page = get(&router, "/").await;
    assert!(page.body.contains("Consumed/s"), "{}", page.body);
    assert!(
        page.body.contains(&gone.to_string()),
        "the silent worker is named"
    );
    // the history keeps the rate beside the depths
    let history = get(&router, "/api/v1/queues/0/rated/history").await.json();
    let points = history.as_array().expect("points");
    assert!(
        points[1]["consumed_per_sec"].as_f64().expect("a rate") > 0.0,
        "{history}"
    );
}

#[tokio::test]
async fn a_console_without_workers_shows_no_rate_column() {
    let memory = MemoryTransport::new();
    let source = Source::new(
        "memory://",
        Arc::new(memory) as Arc<dyn Transport>,
        ["orders"],
    )
    .expect("a source");
    let console = Console::new(vec![source]);
    console.sample().await;
    let page = get(&console.router(), "/").await;
    assert!(!page.body.contains("Consumed/s"), "{}", page.body);
    let rows = get(&console.router(), "/api/v1/queues").await.json();
    assert!(rows[0]["rates"].is_null(), "{rows}");
    let workers = get(&console.router(), "/api/v1/workers").await.json();
    assert_eq!(workers, serde_json::json!([]));
}
