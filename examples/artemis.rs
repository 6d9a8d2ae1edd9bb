//! ActiveMQ Artemis (AMQP 1.0): a producer and a worker on one queue.
//!
//! ```sh
//! scripts/brokers.sh up artemis && eval "$(scripts/brokers.sh env)"
//! cargo run -p babelqueue-examples --features artemis --example artemis -- produce --count 10
//! cargo run -p babelqueue-examples --features artemis --example artemis -- work --count 10
//! ```
//!
//! `artemis://user:password@host:port` (`artemis+ssl://` for TLS). The queue is an anycast
//! address; a redelivery carries the broker's delivery count, which the runtime reconciles with
//! the envelope's `attempts`.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use babelqueue::{App, Consume, Context, HandlerError};
use babelqueue_examples::{Args, Mode, Order, Tally};

#[tokio::main]
async fn main() -> Result<ExitCode, babelqueue::Error> {
    let args = Args::from_env("BQ_ARTEMIS_URL", "artemis://bq:bq@127.0.0.1:5673");
    // `connect` picks the transport from the URL's scheme (this needs the facade's `artemis`
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
