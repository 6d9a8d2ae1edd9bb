//! A bound on every reply: a connection whose packets vanish (a black hole: no reset, no close)
//! would otherwise hold a command, and the worker waiting on it, until the operating system gives
//! up on the socket (never, for a request already acknowledged that only waits for its reply).
//! fred's own check for unresponsive connections skips blocking commands, the worker's wait for
//! work among them, so the transport bounds each call itself: the time the server may
//! legitimately take (a blocking command's timeout, `WAIT`'s timeout) plus
//! [`reply_timeout`](crate::RedisOptions::reply_timeout). A call past it fails with a transient
//! [`RedisError::Connection`] and the client's connections are made to reconnect: all of them,
//! since they take the same route to the same server (a worker idle in its blocking wait would
//! otherwise find its command connection dead only on its next call, one more margin later).

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fred::interfaces::ClientLike;

use crate::error::RedisError;

/// The default [`reply_timeout`](crate::RedisOptions::reply_timeout): Redis' own
/// `busy-reply-threshold` (`lua-time-limit`) is 5 s, past which a script already makes the
/// server answer `BUSY` to everyone; a healthy reply on a loaded server comes well within it.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the server may take before it replies, by the command's own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerWait {
    /// An ordinary command or script: it replies as soon as it ran.
    None,
    /// A blocking command (`BLPOP`, `BLMOVE`, `WAIT`) with this timeout; zero blocks for ever
    /// (the server's meaning of 0), so nothing bounds its reply.
    Blocks(Duration),
}

/// How long a call may wait for its reply: the server's own wait plus `margin`; `None` when
/// nothing bounds it (no margin configured, or a command that blocks for ever).
pub(crate) fn reply_limit(wait: ServerWait, margin: Option<Duration>) -> Option<Duration> {
    let margin = margin?;
    match wait {
        ServerWait::None => Some(margin),
        ServerWait::Blocks(d) if d.is_zero() => None,
        ServerWait::Blocks(d) => Some(d.saturating_add(margin)),
    }
}

/// The watchdog of a set of fred clients to one server: the margin, the clients, and when it
/// last forced a reconnection (one per margin at most: the calls that time out together on one
/// dead connection must not each open a new one).
pub(crate) struct Watchdog {
    margin: Option<Duration>,
    clients: Vec<fred::clients::Client>,
    forced: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchdog")
            .field("margin", &self.margin)
            .finish_non_exhaustive()
    }
}

impl Watchdog {
    pub(crate) fn new(margin: Option<Duration>, clients: Vec<fred::clients::Client>) -> Watchdog {
        Watchdog {
            margin,
            clients,
            forced: Mutex::new(None),
        }
    }

    /// Runs `call` within its [`reply_limit`]; past it, makes every client reconnect and fails.
    pub(crate) async fn bounded<T>(
        &self,
        wait: ServerWait,
        call: impl Future<Output = Result<T, fred::error::Error>>,
    ) -> Result<Result<T, fred::error::Error>, RedisError> {
        let Some(limit) = reply_limit(wait, self.margin) else {
            return Ok(call.await);
        };
        match tokio::time::timeout(limit, call).await {
            Ok(result) => Ok(result),
            Err(_) => {
                if self.should_force(Instant::now()) {
                    tracing::warn!(
                        limit_ms = limit.as_millis() as u64,
                        "no Redis reply within the limit: the connection is replaced"
                    );
                    // A client already reconnecting is left to it: forcing would restart its
                    // attempt (one more connection each time) while the route stays dead.
                    for client in self.clients.iter().filter(|c| c.is_connected()) {
                        let client = client.clone();
                        // Not awaited: the router may sit in its reconnect back-off for
                        // seconds, and this call's caller should hear of the failure now.
                        tokio::spawn(async move {
                            let _ = client.force_reconnection().await;
                        });
                    }
                }
                Err(RedisError::Connection(format!(
                    "no reply within {} ms (the server's own wait plus reply_timeout_ms): the \
                     connection is replaced",
                    limit.as_millis()
                )))
            }
        }
    }

    /// Whether a call that timed out at `now` should force a reconnection (none forced within
    /// the margin before).
    fn should_force(&self, now: Instant) -> bool {
        let margin = self.margin.unwrap_or_default();
        let mut forced = self
            .forced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match *forced {
            Some(at) if now.saturating_duration_since(at) < margin => false,
            _ => {
                *forced = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARGIN: Option<Duration> = Some(Duration::from_secs(5));

    #[test]
    fn a_reply_may_take_the_servers_own_wait_plus_the_margin() {
        assert_eq!(
            reply_limit(ServerWait::None, MARGIN),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            reply_limit(ServerWait::Blocks(Duration::from_millis(250)), MARGIN),
            Some(Duration::from_millis(5_250)),
            "the worker's wait for work (at most the sweep interval) plus the margin"
        );
        assert_eq!(
            reply_limit(ServerWait::Blocks(Duration::from_secs(2)), MARGIN),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            reply_limit(ServerWait::Blocks(Duration::ZERO), MARGIN),
            None,
            "a command told to block for ever is not cut short"
        );
        assert_eq!(
            reply_limit(ServerWait::Blocks(Duration::MAX), MARGIN),
            Some(Duration::MAX),
            "no overflow"
        );
        assert_eq!(reply_limit(ServerWait::None, None), None, "off");
        assert_eq!(
            reply_limit(ServerWait::Blocks(Duration::from_secs(1)), None),
            None
        );
    }

    #[test]
    fn calls_that_time_out_together_force_one_reconnection() {
        let dog = Watchdog::new(MARGIN, Vec::new());
        let t0 = Instant::now();
        assert!(dog.should_force(t0));
        assert!(!dog.should_force(t0 + Duration::from_millis(10)));
        assert!(!dog.should_force(t0 + Duration::from_millis(4_999)));
        assert!(
            dog.should_force(t0 + Duration::from_secs(5)),
            "one margin on"
        );
        assert!(!dog.should_force(t0 + Duration::from_secs(6)));
    }

    #[tokio::test]
    async fn a_reply_within_the_limit_is_passed_through() {
        let dog = Watchdog::new(Some(Duration::from_millis(50)), Vec::new());
        let ok = dog
            .bounded(ServerWait::None, async { Ok::<_, fred::error::Error>(7) })
            .await;
        assert_eq!(ok.ok().and_then(Result::ok), Some(7));
        let late = dog
            .bounded(ServerWait::None, async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok::<_, fred::error::Error>(7)
            })
            .await;
        let Err(error) = late else {
            panic!("a late reply must time out");
        };
        assert!(error.is_transient(), "{error}");
        assert!(
            error.to_string().contains("no reply within 50 ms"),
            "{error}"
        );
    }
}
