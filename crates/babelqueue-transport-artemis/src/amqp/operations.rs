//! [`Client`] for [`AmqpClient`]: sending with a window of settlements, receiving, settling,
//! browsing, each over the live connection's links, reattached when the broker refused one.

use super::*;

#[async_trait]
impl Client for AmqpClient {
    async fn send(&self, address: &str, message: AmqpMessage) -> Result<(), ArtemisError> {
        let sendable = Sendable::builder().message(message).settled(false).build();
        let deadline = Instant::now() + self.config.reconnect_timeout;
        let mut failures: u32 = 1;
        loop {
            match self.try_send(address, &sendable).await {
                Ok(()) => return Ok(()),
                // A full address is not a connection problem: retrying here would only hold the
                // caller; the error goes back at once.
                Err(e)
                    if e.is_transient()
                        && !matches!(e, ArtemisError::AddressBlocked { .. })
                        && !self.closed.load(Ordering::SeqCst)
                        && Instant::now() + RECONNECT_BACKOFF.ceiling(failures) < deadline =>
                {
                    let pause = RECONNECT_BACKOFF.pause(failures);
                    tracing::warn!(target: LOG, address, error = %e,
                        "Sending to {address:?} failed; retrying in {pause:?} on a new connection");
                    tokio::time::sleep(pause).await;
                    failures = failures.saturating_add(1);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Windows of 256 transfers in flight on the address's link, their outcomes
    /// awaited together. A window that stops at an error that heals (a lost connection, not a
    /// full address) goes on one message at a time through [`send`](Client::send), with its
    /// reconnects, from the first message not known to be accepted (which may duplicate a
    /// message whose outcome was lost: at-least-once).
    async fn send_batch(
        &self,
        address: &str,
        messages: Vec<AmqpMessage>,
    ) -> Result<(), ArtemisError> {
        let sendables: Vec<Sendable<Body<Value>>> = messages
            .into_iter()
            .map(|message| Sendable::builder().message(message).settled(false).build())
            .collect();
        let mut done = 0;
        while done < sendables.len() {
            let window = &sendables[done..sendables.len().min(done + SEND_WINDOW)];
            let (accepted, error) = self.try_send_window(address, window).await;
            done += accepted;
            match error {
                None => {}
                Some(e)
                    if e.is_transient()
                        && !matches!(e, ArtemisError::AddressBlocked { .. })
                        && !self.closed.load(Ordering::SeqCst) =>
                {
                    tracing::warn!(target: LOG, address, error = %e, accepted = done,
                        "A batch send to {address:?} failed; sending the rest one at a time");
                    for sendable in &sendables[done..] {
                        self.send(address, sendable.message.clone()).await?;
                    }
                    return Ok(());
                }
                Some(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn receive(
        &self,
        address: &str,
        timeout: Duration,
    ) -> Result<Option<Received>, ArtemisError> {
        let live = self.live().await?;
        let slot = self.receiver(&live, address).await?;
        let mut receiver = slot.receiver.lock().await;
        let grant = lock(&slot.book).window.before_receive();
        if let Some(credit) = grant
            && let Err(e) = receiver.set_credit(credit).await
        {
            live.mark_broken("granting link credit failed");
            return Err(self.connection_error(format!("granting credit on {address:?}: {e}")));
        }
        let delivery = match tokio::time::timeout(timeout, receiver.recv::<Body<Value>>()).await {
            Err(_) => return Ok(None),
            Ok(Err(e)) => {
                live.mark_broken("receiving failed");
                return Err(self.connection_error(format!("receiving from {address:?}: {e}")));
            }
            Ok(Ok(delivery)) => delivery,
        };
        drop(receiver);
        let (info, message) = delivery.into_parts();
        let id = {
            let mut book = lock(&slot.book);
            book.window.on_received();
            let id = book.next_id;
            book.next_id += 1;
            book.pending.insert(id, info);
            id
        };
        Ok(Some(Received {
            message,
            token: DeliveryToken::new(address, live.number, id),
        }))
    }

    /// A receiver link of its own, attached for this browse and closed after it: the source
    /// asks for the `copy` distribution mode (an Artemis queue browser) and the link for
    /// pre-settled deliveries, so no disposition is ever sent ([`crate::browse`]).
    async fn browse(&self, address: &str, max: usize) -> Result<Vec<AmqpMessage>, ArtemisError> {
        let live = self.live().await?;
        let mut source = Source::builder()
            .address(address)
            .distribution_mode(DistributionMode::Copy);
        let capabilities = self.capabilities();
        if !capabilities.is_empty() {
            source = source.capabilities(capabilities);
        }
        let attached = {
            let mut session = live.session.lock().await;
            let attaching = Receiver::builder()
                .name(self.link_name("browse", address))
                .source(source.build())
                .credit_mode(CreditMode::Manual)
                .sender_settle_mode(SenderSettleMode::Settled)
                .auto_accept(false)
                .attach(&mut session);
            tokio::time::timeout(OPERATION_TIMEOUT, attaching).await
        };
        let receiver = match attached {
            Err(_) => {
                live.mark_broken("attaching a browser timed out");
                return Err(ArtemisError::Timeout(OPERATION_TIMEOUT));
            }
            Ok(Err(e)) => {
                return Err(self.attach_error(
                    &live,
                    address,
                    &e.to_string(),
                    remote_refusal_receiver(&e),
                ));
            }
            Ok(Ok(receiver)) => receiver,
        };
        crate::browse::read(receiver, max).await.map_err(|reason| {
            live.mark_broken("browsing failed");
            self.connection_error(format!("{reason} ({address:?})"))
        })
    }

    async fn settle(
        &self,
        token: &DeliveryToken,
        disposition: Disposition,
    ) -> Result<(), ArtemisError> {
        let stale = || ArtemisError::Stale {
            address: token.address().to_owned(),
        };
        let Some(live) = self.current().filter(|l| l.number == token.connection()) else {
            return Err(stale());
        };
        let Some(slot) = lock(&live.receivers).get(token.address()).cloned() else {
            return Err(stale());
        };
        let Some(info) = lock(&slot.book).pending.remove(&token.id()) else {
            tracing::debug!(target: LOG, address = token.address(), "a delivery was settled twice; ignored");
            return Ok(());
        };
        let result = match disposition {
            Disposition::Accepted => slot.disposer.accept(info).await,
            Disposition::Released => slot.disposer.release(info).await,
            Disposition::Failed => {
                let modified = Modified {
                    delivery_failed: Some(true),
                    undeliverable_here: None,
                    message_annotations: None,
                };
                slot.receiver.lock().await.modify(info, modified).await
            }
        };
        lock(&slot.book).window.on_settled();
        result.map_err(|e| {
            live.mark_broken("settling a delivery failed");
            self.connection_error(format!(
                "settling a delivery from {:?}: {e}",
                token.address()
            ))
        })
    }

    /// Accepted deliveries of one receiver link go out together: `accept_all` puts a run of
    /// consecutive delivery ids into one disposition frame. It needs the receiver, so when a
    /// receive holds it, each is accepted through the disposer instead (pipelined, no wait).
    async fn settle_many(
        &self,
        tokens: &[DeliveryToken],
        disposition: Disposition,
    ) -> Result<(), ArtemisError> {
        let mut first_error = None;
        let Some(live) = self.current() else {
            return tokens.first().map_or(Ok(()), |t| {
                Err(ArtemisError::Stale {
                    address: t.address().to_owned(),
                })
            });
        };
        let mut by_address: Vec<(&str, Vec<&DeliveryToken>)> = Vec::new();
        for token in tokens {
            if disposition != Disposition::Accepted || token.connection() != live.number {
                if let Err(e) = self.settle(token, disposition).await {
                    first_error.get_or_insert(e);
                }
                continue;
            }
            match by_address.iter_mut().find(|(a, _)| *a == token.address()) {
                Some((_, group)) => group.push(token),
                None => by_address.push((token.address(), vec![token])),
            }
        }
        for (address, group) in by_address {
            let Some(slot) = lock(&live.receivers).get(address).cloned() else {
                first_error.get_or_insert(ArtemisError::Stale {
                    address: address.to_owned(),
                });
                continue;
            };
            let infos: Vec<DeliveryInfo> = {
                let mut book = lock(&slot.book);
                group
                    .iter()
                    .filter_map(|t| book.pending.remove(&t.id()))
                    .collect()
            };
            let count = infos.len();
            let result = match slot.receiver.try_lock() {
                Ok(receiver) => receiver.accept_all(infos).await,
                Err(_) => {
                    let mut result = Ok(());
                    for info in infos {
                        if let Err(e) = slot.disposer.accept(info).await {
                            result = Err(e);
                        }
                    }
                    result
                }
            };
            {
                let mut book = lock(&slot.book);
                for _ in 0..count {
                    book.window.on_settled();
                }
            }
            if let Err(e) = result {
                live.mark_broken("settling deliveries failed");
                first_error.get_or_insert(
                    self.connection_error(format!("settling deliveries from {address:?}: {e}")),
                );
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn read_attributes(
        &self,
        resource: &str,
        attributes: &[&str],
    ) -> Result<Vec<crate::client::ManagementReply>, ArtemisError> {
        self.management_read(resource, attributes).await
    }

    async fn close(&self) -> Result<(), ArtemisError> {
        self.closed.store(true, Ordering::SeqCst);
        let _guard = self.connecting.lock().await;
        let live = self
            .current
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(live) = live {
            let closing = async {
                let _ = live.session.lock().await.end().await;
                live.connection.lock().await.close().await
            };
            match tokio::time::timeout(OPERATION_TIMEOUT, closing).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(target: LOG, error = %e, "closing the Artemis connection")
                }
                Err(_) => tracing::debug!(target: LOG, "closing the Artemis connection timed out"),
            }
        }
        Ok(())
    }
}
