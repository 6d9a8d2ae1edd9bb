//! Every action writes one audit line (target `babelqueue::audit`): who, what, which ids.

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use babelqueue::{MemoryTransport, Transport as _};
use babelqueue_console::{Console, Source};
use common::*;

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn an_action_is_audited_with_who_what_and_which_ids() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("babelqueue::audit=info"))
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let memory = Arc::new(MemoryTransport::new());
            for id in ["m-1", "m-2"] {
                memory
                    .publish("orders.dlq", &record(id, "urn:a", "failed", "boom", 1))
                    .await
                    .unwrap();
            }
            let router =
                Console::new(vec![Source::new("memory://", memory, ["orders"]).unwrap()]).router();
            let token = csrf(&router).await;
            post_json(
                &router,
                "/api/v1/queues/0/orders/retry",
                &token,
                serde_json::json!({"ids": ["m-1"]}),
            )
            .await;
            post_json(
                &router,
                "/api/v1/queues/0/orders/remove",
                &token,
                serde_json::json!({"ids": ["m-2"]}),
            )
            .await;
            // A read is not audited.
            get(&router, "/api/v1/queues/0/orders/dead-letters").await;
        });
    });
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let audit: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("babelqueue::audit"))
        .collect();
    assert_eq!(audit.len(), 2, "{text}");
    assert!(
        audit[0].contains("who=\"local\"")
            && audit[0].contains("action=\"retry\"")
            && audit[0].contains("ids=\"m-1\""),
        "{}",
        audit[0]
    );
    assert!(
        audit[1].contains("action=\"remove\"") && audit[1].contains("ids=\"m-2\""),
        "{}",
        audit[1]
    );
}
