--[[
  control: writes and lists block and allow entries (includes/control.lua reads them in the decision
  scripts). One key per call, so each runs in that key's slot.
  Input:
    ARGV[1]   op:
      'set'   KEYS[1] an identity's control key; ARGV[2] the field, 'b' (block) or 'a' (allow);
              ARGV[3] for_ms, how long from now (0 clears the field); ARGV[4] a block's reason
      'index' KEYS[1] a prefix's block index (a hash identity -> "end_ms reason"); ARGV[2] the identity;
              ARGV[3] for_ms (0 removes it); ARGV[4] the reason
      'list'  KEYS[1] the index; ARGV[2] at most this many entries
      'oset'  KEYS[1] an identity's control key; ARGV[2] its overrides '<policy>=<limit>,...' ('' clears
              them); ARGV[3] ttl_ms (0: no end)
      'oget'  KEYS[1] an identity's control key
      'oindex' KEYS[1] a prefix's override index (identity -> '<end_ms>|<overrides>'); ARGV[2] the
              identity; ARGV[3] its overrides ('' removes it); ARGV[4] ttl_ms; ARGV[5] the most
              identities the index may hold
      'olist' KEYS[1] the override index; ARGV[2] at most this many entries
      'pset'  KEYS[1] a prefix's pattern table (pattern prefix -> '<end_ms>|<overrides>'), KEYS[2] its
              counter (same slot); ARGV[2] the pattern prefix; ARGV[3] its overrides ('' removes it);
              ARGV[4] ttl_ms; ARGV[5] the most patterns the table may hold (ended ones are dropped
              first)
      'pload' KEYS[1] the pattern table, KEYS[2] its counter
      'pver'  KEYS[1] a cluster slot's copy of the counter; ARGV[2] a version: kept if not older
  Output:
    'set', 'index', 'oset': 1
    'list': { identity, expires_in_ms, reason, ... } of live blocks; ended ones met are removed
    'oget': { overrides, expires_in_ms (-1: no end) } or {} when none is live
    'oindex': 1, or an error when the index is full and the identity not in it
    'olist': { identity, expires_in_ms (-1: no end), overrides, ... }; ended ones met are removed
    'pset': the new version (the counter: one more, or the server's time in ms if later), or an error
            when the table is full
    'pload': { version, now_ms, pattern prefix, '<end_ms>|<overrides>', ... } of the live patterns
    'pver': 1
  The control key lives as long as its longest live entry: each entry's own `for`, and without end
  while an override without end is held.
]]
-- @include now
local op, key = ARGV[1], KEYS[1]
local now_ms = math.floor(now_us / 1000)

-- an '<end_ms>|<overrides>' value: its end (0: none) and overrides, or nil once ended
local function live_override(v)
  if not v then return nil end
  local ends, spec = string.match(v, '^(%d+)|(.*)$')
  ends = tonumber(ends)
  if not ends or (ends > 0 and ends <= now_ms) then return nil end
  return ends, spec
end

-- after a write: the key goes when nothing in it is live, else lives as long as its longest entry
local function keep(k)
  local v = redis.call('HMGET', k, 'b', 'a', 'o')
  local b, a = tonumber(v[1]) or 0, tonumber(v[2]) or 0
  local oe = live_override(v[3])
  if b <= now_ms and a <= now_ms and not oe then
    redis.call('DEL', k)
  elseif oe == 0 then
    redis.call('PERSIST', k)
  else
    redis.call('PEXPIREAT', k, string.format('%.0f', math.max(b, a, oe or 0)))
  end
end

-- an override's stored value, from its overrides and ttl_ms
local function override_value(spec, ttl)
  return string.format('%.0f|%s', ttl > 0 and now_ms + ttl or 0, spec)
end

if op == 'set' then
  local field, for_ms = ARGV[2], tonumber(ARGV[3])
  if for_ms > 0 then
    redis.call('HSET', key, field, string.format('%.0f', now_ms + for_ms))
    if field == 'b' then redis.call('HSET', key, 'r', ARGV[4]) end
  else
    redis.call('HDEL', key, field)
    if field == 'b' then redis.call('HDEL', key, 'r') end
  end
  keep(key)
  return 1
end
if op == 'oset' then
  if ARGV[2] == '' then
    redis.call('HDEL', key, 'o')
  else
    redis.call('HSET', key, 'o', override_value(ARGV[2], tonumber(ARGV[3])))
  end
  keep(key)
  return 1
end
if op == 'oget' then
  local ends, spec = live_override(redis.call('HGET', key, 'o'))
  if not ends then return {} end
  return { spec, ends > 0 and ends - now_ms or -1 }
end
if op == 'oindex' then
  if ARGV[3] == '' then
    redis.call('HDEL', key, ARGV[2])
    return 1
  end
  if redis.call('HEXISTS', key, ARGV[2]) == 0 and redis.call('HLEN', key) >= tonumber(ARGV[5]) then
    return redis.error_reply('tollgate overrides: the index is full (' .. ARGV[5] .. ' identities)')
  end
  redis.call('HSET', key, ARGV[2], override_value(ARGV[3], tonumber(ARGV[4])))
  return 1
end
if op == 'olist' then
  local max, out, cursor = tonumber(ARGV[2]), {}, '0'
  repeat
    local page = redis.call('HSCAN', key, cursor, 'COUNT', 100)
    cursor = page[1]
    local kv = page[2]
    for i = 1, #kv, 2 do
      local ends, spec = live_override(kv[i + 1])
      if not ends then
        redis.call('HDEL', key, kv[i])
      elseif #out < 3 * max then
        out[#out + 1] = kv[i]
        out[#out + 1] = ends > 0 and ends - now_ms or -1
        out[#out + 1] = spec
      end
    end
  until cursor == '0' or #out >= 3 * max
  return out
end
if op == 'pset' then
  if ARGV[3] == '' then
    redis.call('HDEL', key, ARGV[2])
  else
    if redis.call('HEXISTS', key, ARGV[2]) == 0 and redis.call('HLEN', key) >= tonumber(ARGV[5]) then
      -- make room from the patterns that ended, then refuse
      local kv = redis.call('HGETALL', key)
      for i = 1, #kv, 2 do
        if not live_override(kv[i + 1]) then redis.call('HDEL', key, kv[i]) end
      end
      if redis.call('HLEN', key) >= tonumber(ARGV[5]) then
        return redis.error_reply('tollgate overrides: the pattern table is full (' .. ARGV[5] .. ' patterns)')
      end
    end
    redis.call('HSET', key, ARGV[2], override_value(ARGV[3], tonumber(ARGV[4])))
  end
  -- at least the server's time in ms: after a FLUSHALL the next change still outnumbers every version
  -- a process read before, so it reloads
  local v = math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1, now_ms)
  redis.call('SET', KEYS[2], string.format('%.0f', v))
  return v
end
if op == 'pload' then
  local out = { tonumber(redis.call('GET', KEYS[2])) or 0, now_ms }
  local kv = redis.call('HGETALL', key)
  for i = 1, #kv, 2 do
    if live_override(kv[i + 1]) then
      out[#out + 1] = kv[i]
      out[#out + 1] = kv[i + 1]
    end
  end
  return out
end
if op == 'pver' then
  local v = tonumber(ARGV[2])
  if (tonumber(redis.call('GET', key)) or 0) < v then redis.call('SET', key, v) end
  return 1
end
if op == 'index' then
  local for_ms = tonumber(ARGV[3])
  if for_ms > 0 then
    local ends = now_ms + for_ms
    redis.call('HSET', key, ARGV[2], string.format('%.0f %s', ends, ARGV[4]))
    -- the index outlives its longest block (a shorter one is pruned when listed)
    local ttl = redis.call('PEXPIRETIME', key)
    if ttl < ends then redis.call('PEXPIREAT', key, string.format('%.0f', ends)) end
  else
    redis.call('HDEL', key, ARGV[2])
  end
  return 1
end
-- 'list': bounded, in HSCAN's order
local max, out, cursor = tonumber(ARGV[2]), {}, '0'
repeat
  local page = redis.call('HSCAN', key, cursor, 'COUNT', 100)
  cursor = page[1]
  local kv = page[2]
  for i = 1, #kv, 2 do
    local ends, reason = string.match(kv[i + 1], '^(%d+) (.*)$')
    ends = tonumber(ends)
    if not ends or ends <= now_ms then
      redis.call('HDEL', key, kv[i])
    elseif #out < 3 * max then
      out[#out + 1] = kv[i]
      out[#out + 1] = ends - now_ms
      out[#out + 1] = reason
    end
  end
until cursor == '0' or #out >= 3 * max
return out
