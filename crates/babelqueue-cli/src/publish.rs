//! `babelqueue publish`: envelopes out, one JSON line each.

use babelqueue::envelope::RawJson;
use babelqueue::{App, Headers};

use crate::args::PublishArgs;
use crate::{CliResult, Session, close, seconds};

/// Envelopes per `App::publish_batch` call of `publish --count`.
const PUBLISH_BATCH: u64 = 100;

pub(crate) async fn run(session: &Session, args: PublishArgs) -> CliResult {
    let transport = session.connect(&args.url.url).await?;
    let app = App::builder_arc(transport.clone())
        .queue(args.queue.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let result = publish_all(session, &app, args).await;
    session.io().done();
    close(session.io(), transport.as_ref()).await;
    result
}

async fn publish_all(session: &Session, app: &App, args: PublishArgs) -> CliResult {
    let io = session.io();
    let data = RawJson::parse(&args.data).map_err(|e| format!("--data is not JSON: {e}"))?;
    let headers: Headers = args.headers.into_iter().collect();
    let envelope = |app: &App| {
        let mut builder = app.envelope(&args.urn).data_raw(data.clone());
        if let Some(trace_id) = &args.trace_id {
            builder = builder.trace_id(trace_id.clone());
        }
        builder.build().map_err(|e| e.to_string())
    };
    let bar = (args.count > 1).then(|| io.progress(Some(args.count), "publishing"));
    // A signal stops the loop between two publishes: what was printed was sent.
    let stopping = || session.shutdown().exit().is_some();
    // Plain envelopes go out in batches (one round trip each where the broker allows); a
    // delayed or header-carrying publish is one call per envelope.
    if args.delay.is_none() && headers.is_empty() {
        let mut left = args.count;
        while left > 0 && !stopping() {
            let take = left.min(PUBLISH_BATCH);
            let batch = (0..take)
                .map(|_| envelope(app))
                .collect::<Result<Vec<_>, _>>()?;
            app.publish_batch(&args.queue, &batch)
                .await
                .map_err(|e| e.to_string())?;
            for sent in &batch {
                io.line(sent.encode().map_err(|e| e.to_string())?);
            }
            if let Some(bar) = &bar {
                bar.inc(take);
            }
            left -= take;
        }
        return Ok(());
    }
    for _ in 0..args.count {
        if stopping() {
            break;
        }
        let envelope = envelope(app)?;
        match args.delay {
            Some(delay) => {
                app.publish_delayed(&args.queue, &envelope, seconds(delay, "delay")?)
                    .await
            }
            None => app.publish_envelope(&args.queue, &envelope, &headers).await,
        }
        .map_err(|e| e.to_string())?;
        io.line(envelope.encode().map_err(|e| e.to_string())?);
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    Ok(())
}
