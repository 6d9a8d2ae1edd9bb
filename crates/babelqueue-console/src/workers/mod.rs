//! The workers' rates: `babelqueue serve --worker-metrics URL` scrapes each worker's
//! `/metrics` (what `babelqueue::prometheus` or `consume --metrics-listen` serves) when it
//! samples the queues, and shows per queue what the workers consumed, failed and dead-lettered
//! per second between two scrapes, summed over the workers that report the queue.
//!
//! A worker's series name the queue (`messaging_destination_name`), not the broker, so a rate
//! is shown on every watched queue of that name. A worker that does not answer is left out of
//! the sums (and its error shown) until it answers again.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ConsoleError;
use crate::view::now_ms;

mod rates;

use rates::Snapshot;

/// How long one scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// A worker's metrics endpoint (`--worker-metrics`).
#[derive(Clone)]
pub struct WorkerEndpoint {
    url: String,
    label: String,
}

impl std::fmt::Debug for WorkerEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WorkerEndpoint").field(&self.label).finish()
    }
}

impl WorkerEndpoint {
    /// `text` as a worker's metrics endpoint: an `http(s)://` URL, or `HOST:PORT`; a URL
    /// without a path gets `/metrics`.
    ///
    /// # Errors
    /// [`ConsoleError::BadRequest`] naming what is wrong with it.
    pub fn parse(text: &str) -> Result<WorkerEndpoint, ConsoleError> {
        let full = if text.contains("://") {
            text.to_owned()
        } else {
            format!("http://{text}")
        };
        let mut url = url::Url::parse(&full).map_err(|e| {
            ConsoleError::BadRequest(format!(
                "worker metrics {:?}: {e} (give http://HOST:PORT/metrics or HOST:PORT)",
                babelqueue::redact::redact(text)
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(ConsoleError::BadRequest(format!(
                "worker metrics {:?}: not an http(s) URL",
                babelqueue::redact::redact(text)
            )));
        }
        if url.path() == "/" {
            url.set_path("/metrics");
        }
        let url = url.to_string();
        Ok(WorkerEndpoint {
            label: babelqueue::redact::redact(&url),
            url,
        })
    }

    /// The URL as shown (secrets masked).
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// One worker endpoint, as `GET /api/v1/workers` shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct WorkerStatus {
    /// The endpoint, secrets masked.
    pub(crate) url: String,
    /// When it last answered, milliseconds since the Unix epoch.
    pub(crate) scraped_at_ms: Option<u64>,
    /// Why the last scrape failed, when it did.
    pub(crate) error: Option<String>,
    /// The queues its last answer had series of.
    pub(crate) queues: Vec<String>,
}

/// A queue's figures from the workers that report it.
#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema, PartialEq)]
pub(crate) struct QueueRates {
    /// How many workers' last answers have this queue.
    pub(crate) workers: usize,
    /// Deliveries settled per second (every outcome), between their last two scrapes; `null`
    /// until a worker was scraped twice.
    pub(crate) consumed_per_sec: Option<f64>,
    /// Handler failures per second.
    pub(crate) failed_per_sec: Option<f64>,
    /// Dead-lettered deliveries per second.
    pub(crate) dead_lettered_per_sec: Option<f64>,
    /// Deliveries settled since the workers started (their counters, summed).
    pub(crate) consumed_total: f64,
    /// Handler failures since the workers started.
    pub(crate) failed_total: f64,
    /// Dead-lettered deliveries since the workers started.
    pub(crate) dead_lettered_total: f64,
}

/// What the last scrapes of one endpoint said.
#[derive(Debug, Default)]
struct Seen {
    /// The last answer and when it came (kept while the worker does not answer, so the next
    /// answer's rate spans the gap).
    last: Option<(Instant, Snapshot)>,
    /// The rates between its last two answers; empty while it does not answer.
    rates: Option<Snapshot>,
    scraped_at_ms: Option<u64>,
    error: Option<String>,
}

/// The endpoints and what they said.
#[derive(Debug)]
pub(crate) struct Workers {
    endpoints: Vec<WorkerEndpoint>,
    client: Result<reqwest::Client, String>,
    seen: Mutex<Vec<Seen>>,
}

impl Workers {
    pub(crate) fn new(endpoints: Vec<WorkerEndpoint>) -> Workers {
        let client = reqwest::Client::builder()
            .timeout(SCRAPE_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(|e| format!("no HTTP client: {e}"));
        Workers {
            seen: Mutex::new(endpoints.iter().map(|_| Seen::default()).collect()),
            endpoints,
            client,
        }
    }

    pub(crate) fn endpoints(&self) -> &[WorkerEndpoint] {
        &self.endpoints
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// Scrapes every endpoint once.
    pub(crate) async fn scrape(&self) {
        for (i, endpoint) in self.endpoints.iter().enumerate() {
            let answer = self.fetch(endpoint).await;
            let at = Instant::now();
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            let Some(seen) = seen.get_mut(i) else {
                continue;
            };
            match answer {
                Ok(now) => {
                    seen.rates = seen
                        .last
                        .as_ref()
                        .map(|(then, before)| rates::rates(before, &now, at - *then));
                    seen.last = Some((at, now));
                    seen.scraped_at_ms = Some(now_ms());
                    seen.error = None;
                }
                Err(e) => {
                    seen.rates = None;
                    seen.error = Some(babelqueue::redact::scrub(&e, &endpoint.url));
                }
            }
        }
    }

    async fn fetch(&self, endpoint: &WorkerEndpoint) -> Result<Snapshot, String> {
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let response = client
            .get(&endpoint.url)
            .send()
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("answered HTTP {status}"));
        }
        let text = response
            .text()
            .await
            .map_err(|e| format!("answer not read: {e}"))?;
        rates::totals(&text)
    }

    /// Every endpoint and what it last said.
    pub(crate) fn statuses(&self) -> Vec<WorkerStatus> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        self.endpoints
            .iter()
            .zip(seen.iter())
            .map(|(endpoint, seen)| WorkerStatus {
                url: endpoint.label.clone(),
                scraped_at_ms: seen.scraped_at_ms,
                error: seen.error.clone(),
                queues: match (&seen.error, &seen.last) {
                    (None, Some((_, snapshot))) => snapshot.keys().cloned().collect(),
                    _ => Vec::new(),
                },
            })
            .collect()
    }

    /// `queue`'s figures summed over the workers whose last answer has it; `None` when none
    /// has.
    pub(crate) fn queue(&self, queue: &str) -> Option<QueueRates> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Option<QueueRates> = None;
        for seen in seen.iter().filter(|s| s.error.is_none()) {
            let Some(totals) = seen.last.as_ref().and_then(|(_, s)| s.get(queue)) else {
                continue;
            };
            let sum = out.get_or_insert_with(QueueRates::default);
            sum.workers += 1;
            sum.consumed_total += totals.consumed;
            sum.failed_total += totals.failed;
            sum.dead_lettered_total += totals.dead_lettered;
            if let Some(rate) = seen.rates.as_ref().and_then(|r| r.get(queue)) {
                let add = |slot: &mut Option<f64>, value: f64| {
                    *slot = Some(slot.unwrap_or(0.0) + value);
                };
                add(&mut sum.consumed_per_sec, rate.consumed);
                add(&mut sum.failed_per_sec, rate.failed);
                add(&mut sum.dead_lettered_per_sec, rate.dead_lettered);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_a_url_or_host_and_port() {
        let rows = [
            ("127.0.0.1:9090", "http://127.0.0.1:9090/metrics"),
            ("http://127.0.0.1:9090", "http://127.0.0.1:9090/metrics"),
            (
                "http://127.0.0.1:9090/custom",
                "http://127.0.0.1:9090/custom",
            ),
            ("https://w.local/metrics", "https://w.local/metrics"),
        ];
        for (given, url) in rows {
            assert_eq!(WorkerEndpoint::parse(given).expect(given).url, url);
        }
        for bad in ["redis://127.0.0.1:6379", "http://", ":::"] {
            let e = WorkerEndpoint::parse(bad).expect_err(bad);
            assert!(e.to_string().contains("worker metrics"), "{e}");
        }
    }

    #[test]
    fn an_endpoint_never_shows_its_password() {
        let endpoint = WorkerEndpoint::parse("http://scraper:s3cret@127.0.0.1:9090/metrics")
            .expect("an endpoint");
        assert!(!endpoint.label().contains("s3cret"));
        assert!(!format!("{endpoint:?}").contains("s3cret"));
        let e = WorkerEndpoint::parse("ftp://scraper:s3cret@127.0.0.1/").expect_err("ftp");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
