//! Azure Service Bus: a producer and a worker on one queue.
//!
//! ```sh
//! export AZURE_SERVICEBUS_CONNECTION_STRING='Endpoint=sb://asbSPACE.servicebus.windows.net/;SharedAccessKeyName=...;SharedAccessKey=...'
//! cargo run -p babelqueue-examples --features asb --example asb -- produce --url sb://asbSPACE.servicebus.windows.net --count 10
//! cargo run -p babelqueue-examples --features asb --example asb -- work --url sb://asbSPACE.servicebus.windows.net --count 10
//! ```
//!
//! CI compiles this example but cannot run it: there is no Service Bus here (only loopback is
//! reachable, and the emulator ships as a container image), so the transport is tested through
//! its client trait with a PeekLock fake instead. The key comes from the connection string in
//! the environment, or from the URL itself (`sb://KEY_asb:URL_ENCODED_KEY@asbSPACE...`);
//! messages are received in PeekLock mode and settled after the handler.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use babelqueue::{App, Consume, Context, HandlerError};
use babelqueue_examples::{Args, Mode, Order, Tally};

#[tokio::main]
async fn main() -> Result<ExitCode, babelqueue::Error> {
    let args = Args::from_env(
        "AZURE_SERVICEBUS_URL",
        "sb://example.servicebus.windows.net",
    );
    // `connect` picks the transport from the URL's scheme (this needs the facade's `asb`
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
