//! `babelqueue consume`: the real runtime, one JSON line per handler call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use babelqueue::envelope::RawJson;
use babelqueue::{App, Consume, Context, HandlerError, StopHandle};

use crate::args::ConsumeArgs;
use crate::{CliResult, Session, close, seconds};

/// `{"urn","trace_id","attempts","data","meta"}` for one handler call, data and meta verbatim.
fn call_line(ctx: &Context) -> String {
    let envelope = ctx.envelope();
    let trace = envelope
        .get("trace_id")
        .map_or_else(|| "null".to_owned(), |t| t.as_str().to_owned());
    let meta = envelope
        .get("meta")
        .map_or_else(|| "{}".to_owned(), |m| m.as_str().to_owned());
    format!(
        "{{\"urn\":{},\"trace_id\":{trace},\"attempts\":{},\"data\":{},\"meta\":{meta}}}",
        RawJson::string(&ctx.urn()),
        ctx.attempts(),
        ctx.data()
    )
}

pub(crate) async fn run(session: &Session, args: ConsumeArgs) -> CliResult {
    let io = session.io().clone();
    let transport = session.connect(&args.url.url).await?;
    let calls = Arc::new(AtomicU64::new(0));
    let stop_after = args.max;
    let mut builder = App::builder_arc(transport.clone())
        .queue(args.queue.clone())
        .max_attempts(args.max_attempts)
        .dead_letter(args.dead_letter)
        .on_unknown_urn(args.on_unknown_urn.into())
        .retry_backoff(seconds(args.retry_backoff, "retry-backoff")?)
        .concurrency(args.concurrency);
    if let Some(prefetch) = args.prefetch {
        builder = builder.prefetch(prefetch);
    }
    let bar = io.progress(None, format!("consuming {}", args.queue));
    // The stop handle exists only once the app is built; handlers reach it through a cell.
    let stop: Arc<OnceLock<StopHandle>> = Arc::new(OnceLock::new());
    let handler = |fail: bool| {
        let (calls, stop, io, bar) = (calls.clone(), stop.clone(), io.clone(), bar.clone());
        move |ctx: Context| {
            let (calls, stop, io, bar) = (calls.clone(), stop.clone(), io.clone(), bar.clone());
            async move {
                io.line(call_line(&ctx));
                bar.inc(1);
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                if stop_after.is_some_and(|max| n >= max)
                    && let Some(stop) = stop.get()
                {
                    stop.stop();
                }
                if fail {
                    Err(HandlerError::new(format!("{} is a --fail-urn", ctx.urn())))
                } else {
                    Ok(())
                }
            }
        }
    };
    for urn in &args.urns {
        builder = builder.handle(urn.clone(), handler(false));
    }
    for urn in &args.fail_urns {
        builder = builder.handle(urn.clone(), handler(true));
    }
    if args.urns.is_empty() {
        builder = builder.handle_any(handler(false));
    }
    let app = match builder.build() {
        Ok(app) => app,
        Err(e) => {
            io.done();
            close(&io, transport.as_ref()).await;
            return Err(e.to_string());
        }
    };
    let _ = stop.set(app.stop_handle());
    // The CLI owns the signals: a SIGINT stops the loop after its in-flight messages.
    session.shutdown().stops(app.stop_handle());
    if args.max == Some(0) || session.shutdown().exit().is_some() {
        io.done();
        close(&io, transport.as_ref()).await;
        return Ok(());
    }
    let mut options = Consume::new().handle_signals(false);
    if let Some(idle) = args.idle_timeout {
        options = options.idle_timeout(seconds(idle, "idle-timeout")?);
    }
    io.note(format!(
        "consuming {} on {} (Ctrl-C stops after the messages in flight)",
        args.queue,
        transport.name()
    ));
    let summary = app.consume(options).await;
    io.done();
    close(&io, transport.as_ref()).await;
    let summary = summary.map_err(|e| e.to_string())?;
    io.note(format!(
        "{} handler call(s), {} deliveries settled, {} released at shutdown",
        calls.load(Ordering::SeqCst),
        summary.processed,
        summary.released_at_shutdown
    ));
    Ok(())
}
