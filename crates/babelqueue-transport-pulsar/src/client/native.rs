//! [`NativeClient`]: [`PulsarClient`] on the `pulsar` crate, its consumer tasks and the
//! redelivery counts it keeps.

use super::*;

/// [`PulsarClient`] on the `pulsar` crate: one cached producer per topic, one Shared consumer
/// per topic (owned by a task, so acks never wait for a receive in progress), and the
/// redelivery counts of every message it handed out, kept by the client so that a consumer
/// built again for a topic goes on counting. Producers and consumers reach the broker on
/// connections of their own.
pub struct NativeClient {
    /// The producers' client.
    pulsar: Pulsar<TokioExecutor>,
    /// The consumers' client: its own connection to each broker. The `pulsar` crate leaves
    /// Nagle's algorithm on (no `TCP_NODELAY`), and the broker never answers an ack; on one
    /// shared connection a send written after an ack was held by the kernel until the broker's
    /// delayed TCP ack, up to 40 ms (the open loop at 100 msg/s: p99 47 ms, 14 ms apart). A
    /// producer's connection carries sends, each answered by its receipt, so nothing waits
    /// long there.
    consuming: Pulsar<TokioExecutor>,
    options: PulsarOptions,
    producers: Mutex<HashMap<String, Arc<Mutex<Producer<TokioExecutor>>>>>,
    consumers: Mutex<HashMap<String, mpsc::Sender<Command>>>,
    counts: Counts,
    admin: Option<crate::browse::AdminPeek>,
}

impl fmt::Debug for NativeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeClient")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl NativeClient {
    /// Connects to `url` (`pulsar://host:6650` or `pulsar+ssl://host:6651`, with the query
    /// keys `token` and `ca_file`: see [`ClientSettings`](crate::ClientSettings)).
    pub async fn connect(url: &str, options: PulsarOptions) -> Result<NativeClient, PulsarError> {
        let settings = crate::auth::settings(url, &options)?;
        let retry = ConnectionRetryOptions {
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            max_retries: 3,
            connection_timeout: options.connect_timeout,
            ..ConnectionRetryOptions::default()
        };
        let operation = OperationRetryOptions {
            operation_timeout: options.operation_timeout,
            retry_delay: Duration::from_millis(200),
            max_retries: Some(10),
        };
        // One token cache for both clients' broker connections and the admin API.
        let oauth2 = match settings.oauth2 {
            Some(grant) => Some(crate::oauth2::OAuth2Provider::new(
                grant,
                settings.ca_pem.as_deref(),
                options.operation_timeout,
            )?),
            None => None,
        };
        let admin = match &options.admin_url {
            Some(admin_url) => {
                let peek = crate::browse::AdminPeek::new(
                    admin_url,
                    &options.subscription,
                    options.initial_position_earliest,
                    settings.token.clone(),
                    settings.ca_pem.as_deref(),
                    options.operation_timeout,
                )?;
                Some(match &oauth2 {
                    Some(provider) => peek.with_oauth2(provider.clone()),
                    None => peek,
                })
            }
            None => None,
        };
        let build = || async {
            let mut builder = Pulsar::builder(settings.service_url.clone(), TokioExecutor)
                .with_connection_retry_options(retry.clone())
                .with_operation_retry_options(operation.clone());
            if let Some(provider) = &oauth2 {
                builder = builder.with_auth_provider(Box::new(provider.clone()));
            }
            if let Some(pem) = &settings.ca_pem {
                builder = builder.with_certificate_chain(pem.clone());
            }
            if let Some(jwt) = &settings.token {
                builder = builder.with_auth(pulsar::Authentication {
                    name: "token".to_owned(),
                    data: jwt.clone().into_bytes(),
                });
            }
            builder.build().await.map_err(|e| {
                let context = format!("connecting to {}", babelqueue_core::redact::redact(url));
                PulsarError::from_client(&context, &e).scrubbed(url)
            })
        };
        // Two clients, so producers and consumers never share a connection (see the
        // `consuming` field).
        let pulsar = build().await?;
        let consuming = build().await?;
        Ok(NativeClient {
            pulsar,
            consuming,
            options,
            producers: Mutex::new(HashMap::new()),
            consumers: Mutex::new(HashMap::new()),
            counts: Counts::default(),
            admin,
        })
    }

    async fn producer(
        &self,
        topic: &str,
    ) -> Result<Arc<Mutex<Producer<TokioExecutor>>>, PulsarError> {
        let mut producers = self.producers.lock().await;
        if let Some(p) = producers.get(topic) {
            return Ok(p.clone());
        }
        let producer = self
            .pulsar
            .producer()
            .with_topic(topic)
            .build()
            .await
            .map_err(|e| {
                PulsarError::from_client(&format!("creating a producer on {topic}"), &e)
            })?;
        let producer = Arc::new(Mutex::new(producer));
        producers.insert(topic.to_owned(), producer.clone());
        Ok(producer)
    }

    async fn consumer(&self, topic: &str) -> Result<mpsc::Sender<Command>, PulsarError> {
        let mut consumers = self.consumers.lock().await;
        if let Some(c) = consumers.get(topic).filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let initial = if self.options.initial_position_earliest {
            InitialPosition::Earliest
        } else {
            InitialPosition::Latest
        };
        let consumer: Consumer<Vec<u8>, TokioExecutor> = self
            .consuming
            .consumer()
            .with_topic(topic)
            .with_subscription(self.options.subscription.clone())
            .with_subscription_type(SubType::Shared)
            .with_options(ConsumerOptions::default().with_initial_position(initial))
            .build()
            .await
            .map_err(|e| PulsarError::from_client(&format!("subscribing to {topic}"), &e))?;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(run_consumer(
            consumer,
            topic.to_owned(),
            self.counts.topic(topic),
            rx,
        ));
        consumers.insert(topic.to_owned(), tx.clone());
        Ok(tx)
    }

    /// Sends one message on the topic's cached producer and waits for the broker's receipt;
    /// `deliver_at_time` (epoch milliseconds) asks for delayed delivery. It is a window of
    /// one ([`send_window`](Self::send_window)): a full outbound queue (many sends in flight at
    /// once) is waited out and the message handed over again; only a queue still full after
    /// `SLOW_DOWN_LIMIT` waits fails the send, as a transient `Timeout`.
    async fn send_message(
        &self,
        topic: &str,
        payload: &[u8],
        properties: Properties,
        deliver_at_time: Option<i64>,
    ) -> Result<(), PulsarError> {
        self.send_window(topic, vec![(payload, properties, deliver_at_time)], 1)
            .await
    }

    /// [`PulsarClient::send_batch`] (and one send) on the topic's cached producer: up to
    /// `window` messages handed to it at once (in order, under its lock), then their receipts
    /// awaited, window after window ([`crate::window::send`], tested offline). When the
    /// connection's outbound queue is full (the client's `SlowDown`, shared with every producer
    /// and consumer on the connection) the receipts in flight are awaited and the message is
    /// handed over again, in its place. Any other refusal ends the batch (the producer is
    /// dropped from the cache, so the next send builds a fresh one); the receipts already in
    /// flight are still awaited.
    async fn send_window(
        &self,
        topic: &str,
        messages: Vec<(&[u8], Properties, Option<i64>)>,
        window: usize,
    ) -> Result<(), PulsarError> {
        use pulsar::error::{ConnectionError, ProducerError};
        for (payload, _, _) in &messages {
            crate::projection::check_size(topic, payload.len())?;
        }
        let producer = self.producer(topic).await?;
        let failed =
            |e: pulsar::Error| PulsarError::from_client(&format!("sending to {topic}"), &e);
        let (producer, messages, failed) = (&producer, &messages, &failed);
        crate::window::send(
            messages.len(),
            window,
            SLOW_DOWN_LIMIT,
            |i| async move {
                let (payload, properties, deliver_at_time) = &messages[i];
                let message = pulsar::producer::Message {
                    payload: payload.to_vec(),
                    properties: properties
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    deliver_at_time: *deliver_at_time,
                    ..Default::default()
                };
                match producer.lock().await.send_non_blocking(message).await {
                    Ok(receipt) => {
                        Handed::Sent(receipt.map(move |r| r.map(|_| ()).map_err(failed)))
                    }
                    Err(pulsar::Error::Producer(ProducerError::Connection(
                        ConnectionError::SlowDown,
                    ))) => Handed::Full,
                    Err(e) => {
                        self.producers.lock().await.remove(topic);
                        Handed::Failed(failed(e))
                    }
                }
            },
            || {
                failed(pulsar::Error::Producer(ProducerError::Connection(
                    ConnectionError::SlowDown,
                )))
            },
        )
        .await
    }

    async fn ask<T>(
        &self,
        topic: &str,
        make: impl FnOnce(oneshot::Sender<Result<T, PulsarError>>) -> Command,
    ) -> Result<T, PulsarError> {
        let consumer = self.consumer(topic).await?;
        let (reply, answer) = oneshot::channel();
        consumer
            .send(make(reply))
            .await
            .map_err(|_| PulsarError::Connection(format!("the consumer of {topic} stopped")))?;
        answer
            .await
            .map_err(|_| PulsarError::Connection(format!("the consumer of {topic} stopped")))?
    }
}

#[async_trait]
impl PulsarClient for NativeClient {
    async fn send(
        &self,
        topic: &str,
        payload: &[u8],
        properties: Properties,
    ) -> Result<(), PulsarError> {
        self.send_message(topic, payload, properties, None).await
    }

    async fn send_batch(
        &self,
        topic: &str,
        messages: Vec<(&[u8], Properties)>,
    ) -> Result<(), PulsarError> {
        let messages = messages.into_iter().map(|(p, props)| (p, props, None));
        self.send_window(topic, messages.collect(), SEND_WINDOW)
            .await
    }

    async fn send_at(
        &self,
        topic: &str,
        payload: &[u8],
        properties: Properties,
        deliver_at: SystemTime,
    ) -> Result<(), PulsarError> {
        let millis = deliver_at
            .duration_since(UNIX_EPOCH)
            .ok()
            // rounded up, so the broker never releases the message before `deliver_at`
            .map(|d| d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0))
            .and_then(|ms| i64::try_from(ms).ok())
            .ok_or_else(|| {
                PulsarError::Config(format!(
                    "a delivery time of {deliver_at:?} cannot be sent to Pulsar (epoch milliseconds)"
                ))
            })?;
        self.send_message(topic, payload, properties, Some(millis))
            .await
    }

    async fn receive(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<Option<Received>, PulsarError> {
        Ok(self.receive_many(topic, 1, timeout).await?.pop())
    }

    /// One request to the consumer's task: it answers with the first message and whatever
    /// else its receiver queue already holds, up to `max`.
    async fn receive_many(
        &self,
        topic: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Received>, PulsarError> {
        let max = max.max(1);
        let result = self
            .ask(topic, |reply| Command::Receive {
                max,
                timeout,
                reply,
            })
            .await;
        if matches!(&result, Err(e) if e.is_transient()) {
            self.consumers.lock().await.remove(topic);
        }
        result
    }

    async fn ack(&self, message: &MessageRef) -> Result<(), PulsarError> {
        let id = message.id.clone();
        self.ask(&message.topic, |reply| Command::Ack { id, reply })
            .await
    }

    /// One request per topic to the consumer's task, which hands every ack to the consumer
    /// engine without waiting between them.
    async fn ack_many(&self, messages: &[MessageRef]) -> Result<(), PulsarError> {
        let mut by_topic: Vec<(&str, Vec<String>)> = Vec::new();
        for message in messages {
            match by_topic.iter_mut().find(|(t, _)| *t == message.topic) {
                Some((_, ids)) => ids.push(message.id.clone()),
                None => by_topic.push((&message.topic, vec![message.id.clone()])),
            }
        }
        let mut first_error = None;
        for (topic, ids) in by_topic {
            if let Err(e) = self
                .ask(topic, |reply| Command::AckMany { ids, reply })
                .await
            {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn nack(&self, message: &MessageRef) -> Result<(), PulsarError> {
        let id = message.id.clone();
        self.ask(&message.topic, |reply| Command::Nack { id, reply })
            .await
    }

    fn can_browse(&self) -> bool {
        self.admin.is_some()
    }

    async fn browse(&self, topic: &str, max: usize) -> Result<Vec<Vec<u8>>, PulsarError> {
        match &self.admin {
            Some(admin) => admin.browse(topic, max).await,
            None => Err(PulsarError::Config(format!(
                "browsing {topic} needs the admin URL (PulsarOptions::admin_url or {ADMIN_URL_ENV})"
            ))),
        }
    }

    async fn subscription_stats(
        &self,
        topic: &str,
    ) -> Result<Option<crate::stats::SubscriptionStats>, PulsarError> {
        match &self.admin {
            Some(admin) => crate::stats::subscription_stats(admin, topic).await,
            None => Err(PulsarError::Config(format!(
                "the stats of {topic} need the admin URL (PulsarOptions::admin_url or {ADMIN_URL_ENV})"
            ))),
        }
    }

    async fn close(&self) -> Result<(), PulsarError> {
        let consumers: Vec<_> = self.consumers.lock().await.drain().collect();
        for (_, consumer) in consumers {
            let (reply, answer) = oneshot::channel();
            if consumer.send(Command::Close { reply }).await.is_ok() {
                let _ = answer.await;
            }
        }
        let producers: Vec<_> = self.producers.lock().await.drain().collect();
        for (topic, producer) in producers {
            if let Err(e) = producer.lock().await.close().await {
                tracing::debug!(target: "babelqueue::pulsar", topic, error = %e, "closing a producer failed");
            }
        }
        Ok(())
    }
}

type Reply<T> = oneshot::Sender<Result<T, PulsarError>>;

enum Command {
    Receive {
        max: usize,
        timeout: Duration,
        reply: Reply<Vec<Received>>,
    },
    Ack {
        id: String,
        reply: Reply<()>,
    },
    AckMany {
        ids: Vec<String>,
        reply: Reply<()>,
    },
    Nack {
        id: String,
        reply: Reply<()>,
    },
    Close {
        reply: Reply<()>,
    },
}

fn id_text(id: &MessageIdData) -> String {
    format!(
        "{}:{}:{}:{}",
        id.ledger_id,
        id.entry_id,
        id.partition.unwrap_or(-1),
        id.batch_index.unwrap_or(-1)
    )
}

/// Hands `message` out: counts its delivery (the redelivery count the `pulsar` crate does not
/// expose) and keeps its id in flight until it is acknowledged or nacked.
fn take(
    topic: &str,
    message: pulsar::consumer::Message<Vec<u8>>,
    counts: &Shared,
    in_flight: &mut HashMap<String, MessageIdData>,
) -> Received {
    let id = id_text(&message.message_id.id);
    let counted = counts.lock().delivered(&id);
    if counted.forgotten > 0 {
        tracing::warn!(target: "babelqueue::pulsar", topic, "forgetting {} redelivery counts of messages handed out but never acknowledged here", counted.forgotten);
    }
    let redelivery_count = counted.redelivery_count;
    in_flight.insert(id.clone(), message.message_id.id.clone());
    let properties = message
        .payload
        .metadata
        .properties
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect();
    Received {
        payload: message.payload.data,
        properties,
        redelivery_count,
        id: MessageRef {
            topic: topic.to_owned(),
            id,
        },
        metadata: Metadata::of(message.payload.metadata),
    }
}

/// Owns one consumer: answers receive, ack and nack requests in turn, polling the stream only
/// while a receive is waiting. It counts each message id it hands out in the client's `counts`
/// of the topic (the redelivery count the `pulsar` crate does not expose).
async fn run_consumer(
    mut consumer: Consumer<Vec<u8>, TokioExecutor>,
    topic: String,
    counts: Shared,
    mut commands: mpsc::Receiver<Command>,
) {
    let mut waiting: Option<(Instant, usize, Reply<Vec<Received>>)> = None;
    let mut in_flight: HashMap<String, MessageIdData> = HashMap::new();
    loop {
        let deadline = waiting.as_ref().map_or_else(Instant::now, |(d, _, _)| *d);
        tokio::select! {
            biased;
            command = commands.recv() => match command {
                None => break,
                Some(Command::Receive { max, timeout, reply }) => {
                    if let Some((_, _, earlier)) = waiting.take() {
                        let _ = earlier.send(Ok(Vec::new()));
                    }
                    waiting = Some((Instant::now() + timeout, max, reply));
                }
                Some(Command::Ack { id, reply }) => {
                    let result = match in_flight.remove(&id) {
                        Some(message_id) => {
                            counts.lock().acknowledged(&id);
                            consumer
                                .ack_with_id(&topic, message_id)
                                .await
                                .map_err(|e| PulsarError::from_client(&format!("acknowledging on {topic}"), &pulsar::Error::Consumer(e)))
                        }
                        None => Err(PulsarError::ForeignDelivery(format!("{id} is not in flight on {topic}"))),
                    };
                    let _ = reply.send(result);
                }
                Some(Command::AckMany { ids, reply }) => {
                    let mut result = Ok(());
                    for id in ids {
                        let outcome = match in_flight.remove(&id) {
                            Some(message_id) => {
                                counts.lock().acknowledged(&id);
                                consumer
                                    .ack_with_id(&topic, message_id)
                                    .await
                                    .map_err(|e| PulsarError::from_client(&format!("acknowledging on {topic}"), &pulsar::Error::Consumer(e)))
                            }
                            None => Err(PulsarError::ForeignDelivery(format!("{id} is not in flight on {topic}"))),
                        };
                        if let (Ok(()), Err(e)) = (&result, outcome) {
                            result = Err(e);
                        }
                    }
                    let _ = reply.send(result);
                }
                Some(Command::Nack { id, reply }) => {
                    let result = match in_flight.remove(&id) {
                        Some(message_id) => consumer
                            .nack_with_id(&topic, message_id)
                            .await
                            .map_err(|e| PulsarError::from_client(&format!("negatively acknowledging on {topic}"), &pulsar::Error::Consumer(e))),
                        None => Err(PulsarError::ForeignDelivery(format!("{id} is not in flight on {topic}"))),
                    };
                    let _ = reply.send(result);
                }
                Some(Command::Close { reply }) => {
                    if let Some((_, _, earlier)) = waiting.take() {
                        let _ = earlier.send(Ok(Vec::new()));
                    }
                    let result = consumer
                        .close()
                        .await
                        .map_err(|e| PulsarError::from_client(&format!("closing the consumer of {topic}"), &e));
                    let _ = reply.send(result);
                    return;
                }
            },
            next = consumer.next(), if waiting.is_some() => {
                let Some((_, max, reply)) = waiting.take() else { continue };
                match next {
                    Some(Ok(message)) => {
                        let mut batch = vec![take(&topic, message, &counts, &mut in_flight)];
                        // Then what the receiver queue already holds, without waiting.
                        while batch.len() < max {
                            match consumer.next().now_or_never() {
                                Some(Some(Ok(message))) => {
                                    batch.push(take(&topic, message, &counts, &mut in_flight));
                                }
                                Some(Some(Err(e))) => {
                                    tracing::warn!(target: "babelqueue::pulsar", topic, error = %e, "receiving failed after a batch's first message; handing out what came");
                                    break;
                                }
                                Some(None) | None => break,
                            }
                        }
                        let _ = reply.send(Ok(batch));
                    }
                    Some(Err(e)) => {
                        let _ = reply.send(Err(PulsarError::from_client(&format!("receiving from {topic}"), &e)));
                    }
                    None => {
                        let _ = reply.send(Err(PulsarError::Connection(format!("the consumer stream of {topic} ended"))));
                        return;
                    }
                }
            }
            () = tokio::time::sleep_until(deadline), if waiting.is_some() => {
                if let Some((_, _, reply)) = waiting.take() {
                    let _ = reply.send(Ok(Vec::new()));
                }
            }
        }
    }
}
