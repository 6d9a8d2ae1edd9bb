//! `babelqueue serve`: the web console and admin API (`babelqueue-console`) over every broker
//! URL given, until a signal.

use std::sync::Arc;
use std::time::Duration;

use babelqueue::Transport;
use babelqueue_console::{Console, Source, TOKEN_ENV};

use crate::args::ServeArgs;
use crate::{CliResult, Session, close, seconds};

/// `text` without any secret of `urls`.
fn scrubbed(text: &str, urls: &[String]) -> String {
    urls.iter()
        .fold(text.to_owned(), |t, url| babelqueue::redact::scrub(&t, url))
}

pub(crate) async fn run(session: &Session, args: ServeArgs) -> CliResult {
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
    let every = seconds(args.sample_every, "sample-every")?.max(Duration::from_secs(1));
    let mut transports: Vec<Arc<dyn Transport>> = Vec::new();
    let result = async {
        let mut sources = Vec::new();
        for url in &args.urls {
            let transport = session.connect(url).await?;
            transports.push(transport.clone());
            sources
                .push(Source::new(url, transport, args.queues.clone()).map_err(|e| e.to_string())?);
        }
        let console = Console::new(sources)
            .read_only(args.read_only)
            .token(token)
            .sample_every(every)
            .workers(args.worker_metrics.clone());
        // Refuse an open listener before binding it.
        console
            .check_listen(args.listen)
            .map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        session.io().note(format!(
            "babelqueue console on http://{addr}/ ({} broker(s), {} queue(s), {} worker(s) scraped{}); Ctrl-C stops it",
            args.urls.len(),
            args.queues.len(),
            args.worker_metrics.len(),
            if args.read_only { ", read-only" } else { "" }
        ));
        let shutdown = session.shutdown().clone();
        console
            .serve(listener, async move { shutdown.wait().await })
            .await
            .map_err(|e| e.to_string())
    }
    .await;
    for transport in &transports {
        close(session.io(), transport.as_ref()).await;
    }
    result.map_err(|e| scrubbed(&e, &args.urls))
}
