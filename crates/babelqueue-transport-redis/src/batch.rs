//! Many at once: acknowledgements in one script call per queue, publishes in one script call.
//!
//! Each is one `EVALSHA` per queue (and per layout's keys), so a batch costs one round trip, and
//! each script keeps the rules of [`scripts`](crate::scripts): types checked before anything is
//! written, a lapsed reservation left alone.

use std::collections::BTreeMap;

use async_trait::async_trait;
use babelqueue_core::{BatchAcker, BatchPublisher, Delivery, TransportError};

use crate::{Handle, Layout, RedisError, RedisTransport, bytes, scripts};

/// Values per script call: far below Lua's `unpack` limit, and small enough that one call
/// never blocks the server for long.
const CHUNK: usize = 500;

#[async_trait]
impl BatchAcker for RedisTransport {
    async fn ack_batch(&self, deliveries: &[Delivery]) -> Result<(), TransportError> {
        // One call per queue: the arguments of each delivery's reservation, in order.
        let mut by_queue: BTreeMap<&str, Vec<Vec<u8>>> = BTreeMap::new();
        for delivery in deliveries {
            let args = by_queue.entry(delivery.queue()).or_default();
            match (self.handle(delivery)?, self.options.layout) {
                (Handle::Reliable { stored, token }, Layout::Reliable) => {
                    args.push(bytes(token.clone()));
                    args.push(stored.clone());
                }
                (Handle::Laravel { member }, Layout::Laravel) => args.push(member.clone()),
                _ => {
                    return Err(RedisError::Protocol(
                        "a reservation of the other layout cannot be acknowledged here".into(),
                    )
                    .into());
                }
            }
        }
        let o = &self.options;
        let mut first_error = None;
        for (queue, args) in by_queue {
            let (script, keys, per) = match o.layout {
                Layout::Reliable => (
                    &scripts::ACK_LEGACY,
                    vec![bytes(o.processing(queue)), bytes(o.deadlines(queue))],
                    2,
                ),
                Layout::Laravel => (&scripts::ACK_ZSET, vec![bytes(o.reserved(queue))], 1),
            };
            for chunk in args.chunks(CHUNK * per) {
                if let Err(e) = self.client.eval(script, keys.clone(), chunk.to_vec()).await {
                    // Every queue is attempted; a reservation left unacknowledged comes back.
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl BatchPublisher for RedisTransport {
    async fn publish_batch(&self, queue: &str, bodies: &[&[u8]]) -> Result<(), TransportError> {
        // Every body is checked before the first chunk is sent.
        self.options.check_queue(queue)?;
        self.laravel_safe(queue, bodies, true)?;
        let o = &self.options;
        let (script, keys) = match o.layout {
            Layout::Reliable => (&scripts::PUSH_LIST, vec![bytes(o.ready(queue))]),
            Layout::Laravel => (
                &scripts::PUSH,
                vec![bytes(o.ready(queue)), bytes(o.notify(queue))],
            ),
        };
        let since = self.client.reconnects();
        for chunk in bodies.chunks(CHUNK) {
            let args = chunk.iter().map(|body| body.to_vec()).collect();
            self.client.eval(script, keys.clone(), args).await?;
        }
        // One WAIT covers every chunk: it confirms all the connection's writes so far.
        self.replicated(&o.ready(queue), since, || {
            format!("a batch of {} to {queue:?}", bodies.len())
        })
        .await?;
        Ok(())
    }
}
