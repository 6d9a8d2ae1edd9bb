//! What Laravel's scripts do to a job, and the `laravel_safe` check of the Laravel layout.
//!
//! A Laravel worker's pop runs the job through Redis's Lua cjson (decode, then encode); its
//! release and its recovery put that text back. `the_cjson_rule_agrees_with_redis_cjson`
//! holds the rule (`babelqueue_envelope::cjson_changes`) against the server's own cjson: for
//! every body, the rule reports something exactly when the round trip changes what the body
//! says (or fails), and for every number it predicts cjson's spelling byte for byte. The other
//! tests publish through the transport with `laravel_safe` off, `warn` and `refuse`.

use std::collections::BTreeMap;
use std::time::Duration;

use babelqueue_core::{BatchPublisher, Outgoing, TransportErrorKind};
use babelqueue_envelope::cjson::cjson_number;
use babelqueue_envelope::{CjsonChange, RawJson, cjson_changes};
use babelqueue_transport_redis::fred::interfaces::{LuaInterface, SortedSetsInterface};
use babelqueue_transport_redis::{LaravelSafe, RedisError, RedisOptions};

use super::*;

/// The round trip Laravel's pop puts every job through.
const ROUND_TRIP: &str = "return cjson.encode(cjson.decode(ARGV[1]))";

/// What the server's cjson makes of `body`: the re-encoded text, or the script's error.
async fn round_trip(raw: &FredClient, body: &str) -> Result<String, String> {
    raw.raw()
        .eval::<String, _, _, _>(ROUND_TRIP, Vec::<String>::new(), vec![body.to_owned()])
        .await
        .map_err(|e| e.to_string())
}

// ---- what a JSON text says: an independent reading ------------------------------------------

/// A JSON value as its meaning: numbers as exact decimals, strings as UTF-16 code units,
/// objects as their members sorted (repeated names kept), so that key order and spelling do
/// not count and everything else does.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Meaning {
    Null,
    Bool(bool),
    /// Sign (never for zero), significant digits, position of the point: 0.digits × 10^point.
    Number(bool, Vec<u8>, i64),
    String(Vec<u16>),
    Array(Vec<Meaning>),
    Object(Vec<(Vec<u16>, Meaning)>),
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Meaning {
        self.ws();
        match self.b[self.pos] {
            b'n' => {
                self.pos += 4;
                Meaning::Null
            }
            b't' => {
                self.pos += 4;
                Meaning::Bool(true)
            }
            b'f' => {
                self.pos += 5;
                Meaning::Bool(false)
            }
            b'"' => Meaning::String(self.string()),
            b'[' => {
                self.pos += 1;
                let mut items = Vec::new();
                self.ws();
                if self.b[self.pos] == b']' {
                    self.pos += 1;
                    return Meaning::Array(items);
                }
                loop {
                    items.push(self.value());
                    self.ws();
                    self.pos += 1;
                    if self.b[self.pos - 1] == b']' {
                        return Meaning::Array(items);
                    }
                }
            }
            b'{' => {
                self.pos += 1;
                let mut members = Vec::new();
                self.ws();
                if self.b[self.pos] == b'}' {
                    self.pos += 1;
                    return Meaning::Object(members);
                }
                loop {
                    self.ws();
                    let name = self.string();
                    self.ws();
                    self.pos += 1; // ':'
                    members.push((name, self.value()));
                    self.ws();
                    self.pos += 1;
                    if self.b[self.pos - 1] == b'}' {
                        members.sort();
                        return Meaning::Object(members);
                    }
                }
            }
            _ => self.number(),
        }
    }

    fn string(&mut self) -> Vec<u16> {
        self.pos += 1;
        let mut units = Vec::new();
        loop {
            match self.b[self.pos] {
                b'"' => {
                    self.pos += 1;
                    return units;
                }
                b'\\' => {
                    let e = self.b[self.pos + 1];
                    self.pos += 2;
                    let unit = match e {
                        b'u' => {
                            let hex = std::str::from_utf8(&self.b[self.pos..self.pos + 4]).unwrap();
                            self.pos += 4;
                            u16::from_str_radix(hex, 16).unwrap()
                        }
                        b'n' => 0x0A,
                        b't' => 0x09,
                        b'r' => 0x0D,
                        b'b' => 0x08,
                        b'f' => 0x0C,
                        other => u16::from(other),
                    };
                    units.push(unit);
                }
                _ => {
                    let rest = std::str::from_utf8(&self.b[self.pos..]).unwrap();
                    let c = rest.chars().next().unwrap();
                    self.pos += c.len_utf8();
                    let mut buf = [0u16; 2];
                    units.extend_from_slice(c.encode_utf16(&mut buf));
                }
            }
        }
    }

    fn number(&mut self) -> Meaning {
        let start = self.pos;
        while matches!(
            self.b.get(self.pos),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.pos += 1;
        }
        let literal = std::str::from_utf8(&self.b[start..self.pos]).unwrap();
        let (mantissa, exponent) = match literal.find(['e', 'E']) {
            Some(at) => (&literal[..at], literal[at + 1..].parse::<i64>().unwrap()),
            None => (literal, 0),
        };
        let negative = mantissa.starts_with('-');
        let mantissa = mantissa.trim_start_matches('-');
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all: String = format!("{int}{frac}");
        let leading = all.len() - all.trim_start_matches('0').len();
        let digits = all.trim_start_matches('0').trim_end_matches('0');
        if digits.is_empty() {
            return Meaning::Number(false, Vec::new(), 0);
        }
        let point = i64::try_from(int.len()).unwrap() - i64::try_from(leading).unwrap() + exponent;
        Meaning::Number(negative, digits.as_bytes().to_vec(), point)
    }
}

fn meaning(text: &str) -> Meaning {
    let mut reader = Reader {
        b: text.as_bytes(),
        pos: 0,
    };
    let value = reader.value();
    reader.ws();
    assert_eq!(reader.pos, text.len(), "one value: {text}");
    value
}

// ---- the bodies -----------------------------------------------------------------------------

/// The cases of the table in docs/transports/redis.md, and the structures around them.
fn table_bodies() -> Vec<String> {
    let mut bodies: Vec<String> = [
        "12345678901234",
        "99999999999999",
        "123456789012345",
        "-123456789012345",
        "123456789012340",
        "999999999999999",
        "9007199254740993",
        "18446744073709551616",
        "12345678901234567890",
        "0.1",
        "1.50",
        "1.0",
        "1e2",
        "1E2",
        "1e300",
        "-0",
        "-0.0",
        "0.30000000000000004",
        "3.14159265358979",
        "123456789.123456789",
        "0.1000000000000000000000000001",
        "12345678901234.5",
        "0.00001",
        "1e-320",
        "5e-324",
        "1e-310",
        "2.2250738585072014e-308",
        "1.7976931348623157e308",
        "1e-400",
        "-1e-400",
        "1e400",
        "-1e400",
    ]
    .iter()
    .map(|n| format!(r#"{{"n":{n}}}"#))
    .collect();
    bodies.push(format!(r#"{{"n":1{}}}"#, "0".repeat(400)));
    bodies.push(format!(r#"{{"n":1{}}}"#, "0".repeat(300)));
    bodies.extend(
        [
            r#"{"job":"urn:x","data":[],"attempts":0}"#,
            r#"{"data":{"a":[ ],"b":{"c":[]}}}"#,
            r#"{"a":[[]]}"#,
            r#"{"a":[null]}"#,
            r#"{"a":[1,null,3]}"#,
            r#"{"a":{}}"#,
            "{}",
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"a":1}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"b":1,"a":2,"c":3}"#,
            r#"{"s":"a/b","t":"a\/b"}"#,
            r#"{"s":"\u00e9","t":"é"}"#,
            "{\"s\":\"\u{2028}\",\"t\":\"\\u2028\"}",
            r#"{"s":"\u0001\u001f\u007f\t\n\r\b\f\u0000"}"#,
            r#"{"s":"\ud83d\ude00","t":"\uDBFF\uDFFF"}"#,
            r#"{"s":"\ud800"}"#,
            r#"{"s":"\udc00"}"#,
            r#"{"s":"\ud800\u0041"}"#,
            r#"{"s":"\ud800\ud800"}"#,
            r#"{"s":"\ud800x"}"#,
            r#"{"\ud800":1}"#,
            r#"{"a":true,"b":false,"c":null,"":""}"#,
        ]
        .iter()
        .map(|b| (*b).to_owned()),
    );
    for levels in [999, 1000, 1001] {
        bodies.push(format!("{}1{}", "[".repeat(levels), "]".repeat(levels)));
        bodies.push(format!(
            "{}1{}",
            r#"{"a":"#.repeat(levels),
            "}".repeat(levels)
        ));
    }
    bodies
}

/// Number literals: integers of every length, doubles spelled shortest and at every
/// precision (subnormals included), and decimals of up to 25 digits across the exponent range.
fn generated_numbers(rng: &mut fastrand::Rng) -> Vec<String> {
    let mut numbers = Vec::new();
    for _ in 0..400 {
        let digits = rng.u32(1..=20);
        let n = rng.u64(..) % 10u64.saturating_pow(digits).max(1);
        numbers.push(if rng.bool() {
            n.to_string()
        } else {
            format!("-{n}")
        });
    }
    for _ in 0..400 {
        let value = f64::from_bits(rng.u64(..));
        if !value.is_finite() {
            continue;
        }
        numbers.push(match rng.u8(0..3) {
            0 => format!("{value}"),
            1 => format!("{value:e}"),
            _ => format!("{:.*e}", rng.usize(0..20), value),
        });
    }
    for _ in 0..400 {
        let len = rng.usize(1..=25);
        let digits: String = std::iter::once(char::from(b'1' + rng.u8(0..9)))
            .chain((1..len).map(|_| char::from(b'0' + rng.u8(0..10))))
            .collect();
        let point = rng.usize(1..=len);
        let exponent = rng.i32(-340..320);
        numbers.push(format!(
            "{}.{}e{exponent}",
            &digits[..point],
            if point == len { "0" } else { &digits[point..] }
        ));
    }
    numbers
}

/// Small random documents: nested arrays and objects (empty ones included), repeated names,
/// strings with escapes, and numbers of every kind.
fn generated_documents(rng: &mut fastrand::Rng, numbers: &[String]) -> Vec<String> {
    fn value(rng: &mut fastrand::Rng, numbers: &[String], depth: u32) -> String {
        let leaf = depth > 3 || rng.u8(0..3) == 0;
        if leaf {
            return match rng.u8(0..8) {
                0 => "null".into(),
                1 => "true".into(),
                2 => numbers[rng.usize(..numbers.len())].clone(),
                3 => r#""caf\u00e9 \/ \ud83d\ude00 \n""#.into(),
                4 => "\"é/\u{2028}\"".into(),
                5 => rng.u32(..).to_string(),
                6 => "[]".into(),
                _ => "{}".into(),
            };
        }
        let n = rng.usize(0..4);
        if rng.bool() {
            let items: Vec<String> = (0..n).map(|_| value(rng, numbers, depth + 1)).collect();
            format!("[{}]", items.join(","))
        } else {
            let names = ["a", "b", "c", "\\u0061"];
            let members: Vec<String> = (0..n)
                .map(|_| {
                    let name = names[rng.usize(..names.len())];
                    format!(r#""{name}":{}"#, value(rng, numbers, depth + 1))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
    }
    (0..300)
        .map(|_| format!(r#"{{"data":{}}}"#, value(rng, numbers, 1)))
        .collect()
}

#[tokio::test]
async fn the_cjson_rule_agrees_with_redis_cjson() {
    let Some(raw) = redis().await else { return };
    let mut rng = fastrand::Rng::with_seed(0x006c_6172_6176_656c);
    let numbers = generated_numbers(&mut rng);
    let mut bodies = table_bodies();
    bodies.extend(numbers.iter().map(|n| format!(r#"{{"n":{n}}}"#)));
    bodies.extend(generated_documents(&mut rng, &numbers));
    let (mut changed, mut failed) = (0, 0);
    for body in &bodies {
        let found = cjson_changes(body.as_bytes());
        let shown = || format!("{body:.200}: {found:?}");
        match round_trip(&raw, body).await {
            Err(error) => {
                failed += 1;
                assert!(
                    found.iter().any(|f| f.change.fails()),
                    "cjson failed ({error}) on {}",
                    shown()
                );
            }
            Ok(out) => {
                let differs = meaning(body) != meaning(&out);
                changed += usize::from(differs);
                assert_eq!(!found.is_empty(), differs, "{} -> {out:.200}", shown());
                assert!(
                    !found.iter().any(|f| f.change.fails()),
                    "cjson succeeded on {}",
                    shown()
                );
                // A lone number: cjson's spelling, predicted byte for byte.
                if let Some(literal) = body
                    .strip_prefix(r#"{"n":"#)
                    .and_then(|b| b.strip_suffix('}'))
                {
                    let written = out
                        .strip_prefix(r#"{"n":"#)
                        .and_then(|o| o.strip_suffix('}'))
                        .expect("one member");
                    assert_eq!(cjson_number(literal).as_deref(), Some(written), "{literal}");
                    if let Some(f) = found.first() {
                        assert_eq!(f.change, CjsonChange::Rounded(written.to_owned()));
                    }
                }
            }
        }
    }
    // The generated cases reach every side of the rule.
    assert!(bodies.len() > 1_400, "{}", bodies.len());
    assert!(
        changed > 300 && failed > 10,
        "changed {changed}, failed {failed}"
    );
    assert!(bodies.len() - changed - failed > 300);
}

// ---- the option -----------------------------------------------------------------------------

/// A transport on the Laravel layout with `laravel_safe=<mode>` in its URL (`None`: not given).
async fn laravel(mode: Option<&str>) -> RedisTransport {
    let url = match mode {
        Some(mode) => format!("{}?laravel=1&laravel_safe={mode}", base_url()),
        None => format!("{}?laravel=1", base_url()),
    };
    RedisTransport::connect(&url).await.expect("connect")
}

fn body(data: &str) -> Vec<u8> {
    Envelope::builder(URN)
        .queue("laravel-safe")
        .data_raw(RawJson::parse(data).unwrap())
        .build()
        .unwrap()
        .encode()
        .unwrap()
        .into_bytes()
}

const FINE: &str = r#"{"order_id":1042,"total":"12.50","tags":["a"],"ratio":1.50}"#;
const ROUNDED: &str = r#"{"order_id":123456789012345,"tags":["a"]}"#;
const EMPTY: &str = r#"{"order_id":1,"items":[{"tags":[]}]}"#;
const LOST: &str = r#"{"order_id":1,"big":1e400}"#;

async fn llen(raw: &FredClient, key: &str) -> i64 {
    raw.raw().llen(key).await.unwrap()
}

async fn zcard(raw: &FredClient, key: &str) -> i64 {
    raw.raw().zcard(key).await.unwrap()
}

/// The refusal of `error`: its queue, batch index and findings.
fn refusal(error: &babelqueue_core::TransportError) -> (String, Option<usize>, Vec<String>) {
    assert_eq!(error.kind(), TransportErrorKind::Unsupported, "{error}");
    assert!(!error.is_transient());
    let source = std::error::Error::source(error).expect("the Redis error");
    match source.downcast_ref::<RedisError>() {
        Some(RedisError::LaravelUnsafe {
            queue,
            index,
            findings,
        }) => (
            queue.clone(),
            *index,
            findings.iter().map(|f| f.path.clone()).collect(),
        ),
        other => panic!("not a refusal: {other:?}"),
    }
}

#[tokio::test]
async fn laravel_safe_refuse_sends_nothing_and_names_the_member() {
    let Some(raw) = redis().await else { return };
    let q = queue("laravel-refuse");
    let t = laravel(Some("refuse")).await;
    let ready = t.options().ready(&q);
    // A body Laravel keeps goes through.
    t.publish(&q, &body(FINE)).await.unwrap();
    assert_eq!(llen(&raw, &ready).await, 1);

    // One body: refused, naming the member and what Laravel would write.
    let e = t.publish(&q, &body(ROUNDED)).await.unwrap_err();
    assert_eq!(
        refusal(&e),
        (q.clone(), None, vec!["data.order_id".to_owned()])
    );
    let text = e.to_string();
    assert!(
        text.contains("data.order_id: 123456789012345 becomes 1.2345678901234e+14"),
        "{text}"
    );
    assert!(text.contains("nothing was sent"), "{text}");
    let e = t.publish(&q, &body(EMPTY)).await.unwrap_err();
    assert!(
        e.to_string().contains("data.items[0].tags: [] becomes {}"),
        "{e}"
    );
    let e = t.publish(&q, &body(LOST)).await.unwrap_err();
    assert!(e.to_string().contains("would lose the body"), "{e}");
    assert!(e.to_string().contains("data.big: 1e400"), "{e}");
    // Sent with headers (the Laravel layout drops them) as well.
    let headers = Headers::from([("traceparent".to_owned(), "00-1-2-01".to_owned())]);
    let e = t
        .send(&Outgoing::new(&q, &body(ROUNDED)).headers(&headers))
        .await
        .unwrap_err();
    assert_eq!(refusal(&e).2, ["data.order_id"]);
    assert_eq!(llen(&raw, &ready).await, 1, "nothing more was sent");

    // A batch with one bad body: the whole batch is refused before anything is sent.
    let bodies = [body(FINE), body(FINE), body(EMPTY), body(FINE)];
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    let e = t.publish_batch(&q, &slices).await.unwrap_err();
    assert_eq!(
        refusal(&e),
        (q.clone(), Some(2), vec!["data.items[0].tags".to_owned()])
    );
    assert!(e.to_string().contains("body 2 of the batch"), "{e}");
    assert_eq!(llen(&raw, &ready).await, 1, "no body of the batch was sent");
    let notify: i64 = llen(&raw, &t.options().notify(&q)).await;
    assert_eq!(notify, 1, "no wake-up token either");

    // A delayed publish.
    let e = t
        .send(&Outgoing::new(&q, &body(ROUNDED)).delay(Duration::from_secs(60)))
        .await
        .unwrap_err();
    assert_eq!(refusal(&e).2, ["data.order_id"]);
    assert_eq!(zcard(&raw, &t.options().delayed(&q)).await, 0);

    // Through the runtime: `App::publish` and `App::publish_batch` fail the same way.
    let a = app(&t, &q).build().unwrap();
    let e = a
        .publish(URN, &json!({"order_id": 123_456_789_012_345_u64}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("data.order_id"), "{e}");
    let envelopes = [
        a.envelope(URN).data(&json!({"n": 1})).build().unwrap(),
        a.envelope(URN).data(&json!({"n": []})).build().unwrap(),
    ];
    let e = a.publish_batch(&q, &envelopes).await.unwrap_err();
    assert!(e.to_string().contains("data.n: [] becomes {}"), "{e}");
    assert_eq!(llen(&raw, &ready).await, 1, "still only the first body");

    // Fine bodies in a batch go through.
    let bodies = [body(FINE), body(FINE)];
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    t.publish_batch(&q, &slices).await.unwrap();
    assert_eq!(llen(&raw, &ready).await, 3);
    purge(&raw, &q).await;
}

// ---- capturing the warnings -----------------------------------------------------------------

/// The fields of every warning of the target `babelqueue::redis`, on this thread.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN && meta.target() == "babelqueue::redis" {
            let mut fields = BTreeMap::new();
            event.record(&mut Fields(&mut fields));
            self.0.lock().unwrap().push(fields);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

impl Warnings {
    fn laravel_safe(&self) -> Vec<BTreeMap<String, String>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|w| w.get("message").is_some_and(|m| m.contains("laravel_safe")))
            .cloned()
            .collect()
    }
}

#[tokio::test]
async fn laravel_safe_warn_sends_every_body_and_logs_each_one_laravel_would_change() {
    let Some(raw) = redis().await else { return };
    let warnings = Warnings::default();
    let _guard = tracing::subscriber::set_default(warnings.clone());
    let q = queue("laravel-warn");
    let t = laravel(Some("warn")).await;
    let ready = t.options().ready(&q);

    t.publish(&q, &body(FINE)).await.unwrap();
    assert!(
        warnings.laravel_safe().is_empty(),
        "a fine body is not logged"
    );
    t.publish(&q, &body(ROUNDED)).await.unwrap();
    assert_eq!(llen(&raw, &ready).await, 2, "sent");
    let logged = warnings.laravel_safe();
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0]["members"], "data.order_id");
    assert_eq!(logged[0]["queue"], q);
    assert_eq!(logged[0]["lost"], "false");
    assert!(
        logged[0]["changes"].contains("123456789012345 becomes 1.2345678901234e+14"),
        "{logged:?}"
    );

    // A batch: all sent, one warning per body Laravel would change.
    let bodies = [body(EMPTY), body(FINE), body(LOST)];
    let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
    t.publish_batch(&q, &slices).await.unwrap();
    assert_eq!(llen(&raw, &ready).await, 5);
    let logged = warnings.laravel_safe();
    assert_eq!(logged.len(), 3);
    assert_eq!(
        (logged[1]["members"].as_str(), logged[1]["index"].as_str()),
        ("data.items[0].tags", "Some(0)")
    );
    assert_eq!(
        (logged[2]["members"].as_str(), logged[2]["index"].as_str()),
        ("data.big", "Some(2)")
    );
    assert_eq!(logged[2]["lost"], "true");

    // Delayed: sent and logged.
    t.send(&Outgoing::new(&q, &body(ROUNDED)).delay(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(zcard(&raw, &t.options().delayed(&q)).await, 1);
    assert_eq!(warnings.laravel_safe().len(), 4);
    purge(&raw, &q).await;
}

#[tokio::test]
async fn laravel_safe_off_sends_every_body_without_a_word() {
    let Some(raw) = redis().await else { return };
    let warnings = Warnings::default();
    let _guard = tracing::subscriber::set_default(warnings.clone());
    for mode in [None, Some("off")] {
        let q = queue("laravel-off");
        let t = laravel(mode).await;
        assert_eq!(t.options().laravel_safe, LaravelSafe::Off);
        t.publish(&q, &body(ROUNDED)).await.unwrap();
        let bodies = [body(EMPTY), body(LOST)];
        let slices: Vec<&[u8]> = bodies.iter().map(Vec::as_slice).collect();
        t.publish_batch(&q, &slices).await.unwrap();
        assert_eq!(llen(&raw, &t.options().ready(&q)).await, 3, "{mode:?}");
        purge(&raw, &q).await;
    }
    assert!(warnings.laravel_safe().is_empty());
}

#[tokio::test]
async fn laravel_safe_on_the_reliable_layout_is_a_configuration_error() {
    // Refused before any connection is made: no server needed.
    let refused = |e: RedisError, mode: &str| {
        assert_eq!(e.kind(), TransportErrorKind::Config, "{e}");
        let text = e.to_string();
        assert!(text.contains(&format!("laravel_safe={mode}")), "{text}");
        assert!(text.contains("reliable layout"), "{text}");
    };
    for mode in ["warn", "refuse"] {
        let url = format!("{}?laravel_safe={mode}", base_url());
        refused(RedisTransport::connect(&url).await.unwrap_err(), mode);
        refused(
            RedisTransport::connect_with(&url, RedisOptions::default())
                .await
                .unwrap_err(),
            mode,
        );
    }
    refused(
        RedisTransport::builder(base_url())
            .laravel_safe(LaravelSafe::Refuse)
            .connect()
            .await
            .unwrap_err(),
        "refuse",
    );
    // The builder's layout counts: the Laravel layout chosen in code accepts it.
    let (_, options) = RedisTransport::builder(format!("{}?laravel_safe=warn", base_url()))
        .laravel(true)
        .options()
        .unwrap();
    assert_eq!(options.laravel_safe, LaravelSafe::Warn);
    let e = RedisTransport::connect(&format!("{}?laravel=1&laravel_safe=maybe", base_url()))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TransportErrorKind::Config);
    assert!(e.to_string().contains("off, warn or refuse"), "{e}");
}
