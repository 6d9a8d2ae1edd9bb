//! The supervisor's half of [`AmqpTransport`](super::AmqpTransport): the connection of each role,
//! reconnecting with back-off, consumers per generation, and the broker operations bounded in
//! time.

use super::*;

impl Inner {
    pub(super) fn backoff(&self, failures: u32) -> Duration {
        ReconnectBackoff::new(self.options.reconnect_min, self.options.reconnect_max)
            .pause(failures)
    }

    /// The live connection, reconnecting (with back-off) until `deadline` when there is none.
    /// A `deadline` in the past still makes one attempt when no back-off pause is pending.
    pub(super) fn supervised(&self, role: Role) -> &Supervised {
        match role {
            Role::Publishing => &self.publishing,
            Role::Consuming => &self.consuming,
        }
    }

    pub(super) async fn link(&self, role: Role, deadline: Instant) -> Result<Arc<Live>, AmqpError> {
        let conn = self.supervised(role);
        if let Some(live) = lock(&conn.current).as_ref()
            && live.link.is_open()
        {
            return Ok(live.clone());
        }
        loop {
            let mut sup = conn.supervisor.lock().await;
            if let Some(live) = sup.live.clone() {
                if live.link.is_open() {
                    return Ok(live);
                }
                tracing::warn!(target: LOG, role = role.as_str(), generation = live.generation, "The RabbitMQ connection was lost; reconnecting");
                self.forget(conn, role, &mut sup, &live);
            }
            let now = Instant::now();
            if let Some(at) = sup.retry_at
                && at > now
            {
                if at > deadline {
                    return Err(AmqpError::Connection(format!(
                        "RabbitMQ is unreachable ({} failed attempts); the next reconnect is in {:?}",
                        sup.failures,
                        at - now
                    )));
                }
                drop(sup);
                tokio::time::sleep_until(at).await;
                continue;
            }
            let limit = self.options.operation_timeout;
            match bounded(limit, "connecting", self.client.connect()).await {
                Ok(link) => {
                    sup.generation += 1;
                    if sup.generation > 1 {
                        conn.reconnects.fetch_add(1, Ordering::SeqCst);
                        tracing::info!(target: LOG, role = role.as_str(), generation = sup.generation, failures = sup.failures, "Reconnected to RabbitMQ");
                    }
                    // `failures` is kept until the connection proves stable (see `forget`).
                    sup.retry_at = None;
                    let live = Arc::new(Live {
                        link,
                        generation: sup.generation,
                        declared: StdMutex::new(HashSet::new()),
                        opened: Instant::now(),
                    });
                    sup.live = Some(live.clone());
                    *lock(&conn.current) = Some(live.clone());
                    return Ok(live);
                }
                Err(e) => {
                    sup.failures = sup.failures.saturating_add(1);
                    let pause = self.backoff(sup.failures);
                    sup.retry_at = Some(Instant::now() + pause);
                    tracing::warn!(target: LOG, role = role.as_str(), error = %e, failures = sup.failures, retry_in = ?pause, "Connecting to RabbitMQ failed");
                    if !e.is_transient() || Instant::now() >= deadline {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Drops the supervisor's connection `live` after it failed. A connection that failed
    /// young counts as one more failed attempt, and the next attempt waits out the back-off;
    /// one that lived long enough clears the failure count.
    pub(super) fn forget(&self, conn: &Supervised, role: Role, sup: &mut Supervisor, live: &Live) {
        if live.opened.elapsed() < STABLE_CONNECTION {
            sup.failures = sup.failures.saturating_add(1);
            let pause = self.backoff(sup.failures);
            sup.retry_at = Some(Instant::now() + pause);
            tracing::warn!(target: LOG, role = role.as_str(), generation = live.generation, failures = sup.failures, retry_in = ?pause,
                "The RabbitMQ connection failed {:?} after it was opened; backing off before reconnecting",
                live.opened.elapsed());
        } else {
            sup.failures = 0;
        }
        sup.live = None;
        *lock(&conn.current) = None;
    }

    /// Forgets the `role` connection of `generation` after it failed (a newer one is left
    /// alone).
    pub(super) async fn lost(&self, role: Role, generation: u64) {
        let conn = self.supervised(role);
        let dead = {
            let mut sup = conn.supervisor.lock().await;
            match sup.live.clone() {
                Some(live) if live.generation == generation => {
                    self.forget(conn, role, &mut sup, &live);
                    Some(live)
                }
                _ => None,
            }
        };
        if let Some(dead) = dead {
            tracing::warn!(target: LOG, role = role.as_str(), generation, "The RabbitMQ connection failed; it will be re-established");
            tokio::spawn(async move { dead.link.close().await });
        }
    }

    pub(super) async fn declare(&self, live: &Live, queue: &str) -> Result<(), AmqpError> {
        if !self.options.declare || lock(&live.declared).contains(queue) {
            return Ok(());
        }
        let arguments = topology::declare_arguments(self.options.queue_type);
        bounded(
            self.options.operation_timeout,
            "declaring a queue",
            live.link.declare(queue, &arguments),
        )
        .await
        .map_err(|e| topology::explain(e, self.options.queue_type))?;
        lock(&live.declared).insert(queue.to_owned());
        Ok(())
    }

    pub(super) async fn publish_on(
        &self,
        live: &Live,
        queue: &str,
        body: &[u8],
        properties: &lapin::BasicProperties,
    ) -> Result<(), AmqpError> {
        self.declare(live, queue).await?;
        let limit = self.options.operation_timeout;
        let publish = || {
            bounded(
                limit,
                "a confirmed publish",
                live.link.publish(queue, body, properties.clone()),
            )
        };
        match publish().await {
            Err(AmqpError::Unroutable { .. }) if self.options.declare => {
                // The queue vanished since it was declared (deleted by hand): declare it again
                // and send once more; the returned copy was not stored anywhere.
                lock(&live.declared).remove(queue);
                self.declare(live, queue).await?;
                publish().await
            }
            other => other,
        }
    }

    pub(super) async fn publish(
        &self,
        queue: &str,
        body: &[u8],
        properties: lapin::BasicProperties,
    ) -> Result<(), AmqpError> {
        let deadline = Instant::now() + self.options.reconnect_wait;
        let refusal_deadline = Instant::now() + topology::REFUSAL_RESEND_WINDOW;
        let mut losses = 0;
        let mut refusals = 0;
        loop {
            let live = self.link(Role::Publishing, deadline).await?;
            match self.publish_on(&live, queue, body, &properties).await {
                Ok(()) => return Ok(()),
                Err(e @ AmqpError::Nacked { .. }) => {
                    // Not stored. The next publish goes out on a new channel either way (a
                    // channel that met a quorum queue without a leader refuses for ever).
                    live.link.renew_publisher().await;
                    refusals += 1;
                    let left = deadline
                        .min(refusal_deadline)
                        .saturating_duration_since(Instant::now());
                    let Some(pause) = topology::resend_after_refusal(
                        self.options.queue_type,
                        refusals,
                        self.options.reconnect_min,
                        left,
                    ) else {
                        return Err(e);
                    };
                    tracing::warn!(target: LOG, queue, refusals, retry_in = ?pause, "RabbitMQ refused the message (negative publisher confirm); sending it again on a new channel");
                    tokio::time::sleep(pause).await;
                }
                Err(e) => {
                    let lost = e.connection_lost() || !live.link.is_open();
                    if lost {
                        self.lost(Role::Publishing, live.generation).await;
                        losses += 1;
                    }
                    if lost && losses > PUBLISH_LOSSES_TOLERATED {
                        // The same message lost a fresh connection too: RabbitMQ refuses this
                        // message (it closed the connection on it), which resending cannot fix.
                        return Err(AmqpError::Refused(format!(
                            "RabbitMQ closed the connection {losses} times while this message was being published to {queue:?}; \
                             it is not sent again (last error: {e})"
                        )));
                    }
                    if !lost || Instant::now() >= deadline {
                        return Err(e);
                    }
                    tracing::warn!(target: LOG, queue, error = %e, "Publishing failed on a lost connection; sending again after reconnecting");
                }
            }
        }
    }

    /// Publishes `messages` to `queue` with their confirms in flight together (one attempt: a
    /// lost connection fails the batch, and the caller may send it again).
    pub(super) async fn publish_many(
        &self,
        queue: &str,
        messages: &[(&[u8], lapin::BasicProperties)],
    ) -> Result<(), AmqpError> {
        let deadline = Instant::now() + self.options.reconnect_wait;
        let live = self.link(Role::Publishing, deadline).await?;
        self.declare(&live, queue).await?;
        let result = bounded(
            self.options.operation_timeout,
            "confirmed publishes",
            live.link.publish_many(queue, messages),
        )
        .await;
        match &result {
            Err(e) if e.connection_lost() || !live.link.is_open() => {
                self.lost(Role::Publishing, live.generation).await;
            }
            // The batch fails (the caller may send it again), on a new channel next time.
            Err(AmqpError::Nacked { .. }) => live.link.renew_publisher().await,
            _ => {}
        }
        result
    }

    pub(super) async fn subscription(
        &self,
        queue: &str,
        deadline: Instant,
    ) -> Result<Arc<Sub>, AmqpError> {
        let live = self.link(Role::Consuming, deadline).await?;
        if let Some(sub) = lock(&self.subs).get(queue)
            && sub.generation == live.generation
            && sub.sub.is_open()
        {
            return Ok(sub.clone());
        }
        let result = async {
            self.declare(&live, queue).await?;
            // A quorum queue refuses a channel-wide prefetch: there even a bare `pop` loop's
            // consumer has one of its own, which cannot grow, so it starts higher.
            let quorum = self.options.queue_type.needs_consumer_prefetch();
            let start = if quorum { QUORUM_POP_PREFETCH } else { 1 };
            let prefetch = match self.options.prefetch {
                Some(fixed) => fixed,
                None => lock(&self.grown).get(queue).copied().unwrap_or(start),
            };
            // A prefetch known before the first delivery (configured, or announced by the
            // runtime) is the consumer's own; only a bare `pop` loop's grows, channel-wide.
            let fixed =
                quorum || self.options.prefetch.is_some() || lock(&self.announced).contains(queue);
            let subscribing = if fixed {
                live.link.subscribe_fixed(queue, prefetch)
            } else {
                live.link.subscribe(queue, prefetch)
            };
            let sub = bounded(self.options.operation_timeout, "subscribing", subscribing).await?;
            Ok::<_, AmqpError>(Arc::new(Sub {
                generation: live.generation,
                sub,
                outstanding: Arc::new(AtomicUsize::new(0)),
                ledger: Arc::new(Ledger::default()),
                prefetch: AtomicU16::new(prefetch),
                fixed,
            }))
        }
        .await;
        match result {
            Ok(sub) => {
                tracing::debug!(target: LOG, queue, generation = live.generation, "Consuming");
                lock(&self.subs).insert(queue.to_owned(), sub.clone());
                Ok(sub)
            }
            Err(e) => {
                // Declare again next time: the queue may have been deleted under us.
                lock(&live.declared).remove(queue);
                if e.connection_lost() || !live.link.is_open() {
                    self.lost(Role::Consuming, live.generation).await;
                }
                Err(e)
            }
        }
    }

    /// Follows the runtime's concurrency: the runtime only asks for a message while a handler
    /// slot is free, so when every prefetched delivery is still held, one more slot exists.
    pub(super) async fn grow_prefetch(&self, queue: &str, sub: &Sub) -> Result<(), AmqpError> {
        if sub.fixed {
            return Ok(());
        }
        let held = sub.outstanding.load(Ordering::SeqCst);
        let current = sub.prefetch.load(Ordering::SeqCst);
        if held < usize::from(current) || current == u16::MAX {
            return Ok(());
        }
        let wanted = u16::try_from(held + 1).unwrap_or(u16::MAX);
        bounded(
            self.options.operation_timeout,
            "changing the prefetch",
            sub.sub.set_prefetch(wanted),
        )
        .await?;
        sub.prefetch.store(wanted, Ordering::SeqCst);
        lock(&self.grown).insert(queue.to_owned(), wanted);
        tracing::debug!(target: LOG, queue, prefetch = wanted, "Prefetch raised to follow the runtime's concurrency");
        Ok(())
    }

    pub(super) async fn pop(
        &self,
        queue: &str,
        timeout: Duration,
    ) -> Result<Option<Delivery>, AmqpError> {
        let deadline = Instant::now() + timeout;
        loop {
            let sub = self.subscription(queue, deadline).await?;
            let step = async {
                self.grow_prefetch(queue, &sub).await?;
                let remaining = deadline.saturating_duration_since(Instant::now());
                // `next` honours its own timeout; the bound is for a client that does not.
                bounded(
                    remaining + self.options.operation_timeout,
                    "receiving",
                    sub.sub.next(remaining),
                )
                .await
            }
            .await;
            match step {
                Ok(Some(incoming)) => {
                    sub.outstanding.fetch_add(1, Ordering::SeqCst);
                    let headers =
                        projection::received_headers(incoming.properties.headers().as_ref());
                    let tag = incoming.settle.tag();
                    if let Some(tag) = tag {
                        sub.ledger.handed_out(tag);
                    }
                    let handle = Handle {
                        settle: incoming.settle,
                        generation: sub.generation,
                        outstanding: sub.outstanding.clone(),
                        tag,
                        ledger: sub.ledger.clone(),
                        settled: AtomicBool::new(false),
                        wire: Wire {
                            redelivered: incoming.redelivered,
                            exchange: incoming.exchange,
                            routing_key: incoming.routing_key,
                            properties: incoming.properties,
                        },
                    };
                    return Ok(Some(
                        Delivery::new(queue, incoming.body)
                            .with_headers(headers)
                            .with_handle(handle),
                    ));
                }
                Ok(None) => return Ok(None),
                Err(e) => {
                    // The consumer ended: forget it (and the connection, when that is what
                    // died); the next round re-subscribes, within this pop's budget.
                    {
                        let mut subs = lock(&self.subs);
                        if subs.get(queue).is_some_and(|s| Arc::ptr_eq(s, &sub)) {
                            subs.remove(queue);
                        }
                    }
                    let link_dead = {
                        let sup = self.consuming.supervisor.lock().await;
                        sup.live
                            .as_ref()
                            .is_none_or(|l| l.generation != sub.generation || !l.link.is_open())
                    };
                    if link_dead {
                        self.lost(Role::Consuming, sub.generation).await;
                    } else if let Some(live) = self.consuming.supervisor.lock().await.live.clone() {
                        // RabbitMQ cancels the consumer of a deleted queue: declare it again.
                        lock(&live.declared).remove(queue);
                    }
                    tracing::warn!(target: LOG, queue, error = %e, "The consumer stopped; subscribing again");
                    if Instant::now() >= deadline {
                        return Err(e);
                    }
                    // A consumer cancelled on a healthy connection (the queue was deleted) must
                    // not spin: pause briefly before subscribing again.
                    if !link_dead {
                        tokio::time::sleep(
                            self.options
                                .reconnect_min
                                .min(deadline.saturating_duration_since(Instant::now())),
                        )
                        .await;
                    }
                }
            }
        }
    }

    /// Whether `delivery` came on a consuming connection that has since been lost (RabbitMQ
    /// then requeued it by itself).
    pub(super) fn is_stale(&self, delivery: &Delivery) -> bool {
        let Some(handle) = delivery.handle::<Handle>() else {
            return true;
        };
        lock(&self.consuming.current)
            .as_ref()
            .is_none_or(|live| live.generation != handle.generation || !live.link.is_open())
    }

    pub(super) async fn settle(&self, delivery: &Delivery, requeue: bool) -> Result<(), AmqpError> {
        let Some(handle) = delivery.handle::<Handle>() else {
            return Err(AmqpError::Other(
                "this delivery did not come from the AMQP transport".to_owned(),
            ));
        };
        if !handle.take() {
            return Err(AmqpError::Other(
                "this delivery was already settled".to_owned(),
            ));
        }
        let result = if requeue {
            bounded(
                self.options.operation_timeout,
                "a negative acknowledgement",
                handle.settle.requeue(),
            )
            .await
        } else {
            bounded(
                self.options.operation_timeout,
                "an acknowledgement",
                handle.settle.ack(),
            )
            .await
        };
        match &result {
            // Its frame went out: it no longer holds a multiple-ack back. (After a failure it
            // stays in the ledger: whether the frame left is unknown.)
            Ok(()) => handle.ledger.settled(handle.tag),
            Err(e) if e.connection_lost() => self.lost(Role::Consuming, handle.generation).await,
            Err(_) => {}
        }
        result
    }

    /// Acknowledges `handles` (taken, so nobody else settles them): per channel, the run that
    /// no open delivery interrupts with one multiple-ack, the others one by one.
    pub(super) async fn ack_many(&self, handles: Vec<&Handle>) -> Result<(), AmqpError> {
        let mut first_error = None;
        let mut channels: Vec<(Arc<Ledger>, Vec<&Handle>)> = Vec::new();
        for handle in handles {
            match channels
                .iter_mut()
                .find(|(ledger, _)| Arc::ptr_eq(ledger, &handle.ledger))
            {
                Some((_, group)) => group.push(handle),
                None => channels.push((handle.ledger.clone(), vec![handle])),
            }
        }
        for (ledger, group) in channels {
            let tags: Vec<u64> = group.iter().filter_map(|h| h.tag).collect();
            let plan = ledger.plan(&tags);
            let mut alone: Vec<&Handle> = group
                .iter()
                .copied()
                .filter(|h| h.tag.is_none_or(|t| plan.single.contains(&t)))
                .collect();
            if let Some(up_to) = plan.up_to
                && let Some(last) = group.iter().find(|h| h.tag == Some(up_to))
            {
                let result = bounded(
                    self.options.operation_timeout,
                    "an acknowledgement",
                    last.settle.ack_up_to(),
                )
                .await;
                match result {
                    Ok(()) => ledger.settled(tags.iter().copied().filter(|t| *t <= up_to)),
                    Err(e) => {
                        if e.connection_lost() {
                            self.lost(Role::Consuming, last.generation).await;
                        }
                        first_error.get_or_insert(e);
                    }
                }
            }
            alone.sort_by_key(|h| h.tag);
            for handle in alone {
                let result = bounded(
                    self.options.operation_timeout,
                    "an acknowledgement",
                    handle.settle.ack(),
                )
                .await;
                match result {
                    Ok(()) => ledger.settled(handle.tag),
                    Err(e) => {
                        if e.connection_lost() {
                            self.lost(Role::Consuming, handle.generation).await;
                        }
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
