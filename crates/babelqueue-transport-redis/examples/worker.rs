//! A Redis worker: consumes a queue and prints each message it handles.
//!
//! ```text
//! cargo run -p babelqueue-transport-redis --example worker -- redis://127.0.0.1:6379 orders [HANDLER_MS]
//! ```
//!
//! Each handler call prints `handling <meta.id> attempts=<n>` and then works for `HANDLER_MS`
//! milliseconds (default 0) before it prints `handled <meta.id>`. Kill it with SIGKILL while a
//! handler sleeps and start it again: the message comes back once `retry_after` lapses.

#![allow(clippy::print_stdout)]

use std::io::Write as _;
use std::time::Duration;

use babelqueue_core::{App, Context, HandlerError};
use babelqueue_transport_redis::RedisTransport;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let queue = args.next().unwrap_or_else(|| "orders".into());
    let work = Duration::from_millis(args.next().and_then(|ms| ms.parse().ok()).unwrap_or(0));
    let app = App::builder(RedisTransport::connect(&url).await?)
        .queue(queue)
        .handle_any(move |ctx: Context| async move {
            let id = ctx.message_id().unwrap_or_default().into_owned();
            println!("handling {id} attempts={}", ctx.attempts());
            std::io::stdout().flush()?;
            tokio::time::sleep(work).await;
            println!("handled {id}");
            std::io::stdout().flush()?;
            Ok::<(), HandlerError>(())
        })
        .build()?;
    app.run().await?;
    Ok(())
}
