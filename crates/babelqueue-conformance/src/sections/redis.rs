//! The Redis sections: `redis_delay` and the key names of `redis_layout` (pure), `redis`
//! (payload identity) and the behavioural `redis_layout` blocks against a live Redis
//! (`BQ_REDIS_URL`, default `redis://127.0.0.1:6379`), with the transport's clock pinned to each
//! step's `now`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use babelqueue_core::classify::{Class, classify};
use babelqueue_core::{
    App, Context, Delivery, HandlerError, Outgoing, Redeliver, Redelivery, Transport,
};
use babelqueue_transport_redis::fred::interfaces::{
    KeysInterface, ListInterface, SortedSetsInterface,
};
use babelqueue_transport_redis::fred::types::Value as FredValue;
use babelqueue_transport_redis::scripts::LuaScript;
use babelqueue_transport_redis::{
    FredClient, Layout, RedisClient, RedisOptions, RedisTransport, Reply, layout,
};
use serde_json::Value;

use super::{Ctx, str_field};
use crate::Case;
use crate::check::strict_equal;
use crate::hop::block_on;

fn redis_url() -> String {
    std::env::var("BQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

async fn connect() -> Result<FredClient, String> {
    let url = redis_url();
    let shown = babelqueue_core::redact::redact(&url);
    tokio::time::timeout(Duration::from_secs(5), FredClient::connect(&url))
        .await
        .map_err(|_| {
            format!("no Redis reachable at {shown} (start it: scripts/brokers.sh up redis)")
        })?
        .map_err(|e| format!("no Redis reachable at {shown}: {e}"))
}

pub(super) fn redis_delay(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let num = |k: &str| {
        c.get(k)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("no number `{k}`"))
    };
    let got = layout::available_at(num("now")?, num("delay")?);
    let want = c
        .get("expect_score")
        .and_then(Value::as_i64)
        .ok_or("no expect_score")?;
    if got == want {
        Ok(())
    } else {
        Err(format!("score {got}, expected {want}"))
    }
}

/// Records every command's keys; answers the reserve script with one delivered job.
#[derive(Debug, Default)]
struct Recorder(std::sync::Mutex<Vec<(&'static str, Vec<String>)>>);

#[async_trait]
impl RedisClient for Recorder {
    async fn eval(
        &self,
        script: &'static LuaScript,
        keys: Vec<Vec<u8>>,
        _args: Vec<Vec<u8>>,
    ) -> Result<Reply, babelqueue_transport_redis::RedisError> {
        let keys = keys
            .into_iter()
            .map(|k| String::from_utf8_lossy(&k).into_owned())
            .collect();
        self.0.lock().unwrap().push((script.name, keys));
        Ok(match script.name {
            "reserve_zset" => Reply::Array(vec![
                Reply::Bytes(br#"{"job":"urn:x","attempts":0}"#.to_vec()),
                Reply::Bytes(br#"{"job":"urn:x","attempts":1}"#.to_vec()),
            ]),
            _ => Reply::Int(1),
        })
    }
    async fn rpush(
        &self,
        key: &[u8],
        _v: &[u8],
    ) -> Result<(), babelqueue_transport_redis::RedisError> {
        self.0
            .lock()
            .unwrap()
            .push(("rpush", vec![String::from_utf8_lossy(key).into_owned()]));
        Ok(())
    }
    async fn zadd(
        &self,
        key: &[u8],
        _s: i64,
        _m: &[u8],
    ) -> Result<(), babelqueue_transport_redis::RedisError> {
        self.0
            .lock()
            .unwrap()
            .push(("zadd", vec![String::from_utf8_lossy(key).into_owned()]));
        Ok(())
    }
    async fn zrem(
        &self,
        key: &[u8],
        _m: &[u8],
    ) -> Result<i64, babelqueue_transport_redis::RedisError> {
        self.0
            .lock()
            .unwrap()
            .push(("zrem", vec![String::from_utf8_lossy(key).into_owned()]));
        Ok(1)
    }
    async fn lrange(
        &self,
        _k: &[u8],
        _a: i64,
        _b: i64,
    ) -> Result<Vec<Vec<u8>>, babelqueue_transport_redis::RedisError> {
        Ok(Vec::new())
    }
    async fn blpop(
        &self,
        _k: &[u8],
        _t: Duration,
    ) -> Result<(), babelqueue_transport_redis::RedisError> {
        Ok(())
    }
    async fn quit(&self) -> Result<(), babelqueue_transport_redis::RedisError> {
        Ok(())
    }
}

fn key_names(case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    let queue = str_field(c, "queue")?;
    let prefix = str_field(c, "key_prefix")?;
    let expect = c.get("expect").ok_or("no expect")?;
    let recorder = Arc::new(Recorder::default());
    let options = RedisOptions {
        layout: Layout::Laravel,
        prefix: prefix.to_owned(),
        ..RedisOptions::default()
    };
    let transport = RedisTransport::with_client(recorder.clone(), options);
    block_on(async {
        transport
            .publish(queue, b"{}")
            .await
            .map_err(|e| e.to_string())?;
        let delivery = transport
            .pop(queue, Duration::ZERO)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no delivery")?;
        let Redelivery::Native(redeliverer) = transport.capabilities().redelivery_mode() else {
            return Err("no native redelivery".to_owned());
        };
        redeliverer
            .redeliver(&delivery, Redeliver::new(b"{}", Some(1), None))
            .await
            .map_err(|e| e.to_string())
    })?;
    let calls = recorder.0.lock().unwrap().clone();
    let keys_of = |name: &str| {
        calls
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| k.clone())
            .unwrap_or_default()
    };
    let want = |k: &str| {
        expect
            .get(k)
            .and_then(Value::as_str)
            .map(String::from)
            .ok_or(format!("no expect.{k}"))
    };
    let push = keys_of("push");
    let release = keys_of("release_zset");
    let reserve = keys_of("reserve_zset");
    let pairs = [
        ("ready (publish KEYS[1])", push.first(), want("ready")?),
        ("notify (publish KEYS[2])", push.get(1), want("notify")?),
        (
            "delayed (release KEYS[1])",
            release.first(),
            want("delayed")?,
        ),
        (
            "reserved (release KEYS[2])",
            release.get(1),
            want("reserved")?,
        ),
        (
            "reserved (reserve KEYS[2])",
            reserve.get(1),
            want("reserved")?,
        ),
    ];
    for (what, got, want) in pairs {
        if got != Some(&want) {
            return Err(format!("{what} is {got:?}, expected {want:?}"));
        }
    }
    Ok(())
}

pub(super) fn redis(ctx: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    let fixture = ctx.fixture(case.value, "envelope_file")?;
    block_on(async {
        let client = Arc::new(connect().await?);
        let queue = format!("bq-conf-{:016x}", fastrand::u64(..));
        let transport = RedisTransport::with_client(client.clone(), RedisOptions::default());
        let result = async {
            transport
                .publish(&queue, &fixture)
                .await
                .map_err(|e| e.to_string())?;
            let stored: Vec<Vec<u8>> = client
                .raw()
                .lrange(queue.as_str(), 0, -1)
                .await
                .map_err(|e| e.to_string())?;
            if stored != vec![fixture.clone()] {
                return Err(format!(
                    "the list holds {} element(s), not the fixture byte for byte",
                    stored.len()
                ));
            }
            let delivery = transport
                .pop(&queue, Duration::ZERO)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("nothing reserved")?;
            if delivery.body() != fixture.as_slice() {
                return Err("the reserved body differs from the published bytes".into());
            }
            transport.ack(&delivery).await.map_err(|e| e.to_string())
        }
        .await;
        purge(&client, &transport, &queue).await;
        result
    })
}

async fn purge(client: &FredClient, transport: &RedisTransport, queue: &str) {
    let o = transport.options();
    let keys = [
        o.ready(queue),
        o.processing(queue),
        o.deadlines(queue),
        o.delayed(queue),
        o.reserved(queue),
        o.notify(queue),
        format!("{queue}.dlq"),
        o.ready(&format!("{queue}.dlq")),
    ];
    for key in keys {
        let _: Result<i64, _> = client.raw().del(key).await;
    }
}

/// What a reserve step saw: the handler body, the route, and the reservation handle.
/// What a reserve step saw: the handler body, whether the runtime classifies it as poison, and
/// the reserved member.
type Reserved = (Vec<u8>, bool, Vec<u8>);

struct Scenario {
    client: Arc<FredClient>,
    transport: RedisTransport,
    queue: String,
    clock: Arc<AtomicU64>,
    held: HashMap<String, Delivery>,
}

fn score_of(value: &Value) -> Result<f64, String> {
    match value {
        Value::String(s) if s == "+inf" => Ok(f64::INFINITY),
        other => other.as_f64().ok_or_else(|| format!("bad score {other}")),
    }
}

fn entry_matches(member: &[u8], score: f64, want: &Value) -> Result<bool, String> {
    if score != score_of(want.get("score").ok_or("entry without score")?)? {
        return Ok(false);
    }
    if let Some(m) = want.get("member").and_then(Value::as_str) {
        return Ok(member == m.as_bytes());
    }
    if let Some(token) = want.get("token").and_then(Value::as_str) {
        let raw = want
            .get("raw")
            .and_then(Value::as_str)
            .ok_or("token without raw")?;
        if token == "<any>" {
            return Ok(member.len() == 33 + raw.len()
                && member[..32]
                    .iter()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
                && member[32] == b':'
                && &member[33..] == raw.as_bytes());
        }
        return Ok(member == format!("{token}:{raw}").as_bytes());
    }
    let expected = want
        .get("member_json")
        .or_else(|| want.get("body_json"))
        .ok_or("entry without member")?;
    Ok(serde_json::from_slice::<Value>(member).is_ok_and(|got| strict_equal(&got, expected)))
}

impl Scenario {
    fn key(&self, name: &str) -> String {
        let o = self.transport.options();
        match name {
            "ready" => o.ready(&self.queue),
            "delayed" => o.delayed(&self.queue),
            "reserved" => o.reserved(&self.queue),
            "notify" => o.notify(&self.queue),
            "processing" => o.processing(&self.queue),
            "deadlines" => o.deadlines(&self.queue),
            other => other.to_owned(),
        }
    }

    async fn zrange(&self, key: &str) -> Result<Vec<(Vec<u8>, f64)>, String> {
        let raw: Vec<FredValue> = self
            .client
            .raw()
            .zrange(key, 0, -1, None, false, None, true)
            .await
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        let mut it = raw.into_iter().flat_map(|v| match v {
            FredValue::Array(items) => items,
            other => vec![other],
        });
        while let (Some(member), Some(score)) = (it.next(), it.next()) {
            let member = match member {
                FredValue::Bytes(b) => b.to_vec(),
                FredValue::String(s) => s.as_bytes().to_vec(),
                other => return Err(format!("zrange member {other:?}")),
            };
            let score = match score {
                FredValue::Double(d) => d,
                FredValue::Integer(n) => n as f64,
                FredValue::String(s) => {
                    if s.as_bytes() == b"inf" {
                        f64::INFINITY
                    } else {
                        s.parse::<f64>().map_err(|e| e.to_string())?
                    }
                }
                FredValue::Bytes(b) => {
                    let s = String::from_utf8_lossy(&b);
                    if s == "inf" {
                        f64::INFINITY
                    } else {
                        s.parse::<f64>().map_err(|e| e.to_string())?
                    }
                }
                other => return Err(format!("zrange score {other:?}")),
            };
            out.push((member, score));
        }
        Ok(out)
    }

    async fn lrange(&self, key: &str) -> Result<Vec<Vec<u8>>, String> {
        self.client
            .raw()
            .lrange(key, 0, -1)
            .await
            .map_err(|e| e.to_string())
    }

    async fn llen(&self, key: &str) -> Result<i64, String> {
        self.client.raw().llen(key).await.map_err(|e| e.to_string())
    }

    async fn seed(&self, state: &Value) -> Result<(), String> {
        let raw = self.client.raw();
        for (name, list) in [("ready", "ready"), ("processing", "processing")] {
            for member in state
                .get(name)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let m = member.as_str().ok_or("non-string member")?;
                let _: i64 = raw
                    .rpush(self.key(list), m)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        for name in ["delayed", "reserved", "deadlines"] {
            for entry in state
                .get(name)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let member = match entry.get("member").and_then(Value::as_str) {
                    Some(m) => m.to_owned(),
                    None => format!(
                        "{}:{}",
                        str_field(entry, "token")?,
                        str_field(entry, "raw")?
                    ),
                };
                let score = score_of(entry.get("score").ok_or("no score")?)?;
                let _: FredValue = raw
                    .zadd(self.key(name), None, None, false, false, (score, member))
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        if let Some(generate) = state.get("delayed_generate") {
            let count = generate
                .get("count")
                .and_then(Value::as_u64)
                .ok_or("no count")?;
            let pattern = str_field(generate, "member")?;
            let score = score_of(generate.get("score").ok_or("no score")?)?;
            for i in 0..count {
                let member = pattern.replace("%03d", &format!("{i:03}"));
                let _: FredValue = raw
                    .zadd(
                        self.key("delayed"),
                        None,
                        None,
                        false,
                        false,
                        (score, member),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        for _ in 0..state.get("notify").and_then(Value::as_u64).unwrap_or(0) {
            let _: i64 = raw
                .rpush(self.key("notify"), "1")
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The delivery a step names: a held reservation (taken out: each is settled once), or an
    /// explicit `{token, raw}` reliable-layout reservation.
    fn reservation(&mut self, reference: &Value) -> Result<Delivery, String> {
        match reference {
            Value::String(name) => self
                .held
                .remove(name)
                .ok_or_else(|| format!("reservation {name:?} is not held")),
            other => Ok(self.transport.reservation(
                &self.queue,
                str_field(other, "token")?,
                str_field(other, "raw")?.as_bytes(),
            )),
        }
    }

    /// The runtime's retry path for one reservation: a handler that fails, a back-off of exactly
    /// `delay`, an unreachable max_attempts; the runtime builds the body and calls the
    /// transport's release.
    async fn release(&self, delivery: Delivery, delay: f64) -> Result<(), String> {
        let app = App::builder(self.transport.clone())
            .queue(self.queue.clone())
            .max_attempts(i64::MAX)
            .retry_backoff(Duration::from_secs_f64(delay.max(0.0)))
            .handle_any(|_ctx: Context| async {
                Err::<(), _>(HandlerError::new("conformance: release"))
            })
            .build()
            .map_err(|e| e.to_string())?;
        let outcome = app.dispatch(delivery).await;
        if outcome == babelqueue_core::Outcome::Retried {
            Ok(())
        } else {
            Err(format!("the runtime settled the release as {outcome:?}"))
        }
    }

    async fn step(&mut self, step: &Value) -> Result<Option<Option<Reserved>>, String> {
        let now = step
            .get("now")
            .and_then(Value::as_f64)
            .ok_or("step without now")?;
        self.clock.store(now.to_bits(), Ordering::SeqCst);
        match str_field(step, "op")? {
            "reserve" => {
                let delivery = self
                    .transport
                    .pop(&self.queue, Duration::ZERO)
                    .await
                    .map_err(|e| e.to_string())?;
                let seen = delivery.as_ref().map(|d| {
                    (
                        d.body().to_vec(),
                        matches!(classify(d.body(), d.facts(), d.queue()), Class::Poison(_)),
                        RedisTransport::reservation_of(d)
                            .unwrap_or_default()
                            .to_vec(),
                    )
                });
                if let (Some(name), Some(d)) = (step.get("as").and_then(Value::as_str), delivery) {
                    self.held.insert(name.to_owned(), d);
                }
                return Ok(Some(seen));
            }
            "push_delayed" => {
                let delay = step
                    .get("delay")
                    .and_then(Value::as_f64)
                    .ok_or("no delay")?;
                let body = str_field(step, "body")?;
                if !self.transport.capabilities().send_parts().delay {
                    return Err("no delayed publish in this layout".into());
                }
                let delay = Duration::from_secs_f64(delay.max(0.0));
                self.transport
                    .send(&Outgoing::new(&self.queue, body.as_bytes()).delay(delay))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            "migrate" => {
                self.transport
                    .migrate(&self.queue)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            "sweep" => {
                self.transport
                    .sweep(&self.queue)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            "release" => {
                let delivery =
                    self.reservation(step.get("reservation").ok_or("no reservation")?)?;
                let delay = step.get("delay").and_then(Value::as_f64).unwrap_or(0.0);
                self.release(delivery, delay).await?;
            }
            "ack" => {
                let delivery =
                    self.reservation(step.get("reservation").ok_or("no reservation")?)?;
                self.transport
                    .ack(&delivery)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            "dead_letter" => {
                let delivery =
                    self.reservation(step.get("reservation").ok_or("no reservation")?)?;
                let capabilities = self.transport.capabilities();
                let writer = capabilities
                    .dead_letter_writer()
                    .ok_or("no dead-letter writer")?;
                let body = delivery.body().to_vec();
                writer
                    .dead_letter(&delivery, &format!("{}.dlq", self.queue), &body)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            other => return Err(format!("unknown op {other:?}")),
        }
        Ok(None)
    }

    async fn check(
        &self,
        expect: &Value,
        reserved: Option<&Option<Reserved>>,
    ) -> Result<(), String> {
        let message = reserved.and_then(Option::as_ref);
        if let Some(want) = expect.get("outcome").and_then(Value::as_str) {
            let got = match message {
                None => "empty",
                Some((_, true, _)) => "poison",
                Some(_) => "delivered",
            };
            if got != want {
                return Err(format!("outcome {got}, expected {want}"));
            }
        }
        if let Some(want) = expect.get("handler_body").and_then(Value::as_str) {
            let (body, _, _) = message.ok_or("handler_body expected but nothing was reserved")?;
            if body != want.as_bytes() {
                return Err(format!(
                    "handler body {:?}, expected {want:?}",
                    String::from_utf8_lossy(body)
                ));
            }
        }
        if let Some(want) = expect.get("reported_attempts") {
            let (_, _, member) =
                message.ok_or("reported_attempts expected but nothing was reserved")?;
            let got: Value = serde_json::from_slice(member)
                .map_err(|e| format!("reserved member is not JSON: {e}"))?;
            if !strict_equal(&got["attempts"], want) {
                return Err(format!(
                    "reported attempts {}, expected {want}",
                    got["attempts"]
                ));
            }
        }
        let list_eq = |name: &str, got: Vec<Vec<u8>>, want: &Value| -> Result<(), String> {
            let want: Vec<Vec<u8>> = want
                .as_array()
                .ok_or("not a list")?
                .iter()
                .filter_map(Value::as_str)
                .map(|s| s.as_bytes().to_vec())
                .collect();
            if got == want {
                Ok(())
            } else {
                Err(format!(
                    "{name}: {:?}, expected {:?}",
                    got.iter()
                        .map(|g| String::from_utf8_lossy(g).into_owned())
                        .collect::<Vec<_>>(),
                    want.iter()
                        .map(|g| String::from_utf8_lossy(g).into_owned())
                        .collect::<Vec<_>>()
                ))
            }
        };
        if let Some(want) = expect.get("ready") {
            list_eq("ready", self.lrange(&self.key("ready")).await?, want)?;
        }
        if let Some(generate) = expect.get("ready_generate") {
            let count = generate
                .get("count")
                .and_then(Value::as_u64)
                .ok_or("no count")?;
            let pattern = str_field(generate, "member")?;
            let want: Vec<Value> = (0..count)
                .map(|i| Value::from(pattern.replace("%03d", &format!("{i:03}"))))
                .collect();
            list_eq(
                "ready (generated)",
                self.lrange(&self.key("ready")).await?,
                &Value::Array(want),
            )?;
        }
        for (field, key) in [
            ("ready_count", self.queue.clone()),
            ("dlq_count", format!("{}.dlq", self.queue)),
            ("notify", self.key("notify")),
        ] {
            if let Some(want) = expect.get(field).and_then(Value::as_i64) {
                let got = self.llen(&key).await?;
                if got != want {
                    return Err(format!("{field}: {got}, expected {want}"));
                }
            }
        }
        if let Some(want) = expect.get("processing") {
            list_eq(
                "processing",
                self.lrange(&self.key("processing")).await?,
                want,
            )?;
        }
        for name in ["delayed", "reserved", "deadlines"] {
            let Some(want) = expect.get(name).and_then(Value::as_array) else {
                continue;
            };
            let mut remaining = self.zrange(&self.key(name)).await?;
            for entry in want {
                let mut found = None;
                for (i, (member, score)) in remaining.iter().enumerate() {
                    if entry_matches(member, *score, entry)? {
                        found = Some(i);
                        break;
                    }
                }
                match found {
                    Some(i) => {
                        remaining.remove(i);
                    }
                    None => return Err(format!("{name}: nothing matches {entry}")),
                }
            }
            if !remaining.is_empty() {
                let extra: Vec<_> = remaining
                    .iter()
                    .map(|(m, s)| (String::from_utf8_lossy(m).into_owned(), *s))
                    .collect();
                return Err(format!("{name}: unexpected entries {extra:?}"));
            }
        }
        if expect.get("tokens_distinct") == Some(&Value::Bool(true)) {
            let mut tokens: Vec<Vec<u8>> = self
                .zrange(&self.key("deadlines"))
                .await?
                .into_iter()
                .map(|(m, _)| m[..32.min(m.len())].to_vec())
                .collect();
            let n = tokens.len();
            tokens.sort();
            tokens.dedup();
            if tokens.len() != n {
                return Err("deadline tokens are not distinct".into());
            }
        }
        Ok(())
    }
}

fn behavioural(case: &Case<'_>) -> Result<(), String> {
    let c = case.value;
    block_on(async {
        let client = Arc::new(connect().await?);
        let clock = Arc::new(AtomicU64::new(0f64.to_bits()));
        let mut options = RedisOptions {
            layout: if str_field(c, "layout")? == "zset" {
                Layout::Laravel
            } else {
                Layout::Reliable
            },
            ..RedisOptions::default()
        };
        if let Some(retry_after) = c.get("retry_after") {
            options.retry_after = retry_after.as_u64();
        }
        if let Some(n) = c.get("migration_batch_size").and_then(Value::as_i64) {
            options.migration_batch_size = n;
        }
        let ticking = clock.clone();
        let transport =
            RedisTransport::with_client(client.clone(), options).with_clock(Arc::new(move || {
                f64::from_bits(ticking.load(Ordering::SeqCst))
            }));
        let queue = format!("bq-conf-{:016x}", fastrand::u64(..));
        let mut scenario = Scenario {
            client: client.clone(),
            transport: transport.clone(),
            queue: queue.clone(),
            clock,
            held: HashMap::new(),
        };
        let result = async {
            scenario
                .seed(c.get("state").unwrap_or(&Value::Null))
                .await?;
            for (i, step) in c
                .get("steps")
                .and_then(Value::as_array)
                .ok_or("no steps")?
                .iter()
                .enumerate()
            {
                let observed = scenario
                    .step(step)
                    .await
                    .map_err(|e| format!("step {i}: {e}"))?;
                if let Some(expect) = step.get("expect") {
                    scenario
                        .check(expect, observed.as_ref())
                        .await
                        .map_err(|e| format!("step {i} ({}): {e}", step["op"]))?;
                }
            }
            Ok(())
        }
        .await;
        purge(&client, &transport, &queue).await;
        result
    })
}

pub(super) fn redis_layout(_: &Ctx<'_>, case: &Case<'_>) -> Result<(), String> {
    match case.group {
        None => key_names(case),
        Some(_) => behavioural(case),
    }
}
