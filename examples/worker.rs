//! The worker: handles orders from a queue on any broker, the same program for each.
//!
//! ```sh
//! scripts/brokers.sh up redis && eval "$(scripts/brokers.sh env)"
//! cargo run -p babelqueue-examples --features redis --example worker -- --url "$BQ_REDIS_URL" --count 10
//! ```
//!
//! It exits with status 0 once it handled `--count` orders, and with status 1 when the queue
//! stayed idle for `--timeout` seconds (default 60) first. The URL is `--url`, else `BQ_URL`;
//! its scheme picks the broker (the table in `common.rs` says what each does), and the matching
//! feature of this package must be on (`--features full` builds them all). The producer
//! (`producer.rs`) publishes the orders.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use babelqueue::{App, Consume, Context, HandlerError, Redelivery};
use babelqueue_examples::{Args, Order, Role, Tally};

#[tokio::main]
async fn main() -> Result<ExitCode, babelqueue::Error> {
    let args = Args::from_env(Role::Worker);
    // `connect` picks the transport from the URL's scheme; the app is the same for every
    // broker.
    let transport = babelqueue::connect(&args.url).await?;
    // A failing handler's order is retried twice, then dead-lettered. Kafka without retry
    // tiers cannot put one record back: there a failure goes straight to the dead-letter
    // topic (a retry would leave the record unsettled in place), hence one attempt.
    let max_attempts = match transport.capabilities().redelivery_mode() {
        Redelivery::Impossible => 1,
        _ => 3,
    };

    let tally = Tally::default();
    let handled = tally.clone();
    let app = App::builder_arc(transport)
        .queue(&args.queue)
        .max_attempts(max_attempts)
        .dead_letter(true) // then moved to the dead-letter queue (`<queue>-dlq` on SQS)
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

    // Stops after `count` orders, or once the queue was idle for `timeout`.
    let run = Consume::new()
        .max_messages(args.count)
        .idle_timeout(args.timeout);
    app.consume(run).await?;
    Ok(tally.verdict(args.count))
}
