//! Apache Kafka: a producer and a worker on one topic.
//!
//! ```sh
//! scripts/brokers.sh up kafka && eval "$(scripts/brokers.sh env)"
//! cargo run -p babelqueue-examples --features kafka --example kafka -- produce --count 10
//! cargo run -p babelqueue-examples --features kafka --example kafka -- work --count 10
//! ```
//!
//! `kafka://host:port[?group_id=kafka]`: the queue is the topic, workers share the consumer
//! group (default `babelqueue`) and commit an offset only after the record was handled. Kafka
//! cannot put one record back, so a retry needs retry tiers (see the transport's docs); without
//! them a failed record goes straight to the dead-letter topic, hence `max_attempts(1)`.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use babelqueue::{App, Consume, Context, HandlerError};
use babelqueue_examples::{Args, Mode, Order, Tally};

#[tokio::main]
async fn main() -> Result<ExitCode, babelqueue::Error> {
    let args = Args::from_env("BQ_KAFKA_URL", "kafka://127.0.0.1:9092");
    // `connect` picks the transport from the URL's scheme (this needs the facade's `kafka`
    // feature); the app is the same for every broker.
    let transport = babelqueue::connect(&args.url).await?;

    let tally = Tally::default();
    let handled = tally.clone();
    let app = App::builder_arc(transport)
        .queue(&args.queue)
        .max_attempts(1) // no retry tiers configured: a failure is not retried ...
        .dead_letter(true) // ... but written to the dead-letter topic
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
