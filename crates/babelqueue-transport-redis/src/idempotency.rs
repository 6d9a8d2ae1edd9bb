//! A Redis-backed [`IdempotencyStore`] for the core's
//! [`idempotent()`](babelqueue_core::idempotency::idempotent) wrapper, shared by every worker of
//! a fleet.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use babelqueue_core::idempotency::idempotent;
//! use babelqueue_core::{App, Context, HandlerError};
//! use babelqueue_transport_redis::{RedisIdempotencyStore, RedisTransport};
//!
//! let redis = RedisTransport::connect("redis://127.0.0.1:6379/0").await?;
//! // The same connection as the transport; `RedisIdempotencyStore::connect(url)` opens its own.
//! let store = Arc::new(
//!     RedisIdempotencyStore::from_transport(&redis)
//!         .claim_ttl(Duration::from_secs(60))
//!         .done_ttl(Duration::from_secs(7 * 24 * 3600)),
//! );
//! let app = App::builder(redis)
//!     .queue("orders")
//!     .handle("urn:babel:orders:created", idempotent(store, |_ctx: Context| async {
//!         Ok::<(), HandlerError>(())
//!     }))
//!     .build()?;
//! app.run().await?;
//! # Ok(()) }
//! ```
//!
//! # Key layout
//!
//! One string key per message id: `<prefix><meta.id>` (default prefix `bq:idemp:`; the id is
//! taken verbatim). Its value is
//!
//! * [`IN_FLIGHT`] while a delivery holds the claim; written by `SET key IN_FLIGHT NX PX
//!   claim_ttl`, so of two concurrent deliveries exactly one creates it. The other sees the
//!   marker and is retried later (the core wrapper's `InFlight` outcome). The lifetime frees the
//!   id when a worker dies mid-handler;
//! * [`DONE`] (`1`) once a delivery succeeded: `SET key 1 PX done_ttl` replaces the claim and
//!   its lifetime. A later delivery of the id is skipped and acknowledged. Any value other than
//!   the in-flight marker counts as done, so a key a plain seen-set store wrote under the same
//!   prefix is honoured;
//! * absent after a failed delivery (`DEL`, so a redelivery runs the handler again), after a
//!   `forget`, or once a lifetime ran out.
//!
//! Every step is one Lua script on one key, so it is atomic and safe on a cluster.
//!
//! # Choosing the lifetimes
//!
//! `claim_ttl` must be longer than the slowest handler run (or a duplicate can start while the
//! first still runs) and shorter than the time the broker takes to redeliver a message whose
//! worker died (the transport's `retry_after`, 90 s by default): a redelivery that still finds
//! the claim is retried after one second, and each such retry spends one of its attempts.
//! `done_ttl` is how long a success is remembered: longer than any redelivery or replay window.
//! A zero lifetime means the key never expires.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::idempotency::{Claim, IdempotencyStore, StoreError};

use crate::client::{FredClient, RedisClient};
use crate::error::RedisError;
use crate::scripts::{
    IDEMPOTENCY_CLAIM, IDEMPOTENCY_FORGET, IDEMPOTENCY_REMEMBER, IDEMPOTENCY_SEEN,
};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "bq:idemp:";
/// The default lifetime of an in-flight claim.
pub const DEFAULT_CLAIM_TTL: Duration = Duration::from_secs(60);
/// The default lifetime of a success marker.
pub const DEFAULT_DONE_TTL: Duration = Duration::from_secs(24 * 3600);
/// The value of a key while a delivery holds the claim.
pub const IN_FLIGHT: &str = "in-flight";
/// The value of a key once a delivery succeeded.
pub const DONE: &str = "1";

/// An [`IdempotencyStore`] on Redis (see the module docs for the key layout).
#[derive(Clone)]
pub struct RedisIdempotencyStore {
    client: Arc<dyn RedisClient>,
    prefix: String,
    claim_ttl: Duration,
    done_ttl: Duration,
}

impl fmt::Debug for RedisIdempotencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisIdempotencyStore")
            .field("prefix", &self.prefix)
            .field("claim_ttl", &self.claim_ttl)
            .field("done_ttl", &self.done_ttl)
            .finish_non_exhaustive()
    }
}

/// Milliseconds for `PX`, rounded up (`0` means no expiry, so a non-zero lifetime is at least
/// 1 ms).
fn millis(ttl: Duration) -> Vec<u8> {
    let ms = u64::try_from(ttl.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    ms.to_string().into_bytes()
}

fn store_error(what: &str, e: RedisError) -> StoreError {
    StoreError::with_source(format!("redis {what}: {e}"), e)
}

impl RedisIdempotencyStore {
    /// A store over any [`RedisClient`] (a transport's, a fake), with the default prefix and
    /// lifetimes.
    pub fn new(client: Arc<dyn RedisClient>) -> RedisIdempotencyStore {
        RedisIdempotencyStore {
            client,
            prefix: DEFAULT_PREFIX.to_owned(),
            claim_ttl: DEFAULT_CLAIM_TTL,
            done_ttl: DEFAULT_DONE_TTL,
        }
    }

    /// A store on the transport's own connection.
    pub fn from_transport(transport: &crate::RedisTransport) -> RedisIdempotencyStore {
        RedisIdempotencyStore::new(transport.client().clone())
    }

    /// Connects to the server `url` names (`redis://…`, `rediss://…`) with a connection of its
    /// own.
    pub async fn connect(url: &str) -> Result<RedisIdempotencyStore, RedisError> {
        Ok(RedisIdempotencyStore::new(Arc::new(
            FredClient::connect(url).await?,
        )))
    }

    /// Sets the key prefix (every key is `<prefix><meta.id>`).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> RedisIdempotencyStore {
        self.prefix = prefix.into();
        self
    }

    /// Sets how long an in-flight claim lives (zero: until released).
    #[must_use]
    pub fn claim_ttl(mut self, ttl: Duration) -> RedisIdempotencyStore {
        self.claim_ttl = ttl;
        self
    }

    /// Sets how long a success is remembered (zero: forever).
    #[must_use]
    pub fn done_ttl(mut self, ttl: Duration) -> RedisIdempotencyStore {
        self.done_ttl = ttl;
        self
    }

    /// The key of `id`.
    pub fn key(&self, id: &str) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.prefix.len() + id.len());
        key.extend_from_slice(self.prefix.as_bytes());
        key.extend_from_slice(id.as_bytes());
        key
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The (claim, done) lifetimes.
    pub fn ttls(&self) -> (Duration, Duration) {
        (self.claim_ttl, self.done_ttl)
    }
}

#[async_trait]
impl IdempotencyStore for RedisIdempotencyStore {
    async fn seen(&self, id: &str) -> Result<bool, StoreError> {
        let reply = self
            .client
            .eval(
                &IDEMPOTENCY_SEEN,
                vec![self.key(id)],
                vec![IN_FLIGHT.into()],
            )
            .await
            .map_err(|e| store_error("seen", e))?;
        Ok(reply.as_int() == 1)
    }

    async fn remember(&self, id: &str) -> Result<(), StoreError> {
        self.client
            .eval(
                &IDEMPOTENCY_REMEMBER,
                vec![self.key(id)],
                vec![DONE.into(), millis(self.done_ttl)],
            )
            .await
            .map_err(|e| store_error("remember", e))?;
        Ok(())
    }

    async fn forget(&self, id: &str) -> Result<(), StoreError> {
        self.client
            .eval(&IDEMPOTENCY_FORGET, vec![self.key(id)], Vec::new())
            .await
            .map_err(|e| store_error("forget", e))?;
        Ok(())
    }

    async fn claim(&self, id: &str) -> Result<Claim, StoreError> {
        let reply = self
            .client
            .eval(
                &IDEMPOTENCY_CLAIM,
                vec![self.key(id)],
                vec![IN_FLIGHT.into(), millis(self.claim_ttl)],
            )
            .await
            .map_err(|e| store_error("claim", e))?;
        match reply.as_int() {
            1 => Ok(Claim::Acquired),
            0 => Ok(Claim::InFlight),
            2 => Ok(Claim::Done),
            other => Err(StoreError::new(format!(
                "redis claim: unexpected reply {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Reply;
    use crate::scripts::LuaScript;
    use std::sync::Mutex;

    /// One script call: (script, keys, args).
    type Call = (&'static str, Vec<Vec<u8>>, Vec<Vec<u8>>);

    /// Records every script call and answers with a fixed integer.
    #[derive(Debug, Default)]
    struct Recording {
        calls: Mutex<Vec<Call>>,
        answer: i64,
    }

    #[async_trait]
    impl RedisClient for Recording {
        async fn eval(
            &self,
            script: &'static LuaScript,
            keys: Vec<Vec<u8>>,
            args: Vec<Vec<u8>>,
        ) -> Result<Reply, RedisError> {
            self.calls.lock().unwrap().push((script.name, keys, args));
            Ok(Reply::Int(self.answer))
        }
        async fn rpush(&self, _: &[u8], _: &[u8]) -> Result<(), RedisError> {
            unreachable!("not used by the store")
        }
        async fn zadd(&self, _: &[u8], _: i64, _: &[u8]) -> Result<(), RedisError> {
            unreachable!("not used by the store")
        }
        async fn zrem(&self, _: &[u8], _: &[u8]) -> Result<i64, RedisError> {
            unreachable!("not used by the store")
        }
        async fn lrange(&self, _: &[u8], _: i64, _: i64) -> Result<Vec<Vec<u8>>, RedisError> {
            unreachable!("not used by the store")
        }
        async fn blpop(&self, _: &[u8], _: Duration) -> Result<(), RedisError> {
            unreachable!("not used by the store")
        }
        async fn quit(&self) -> Result<(), RedisError> {
            Ok(())
        }
    }

    fn s(v: &[u8]) -> String {
        String::from_utf8(v.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn keys_markers_and_lifetimes_reach_the_scripts() {
        let client = Arc::new(Recording {
            answer: 1,
            ..Default::default()
        });
        let store = RedisIdempotencyStore::new(client.clone())
            .prefix("app:idem:")
            .claim_ttl(Duration::from_micros(1500))
            .done_ttl(Duration::ZERO);
        assert_eq!(store.claim("m-1").await.unwrap(), Claim::Acquired);
        store.remember("m-1").await.unwrap();
        assert!(store.seen("m-1").await.unwrap());
        store.forget("m-1").await.unwrap();
        let calls = client.calls.lock().unwrap();
        let got: Vec<(&str, Vec<String>, Vec<String>)> = calls
            .iter()
            .map(|(n, k, a)| {
                (
                    *n,
                    k.iter().map(|x| s(x)).collect(),
                    a.iter().map(|x| s(x)).collect(),
                )
            })
            .collect();
        let key = vec!["app:idem:m-1".to_owned()];
        assert_eq!(
            got,
            [
                (
                    "idempotency_claim",
                    key.clone(),
                    vec!["in-flight".into(), "2".into()]
                ),
                (
                    "idempotency_remember",
                    key.clone(),
                    vec!["1".into(), "0".into()]
                ),
                ("idempotency_seen", key.clone(), vec!["in-flight".into()]),
                ("idempotency_forget", key, vec![]),
            ]
        );
    }

    #[tokio::test]
    async fn claim_replies_map_to_the_core_states() {
        for (answer, want) in [
            (0, Some(Claim::InFlight)),
            (2, Some(Claim::Done)),
            (7, None),
        ] {
            let store = RedisIdempotencyStore::new(Arc::new(Recording {
                answer,
                ..Default::default()
            }));
            assert_eq!(store.claim("x").await.ok(), want, "reply {answer}");
        }
    }

    #[test]
    fn defaults_and_millisecond_rounding() {
        let store = RedisIdempotencyStore::new(Arc::new(Recording::default()));
        assert_eq!(store.key_prefix(), "bq:idemp:");
        assert_eq!(store.key("a b"), b"bq:idemp:a b");
        assert_eq!(store.ttls(), (DEFAULT_CLAIM_TTL, DEFAULT_DONE_TTL));
        assert_eq!(millis(Duration::ZERO), b"0");
        assert_eq!(millis(Duration::from_nanos(1)), b"1");
        assert_eq!(millis(Duration::from_micros(1500)), b"2");
        assert_eq!(millis(Duration::from_secs(60)), b"60000");
    }
}
