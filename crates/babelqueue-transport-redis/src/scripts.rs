//! Every Lua script the transport runs, with its KEYS/ARGV contract. Each runs atomically on the
//! server: nothing can fail between taking a message and recording its reservation, which is
//! what keeps a crash from losing it.

/// A named Lua script.
#[derive(Debug)]
pub struct LuaScript {
    /// Short name, for errors and tests.
    pub name: &'static str,
    /// The Lua source.
    pub lua: &'static str,
}

/// Laravel layout publish. KEYS = \[ready, notify\]; ARGV = \[body\].
/// Appends the body, then one wake-up token.
pub static PUSH: LuaScript = LuaScript {
    name: "push",
    lua: r"
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], 1)
return 1
",
};

/// Laravel layout reserve. KEYS = \[ready, reserved, notify\]; ARGV = \[deadline score or +inf\].
/// Takes the head job; the reserved member is the job with `attempts + 1` (re-encoded by cjson)
/// when it decodes to a table with a numeric `attempts`, else the raw job. Both the decode and
/// the re-encode run under `pcall`, because nothing may fail after the LPOP. Records the
/// reservation, consumes one wake-up token, returns `{job, member}` (`{false, false}` when empty).
pub static RESERVE_ZSET: LuaScript = LuaScript {
    name: "reserve_zset",
    lua: r"
local job = redis.call('LPOP', KEYS[1])
if not job then
  return {false, false}
end
local member = job
local decoded_ok, decoded = pcall(cjson.decode, job)
if decoded_ok and type(decoded) == 'table' and type(decoded['attempts']) == 'number' then
  decoded['attempts'] = decoded['attempts'] + 1
  local encoded_ok, encoded = pcall(cjson.encode, decoded)
  if encoded_ok then
    member = encoded
  end
end
redis.call('ZADD', KEYS[2], ARGV[1], member)
redis.call('LPOP', KEYS[3])
return {job, member}
",
};

/// Laravel layout release. KEYS = \[delayed, reserved\]; ARGV = \[member, body, available-at\].
/// Drops the reservation and schedules the runtime-built body.
pub static RELEASE_ZSET: LuaScript = LuaScript {
    name: "release_zset",
    lua: r"
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
return 1
",
};

/// Laravel layout dead-letter, gated on the reservation. KEYS = \[reserved, dlq ready, dlq
/// notify\]; ARGV = \[member, record\]. Writes only if this reservation still exists.
pub static DEAD_LETTER_ZSET: LuaScript = LuaScript {
    name: "dead_letter_zset",
    lua: r"
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('RPUSH', KEYS[3], 1)
  return 1
end
return 0
",
};

/// Laravel layout migrate (delayed or expired reserved → ready). KEYS = \[source zset, ready,
/// notify\]; ARGV = \[now, batch size (-1 = all)\]. Moves the due members byte for byte, in score
/// order, in chunks of 100, with one wake-up token each; returns how many moved.
pub static MIGRATE: LuaScript = LuaScript {
    name: "migrate",
    lua: r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local n = #due
if n > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
  for first = 1, n, 100 do
    local last = math.min(first + 99, n)
    redis.call('RPUSH', KEYS[2], unpack(due, first, last))
    for _ = first, last do
      redis.call('RPUSH', KEYS[3], 1)
    end
  end
end
return n
",
};

/// Default layout reserve. KEYS = \[ready, processing, deadlines\]; ARGV = \[deadline score or
/// +inf, token]. Moves the head to the processing list and records `<token>:<raw>` with its
/// deadline; returns the raw value, or false when empty.
pub static RESERVE_LEGACY: LuaScript = LuaScript {
    name: "reserve_legacy",
    lua: r"
local raw = redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')
if not raw then
  return false
end
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[2] .. ':' .. raw)
return raw
",
};

/// Default layout sweep. KEYS = \[ready, processing, deadlines\]; ARGV = \[now, batch (-1 = all)\].
/// For each lapsed `<token>:<raw>` member: if exactly one copy of raw leaves the processing
/// list it goes back to the END of ready, unchanged; the member is always removed (a malformed
/// member or an orphan is only removed). Returns how many moved.
pub static SWEEP: LuaScript = LuaScript {
    name: "sweep",
    lua: r"
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local moved = 0
for _, member in ipairs(lapsed) do
  if #member >= 34 and string.sub(member, 33, 33) == ':' then
    local raw = string.sub(member, 34)
    if redis.call('LREM', KEYS[2], 1, raw) == 1 then
      redis.call('RPUSH', KEYS[1], raw)
      moved = moved + 1
    end
  end
  redis.call('ZREM', KEYS[3], member)
end
return moved
",
};

/// Default layout settle (ack, release, dead-letter), gated on the reservation. KEYS =
/// \[processing, deadlines, optional target list\]; ARGV = \[token, raw, target body\]. Only when
/// this reservation's member still exists: drop it, remove one copy of raw from processing, and
/// push the target body when there is a target. Returns 1, or 0 when the reservation lapsed.
pub static SETTLE_LEGACY: LuaScript = LuaScript {
    name: "settle_legacy",
    lua: r"
if redis.call('ZREM', KEYS[2], ARGV[1] .. ':' .. ARGV[2]) == 1 then
  redis.call('LREM', KEYS[1], 1, ARGV[2])
  if KEYS[3] then
    redis.call('RPUSH', KEYS[3], ARGV[3])
  end
  return 1
end
return 0
",
};

/// Idempotency claim. `KEYS = [key]`; `ARGV = [in-flight marker, claim lifetime in ms (0 = none)]`.
/// `SET key marker NX PX ttl`: returns 1 when this call created the key (the claim is ours), 0
/// when the key holds the in-flight marker (another delivery is running), 2 when it holds
/// anything else (a delivery succeeded).
pub static IDEMPOTENCY_CLAIM: LuaScript = LuaScript {
    name: "idempotency_claim",
    lua: r"
local created
if tonumber(ARGV[2]) > 0 then
  created = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
else
  created = redis.call('SET', KEYS[1], ARGV[1], 'NX')
end
if created then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return 0
end
return 2
",
};

/// Idempotency success marker. `KEYS = [key]`; `ARGV = [done marker, lifetime in ms (0 = none)]`.
/// Overwrites a claim (and its lifetime) with the done marker.
pub static IDEMPOTENCY_REMEMBER: LuaScript = LuaScript {
    name: "idempotency_remember",
    lua: r"
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
",
};

/// Idempotency lookup. `KEYS = [key]`; `ARGV = [in-flight marker]`. Returns 1 when the key holds
/// anything but the in-flight marker (a delivery succeeded), else 0.
pub static IDEMPOTENCY_SEEN: LuaScript = LuaScript {
    name: "idempotency_seen",
    lua: r"
local value = redis.call('GET', KEYS[1])
if value and value ~= ARGV[1] then
  return 1
end
return 0
",
};

/// Idempotency release. `KEYS = [key]`. Deletes the claim or the success marker.
pub static IDEMPOTENCY_FORGET: LuaScript = LuaScript {
    name: "idempotency_forget",
    lua: r"
return redis.call('DEL', KEYS[1])
",
};

/// Every script, for loading and tests.
pub static ALL: [&LuaScript; 12] = [
    &PUSH,
    &RESERVE_ZSET,
    &RELEASE_ZSET,
    &DEAD_LETTER_ZSET,
    &MIGRATE,
    &RESERVE_LEGACY,
    &SWEEP,
    &SETTLE_LEGACY,
    &IDEMPOTENCY_CLAIM,
    &IDEMPOTENCY_REMEMBER,
    &IDEMPOTENCY_SEEN,
    &IDEMPOTENCY_FORGET,
];
