//! SASL/PLAIN against the broker's SASL_PLAINTEXT listener (127.0.0.1:9094, user `bq`): the
//! right password works; a wrong one is an `Auth` error within seconds, from `publish` and from
//! `App::consume` (and a non-zero exit of `babelqueue consume`), naming the broker and never
//! showing the password.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelqueue_core::{App, Consume, Context, HandlerError, Transport, TransportErrorKind};
use babelqueue_envelope::Envelope;
use babelqueue_transport_kafka::{KafkaOptions, KafkaTransport};
use serde_json::json;

use crate::common::{broker, cli, create_topics, sasl_broker, sasl_url, unique};

const URN: &str = "urn:babel:orders:created";
/// Far more than the few seconds a refusal takes, far less than the 30 s delivery timeout.
const AUTH_BOUND: Duration = Duration::from_secs(10);
/// The wrong password: a string that appears nowhere else, so finding it in a text is a leak.
const WRONG: &str = "wr0ng-Pa55-zq";

/// [`sasl_url`] with the password replaced by `password`.
fn with_password(password: &str) -> String {
    let url = sasl_url();
    let config = KafkaOptions::from_url(&url).expect("a valid BQ_KAFKA_SASL_URL");
    let right = &config.client["sasl.password"];
    assert!(
        url.contains(&format!(":{right}@")),
        "BQ_KAFKA_SASL_URL carries user:password@"
    );
    url.replacen(&format!(":{right}@"), &format!(":{password}@"), 1)
}

fn group_url(url: &str, group: &str) -> String {
    format!("{url}&group_id={group}")
}

fn body(topic: &str) -> Vec<u8> {
    Envelope::builder(URN)
        .queue(topic)
        .data(&json!({"n": 1}))
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

/// The error names the SASL listener, says the credentials were refused, and shows no
/// password, in `Display` and in `Debug`.
fn assert_refusal(what: &str, display: &str, debug: &str) {
    assert!(display.contains("127.0.0.1:9094"), "{what}: {display}");
    assert!(
        display.contains("refused the credentials"),
        "{what}: {display}"
    );
    for text in [display, debug] {
        assert!(!text.contains(WRONG), "{what} shows the password: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_right_password_publishes_and_consumes() {
    let (Some(plain), Some(_)) = (broker(), sasl_broker()) else {
        return;
    };
    let (topic, group) = (unique("sasl-ok"), unique("group"));
    create_topics(&plain, &[&topic], 1).await;
    let t = KafkaTransport::connect(&group_url(&sasl_url(), &group))
        .await
        .unwrap();
    let published = body(&topic);
    tokio::time::timeout(Duration::from_secs(30), t.publish(&topic, &published))
        .await
        .expect("the publish is confirmed in time")
        .expect("the right password publishes");
    let id = Envelope::decode(&published)
        .unwrap()
        .envelope
        .message_id()
        .unwrap()
        .into_owned();
    let got: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = got.clone();
    let app = App::builder(t.clone())
        .queue(topic.clone())
        .handle(URN, move |ctx: Context| {
            seen.lock()
                .unwrap()
                .push(ctx.message_id().unwrap_or_default().into_owned());
            async { Ok::<(), HandlerError>(()) }
        })
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "nothing consumed over SASL");
        tokio::time::timeout(
            Duration::from_secs(60),
            app.consume(Consume::new().max_messages(1).handle_signals(false)),
        )
        .await
        .expect("the consume run ends")
        .expect("the right password consumes");
    }
    assert_eq!(got.lock().unwrap()[0], id);
    t.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_wrong_password_is_an_auth_error_within_seconds() {
    let (Some(plain), Some(_)) = (broker(), sasl_broker()) else {
        return;
    };
    let topic = unique("sasl-wrong");
    create_topics(&plain, &[&topic], 1).await;
    let url = with_password(WRONG);

    // publish
    let t = KafkaTransport::connect(&group_url(&url, &unique("group")))
        .await
        .unwrap();
    assert!(!format!("{t:?}").contains(WRONG), "{t:?}");
    let started = Instant::now();
    let err = tokio::time::timeout(AUTH_BOUND, t.publish(&topic, &body(&topic)))
        .await
        .expect("publish fails within the bound, not after the delivery timeout")
        .expect_err("a wrong password cannot publish");
    println!("publish refused after {:?}: {err}", started.elapsed());
    assert_eq!(err.kind(), TransportErrorKind::Auth, "{err}");
    assert!(!err.is_transient());
    assert_refusal("publish", &err.to_string(), &format!("{err:?}"));

    // consume, on a transport of its own (its consumer meets the refusal itself)
    let t = KafkaTransport::connect(&group_url(&url, &unique("group")))
        .await
        .unwrap();
    let app = App::builder(t)
        .queue(topic.clone())
        .handle(URN, |_ctx: Context| async { Ok::<(), HandlerError>(()) })
        .build()
        .unwrap();
    let started = Instant::now();
    let err = tokio::time::timeout(
        AUTH_BOUND,
        app.consume(Consume::new().handle_signals(false)),
    )
    .await
    .expect("consume stops within the bound")
    .expect_err("a wrong password stops consume with an error");
    println!("consume stopped after {:?}: {err}", started.elapsed());
    match &err {
        babelqueue_core::Error::Transport(e) => assert_eq!(e.kind(), TransportErrorKind::Auth),
        other => panic!("not a transport error: {other:?}"),
    }
    assert_refusal("consume", &err.to_string(), &format!("{err:?}"));
}

/// `babelqueue consume` with a wrong password exits non-zero within seconds, says why, and
/// prints no password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_consume_with_a_wrong_password_exits_non_zero() {
    let (Some(plain), Some(_)) = (broker(), sasl_broker()) else {
        return;
    };
    let topic = unique("sasl-cli");
    create_topics(&plain, &[&topic], 1).await;
    let url = group_url(&with_password(WRONG), &unique("group"));
    let bin = cli();
    let started = Instant::now();
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(bin)
            .args(["consume", &url, "--queue", &topic])
            .output(),
    )
    .await
    .expect("the CLI stops by itself")
    .expect("the CLI runs");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!(
        "babelqueue consume exited {} after {elapsed:?}; stderr:\n{stderr}",
        output.status
    );
    assert!(!output.status.success(), "exit 0 on refused credentials");
    assert!(elapsed < AUTH_BOUND, "took {elapsed:?}");
    assert!(stderr.contains("127.0.0.1:9094"), "{stderr}");
    assert!(stderr.contains("refused the credentials"), "{stderr}");
    assert!(
        !stderr.contains(WRONG) && !stdout.contains(WRONG),
        "the CLI printed the password:\n{stdout}\n{stderr}"
    );
}
