//! The library behind the `babelqueue` command-line tool: [`main`] is the binary, [`run`] the
//! same commands on streams and a transport of your choosing (tests, embedding), [`command`]
//! the clap definition (completions, documentation).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use babelqueue_cli::{Io, Session, run};
//!
//! let (io, printed) = Io::capture();
//! let body = r#"{"job":"urn:babel:orders:created","attempts":0}"#;
//! std::fs::write(std::env::temp_dir().join("bq-doc-body.json"), body).unwrap();
//! let file = std::env::temp_dir().join("bq-doc-body.json");
//! let status = run(&Session::new(io), ["babelqueue", "inspect", file.to_str().unwrap()]).await;
//! assert_eq!(status, 0);
//! assert!(printed.stdout().starts_with(r#"{"verdict":"ok""#));
//! # }
//! ```
//!
//! The commands, their output formats and exit statuses are described in the crate's README
//! and by `babelqueue --help`.

use std::ffi::OsString;
use std::future::Future;
use std::io::IsTerminal as _;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use babelqueue::{Error, SCHEMES, Transport};
use clap::{CommandFactory as _, Parser as _};

mod args;
mod consume;
mod demo;
mod dlq;
mod inspect;
mod io;
#[cfg(feature = "kafka")]
mod kafka;
mod publish;
mod serve;
mod signals;
mod stats;
mod wire;

use args::{Cli, Command};
pub use io::{Captured, Io};
use signals::Shutdown;

/// A command's result: `Err` is the message printed after `babelqueue: ` (exit status 1).
type CliResult = Result<(), String>;

/// The exit status of a failed command.
const FAILED: u8 = 1;
/// The exit status of a usage error.
const USAGE: u8 = 2;
/// The exit status of `inspect` on a poison body.
pub(crate) const POISON: u8 = 3;

/// Opens the transport a broker URL names.
pub type Connector = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = Result<Arc<dyn Transport>, Error>> + Send>>
        + Send
        + Sync,
>;

/// What a run writes to, how it reaches brokers, and the signals it obeys.
#[derive(Clone)]
pub struct Session {
    io: Io,
    connect: Connector,
    shutdown: Shutdown,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("io", &self.io)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Writes to `io`, connects with [`babelqueue::connect`], obeys no signal.
    pub fn new(io: Io) -> Session {
        Session {
            io,
            connect: Arc::new(|url: String| Box::pin(async move { connect(&url).await })),
            shutdown: Shutdown::default(),
        }
    }

    /// Every broker URL opens `transport` (a shared [`babelqueue::MemoryTransport`] in tests).
    #[must_use]
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Session {
        self.connect = Arc::new(move |_url: String| {
            let transport = transport.clone();
            Box::pin(async move { Ok(transport) })
        });
        self
    }

    /// Stops on SIGINT/SIGTERM (exit 130/143) instead of dying at once. Call inside a Tokio
    /// runtime.
    #[must_use]
    pub fn with_signals(mut self) -> Session {
        self.shutdown = Shutdown::listen(self.io.clone());
        self
    }

    pub(crate) async fn connect(&self, url: &str) -> Result<Arc<dyn Transport>, String> {
        // Nothing is held yet: a signal abandons the attempt (a broker that does not answer).
        let transport = tokio::select! {
            connected = (self.connect)(url.to_owned()) => connected.map_err(|e| e.to_string())?,
            () = self.shutdown.wait() => return Err("interrupted while connecting".to_owned()),
        };
        tracing::debug!(target: "babelqueue::cli", transport = transport.name(), "connected");
        Ok(transport)
    }

    pub(crate) fn io(&self) -> &Io {
        &self.io
    }

    pub(crate) fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }
}

/// [`babelqueue::connect`], with the hint for a transport this build lacks naming the CLI's
/// feature (the facade's names the `babelqueue` crate's).
async fn connect(url: &str) -> Result<Arc<dyn Transport>, Error> {
    babelqueue::connect(url).await.map_err(cli_hint)
}

/// Rewrites the facade's "enable the feature" hint for the CLI: the operator rebuilds
/// `babelqueue-cli`, not the library. Every other error (an unknown scheme, a URL without
/// `://`) is returned unchanged.
///
/// ```
/// let facade = babelqueue::Error::UnsupportedScheme {
///     scheme: "pulsar".into(),
///     hint: "enable the `pulsar` feature of the `babelqueue` crate".into(),
/// };
/// let shown = babelqueue_cli::cli_hint(facade).to_string();
/// assert!(shown.contains("cargo install babelqueue-cli --features pulsar"), "{shown}");
/// ```
pub fn cli_hint(error: Error) -> Error {
    match error {
        Error::UnsupportedScheme { scheme, hint } => {
            let known = SCHEMES
                .iter()
                .find(|s| s.scheme == scheme && !s.feature.is_empty());
            let hint = match known.filter(|_| hint.contains("feature")) {
                Some(row) => format!(
                    "this babelqueue CLI was built without the {} transport; rebuild it with the \
                     `{}` feature of the `babelqueue-cli` crate (cargo install babelqueue-cli \
                     --features {}), or with its default features, which include every broker",
                    row.krate, row.feature, row.feature
                ),
                None => hint,
            };
            Error::UnsupportedScheme { scheme, hint }
        }
        other => other,
    }
}

/// The command-line definition, e.g. to walk every argument or generate documentation.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Parses `args` (the program name first) and runs the command; returns the exit status.
/// Usage errors print to the session's standard error and return 2, like the binary.
pub async fn run<I, T>(session: &Session, args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => execute(session, cli).await,
        Err(e) => {
            let text = e.render().to_string();
            if e.use_stderr() {
                session.io.err_text(&text);
            } else {
                session.io.out_text(text.as_bytes());
            }
            u8::try_from(e.exit_code()).unwrap_or(2)
        }
    }
}

async fn execute(session: &Session, mut cli: Cli) -> u8 {
    if let Err(e) = cli.command.resolve(std::env::var(args::URL_ENV).ok()) {
        session.io.note(e);
        return USAGE;
    }
    let url = cli.command.url().map(str::to_owned);
    let shutdown = session.shutdown.clone();
    let result: Result<u8, String> = match cli.command {
        Command::Demo => interruptible(&shutdown, demo::run(session.io.clone())).await,
        Command::Publish(a) => publish::run(session, a).await.map(|()| 0),
        Command::Consume(a) => consume::run(session, a).await.map(|()| 0),
        Command::Dlq { command } => dlq::run(session, command).await.map(|()| 0),
        Command::Stats(a) => stats::run(session, a).await.map(|()| 0),
        Command::Serve(a) => serve::run(session, a).await.map(|()| 0),
        Command::Inspect(a) => interruptible(&shutdown, inspect::run(session.io(), a)).await,
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "babelqueue", &mut script);
            session.io.out_text(&script);
            Ok(0)
        }
        #[cfg(feature = "kafka")]
        Command::Kafka { command } => kafka::run(session, command).await.map(|()| 0),
    };
    if let Some(exit) = shutdown.exit() {
        return exit;
    }
    match result {
        Ok(status) => status,
        Err(e) => {
            // No error shows the password of the broker URL, whatever shape it quotes it in.
            let shown = match &url {
                Some(url) => babelqueue::redact::scrub(&e, url),
                None => babelqueue::redact::redact(&e),
            };
            session.io.note(shown);
            FAILED
        }
    }
}

/// Runs `work` until it ends or a signal comes (it holds nothing a signal could strand).
async fn interruptible<F>(shutdown: &Shutdown, work: F) -> Result<u8, String>
where
    F: Future<Output = Result<u8, String>>,
{
    tokio::select! {
        result = work => result,
        () = shutdown.wait() => Ok(0),
    }
}

/// Releases the transport's connections (and, on SQS, any batch-received messages) before the
/// process exits; a failure is reported, never fatal: nothing unsettled is lost, it only comes
/// back later.
pub(crate) async fn close(io: &Io, transport: &dyn Transport) {
    if let Err(e) = transport.close().await {
        io.note(format!(
            "closing the {} transport failed: {e}",
            transport.name()
        ));
    }
}

/// `--NAME` seconds as a duration.
pub(crate) fn seconds(value: f64, name: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| format!("--{name} must be a non-negative number of seconds, got {value}"))
}

/// The `babelqueue` binary: logs to standard error (`BABELQUEUE_LOG`, no colour unless it is a
/// terminal), signals handled, exit status as documented.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // The demo narrates instead of logging.
    // The AWS SDK's credential chain warns about every provider it tried (the instance
    // metadata service's token text first); the SQS transport's own error names the cause
    // and what to set, so by default only its errors are shown.
    let default_level = if matches!(cli.command, Command::Demo) {
        "error"
    } else {
        "warn,aws_config=error"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BABELQUEUE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let io = Io::std();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            io.note(format!("cannot start the async runtime: {e}"));
            return ExitCode::from(FAILED);
        }
    };
    let status = runtime.block_on(async {
        let session = Session::new(io).with_signals();
        execute(&session, cli).await
    });
    // A consumer's in-flight work is done; do not wait for blocked readers (stdin).
    runtime.shutdown_timeout(Duration::from_millis(100));
    ExitCode::from(status)
}
