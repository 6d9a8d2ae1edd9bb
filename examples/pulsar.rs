//! Apache Pulsar: a producer and a worker on one topic.
//!
//! ```sh
//! scripts/brokers.sh up pulsar && eval "$(scripts/brokers.sh env)"
//! cargo run -p babelqueue-examples --features pulsar --example pulsar -- produce --count 10
//! cargo run -p babelqueue-examples --features pulsar --example pulsar -- work --count 10
//! ```
//!
//! `pulsar://host:port` (`pulsar+ssl://` for TLS). The queue is a topic; workers share one
//! subscription (default `babelqueue`) that starts at the earliest retained message, so the
//! worker sees what was produced before it subscribed. Retries wait through delayed delivery.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use babelqueue::{App, Consume, Context, HandlerError};
use babelqueue_examples::{Args, Mode, Order, Tally};

#[tokio::main]
async fn main() -> Result<ExitCode, babelqueue::Error> {
    let args = Args::from_env("BQ_PULSAR_URL", "pulsar://127.0.0.1:6650");
    // `connect` picks the transport from the URL's scheme (this needs the facade's `pulsar`
    // feature); the app is the same for every broker.
    let transport = babelqueue::connect(&args.url).await?;

    let tally = Tally::default();
    let handled = tally.clone();
    let app = App::builder_arc(transport)
        .queue(&args.queue)
        .max_attempts(3) // a failing handler's order is retried twice ...
        .dead_letter(true) // ... then moved to the dead-letter queue
        .concurrency(4)
        .handle_message(move |order: Order, ctx: Context| {
            let handled = handled.clone();
            async move {
                println!(
                    "order {} (attempts before this one: {})",
                    order.order_id,
                    ctx.attempts()
                );
                handled.add();
                Ok::<(), HandlerError>(())
            }
        })
        .build()?;

    match args.mode {
        Mode::Produce => {
            for order_id in 1..=args.count {
                app.publish_message(&Order { order_id }).await?;
            }
            println!("published {} orders to {}", args.count, args.queue);
            Ok(ExitCode::SUCCESS)
        }
        Mode::Work => {
            // Stops after `count` orders, or once the queue was idle for `timeout`.
            let run = Consume::new()
                .max_messages(args.count)
                .idle_timeout(args.timeout);
            app.consume(run).await?;
            Ok(tally.verdict(args.count))
        }
    }
}
