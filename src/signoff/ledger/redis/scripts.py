"""The Redis ledger's Lua scripts, each atomic on the server, and its schema's migrations."""

from redis import asyncio as aioredis

from signoff.core.errors import LedgerUnavailable
from signoff.ledger.redis.failures import new_epoch

COMMIT = """
local p, c = ARGV[1], cjson.decode(ARGV[2])
local epoch = redis.call('GET', p .. ':epoch')
if epoch ~= c.epoch then return {'wiped', epoch} end
for _, r in ipairs(c.revs) do
  local rev = tonumber(redis.call('HGET', p .. ':' .. r[1] .. ':' .. r[2], 'rev')) or 0
  if rev ~= r[3] then return {'stale'} end
end
for _, call in ipairs(c.calls) do
  if redis.call('HEXISTS', p .. ':calls', call) == 1 then return {'stale'} end
end
for _, t in ipairs(c.tseqs) do
  if redis.call('HGET', p .. ':t:' .. t[1], 'seq') ~= t[2] then return {'stale'} end
end
for _, call in ipairs(c.tcalls) do
  if redis.call('HEXISTS', p .. ':tcalls', call) == 1 then return {'stale'} end
end
local head = redis.call('HMGET', p .. ':head', 'seq', 'hash')
local seq = tonumber(head[1]) or 0
if seq ~= c.head then return {'head', seq, head[2]} end
for _, a in ipairs(c.approvals) do
  local key = p .. ':a:' .. a.id
  if a.call then
    local n = redis.call('INCR', p .. ':n')
    redis.call('HSET', key, 'record', a.record, 'state', a.state, 'rev', 1)
    redis.call('HSET', p .. ':calls', a.call, a.id)
    redis.call('ZADD', p .. ':order', n, a.id)
    redis.call('ZADD', p .. ':chat:' .. a.chat, n, a.id)
    redis.call('ZADD', p .. ':state:' .. a.state, n, a.id)
    if a.deadline then redis.call('ZADD', p .. ':due', a.deadline, a.id) end
  else
    local was = redis.call('HGET', key, 'state')
    redis.call('HSET', key, 'record', a.record, 'state', a.state)
    redis.call('HINCRBY', key, 'rev', 1)
    if was ~= a.state then
      local n = redis.call('ZSCORE', p .. ':order', a.id)
      redis.call('ZREM', p .. ':state:' .. was, a.id)
      redis.call('ZADD', p .. ':state:' .. a.state, n, a.id)
      redis.call('ZREM', p .. ':due', a.id)
      if a.state ~= 'pending' then redis.call('PUBLISH', p .. ':decided', a.record) end
    end
  end
end
for _, g in ipairs(c.grants) do
  local key = p .. ':g:' .. g.id
  redis.call('HSET', key, 'record', g.record)
  if redis.call('HINCRBY', key, 'rev', 1) == 1 then
    local n = redis.call('INCR', p .. ':n')
    redis.call('ZADD', p .. ':grants', n, g.id)
    redis.call('ZADD', p .. ':grants:' .. g.tool, n, g.id)
  end
end
local seqs = {}
for _, t in ipairs(c.tasks) do
  local key = p .. ':t:' .. t.id
  if t.call then
    redis.call('HSET', p .. ':tcalls', t.call, t.id)
    redis.call('ZADD', p .. ':tchat:' .. t.chat, t.created, t.id)
    redis.call('ZADD', p .. ':tall', t.created, t.id)
  end
  local was = redis.call('HGET', key, 'worker')
  if was then redis.call('SREM', p .. ':tworker:' .. was, t.id) end
  local seq = redis.call('INCR', p .. ':tseq')
  redis.call('HSET', key, 'record', t.record, 'state', t.state, 'worker', t.worker,
    'cancel_by', t.cancel_by, 'progress', t.progress, 'message', t.message,
    'updated_at', t.updated_at, 'heartbeat', t.heartbeat, 'seq', seq)
  redis.call('ZADD', p .. ':tchanges', seq, t.id)
  if t.state == 'pending' or t.state == 'running' then
    redis.call('ZADD', p .. ':tlive', t.heartbeat, t.id)
    redis.call('SADD', p .. ':tworker:' .. t.worker, t.id)
  else
    redis.call('ZREM', p .. ':tlive', t.id)
  end
  table.insert(seqs, seq)
end
for _, r in ipairs(c.principals) do
  local key = p .. ':p:' .. r.id
  redis.call('HSET', key, 'record', r.record)
  if redis.call('HINCRBY', key, 'rev', 1) == 1 then
    redis.call('HSET', p .. ':tokens', r.hash, r.id)
    redis.call('ZADD', p .. ':principals', redis.call('INCR', p .. ':n'), r.id)
  end
end
for _, o in ipairs(c.notices) do
  redis.call('HSET', p .. ':o:' .. o.id, unpack(o.fields))
  local n = redis.call('INCR', p .. ':n')
  redis.call('ZADD', p .. ':outbox', n, o.id)
  redis.call('ZADD', p .. ':oa:' .. o.approval, n, o.id)
  redis.call('ZADD', p .. ':odue:' .. o.channel, o.due, o.id)
end
for _, e in ipairs(c.entries) do redis.call('XADD', p .. ':audit', e[1] .. '-1', 'e', e[2]) end
if #c.entries > 0 then redis.call('HSET', p .. ':head', 'seq', c.entries[#c.entries][1], 'hash', c.hash) end
return {'ok', seqs}
"""
"""Store a batch of writes (see `RedisBackend.store`) into the ledger whose epoch marker it names
(`wiped`, with the marker found, if it is gone or another's: a ledger that lost its data is never written
anew as if nothing happened), if nothing it was computed from moved: every record's
`rev`, every task's change number and every new approval's or task's call (`stale`), and the audit head
(`head`, with the real one). A task's times come as strings: Lua would print a number with 14 digits.
Answers with the change number each task got."""

CLAIM = """
local p, holder, now, till = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
local due = p .. ':odue:' .. ARGV[2]
local ids = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))
for _, id in ipairs(ids) do
  local key = p .. ':o:' .. id
  redis.call('HSET', key, 'holder', holder, 'lease_until', till)
  redis.call('HINCRBY', key, 'attempts', 1)
  redis.call('ZADD', due, till, id)
end
return ids
"""
"""Hold the channel's notices due by now (a pending notice's score is when it may next be tried: its next
attempt, or its holder's lease's end), each for one more attempt; their ids, soonest first."""

SETTLE = """
local p, id = ARGV[1], ARGV[3]
local key = p .. ':o:' .. id
if redis.call('HGET', key, 'holder') ~= ARGV[2] then return 0 end
redis.call('HSET', key, unpack(ARGV, 6))
local due = p .. ':odue:' .. redis.call('HGET', key, 'channel')
if ARGV[4] == 'pending' then redis.call('ZADD', due, ARGV[5], id) else redis.call('ZREM', due, id) end
return 1
"""
"""Store a notice's fields if the holder that claimed it still holds it; a pending one is due again at the
score given, and any other leaves the channel's due notices."""

SAVE_CHAT = """
local version = tonumber(redis.call('HGET', KEYS[1], 'version')) or 0
if version ~= tonumber(ARGV[1]) - 1 then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'state', ARGV[2], 'updated_at', ARGV[3])
if version == 0 and ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'owner', ARGV[4]) end
if ARGV[5] ~= '' then
  local kept = tonumber(ARGV[5])
  if kept == 0 then redis.call('DEL', KEYS[2]) else redis.call('LTRIM', KEYS[2], 0, kept - 1) end
  for i = 6, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
end
return 1
"""
"""Save a chat over the version read; then, unless the count kept is empty (the entries stay), keep that
many of its entries and append the rest of the arguments."""

LOAD_CHAT = """
local chat = redis.call('HMGET', KEYS[1], 'version', 'state', 'updated_at', 'owner')
if not chat[1] then return false end
if chat[1] == ARGV[1] then return {chat[1], '', chat[3], chat[4] or ''} end
local found = {chat[1], chat[2], chat[3], chat[4] or ''}
for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do found[#found + 1] = entry end
return found
"""
"""A chat's version, state, update time, owner ('' for none) and entries; without its state and entries
when its version is the one the caller holds."""

LOG_FRAMES = """
if redis.call('HGET', KEYS[1], 'reply') ~= ARGV[1] then return 0 end
local have, start = redis.call('LLEN', KEYS[2]), tonumber(ARGV[2])
for i = 6, #ARGV do
  if start + i - 5 > have then redis.call('RPUSH', KEYS[2], ARGV[i]) end
end
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'done', 1) end
redis.call('HSET', KEYS[1], 'updated_at', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
return 1
"""
"""Append frames to the chat's reply log if it is still this reply's; a frame already there (a retry)
is not appended twice."""

BEGIN_REPLY = """
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'reply', ARGV[1], 'meta', ARGV[2], 'done', 0, 'updated_at', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return 1
"""

FORGET_REPLIES = """
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
for _, chat in ipairs(old) do
  redis.call('DEL', ARGV[1] .. ':reply:' .. chat, ARGV[1] .. ':frames:' .. chat)
  redis.call('ZREM', KEYS[1], chat)
end
return #old
"""

REPORT_TASKS = """
local p, now, cancelling = ARGV[1], ARGV[2], {}
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local key = p .. ':t:' .. id
  if redis.call('HGET', key, 'state') == 'running' then
    local seq = redis.call('INCR', p .. ':tseq')
    redis.call('HSET', key, 'progress', ARGV[i + 1], 'message', ARGV[i + 2], 'updated_at', now,
      'heartbeat', now, 'seq', seq)
    redis.call('ZADD', p .. ':tchanges', seq, id)
    redis.call('ZADD', p .. ':tlive', now, id)
    if redis.call('HGET', key, 'cancel_by') ~= '' then table.insert(cancelling, id) end
  end
end
return cancelling
"""

BEAT = """
local p, now, cancelling = ARGV[1], ARGV[3], {}
for _, id in ipairs(redis.call('SMEMBERS', p .. ':tworker:' .. ARGV[2])) do
  local key = p .. ':t:' .. id
  redis.call('HSET', key, 'heartbeat', now)
  redis.call('ZADD', p .. ':tlive', now, id)
  local state, by = unpack(redis.call('HMGET', key, 'state', 'cancel_by'))
  if state == 'running' and by ~= '' then table.insert(cancelling, id) end
end
return cancelling
"""

LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

MIGRATIONS: tuple[str, ...] = (
    "",  # version 1: every key is made as its record is first written; nothing to move
    "redis.call('SET', prefix .. ':epoch', epoch, 'NX')",  # version 2: the epoch marker (`failures`)
)
"""The schema, one migration per version: version N is the keys after MIGRATIONS[N - 1], a Lua body that
may use `prefix` and `epoch` (a new epoch marker). Append only."""
SCHEMA_VERSION = len(MIGRATIONS)

MIGRATE = """
local have = tonumber(redis.call('GET', KEYS[1]) or '0')
if have ~= tonumber(ARGV[2]) - 1 then return have end
local prefix, epoch = ARGV[1], ARGV[3]
%s
redis.call('SET', KEYS[1], ARGV[2])
return tonumber(ARGV[2])
"""
"""Run one migration if the schema is at the version before it, and record it in the same script: of
several workers migrating at once, exactly one applies it."""


async def migrate(client: aioredis.Redis, prefix: str, shown: str) -> int:
    """Apply the migrations after the recorded version, each in the script that records it; a newer
    schema is refused (the ledger at `shown`). The version before."""
    schema = f"{prefix}:schema"
    before = int(await client.get(schema) or 0)
    if before > SCHEMA_VERSION:
        raise LedgerUnavailable(
            f"Redis ledger {shown} (prefix {prefix!r}) has ledger schema {before},"
            f" newer than this signoff's {SCHEMA_VERSION}"
        )
    for version in range(before + 1, SCHEMA_VERSION + 1):
        await client.eval(MIGRATE % MIGRATIONS[version - 1], 1, schema, prefix, version, new_epoch())
    return before
