//! Every Lua script the transport runs, with its KEYS/ARGV contract. Each runs atomically on the
//! server, but Redis has no rollback: a command that fails half-way through a script leaves the
//! earlier writes in place. So every script that moves a message follows two rules:
//!
//! 1. **Check, then write.** Before anything is written, the script checks that every key it
//!    writes holds the type it expects (or does not exist) and, for a gated settle, that the
//!    reservation still exists. A key of the wrong type (`SET q.dlq notalist`) makes the script
//!    return an error (`BQWRONGTYPE …`) and touch nothing.
//! 2. **Add before remove.** Every write that can still fail (a push refused by an ACL rule or
//!    by `maxmemory`) runs before the message leaves its old place, so a failure can at worst
//!    leave a duplicate, never lose the message.
//!
//! The Laravel reserve counts the attempt into the reserved member at byte level: only the
//! `attempts` token changes, so a recovered reservation keeps `data` byte for byte (cjson would
//! turn `12345678901234567890` into `1.2345678901235e+19` and `[]` into `{}`).

/// A named Lua script.
#[derive(Debug)]
pub struct LuaScript {
    /// Short name, for errors and tests.
    pub name: &'static str,
    /// The Lua source.
    pub lua: &'static str,
}

/// The helper every moving script starts with: `bq_types({key, type, key, type, ...})` returns
/// an error reply when one key exists with another type, else `nil`.
macro_rules! guarded {
    ($body:literal) => {
        concat!(
            r"
local function bq_types(pairs)
  for n = 1, #pairs, 2 do
    local held = redis.call('TYPE', pairs[n])['ok']
    if held ~= 'none' and held ~= pairs[n + 1] then
      return redis.error_reply('BQWRONGTYPE key ' .. pairs[n] .. ' holds a ' .. held ..
        ' where a ' .. pairs[n + 1] .. ' is expected; nothing was moved')
    end
  end
  return nil
end
",
            $body
        )
    };
}

/// Laravel layout publish. KEYS = \[ready, notify\]; ARGV = \[body, …\] (one or more).
/// Appends the bodies in order, then one wake-up token per body; returns how many.
pub static PUSH: LuaScript = LuaScript {
    name: "push",
    lua: guarded!(
        r"
local bad = bq_types({KEYS[1], 'list', KEYS[2], 'list'})
if bad then return bad end
for first = 1, #ARGV, 100 do
  local last = math.min(first + 99, #ARGV)
  redis.call('RPUSH', KEYS[1], unpack(ARGV, first, last))
  local tokens = {}
  for n = first, last do tokens[#tokens + 1] = 1 end
  redis.call('RPUSH', KEYS[2], unpack(tokens))
end
return #ARGV
"
    ),
};

/// Default layout publish of several bodies. KEYS = \[ready\]; ARGV = \[value, …\]. Appends
/// them in order; returns how many.
pub static PUSH_LIST: LuaScript = LuaScript {
    name: "push_list",
    lua: guarded!(
        r"
local bad = bq_types({KEYS[1], 'list'})
if bad then return bad end
for first = 1, #ARGV, 100 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, first, math.min(first + 99, #ARGV)))
end
return #ARGV
"
    ),
};

/// Laravel layout reserve. KEYS = \[ready, reserved, notify\]; ARGV = \[deadline score or +inf,
/// most to reserve (1 when absent)\]. For each job reserved, from the head:
/// Reads the head job; the reserved member is the job with its top-level `attempts` token
/// replaced by `attempts + 1` (every other byte kept) when cjson decodes it to an object with a
/// numeric `attempts` and could re-encode it, else the raw job (poison). The decode and the
/// re-encode run under `pcall` and only decide; the member is never cjson's encoding. The
/// reservation is recorded before the job leaves the ready list; one wake-up token is consumed.
/// Returns `{job, member, job, member, …}`, empty when the list is.
pub static RESERVE_ZSET: LuaScript = LuaScript {
    name: "reserve_zset",
    lua: guarded!(
        r#"
local bad = bq_types({KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'list'})
if bad then return bad end
-- The value span [from, to] of the last top-level member named attempts, in a text cjson
-- already decoded as an object. Strings are skipped with their escapes; names holding an
-- escape are compared after cjson decodes them.
local function attempts_span(s)
  local i = string.find(s, '{', 1, true) + 1
  local depth, want_name, from, to = 1, true, nil, nil
  while depth > 0 do
    local p, _, c = string.find(s, '([%[%]{}",])', i)
    if not p then return nil end
    if c == '"' then
      local q = p + 1
      while true do
        local e, _, d = string.find(s, '(["\\])', q)
        if not e then return nil end
        if d == '\\' then q = e + 2 else q = e break end
      end
      if depth == 1 and want_name then
        want_name = false
        local name = string.sub(s, p + 1, q - 1)
        if string.find(name, '\\', 1, true) then
          local ok, decoded = pcall(cjson.decode, string.sub(s, p, q))
          if ok then name = decoded end
        end
        local colon = string.find(s, ':', q + 1, true)
        if name == 'attempts' then
          from = string.find(s, '[^ \t\r\n]', colon + 1)
          to = string.find(s, '[ \t\r\n,}]', from) - 1
        end
        i = colon + 1
      else
        i = q + 1
      end
    elseif c == '{' or c == '[' then
      depth = depth + 1
      i = p + 1
    elseif c == '}' or c == ']' then
      depth = depth - 1
      i = p + 1
    else
      if depth == 1 then want_name = true end
      i = p + 1
    end
  end
  return from, to
end
local function counted_member(job)
local member = job
local decoded_ok, decoded = pcall(cjson.decode, job)
if decoded_ok and type(decoded) == 'table' and type(decoded['attempts']) == 'number' then
  local encoded_ok = pcall(cjson.encode, decoded)
  if encoded_ok then
    local span_ok, from, to = pcall(attempts_span, job)
    if span_ok and from and to and to >= from then
      local counted = decoded['attempts'] + 1
      local text
      if counted == math.floor(counted) and math.abs(counted) < 2^53 then
        text = string.format('%.0f', counted)
      else
        text = cjson.encode(counted)
      end
      member = string.sub(job, 1, from - 1) .. text .. string.sub(job, to + 1)
    end
  end
end
return member
end
local out = {}
for _ = 1, tonumber(ARGV[2] or '1') do
  local job = redis.call('LINDEX', KEYS[1], 0)
  if not job then break end
  local member = counted_member(job)
  redis.call('ZADD', KEYS[2], ARGV[1], member)
  redis.call('LPOP', KEYS[1])
  redis.call('LPOP', KEYS[3])
  out[#out + 1] = job
  out[#out + 1] = member
end
return out
"#
    ),
};

/// Laravel layout release. KEYS = \[delayed, reserved\]; ARGV = \[member, body, available-at\].
/// Schedules the runtime-built body, then drops the reservation.
pub static RELEASE_ZSET: LuaScript = LuaScript {
    name: "release_zset",
    lua: guarded!(
        r"
local bad = bq_types({KEYS[1], 'zset', KEYS[2], 'zset'})
if bad then return bad end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"
    ),
};

/// Laravel layout dead-letter, gated on the reservation. KEYS = \[reserved, dlq ready, dlq
/// notify\]; ARGV = \[member, record\]. Only while this reservation exists: push the record and
/// a wake-up token, then drop the reservation. Returns 1, or 0 when the reservation lapsed.
pub static DEAD_LETTER_ZSET: LuaScript = LuaScript {
    name: "dead_letter_zset",
    lua: guarded!(
        r"
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local bad = bq_types({KEYS[1], 'zset', KEYS[2], 'list', KEYS[3], 'list'})
if bad then return bad end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('RPUSH', KEYS[3], 1)
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
"
    ),
};

/// Laravel layout migrate (delayed or expired reserved → ready). KEYS = \[source zset, ready,
/// notify\]; ARGV = \[now, batch size (-1 = all)\]. Moves the due members byte for byte, in score
/// order, in chunks of 100 (each chunk pushed with one wake-up token per member, then removed
/// from the source); returns how many moved.
pub static MIGRATE: LuaScript = LuaScript {
    name: "migrate",
    lua: guarded!(
        r"
local bad = bq_types({KEYS[1], 'zset', KEYS[2], 'list', KEYS[3], 'list'})
if bad then return bad end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local n = #due
for first = 1, n, 100 do
  local last = math.min(first + 99, n)
  redis.call('RPUSH', KEYS[2], unpack(due, first, last))
  for _ = first, last do
    redis.call('RPUSH', KEYS[3], 1)
  end
  redis.call('ZREM', KEYS[1], unpack(due, first, last))
end
return n
"
    ),
};

/// Default layout reserve. KEYS = \[ready, processing, deadlines\]; ARGV = \[deadline score or
/// +inf, token, token, …\]: one reservation per token at most. For each: records
/// `<token>:<raw>` with its deadline for the head, then moves the head to the processing list.
/// Returns the raw values reserved, in order (empty when the list is).
pub static RESERVE_LEGACY: LuaScript = LuaScript {
    name: "reserve_legacy",
    lua: guarded!(
        r"
local bad = bq_types({KEYS[1], 'list', KEYS[2], 'list', KEYS[3], 'zset'})
if bad then return bad end
local out = {}
for n = 2, #ARGV do
  local raw = redis.call('LINDEX', KEYS[1], 0)
  if not raw then break end
  redis.call('ZADD', KEYS[3], ARGV[1], ARGV[n] .. ':' .. raw)
  redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')
  out[#out + 1] = raw
end
return out
"
    ),
};

/// Default layout sweep. KEYS = \[ready, processing, deadlines\]; ARGV = \[now, batch (-1 = all)\].
/// For each lapsed `<token>:<raw>` member: if a copy of raw is in the processing list, raw goes
/// back to the END of ready, unchanged, and then exactly one copy leaves the processing list; the
/// member is always removed (a malformed member or an orphan is only removed). Returns how many
/// moved.
pub static SWEEP: LuaScript = LuaScript {
    name: "sweep",
    lua: guarded!(
        r"
local bad = bq_types({KEYS[1], 'list', KEYS[2], 'list', KEYS[3], 'zset'})
if bad then return bad end
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local moved = 0
for _, member in ipairs(lapsed) do
  if #member >= 34 and string.sub(member, 33, 33) == ':' then
    local raw = string.sub(member, 34)
    if redis.call('LPOS', KEYS[2], raw) then
      redis.call('RPUSH', KEYS[1], raw)
      redis.call('LREM', KEYS[2], 1, raw)
      moved = moved + 1
    end
  end
  redis.call('ZREM', KEYS[3], member)
end
return moved
"
    ),
};

/// Default layout settle (ack, release, dead-letter), gated on the reservation. KEYS =
/// \[processing, deadlines, optional target list\]; ARGV = \[token, raw, target body\]. Only when
/// this reservation's member still exists: push the target body when there is a target, then
/// drop the member and remove one copy of raw from processing. Returns 1, or 0 when the
/// reservation lapsed.
pub static SETTLE_LEGACY: LuaScript = LuaScript {
    name: "settle_legacy",
    lua: guarded!(
        r"
local member = ARGV[1] .. ':' .. ARGV[2]
if not redis.call('ZSCORE', KEYS[2], member) then
  return 0
end
local bad
if KEYS[3] then
  bad = bq_types({KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'list'})
else
  bad = bq_types({KEYS[1], 'list', KEYS[2], 'zset'})
end
if bad then return bad end
if KEYS[3] then
  redis.call('RPUSH', KEYS[3], ARGV[3])
end
redis.call('ZREM', KEYS[2], member)
redis.call('LREM', KEYS[1], 1, ARGV[2])
return 1
"
    ),
};

/// Default layout acknowledgement of several reservations. KEYS = \[processing, deadlines\];
/// ARGV = \[token, raw, token, raw, …\]. Each reservation whose member still exists is dropped
/// with one copy of raw from processing (as [`SETTLE_LEGACY`] without a target); a lapsed one
/// is left alone. Returns how many were settled.
pub static ACK_LEGACY: LuaScript = LuaScript {
    name: "ack_legacy",
    lua: guarded!(
        r"
local bad = bq_types({KEYS[1], 'list', KEYS[2], 'zset'})
if bad then return bad end
local settled = 0
for n = 1, #ARGV, 2 do
  local member = ARGV[n] .. ':' .. ARGV[n + 1]
  if redis.call('ZREM', KEYS[2], member) == 1 then
    redis.call('LREM', KEYS[1], 1, ARGV[n + 1])
    settled = settled + 1
  end
end
return settled
"
    ),
};

/// Laravel layout acknowledgement of several reservations. KEYS = \[reserved\]; ARGV =
/// \[member, …\]. Removes them; returns how many were there.
pub static ACK_ZSET: LuaScript = LuaScript {
    name: "ack_zset",
    lua: guarded!(
        r"
local bad = bq_types({KEYS[1], 'zset'})
if bad then return bad end
local removed = 0
for first = 1, #ARGV, 100 do
  removed = removed + redis.call('ZREM', KEYS[1], unpack(ARGV, first, math.min(first + 99, #ARGV)))
end
return removed
"
    ),
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

/// Whether a reservation still holds, for a settle made in steps (a dead-letter record written
/// to another slot of a Redis Cluster). KEYS = \[reservation set\] (the reliable layout's
/// deadlines, Laravel's `:reserved`); ARGV = \[member\]. Returns 1 or 0.
pub static HELD: LuaScript = LuaScript {
    name: "held",
    lua: r"
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 1
end
return 0
",
};

/// `LLEN` or `ZCARD` of each key by its type (0 when it does not exist); an error reply names
/// a key of any other type. With `ARGV[1] == '1'`, one more element: the `meta.created_at` of
/// the first key's head (the next message a consumer takes), 0 when it has none (an empty
/// list, a body that is not an envelope). Only that number leaves the server, not the body.
pub static STATS_LENGTHS: LuaScript = LuaScript {
    name: "stats_lengths",
    lua: r"
local out = {}
for n = 1, #KEYS do
  local held = redis.call('TYPE', KEYS[n])['ok']
  if held == 'list' then
    out[n] = redis.call('LLEN', KEYS[n])
  elseif held == 'zset' then
    out[n] = redis.call('ZCARD', KEYS[n])
  elseif held == 'none' then
    out[n] = 0
  else
    return redis.error_reply('BQWRONGTYPE key ' .. KEYS[n] .. ' holds a ' .. held ..
      ' where a list or a sorted set is expected')
  end
end
if ARGV[1] == '1' then
  local created = 0
  local head = redis.call('LINDEX', KEYS[1], 0)
  if head then
    local ok, decoded = pcall(cjson.decode, head)
    if ok and type(decoded) == 'table' and type(decoded.meta) == 'table'
      and type(decoded.meta.created_at) == 'number' then
      created = decoded.meta.created_at
    end
  end
  out[#KEYS + 1] = created
end
return out
",
};

/// Take one entry out of a list in place, or move it (the dead-letter tools' [`Taker`]).
/// KEYS = \[list\] (take), \[list, ready\] (move, default layout) or \[list, ready, notify\]
/// (move, Laravel layout); ARGV = \[position, body, `1` when a stored value may be a
/// `__bq_frame` holding body, the value to push\]. The entry is the one at `position` when it
/// holds body, else the first from the head that does; none: returns 0 and writes nothing. A
/// move appends the value to `ready` (and one wake-up token to `notify`) as a publish does,
/// before the entry leaves the list; the entry is replaced by a marker and the marker removed
/// (`LREM` would take the first equal value, not the one at `position`). Returns 1.
///
/// [`Taker`]: babelqueue_core::Taker
pub static TAKE: LuaScript = LuaScript {
    name: "take",
    lua: guarded!(
        r#"
local checks = {}
for n = 1, #KEYS do
  checks[#checks + 1] = KEYS[n]
  checks[#checks + 1] = 'list'
end
local bad = bq_types(checks)
if bad then return bad end
local body, framed = ARGV[2], ARGV[3] == '1'
local function truthy(v)
  if v == nil or v == cjson.null or v == false or v == 0 or v == '' then return false end
  if type(v) == 'table' then return next(v) ~= nil end
  return true
end
local function holds(value)
  if value == body then return true end
  if not framed or string.sub(value, 1, 1) ~= '{'
    or not string.find(value, '"__bq_frame"', 1, true) then
    return false
  end
  local ok, frame = pcall(cjson.decode, value)
  return ok and type(frame) == 'table' and truthy(frame.__bq_frame)
    and type(frame.body) == 'string' and frame.body == body
end
local at = tonumber(ARGV[1])
local value = redis.call('LINDEX', KEYS[1], at)
if not (value and holds(value)) then
  at = nil
  local len = redis.call('LLEN', KEYS[1])
  for first = 0, len - 1, 1000 do
    local chunk = redis.call('LRANGE', KEYS[1], first, first + 999)
    for n = 1, #chunk do
      if holds(chunk[n]) then at = first + n - 1 break end
    end
    if at then break end
  end
  if not at then return 0 end
end
if #KEYS >= 2 then
  redis.call('RPUSH', KEYS[2], ARGV[4])
  if #KEYS == 3 then redis.call('RPUSH', KEYS[3], 1) end
end
local marker = '\0babelqueue:taken\0'
redis.call('LSET', KEYS[1], at, marker)
redis.call('LREM', KEYS[1], 1, marker)
return 1
"#
    ),
};

/// Every script, for loading and tests.
pub static ALL: [&LuaScript; 18] = [
    &PUSH,
    &PUSH_LIST,
    &ACK_LEGACY,
    &ACK_ZSET,
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
    &HELD,
    &STATS_LENGTHS,
    &TAKE,
];
