//! The console in a real browser (Debian's `chromium` driven through `chromium-driver` with
//! fantoccini), over a live Redis (`BQ_REDIS_URL`): the overview lists a queue with 3 dead
//! letters, the dead-letter page filters them, and its Retry button moves one back to the
//! queue (checked on the broker). A screenshot of each page is saved under the target
//! directory (`$CARGO_TARGET_TMPDIR/console-screenshots/`).
//!
//! Without Redis, chromium or chromedriver the test prints `SKIPPED`, and fails with
//! `BQ_REQUIRE_BROKERS=1` (scripts/brokers.sh installs both browsers' packages).

#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use babelqueue::{App, Consume, HandlerError, Transport};
use babelqueue_console::{Console, Source};
use babelqueue_testkit::{broker_or_skip, free_port, skip_or_fail, unique_queue};
use fantoccini::{Client, ClientBuilder, Locator};

/// The chromedriver child, killed when the test ends however it ends.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn program(env: &str, name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Some(PathBuf::from(path));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

fn screenshots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shoot(client: &Client, name: &str) {
    let png = client.screenshot().await.unwrap();
    let path = screenshots().join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap();
    println!("screenshot: {}", path.display());
}

/// Three messages dead-lettered out of a fresh Redis queue by the runtime: two of
/// `urn:console:orders`, one of `urn:console:billing`.
async fn dead_lettered(url: &str) -> Option<String> {
    let transport = broker_or_skip("Redis", babelqueue::connect(url)).await?;
    let queue = unique_queue("browser");
    let app = App::builder_arc(transport.clone())
        .queue(queue.clone())
        .max_attempts(1)
        .dead_letter(true)
        .handle_any(|ctx: babelqueue::Context| async move {
            Err(HandlerError::new(format!(
                "{} failed: payment service 503",
                ctx.urn()
            )))
        })
        .build()
        .unwrap();
    for urn in [
        "urn:console:orders",
        "urn:console:orders",
        "urn:console:billing",
    ] {
        app.publish(urn, &serde_json::json!({"amount": 42}))
            .await
            .unwrap();
    }
    app.consume(
        Consume::new()
            .max_messages(3)
            .idle_timeout(Duration::from_secs(10))
            .handle_signals(false),
    )
    .await
    .unwrap();
    transport.close().await.unwrap();
    Some(queue)
}

/// Waits for the page at an address containing `part`, then for `css` on it.
async fn arrived(client: &Client, part: &str, css: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !client.current_url().await.unwrap().as_str().contains(part) {
        assert!(Instant::now() < deadline, "never reached {part}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.wait().for_element(Locator::Css(css)).await.unwrap();
}

async fn rows(client: &Client) -> usize {
    client
        .find_all(Locator::Css("#dead-letter-list tr.entry"))
        .await
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    let url = std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let (Some(chromium), Some(chromedriver)) = (
        program("BQ_CHROMIUM", "chromium"),
        program("BQ_CHROMEDRIVER", "chromedriver"),
    ) else {
        skip_or_fail(
            "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)",
        );
        return;
    };
    let Some(queue) = dead_lettered(&url).await else {
        return;
    };

    // The console, on a port of its own.
    let transport: Arc<dyn Transport> = babelqueue::connect(&url).await.unwrap();
    let console = Console::new(vec![
        Source::new(&url, transport.clone(), [queue.clone()]).unwrap(),
    ]);
    console.sample().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = {
        let console = console.clone();
        tokio::spawn(async move {
            console
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
        })
    };

    // chromedriver, then a headless chromium session.
    let port = free_port().unwrap();
    let _driver = Driver(
        Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_owned(),
        serde_json::json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]
        }),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(client) => break client,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "chromedriver never answered: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };

    // The overview lists the queue with its 3 dead letters.
    client.goto(&format!("{base}/")).await.unwrap();
    let table = client
        .find(Locator::Css("#queues"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(table.contains(&queue), "{table}");
    let row = client
        .find(Locator::XPath(&format!(
            "//table[@id='queues']//tr[td/a[text()='{queue}']]"
        )))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(row.split_whitespace().any(|cell| cell == "3"), "{row}");
    shoot(&client, "overview").await;

    // The dead-letter page: three, then one when filtered by URN.
    client
        .find(Locator::LinkText(&queue))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    arrived(&client, "/q/0/", "#dead-letter-list").await;
    assert_eq!(rows(&client).await, 3);
    shoot(&client, "dead-letters").await;
    let urn = client
        .find(Locator::Css("form.filters input[name='urn']"))
        .await
        .unwrap();
    urn.send_keys("billing").await.unwrap();
    client
        .find(Locator::Css("form.filters button[type='submit']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    arrived(&client, "urn=billing", "#dead-letter-list").await;
    assert_eq!(rows(&client).await, 1);
    let shown = client
        .find(Locator::Css("#dead-letter-list"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        shown.contains("urn:console:billing") && !shown.contains("urn:console:orders"),
        "{shown}"
    );
    shoot(&client, "filtered").await;

    // Its Retry button moves it back to the queue.
    client
        .find(Locator::Css("button.retry-one"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    arrived(&client, "/retry", "#summary").await;
    let summary = client
        .find(Locator::Css("#summary"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(summary.starts_with("1 done"), "{summary}");
    shoot(&client, "retried").await;
    let stats = transport
        .capabilities()
        .stats_reader()
        .unwrap()
        .stats(&queue)
        .await
        .unwrap();
    assert_eq!(
        (stats.ready, stats.dead_letter),
        (Some(1), Some(2)),
        "{stats:?}"
    );
    let delivery = transport
        .pop(&queue, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(delivery.body()).contains("urn:console:billing"));
    transport.ack(&delivery).await.unwrap();

    // The causes page, then the overview once more for the record.
    client
        .goto(&format!("{base}/q/0/{queue}/groups"))
        .await
        .unwrap();
    let groups = client
        .find(Locator::Css("#groups"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        groups.contains("urn:console:orders failed: payment service #"),
        "{groups}"
    );
    shoot(&client, "causes").await;

    client.close().await.unwrap();
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    transport.close().await.unwrap();
}
