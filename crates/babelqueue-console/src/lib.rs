//! The web console and admin API behind `babelqueue serve`: every configured queue of one or
//! more brokers with its depths and an hour of history, a paged and filtered dead-letter
//! browser with failures grouped by cause, retry/remove/redrive actions (each one audited),
//! the same as JSON under `/api/v1` (OpenAPI at `/api/v1/openapi.json`), and Prometheus gauges
//! at `/metrics`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::sync::Arc;
//!
//! use babelqueue::{MemoryTransport, Transport as _};
//! use babelqueue_console::{Console, Source};
//! use tower::ServiceExt as _;
//!
//! let memory = Arc::new(MemoryTransport::new());
//! memory.publish("orders.dlq", br#"{"job":"urn:a","meta":{"id":"m-1"},"attempts":3}"#).await.unwrap();
//! let source = Source::new("memory://", memory, ["orders"]).unwrap();
//! let console = Console::new(vec![source]);
//! let request = axum::http::Request::get("/api/v1/queues/0/orders/dead-letters")
//!     .body(axum::body::Body::empty())
//!     .unwrap();
//! let response = console.router().oneshot(request).await.unwrap();
//! assert_eq!(response.status(), 200);
//! # }
//! ```
//!
//! Security: [`Console::check_listen`] refuses a non-loopback address without an admin token;
//! with a token, the API wants `Authorization: Bearer TOKEN` and the pages a login; every
//! action wants a CSRF token; `--read-only` ([`Console::read_only`]) refuses every action.
//! Everything a broker stores is escaped on the pages, and no page or answer shows a secret of
//! a broker URL.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelqueue::{App, Transport};

mod actions;
mod api;
mod chart;
mod error;
pub mod fingerprint;
mod pages;
mod prom;
mod sampler;
mod scan;
mod security;
mod view;
mod workers;

pub use actions::{ActionReport, ItemResult, RedriveRequest, RemoveRequest, RetryRequest};
pub use api::ApiDoc;
pub use error::{ConsoleError, ErrorKind};
pub use fingerprint::fingerprint;
pub use sampler::Point;
pub use scan::{Group, Groups, Page};
pub use security::TOKEN_ENV;
pub use view::{EntryDetail, EntryView, Filter, Member};
pub use workers::WorkerEndpoint;

use sampler::History;
use security::Sessions;
use workers::Workers;

/// One broker the console shows: its transport and the queues it watches.
#[derive(Clone)]
pub struct Source {
    /// The URL as shown: [`babelqueue::redact::redact`]ed.
    label: String,
    /// The URL as given, only ever used to scrub broker messages of its secrets.
    url: String,
    transport: Arc<dyn Transport>,
    queues: Vec<Watched>,
}

/// A watched queue and the dead-letter queue the runtime gives it on its broker.
#[derive(Debug, Clone)]
pub(crate) struct Watched {
    pub(crate) name: String,
    pub(crate) dlq: String,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("url", &self.label)
            .field("transport", &self.transport.name())
            .field("queues", &self.queues)
            .finish()
    }
}

impl Source {
    /// The queues `queues` of the broker `url` opened as `transport`; each one's dead-letter
    /// queue is named the way the runtime names it on this broker.
    ///
    /// # Errors
    /// [`ConsoleError::BadRequest`] when no queue is given or a queue name is refused.
    pub fn new<I, S>(
        url: &str,
        transport: Arc<dyn Transport>,
        queues: I,
    ) -> Result<Source, ConsoleError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut watched = Vec::new();
        for queue in queues {
            let name: String = queue.into();
            let app = App::builder_arc(transport.clone())
                .queue(name.clone())
                .build()
                .map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
            let dlq = babelqueue::dead_letter_queue(
                app.policy(),
                &name,
                app.transport().capabilities().dead_letter_namer(),
            );
            watched.push(Watched { name, dlq });
        }
        if watched.is_empty() {
            return Err(ConsoleError::BadRequest(
                "no queue to watch: name one with --queue".to_owned(),
            ));
        }
        Ok(Source {
            label: babelqueue::redact::redact(url),
            url: url.to_owned(),
            transport,
            queues: watched,
        })
    }

    /// The URL as shown (secrets masked).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// `text` (a broker's message) without any secret of this source's URL.
    pub(crate) fn scrub(&self, text: &str) -> String {
        babelqueue::redact::scrub(text, &self.url)
    }

    pub(crate) fn transport(&self) -> &dyn Transport {
        self.transport.as_ref()
    }

    pub(crate) fn queues(&self) -> &[Watched] {
        &self.queues
    }
}

/// The console: its sources and settings. Cheap to clone (shared state).
#[derive(Clone, Debug)]
pub struct Console {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) sources: Vec<Source>,
    pub(crate) read_only: bool,
    pub(crate) token: Option<security::Token>,
    pub(crate) sessions: Sessions,
    pub(crate) history: History,
    pub(crate) sample_every: Duration,
    pub(crate) metrics: prom::Gauges,
    pub(crate) workers: Workers,
}

/// How often the sampler reads every queue's stats by default.
pub const DEFAULT_SAMPLE_EVERY: Duration = Duration::from_secs(15);

impl Console {
    /// A console over `sources`: read-write, no token (loopback only), sampled every
    /// [`DEFAULT_SAMPLE_EVERY`].
    pub fn new(sources: Vec<Source>) -> Console {
        Console::build(
            sources,
            Settings {
                read_only: false,
                token: None,
                sample_every: DEFAULT_SAMPLE_EVERY,
                workers: Vec::new(),
            },
        )
    }

    fn build(sources: Vec<Source>, settings: Settings) -> Console {
        let Settings {
            read_only,
            token,
            sample_every,
            workers,
        } = settings;
        let queues = sources.iter().map(|s| s.queues.len()).sum();
        Console {
            inner: Arc::new(Inner {
                history: History::new(queues, sample_every),
                sources,
                read_only,
                token,
                sessions: Sessions::default(),
                sample_every,
                metrics: prom::Gauges::new(),
                workers: Workers::new(workers),
            }),
        }
    }

    /// A console with the settings `f` changes (a fresh one: its history and logins start
    /// empty; a clone taken before keeps the old settings).
    fn rebuild(self, f: impl FnOnce(&mut Settings)) -> Console {
        let mut settings = Settings {
            read_only: self.inner.read_only,
            token: self.inner.token.clone(),
            sample_every: self.inner.sample_every,
            workers: self.inner.workers.endpoints().to_vec(),
        };
        f(&mut settings);
        let sources = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner.sources,
            Err(shared) => shared.sources.clone(),
        };
        Console::build(sources, settings)
    }

    /// Refuses every action (retry, remove, redrive) when `on`.
    #[must_use]
    pub fn read_only(self, on: bool) -> Console {
        self.rebuild(|s| s.read_only = on)
    }

    /// Requires `token` (`BABELQUEUE_ADMIN_TOKEN`): `Authorization: Bearer` on the API, a login
    /// on the pages. An empty token is no token.
    #[must_use]
    pub fn token(self, token: Option<String>) -> Console {
        self.rebuild(|s| {
            s.token = token
                .filter(|t| !t.is_empty())
                .map(|t| security::Token::new(&t))
        })
    }

    /// Samples every queue's stats this often (the chart's resolution).
    #[must_use]
    pub fn sample_every(self, every: Duration) -> Console {
        self.rebuild(|s| s.sample_every = every.max(Duration::from_millis(10)))
    }

    /// Scrapes these workers' `/metrics` whenever it samples the queues, for each queue's
    /// consumed, failed and dead-lettered messages per second (`--worker-metrics`).
    #[must_use]
    pub fn workers(self, endpoints: Vec<WorkerEndpoint>) -> Console {
        self.rebuild(|s| s.workers = endpoints)
    }

    /// Whether `addr` may be listened on with this console's settings: a non-loopback address
    /// needs a token.
    ///
    /// # Errors
    /// [`ConsoleError::TokenRequired`].
    pub fn check_listen(&self, addr: SocketAddr) -> Result<(), ConsoleError> {
        security::check_listen(addr, self.inner.token.is_some())
    }

    /// The console's routes: the pages, `/api/v1`, `/metrics`.
    pub fn router(&self) -> axum::Router {
        security::layers(
            pages::routes()
                .merge(api::routes())
                .merge(prom::routes())
                .with_state(self.clone()),
            self.clone(),
        )
    }

    /// Reads every queue's stats once into the history (the sampler does it periodically).
    pub async fn sample(&self) {
        sampler::sample(self).await;
    }

    /// Serves on `listener` until `shutdown` completes, sampling in the background.
    ///
    /// # Errors
    /// [`ConsoleError::TokenRequired`] for a non-loopback listener without a token;
    /// [`ConsoleError::Serve`] when serving fails.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ConsoleError> {
        let addr = listener.local_addr().map_err(|e| ConsoleError::Serve {
            addr: "?".to_owned(),
            message: e.to_string(),
        })?;
        self.check_listen(addr)?;
        let sampler = tokio::spawn(sampler::run(self.clone()));
        let served = axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| ConsoleError::Serve {
                addr: addr.to_string(),
                message: e.to_string(),
            });
        sampler.abort();
        served
    }

    pub(crate) fn sources(&self) -> &[Source] {
        &self.inner.sources
    }

    /// The source `source` and its queue `queue`.
    pub(crate) fn queue(
        &self,
        source: usize,
        queue: &str,
    ) -> Result<(&Source, &Watched), ConsoleError> {
        self.inner
            .sources
            .get(source)
            .and_then(|s| s.queues.iter().find(|q| q.name == queue).map(|q| (s, q)))
            .ok_or_else(|| ConsoleError::NotFound(format!("{source}/{queue}")))
    }

    pub(crate) fn is_read_only(&self) -> bool {
        self.inner.read_only
    }
}

struct Settings {
    read_only: bool,
    token: Option<security::Token>,
    sample_every: Duration,
    workers: Vec<WorkerEndpoint>,
}
