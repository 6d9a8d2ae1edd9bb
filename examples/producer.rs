//! The producer: publishes orders to a queue on any broker, the same program for each.
//!
//! ```sh
//! scripts/brokers.sh up redis && eval "$(scripts/brokers.sh env)"
//! cargo run -p babelqueue-examples --features redis --example producer -- --url "$BQ_REDIS_URL" --count 10
//! ```
//!
//! The URL is `--url`, else `BQ_URL`; its scheme picks the broker (`redis://`, `amqp://`,
//! `sqs://`, `kafka://`, `artemis://`, `pulsar://`, `nats://`, `sb://`), and the matching
//! feature of this package must be on (`--features full` builds them all). What each URL looks
//! like and what each broker does with the orders: the table in `common.rs`. The worker
//! (`worker.rs`) handles them.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use babelqueue::App;
use babelqueue_examples::{Args, Order, Role};

#[tokio::main]
async fn main() -> Result<ExitCode, babelqueue::Error> {
    let args = Args::from_env(Role::Producer);
    // `connect` picks the transport from the URL's scheme; the app is the same for every
    // broker. A producer needs no handler: it only publishes.
    let transport = babelqueue::connect(&args.url).await?;
    let app = App::builder_arc(transport).queue(&args.queue).build()?;
    for order_id in 1..=args.count {
        app.publish_message(&Order { order_id }).await?;
    }
    println!("published {} orders to {}", args.count, args.queue);
    Ok(ExitCode::SUCCESS)
}
