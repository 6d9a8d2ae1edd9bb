//! NATS JetStream: the stream behind a queue, read and reshaped with the client the transport
//! itself uses (`babelqueue::nats::async_nats`), named by the transport's own rules
//! (`NatsOptions::stream_name` and `subject`), so the harness and the worker agree on them.

use std::time::Duration;

use babelqueue::nats::NatsOptions;
use babelqueue::nats::async_nats::{self, jetstream};

/// A JetStream context on the broker of `url` (the transport's URL: its options are ignored).
async fn connect(url: &str) -> Result<(NatsOptions, jetstream::Context), String> {
    let options = NatsOptions::from_url(url).map_err(|e| e.to_string())?;
    let server = options.server.clone();
    let client = tokio::time::timeout(Duration::from_secs(10), async_nats::connect(&server))
        .await
        .map_err(|_| format!("no connection to {server} within 10 s"))?
        .map_err(|e| format!("{server}: {e}"))?;
    Ok((options, jetstream::new(client)))
}

/// The stream the dead-letter queue `dlq` needs, created as the transport would create it, but
/// with a 64-byte limit on a message: every dead-letter write is refused.
pub(crate) async fn break_dlq(url: &str, dlq: &str) -> Result<String, String> {
    let (options, js) = connect(url).await?;
    let name = options.stream_name(dlq).map_err(|e| e.to_string())?;
    let subject = options.subject(dlq).map_err(|e| e.to_string())?;
    js.create_stream(jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![subject],
        retention: jetstream::stream::RetentionPolicy::WorkQueue,
        max_message_size: 64,
        ..Default::default()
    })
    .await
    .map_err(|e| format!("create stream {name}: {e}"))?;
    Ok(format!(
        "stream {name} created with max_msg_size 64 (every dead-letter write is refused)"
    ))
}

/// Undoes [`break_dlq`]: the stream takes messages of any size again.
pub(crate) async fn fix_dlq(url: &str, dlq: &str) -> Result<(), String> {
    let (options, js) = connect(url).await?;
    let name = options.stream_name(dlq).map_err(|e| e.to_string())?;
    let mut stream = js
        .get_stream(&name)
        .await
        .map_err(|e| format!("stream {name}: {e}"))?;
    let mut config = stream
        .info()
        .await
        .map_err(|e| format!("stream info {name}: {e}"))?
        .config
        .clone();
    config.max_message_size = -1;
    js.update_stream(config)
        .await
        .map(|_| ())
        .map_err(|e| format!("update stream {name}: {e}"))
}

/// The server that leads the stream of `queue`, and how many of its other replicas are current
/// (`Err` while it has no leader, or before it exists).
pub(crate) async fn stream_leader(url: &str, queue: &str) -> Result<(String, usize), String> {
    let (options, js) = connect(url).await?;
    let name = options.stream_name(queue).map_err(|e| e.to_string())?;
    let mut stream = js
        .get_stream(&name)
        .await
        .map_err(|e| format!("stream {name}: {e}"))?;
    let info = stream
        .info()
        .await
        .map_err(|e| format!("stream info {name}: {e}"))?;
    let cluster = info
        .cluster
        .clone()
        .ok_or_else(|| format!("stream {name}: no cluster information"))?;
    let leader = cluster
        .leader
        .clone()
        .ok_or_else(|| format!("stream {name} has no leader"))?;
    Ok((
        leader,
        cluster.replicas.iter().filter(|r| r.current).count(),
    ))
}

/// Deletes the stream of `queue` (a row's own).
pub(crate) async fn delete_stream(url: &str, queue: &str) -> Result<(), String> {
    let (options, js) = connect(url).await?;
    let name = options.stream_name(queue).map_err(|e| e.to_string())?;
    js.delete_stream(&name)
        .await
        .map(|_| ())
        .map_err(|e| format!("delete stream {name}: {e}"))
}
