//! The librdkafka producer ([`RdProducer`]): records written in a window of delivery reports,
//! confirmed, and a delivery timeout explained by too few in-sync replicas.

use super::*;

/// Records written and not confirmed yet: each one's place in its batch, its topic and its
/// delivery report to come.
type Pending = std::collections::VecDeque<(usize, Arc<str>, rdkafka::producer::DeliveryFuture)>;

/// The librdkafka producer.
pub(crate) struct RdProducer {
    pub(super) producer: FutureProducer<RdContext>,
    pub(super) auth: Arc<AuthWatch>,
    /// With acks=all: what explains a delivery timeout by too few in-sync replicas.
    pub(super) isr: Option<crate::isr::IsrCheck>,
}

impl fmt::Debug for RdProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdProducer").finish_non_exhaustive()
    }
}

/// The librdkafka record for `record` (it borrows the topic, key, value and headers).
fn future_record(record: &OutRecord) -> FutureRecord<'_, [u8], [u8]> {
    let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
    for h in &record.headers {
        headers = headers.insert(Header {
            key: &h.key,
            value: h.value.as_deref(),
        });
    }
    let mut future = FutureRecord::<[u8], [u8]>::to(&record.topic)
        .payload(&record.value)
        .headers(headers);
    if let Some(key) = record.key.as_deref() {
        // An empty slice is an empty key, not a null one.
        future = future.key(key);
    }
    if let Some(ts) = record.timestamp {
        future = future.timestamp(ts);
    }
    future
}

impl RdProducer {
    /// What a delivery report (or its absence within `timeout`) means for a record of `topic`.
    fn outcome(
        &self,
        topic: &str,
        timeout: Duration,
        report: Result<rdkafka::producer::future_producer::OwnedDeliveryResult, ()>,
    ) -> Result<(), KafkaError> {
        match report {
            Err(()) => Err(KafkaError::DeliveryTimeout {
                topic: topic.to_owned(),
                timeout,
            }),
            Ok(Ok(_)) => {
                self.auth.accepted();
                Ok(())
            }
            Ok(Err((source, _))) => Err(self.auth.explain(KafkaError::delivery(topic, source))),
        }
    }

    /// Queues `record` in librdkafka without waiting for its report; when librdkafka's own
    /// queue is full, waits for the oldest report of `pending` (and records its outcome) first.
    async fn enqueue(
        &self,
        record: &OutRecord,
        timeout: Duration,
        pending: &mut Pending,
        outcomes: &mut [Option<Result<(), KafkaError>>],
    ) -> Result<rdkafka::producer::DeliveryFuture, KafkaError> {
        // The clock is read only once librdkafka's queue is full (never, mostly).
        let mut started = None;
        let mut future = future_record(record);
        loop {
            match self.producer.send_result(future) {
                Ok(delivery) => return Ok(delivery),
                Err((RdError::MessageProduction(code), back))
                    if code == rdkafka::types::RDKafkaErrorCode::QueueFull
                        && started
                            .get_or_insert_with(tokio::time::Instant::now)
                            .elapsed()
                            < timeout =>
                {
                    future = back;
                    match pending.pop_front() {
                        Some((n, of, oldest)) => {
                            outcomes[n] = Some(self.settled(&of, timeout, oldest).await);
                        }
                        None => tokio::time::sleep(Duration::from_millis(5)).await,
                    }
                }
                Err((source, _)) => {
                    return Err(self
                        .auth
                        .explain(KafkaError::delivery(record.topic.as_str(), source)));
                }
            }
        }
    }

    /// Writes the `count` records of `records` in order with up to [`PRODUCE_WINDOW`] reports
    /// outstanding (see [`KafkaProducer::send_many`]); each record is dropped as soon as
    /// librdkafka holds its copy.
    async fn write_all(
        &self,
        count: usize,
        records: impl Iterator<Item = OutRecord> + Send,
        timeout: Duration,
    ) -> Vec<Result<(), KafkaError>> {
        let mut outcomes: Vec<Option<Result<(), KafkaError>>> =
            std::iter::repeat_with(|| None).take(count).collect();
        let mut pending: Pending = std::collections::VecDeque::with_capacity(PRODUCE_WINDOW);
        // The topic of the records in flight, shared while it stays the same.
        let mut topic: Option<Arc<str>> = None;
        for (n, record) in records.take(count).enumerate() {
            if let Some(refused) = self.auth.current().or_else(|| self.auth.unreachable_now()) {
                outcomes[n] = Some(Err(refused));
                continue;
            }
            if pending.len() >= PRODUCE_WINDOW
                && let Some((m, of, oldest)) = pending.pop_front()
            {
                outcomes[m] = Some(self.settled(&of, timeout, oldest).await);
            }
            let shared = match &topic {
                Some(same) if **same == *record.topic => same.clone(),
                _ => topic.insert(Arc::from(record.topic.as_str())).clone(),
            };
            match self
                .enqueue(&record, timeout, &mut pending, &mut outcomes)
                .await
            {
                Ok(delivery) => pending.push_back((n, shared, delivery)),
                Err(e) => outcomes[n] = Some(Err(e)),
            }
        }
        while let Some((m, of, delivery)) = pending.pop_front() {
            outcomes[m] = Some(self.settled(&of, timeout, delivery).await);
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| Err(KafkaError::Config("a record was never written".into())))
            })
            .collect()
    }

    /// `outcome`, a timeout explained by too few in-sync replicas where that is the reason
    /// (acks=all only; see [`crate::isr`]).
    async fn explained(&self, outcome: Result<(), KafkaError>) -> Result<(), KafkaError> {
        match (outcome, &self.isr) {
            (Err(e), Some(isr)) => Err(isr.explain(&self.producer, e).await),
            (outcome, _) => outcome,
        }
    }

    /// Waits (up to `timeout`) for one delivery report.
    async fn settled(
        &self,
        topic: &str,
        timeout: Duration,
        mut delivery: rdkafka::producer::DeliveryFuture,
    ) -> Result<(), KafkaError> {
        use futures_util::FutureExt as _;
        // A report already in is the outcome: no timer, no watch (most reports of a window
        // are in by the time their turn comes).
        if let Some(report) = (&mut delivery).now_or_never() {
            let outcome = self.outcome(topic, timeout, report.map_err(|_| ()));
            return self.explained(outcome).await;
        }
        // As in `send`: a broker never reached is said at once, the record stays unconfirmed.
        let down = self.auth.unreachable.subscribe();
        if let Some(unreachable) = self.auth.unreachable_now() {
            return Err(unreachable);
        }
        let report = tokio::select! {
            report = tokio::time::timeout(timeout, delivery) => report,
            unreachable = self.auth.next_unreachable(down) => return Err(unreachable),
        };
        let report = match report {
            Ok(Ok(report)) => Ok(report),
            // Timed out, or librdkafka dropped the report (the producer is going away).
            Ok(Err(_)) | Err(_) => Err(()),
        };
        let outcome = self.outcome(topic, timeout, report);
        self.explained(outcome).await
    }
}

#[async_trait]
impl KafkaProducer for RdProducer {
    async fn send(&self, record: OutRecord, timeout: Duration) -> Result<(), KafkaError> {
        let future = future_record(&record);
        // Credentials refused a moment ago: nothing is written (librdkafka would hold the
        // record until the delivery timeout and then drop it).
        let changes = self.auth.subscribe();
        let down = self.auth.unreachable.subscribe();
        if let Some(refused) = self.auth.current() {
            return Err(refused);
        }
        // No broker ever answered and every one is down: say so now, not at the timeout.
        if let Some(unreachable) = self.auth.unreachable_now() {
            return Err(unreachable);
        }
        let delivery = tokio::time::timeout(timeout, self.producer.send(future, timeout));
        let result = tokio::select! {
            result = delivery => result,
            // Refused while waiting: the record stays queued in librdkafka and is dropped
            // when its delivery timeout passes (an unconfirmed write, as after a timeout).
            refused = self.auth.next_refusal(changes) => return Err(refused),
            unreachable = self.auth.next_unreachable(down) => return Err(unreachable),
        };
        let outcome = self.outcome(&record.topic, timeout, result.map_err(|_| ()));
        self.explained(outcome).await
    }

    /// Every record goes into librdkafka's queue in order, up to [`PRODUCE_WINDOW`] without a
    /// report; then the oldest report is awaited before the next record goes in. Each record
    /// gets its own outcome; refused credentials fail every record not yet written.
    async fn send_many(
        &self,
        records: Vec<OutRecord>,
        timeout: Duration,
    ) -> Vec<Result<(), KafkaError>> {
        self.write_all(records.len(), records.into_iter(), timeout)
            .await
    }

    /// As `send_many`, each record made when its turn comes and dropped once librdkafka holds
    /// its copy.
    async fn send_made(
        &self,
        count: usize,
        make: &(dyn Fn(usize) -> OutRecord + Send + Sync),
        timeout: Duration,
    ) -> Vec<Result<(), KafkaError>> {
        self.write_all(count, (0..count).map(make), timeout).await
    }

    async fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        let producer = self.producer.clone();
        // No broker was ever reached and every one is down: the records still queued were
        // already reported unreachable to their callers, and nothing can take them now; drop
        // them (never one in flight) instead of waiting out their delivery timeout.
        if self.auth.unreachable_now().is_some() {
            producer.purge(rdkafka::producer::PurgeConfig::default().queue());
        }
        tokio::task::spawn_blocking(move || producer.flush(timeout))
            .await
            .map_err(|e| KafkaError::Config(format!("the flush task failed: {e}")))?
            .map_err(KafkaError::client("flush the producer"))
    }
}
