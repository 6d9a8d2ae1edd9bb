//! Reserving and settling: the Laravel layout's sweep, a reservation's delivery handle, the
//! reserve scripts of both layouts and the settle of the reliable one.

use super::*;

impl RedisTransport {
    /// Laravel layout: moves due delayed messages, then (unless recovery is off) expired
    /// reservations, back to the ready list. A consumer runs it before a reserve when the last
    /// pass is [`SWEEP_INTERVAL`] old; public for tools.
    pub async fn migrate(&self, queue: &str) -> Result<i64, RedisError> {
        let o = &self.options;
        o.check_queue(queue)?;
        let now = bytes(layout::whole_seconds(self.now()).to_string());
        let ready = o.ready(queue);
        let notify = o.notify(queue);
        let mut moved = self
            .client
            .eval(
                &scripts::MIGRATE,
                vec![
                    bytes(o.delayed(queue)),
                    bytes(ready.clone()),
                    bytes(notify.clone()),
                ],
                vec![now.clone(), self.batch()],
            )
            .await?
            .as_int();
        if o.retry_after.is_some() {
            moved += self
                .client
                .eval(
                    &scripts::MIGRATE,
                    vec![bytes(o.reserved(queue)), bytes(ready), bytes(notify)],
                    vec![now, self.batch()],
                )
                .await?
                .as_int();
        }
        Ok(moved)
    }

    /// Reliable layout: returns lapsed reservations to the end of the ready list. A consumer
    /// runs it before a reserve when the last pass is [`SWEEP_INTERVAL`] old (also with
    /// recovery off: a foreign finite deadline is still swept).
    pub async fn sweep(&self, queue: &str) -> Result<i64, RedisError> {
        let o = &self.options;
        o.check_queue(queue)?;
        let now = bytes(layout::whole_seconds(self.now()).to_string());
        Ok(self
            .client
            .eval(
                &scripts::SWEEP,
                vec![
                    bytes(o.ready(queue)),
                    bytes(o.processing(queue)),
                    bytes(o.deadlines(queue)),
                ],
                vec![now, self.batch()],
            )
            .await?
            .as_int())
    }

    /// A delivery for an existing reliable-layout reservation `<token>:<stored>` of `queue`
    /// (tools that settle reservations they did not pop).
    pub fn reservation(&self, queue: &str, token: &str, stored: &[u8]) -> Delivery {
        Self::reserved(queue, token, stored, None)
    }

    /// A delivery for a reliable-layout reservation lapsing at `deadline`.
    pub(crate) fn reserved(
        queue: &str,
        token: &str,
        stored: &[u8],
        deadline: Option<i64>,
    ) -> Delivery {
        let (body, headers) = layout::unframe(stored);
        // A reservation has nowhere else to go: the binding dead-letters poison in every
        // configuration.
        Delivery::new(queue, body.into_owned())
            .with_headers(headers)
            .poison_always_dead_lettered()
            .with_handle(Held {
                handle: Handle::Reliable {
                    stored: stored.to_vec(),
                    token: token.to_owned(),
                },
                deadline,
            })
    }

    /// The reservation a delivery holds: the reserved member (Laravel layout) or the stored value
    /// (reliable layout), byte for byte.
    pub fn reservation_of(delivery: &Delivery) -> Option<&[u8]> {
        match &delivery.handle::<Held>()?.handle {
            Handle::Reliable { stored, .. } => Some(stored),
            Handle::Laravel { member } => Some(member),
        }
    }

    pub(crate) async fn reserve_reliable(
        &self,
        queue: &str,
        max: usize,
    ) -> Result<Vec<Delivery>, RedisError> {
        let o = &self.options;
        let tokens: Vec<String> = (0..max.max(1)).map(|_| layout::new_token()).collect();
        let now = self.now();
        let mut args = vec![bytes(layout::deadline_score(now, o.retry_after))];
        let deadline = layout::hold_deadline(now, o.retry_after);
        args.extend(tokens.iter().map(|t| bytes(t.clone())));
        let reply = self
            .client
            .eval(
                &scripts::RESERVE_LEGACY,
                vec![
                    bytes(o.ready(queue)),
                    bytes(o.processing(queue)),
                    bytes(o.deadlines(queue)),
                ],
                args,
            )
            .await?;
        let Reply::Array(raws) = reply else {
            return Ok(Vec::new());
        };
        Ok(raws
            .into_iter()
            .zip(&tokens)
            .filter_map(|(raw, token)| {
                raw.into_bytes()
                    .map(|stored| Self::reserved(queue, token, &stored, deadline))
            })
            .collect())
    }

    pub(crate) async fn reserve_laravel(
        &self,
        queue: &str,
        max: usize,
    ) -> Result<Vec<Delivery>, RedisError> {
        let o = &self.options;
        let now = self.now();
        let deadline = layout::hold_deadline(now, o.retry_after);
        let reply = self
            .client
            .eval(
                &scripts::RESERVE_ZSET,
                vec![
                    bytes(o.ready(queue)),
                    bytes(o.reserved(queue)),
                    bytes(o.notify(queue)),
                ],
                vec![
                    bytes(layout::deadline_score(now, o.retry_after)),
                    bytes(max.max(1).to_string()),
                ],
            )
            .await?;
        let Reply::Array(pairs) = reply else {
            return Ok(Vec::new());
        };
        let mut reserved = Vec::with_capacity(pairs.len() / 2);
        let mut pairs = pairs.into_iter();
        while let (Some(Reply::Bytes(job)), Some(Reply::Bytes(member))) =
            (pairs.next(), pairs.next())
        {
            let counted = layout::laravel_counted(&job, &member);
            let delivery = Delivery::new(queue, job).poison_always_dead_lettered();
            let delivery = if counted {
                delivery
            } else {
                delivery.attempts_not_counted()
            };
            reserved.push(delivery.with_handle(Held {
                handle: Handle::Laravel { member },
                deadline,
            }));
        }
        Ok(reserved)
    }

    /// Sweeps (reliable layout) or migrates (Laravel layout) `queue` when the last pass is at
    /// least [`SWEEP_INTERVAL`] old by the transport's clock: recovered reservations and due
    /// delayed messages are on time within that interval, without a script before every reserve.
    pub(crate) async fn sweep_if_due(&self, queue: &str) -> Result<(), RedisError> {
        let now = self.now();
        {
            let swept = self.swept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(&last) = swept.get(queue)
                && (0.0..SWEEP_INTERVAL.as_secs_f64()).contains(&(now - last))
            {
                return Ok(());
            }
        }
        match self.options.layout {
            Layout::Reliable => self.sweep(queue).await?,
            Layout::Laravel => self.migrate(queue).await?,
        };
        self.swept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(queue.to_owned(), now);
        Ok(())
    }

    /// Reserves up to `max` deliveries of `queue`, waiting up to `timeout` (or `block_for`) for
    /// the first.
    pub(crate) async fn receive_up_to(
        &self,
        queue: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Delivery>, RedisError> {
        self.options.check_queue(queue)?;
        let budget = self.options.block_for.unwrap_or(timeout);
        let deadline = tokio::time::Instant::now() + budget;
        loop {
            self.sweep_if_due(queue).await?;
            let reserved = match self.options.layout {
                Layout::Reliable => self.reserve_reliable(queue, max).await?,
                Layout::Laravel => self.reserve_laravel(queue, max).await?,
            };
            if !reserved.is_empty() {
                return Ok(reserved);
            }
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            if remaining < Duration::from_millis(1) {
                return Ok(Vec::new());
            }
            match self.options.layout {
                Layout::Reliable => {
                    // Woken as soon as the ready list holds an item; at most every
                    // SWEEP_INTERVAL, so that lapsed reservations are swept back on time.
                    let ready = self.options.ready(queue);
                    self.client
                        .wait_for_items(ready.as_bytes(), remaining.min(SWEEP_INTERVAL))
                        .await?;
                }
                Layout::Laravel => {
                    let notify = self.options.notify(queue);
                    self.client
                        .blpop(notify.as_bytes(), remaining.min(Duration::from_secs(1)))
                        .await?;
                }
            }
        }
    }

    pub(crate) fn handle<'a>(&self, delivery: &'a Delivery) -> Result<&'a Handle, RedisError> {
        delivery
            .handle::<Held>()
            .map(|held| &held.handle)
            .ok_or_else(|| {
                RedisError::Protocol("this delivery was not reserved by a Redis transport".into())
            })
    }

    /// The gated reliable-layout settle: `target` gets `body` only if the reservation holds.
    pub(crate) async fn settle_reliable(
        &self,
        delivery: &Delivery,
        target: Option<(&str, &[u8])>,
    ) -> Result<bool, RedisError> {
        let Handle::Reliable { stored, token } = self.handle(delivery)? else {
            return Err(RedisError::Protocol(
                "a Laravel reservation settled through the reliable layout".into(),
            ));
        };
        let o = &self.options;
        let mut keys = vec![
            bytes(o.processing(delivery.queue())),
            bytes(o.deadlines(delivery.queue())),
        ];
        let mut args = vec![bytes(token.clone()), stored.clone()];
        if let Some((key, body)) = target {
            keys.push(bytes(key));
            args.push(body.to_vec());
        }
        let settled = self
            .client
            .eval(&scripts::SETTLE_LEGACY, keys, args)
            .await?
            .as_int()
            == 1;
        if !settled {
            tracing::warn!(target: "babelqueue::redis", queue = delivery.queue(),
                "The Redis reservation expired before it was settled: it was swept back and may be delivered again; nothing was touched");
        }
        Ok(settled)
    }

    pub(crate) fn laravel_member<'a>(
        &self,
        delivery: &'a Delivery,
    ) -> Result<&'a [u8], RedisError> {
        match self.handle(delivery)? {
            Handle::Laravel { member } => Ok(member),
            Handle::Reliable { .. } => Err(RedisError::Protocol(
                "a reliable reservation settled through the Laravel layout".into(),
            )),
        }
    }
}
