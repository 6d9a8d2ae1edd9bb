//! A real Prometheus server scrapes a worker and `babelqueue serve`: the server
//! (`BQ_PROMETHEUS`, as `scripts/brokers.sh env` exports it, else `prometheus` on the `PATH`) is
//! started on a port probed free, scraping the worker's `/metrics` (`babelqueue::prometheus`)
//! and the console's every second, and its query API must answer the worker's counts and the
//! broker-side depth the console reports, under the same queue label. Without the binary the
//! test prints `SKIPPED`; with `BQ_REQUIRE_BROKERS` set it fails instead.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use babelqueue::prometheus::Prometheus;
use babelqueue::{App, Consume, Context, HandlerError, MemoryTransport, Transport};
use babelqueue_console::{Console, Source};
use babelqueue_testkit::{skip_or_fail, unique_queue};

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The value of an instant query's first sample, if it has one.
async fn query(api: u16, promql: &str) -> Option<f64> {
    let url = url::Url::parse_with_params(
        &format!("http://127.0.0.1:{api}/api/v1/query"),
        [("query", promql)],
    )
    .ok()?;
    let body = reqwest::get(url).await.ok()?.bytes().await.ok()?;
    let answer: serde_json::Value = serde_json::from_slice(&body).ok()?;
    answer["data"]["result"][0]["value"][1]
        .as_str()?
        .parse()
        .ok()
}

#[tokio::test]
async fn prometheus_scrapes_a_worker_and_the_console() {
    let binary = std::env::var("BQ_PROMETHEUS").unwrap_or_else(|_| "prometheus".to_owned());
    if Command::new(&binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        skip_or_fail(format!(
            "no Prometheus server at {binary:?} (scripts/brokers.sh up prometheus)"
        ));
        return;
    }
    let prometheus = Prometheus::install().expect("installed");
    let worker = prometheus
        .serve("127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("serving");
    let queue = unique_queue("prometheus-scraped");
    let memory = MemoryTransport::new();
    let app = App::builder(memory.clone())
        .queue(&queue)
        .observer(prometheus.observer())
        .handle("urn:babel:orders:created", |_ctx: Context| async {
            Ok::<(), HandlerError>(())
        })
        .build()
        .expect("app");
    for n in 0..3 {
        app.publish("urn:babel:orders:created", &serde_json::json!({ "n": n }))
            .await
            .expect("publish");
    }
    app.consume(Consume::new().max_messages(3).handle_signals(false))
        .await
        .expect("consume");
    // two messages left waiting, for the console's depth
    for _ in 0..2 {
        memory.publish(&queue, b"{}").await.expect("publish");
    }
    let source = Source::new(
        "memory://",
        Arc::new(memory.clone()) as Arc<dyn Transport>,
        [queue.clone()],
    )
    .expect("a source");
    let console = Console::new(vec![source]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let console_addr = listener.local_addr().expect("an address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        console
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await
    });

    let dir = std::env::temp_dir().join(format!("bq-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: worker\n    \
             static_configs:\n      - targets: ['{}']\n  - job_name: console\n    \
             static_configs:\n      - targets: ['{}']\n",
            worker.local_addr(),
            console_addr
        ),
    )
    .expect("the config");
    let api = free_port();
    let _server = Server(
        Command::new(&binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{api}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Prometheus starts"),
    );
    let sent = format!(
        "sum(messaging_client_sent_messages_total{{messaging_destination_name=\"{queue}\"}})"
    );
    let acked = format!(
        "sum(messaging_client_consumed_messages_total{{messaging_destination_name=\"{queue}\",\
         messaging_babelqueue_outcome=\"acked\",job=\"worker\"}})"
    );
    let ready = format!(
        "sum(babelqueue_queue_messages{{messaging_destination_name=\"{queue}\",\
         state=\"ready\",job=\"console\"}})"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut got_sent, mut got_acked, mut got_ready) = (None, None, None);
    while Instant::now() < deadline {
        got_sent = query(api, &sent).await;
        got_acked = query(api, &acked).await;
        got_ready = query(api, &ready).await;
        if got_sent.is_some() && got_acked.is_some() && got_ready.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(got_sent, Some(3.0), "Prometheus answered {sent}");
    assert_eq!(got_acked, Some(3.0), "Prometheus answered {acked}");
    assert_eq!(got_ready, Some(2.0), "Prometheus answered {ready}");
    for job in ["worker", "console"] {
        let up = query(api, &format!("up{{job=\"{job}\"}}")).await;
        assert_eq!(up, Some(1.0), "the {job} target is up");
    }
    let _ = stop.send(());
    serving
        .await
        .expect("the console task")
        .expect("the console served");
    let _ = std::fs::remove_dir_all(&dir);
}
