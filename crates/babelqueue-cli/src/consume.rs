//! `babelqueue consume`: the real runtime; one JSON line per handler call, or per delivery
//! with what crossed the wire (`--output raw|wire`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use babelqueue::envelope::RawJson;
use babelqueue::prometheus::{LagWatch, MetricsServer, Prometheus, watch_lag};
use babelqueue::{
    App, AppBuilder, Consume, Context, Event, HandlerError, Observer, Outcome, Settings,
    StopHandle, Transport,
};

use crate::args::{ConsumeArgs, ConsumeOutput};
use crate::io::Io;
use crate::{CliResult, Session, close, seconds, wire};

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

/// Prints one line per settled delivery (`--output raw|wire`), whatever it held.
struct WireLines {
    io: Io,
    output: ConsumeOutput,
    transport: Arc<dyn Transport>,
}

impl Observer for WireLines {
    fn on_event(&self, event: &Event<'_>) {
        let delivery = event.delivery;
        let body = wire::body_member(delivery.body());
        let line = match self.output {
            ConsumeOutput::Wire => format!(
                "{{\"queue\":{},\"outcome\":\"{}\",\"urn\":{},{body},\"members\":{},\"headers\":{},\
                 \"facts\":{},\"broker\":{}}}",
                RawJson::string(event.queue),
                Outcome::as_str(event.outcome),
                RawJson::string(event.urn),
                wire::members(delivery.body()),
                wire::headers(delivery.headers()),
                wire::facts(delivery.facts()),
                wire::broker(self.transport.as_ref(), delivery),
            ),
            ConsumeOutput::Raw | ConsumeOutput::Call => format!("{{{body}}}"),
        };
        self.io.line(line);
    }
}

/// The settings of the environment and of the file `BABELQUEUE_CONFIG` names (the
/// environment wins); each unknown `BABELQUEUE_*` variable is a warning on standard error. The
/// broker URL is not read here: it is the command's argument, or `BABELQUEUE_URL` through clap.
fn settings(io: &Io) -> Result<Settings, String> {
    let vars = std::env::vars_os().filter_map(|(k, v)| {
        let k = k.into_string().ok()?;
        (k.starts_with(babelqueue::settings::PREFIX) && k != crate::args::URL_ENV)
            .then(|| (k, v.to_string_lossy().into_owned()))
    });
    let read = Settings::from_vars(vars).map_err(|e| e.to_string())?;
    for name in &read.unknown {
        io.note(format!(
            "warning: {name} is not a BabelQueue setting and is ignored (docs/settings.md)"
        ));
    }
    match std::env::var_os("BABELQUEUE_CONFIG").filter(|p| !p.is_empty()) {
        Some(path) => Ok(read
            .settings
            .over(Settings::from_toml_file(path).map_err(|e| e.to_string())?)),
        None => Ok(read.settings),
    }
}

/// The app's settings from the command line: each flag given is an explicit builder call, so
/// it wins over the environment and the settings file.
fn configure(mut builder: AppBuilder, args: &ConsumeArgs) -> Result<AppBuilder, String> {
    if let Some(queue) = &args.queue {
        builder = builder.queue(queue.clone());
    }
    if let Some(max) = args.max_attempts {
        builder = builder.max_attempts(max);
    }
    if args.dead_letter {
        builder = builder.dead_letter(true);
    }
    if let Some(strategy) = args.on_unknown_urn {
        builder = builder.on_unknown_urn(strategy.into());
    }
    if let Some(base) = args.retry_backoff {
        builder = builder.retry_backoff(seconds(base, "retry-backoff")?);
    }
    if let Some(n) = args.concurrency {
        builder = builder.concurrency(n);
    }
    if let Some(prefetch) = args.prefetch {
        builder = builder.prefetch(prefetch);
    }
    if let Some(queue) = &args.dead_letter_queue {
        builder = builder.dead_letter_queue(queue.clone());
    }
    if let Some(suffix) = &args.dead_letter_suffix {
        builder = builder.dead_letter_suffix(suffix.clone());
    }
    if let Some(delay) = args.unknown_urn_release_delay {
        builder = builder.unknown_urn_release_delay(seconds(delay, "unknown-urn-release-delay")?);
    }
    if let Some(multiplier) = args.retry_backoff_multiplier {
        builder = builder.retry_backoff_multiplier(multiplier);
    }
    if let Some(max) = args.retry_backoff_max {
        builder = builder.retry_backoff_max(seconds(max, "retry-backoff-max")?);
    }
    if let Some(jitter) = args.retry_jitter {
        builder = builder.retry_jitter(jitter.into());
    }
    if let Some(timeout) = args.shutdown_timeout {
        builder = builder.shutdown_timeout(seconds(timeout, "shutdown-timeout")?);
    }
    Ok(builder)
}

/// The seconds between two reads of the queue's stats for the lag gauges.
const LAG_EVERY: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder, serves it on `addr` and samples the queue's lag.
async fn metrics(
    addr: std::net::SocketAddr,
    transport: Arc<dyn Transport>,
    queue: &str,
) -> Result<(Prometheus, MetricsServer, LagWatch), String> {
    let prometheus = Prometheus::install().map_err(|e| e.to_string())?;
    let server = prometheus
        .serve(addr)
        .await
        .map_err(|e| format!("--metrics-listen: {e}"))?;
    tracing::info!(target: "babelqueue::cli", url = %server.url(), "serving Prometheus metrics");
    let lag = watch_lag(transport, vec![queue.to_owned()], LAG_EVERY);
    Ok((prometheus, server, lag))
}

pub(crate) async fn run(session: &Session, args: ConsumeArgs) -> CliResult {
    let io = session.io().clone();
    let settings = settings(&io)?;
    // The queue as the app will have it: the flag wins over the settings.
    let Some(queue) = args.queue.clone().or_else(|| settings.queue.clone()) else {
        return Err(
            "no queue to consume: pass --queue, or set BABELQUEUE_QUEUE (or `queue` in the \
             settings file $BABELQUEUE_CONFIG)"
                .into(),
        );
    };
    let transport = session.connect(&args.url.url).await?;
    let calls = Arc::new(AtomicU64::new(0));
    let stop_after = args.max;
    let per_call = args.output == ConsumeOutput::Call;
    let base = App::builder_arc(transport.clone()).settings(settings);
    let mut builder = match configure(base, &args) {
        Ok(builder) => builder,
        Err(e) => {
            close(&io, transport.as_ref()).await;
            return Err(e);
        }
    };
    // Held until the run ends: dropping them stops the endpoint and the lag sampling.
    let metrics = match args.metrics_listen {
        Some(addr) => match metrics(addr, transport.clone(), &queue).await {
            Ok((prometheus, server, lag)) => {
                builder = builder.observer(prometheus.observer());
                Some((server, lag))
            }
            Err(e) => {
                close(&io, transport.as_ref()).await;
                return Err(e);
            }
        },
        None => None,
    };
    if !per_call {
        builder = builder.observer(Arc::new(WireLines {
            io: io.clone(),
            output: args.output,
            transport: transport.clone(),
        }));
    }
    let bar = io.progress(None, format!("consuming {queue}"));
    // The stop handle exists only once the app is built; handlers reach it through a cell.
    let stop: Arc<OnceLock<StopHandle>> = Arc::new(OnceLock::new());
    let handler = |fail: bool| {
        let (calls, stop, io, bar) = (calls.clone(), stop.clone(), io.clone(), bar.clone());
        move |ctx: Context| {
            let (calls, stop, io, bar) = (calls.clone(), stop.clone(), io.clone(), bar.clone());
            async move {
                if per_call {
                    io.line(call_line(&ctx));
                }
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
    if args.max == Some(0) || args.max_deliveries == Some(0) || session.shutdown().exit().is_some()
    {
        io.done();
        close(&io, transport.as_ref()).await;
        return Ok(());
    }
    let mut options = Consume::new().handle_signals(false);
    if let Some(idle) = args.idle_timeout {
        options = options.idle_timeout(seconds(idle, "idle-timeout")?);
    }
    if let Some(max) = args.max_deliveries {
        options = options.max_messages(max);
    }
    io.note(format!(
        "consuming {} on {} (Ctrl-C stops after the messages in flight)",
        queue,
        transport.name()
    ));
    let summary = app.consume(options).await;
    // The endpoint answers until the loop has settled its last delivery.
    drop(metrics);
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
