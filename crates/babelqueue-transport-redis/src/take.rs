//! Taking a named entry out of a list in place ([`Taker`]): the dead-letter tools' remove and
//! retry by id, without draining the list.
//!
//! One script ([`scripts::TAKE`]) finds the entry (at the position it was read at, else the
//! first from the head holding the body; on the default layout a stored `__bq_frame` counts by
//! the body it carries, as [`Browser`](babelqueue_core::Browser) reads it) and takes it; a move
//! appends the new value to the target's ready list as a publish to it does (the Laravel layout
//! with its wake-up token) in the same script, so a retry is atomic. On a Redis Cluster whose
//! target is in another slot, the move is made in two steps that never lose the message: the
//! publish, then the take (a take that then finds nothing leaves a duplicate).

use async_trait::async_trait;
use babelqueue_core::{Taker, Transport as _, TransportError};

use crate::{Layout, RedisError, RedisTransport, bytes, scripts};

impl RedisTransport {
    /// Runs [`scripts::TAKE`] on `list` (with `push`: the target's keys and value).
    async fn take_script(
        &self,
        list: &str,
        at: usize,
        body: &[u8],
        push: Option<(Vec<Vec<u8>>, &[u8])>,
    ) -> Result<usize, RedisError> {
        let framed = if self.options.layout == Layout::Reliable {
            b"1".to_vec()
        } else {
            b"0".to_vec()
        };
        let mut keys = vec![bytes(self.options.ready(list))];
        let mut value = Vec::new();
        if let Some((target, publish)) = push {
            keys.extend(target);
            value = publish.to_vec();
        }
        let taken = self
            .client
            .eval(
                &scripts::TAKE,
                keys,
                vec![bytes(at.to_string()), body.to_vec(), framed, value],
            )
            .await?
            .as_int();
        Ok(usize::from(taken == 1))
    }
}

#[async_trait]
impl Taker for RedisTransport {
    async fn take(&self, queue: &str, at: usize, body: &[u8]) -> Result<usize, TransportError> {
        self.options.check_queue(queue)?;
        let ready = self.options.ready(queue);
        let since = self.client.reconnects();
        let taken = self.take_script(queue, at, body, None).await?;
        if taken == 1 {
            self.replicated(&ready, since, || format!("a removal from {queue:?}"))
                .await?;
        }
        Ok(taken)
    }

    async fn take_to(
        &self,
        from: &str,
        at: usize,
        body: &[u8],
        to: &str,
        publish: &[u8],
    ) -> Result<usize, TransportError> {
        let o = &self.options;
        o.check_queue(from)?;
        o.check_queue(to)?;
        let (source, ready) = (o.ready(from), o.ready(to));
        if self.apart(&source, &ready) {
            // Two slots: no script may touch both. Add before remove.
            self.publish(to, publish).await?;
            return self.take(from, at, body).await;
        }
        self.laravel_safe(to, &[publish], false)?;
        let target = match o.layout {
            Layout::Reliable => vec![bytes(ready.clone())],
            Layout::Laravel => vec![bytes(ready.clone()), bytes(o.notify(to))],
        };
        let since = self.client.reconnects();
        let taken = self
            .take_script(from, at, body, Some((target, publish)))
            .await?;
        if taken == 1 {
            self.replicated(&ready, since, || format!("a retry to {to:?}"))
                .await?;
        }
        Ok(taken)
    }
}
