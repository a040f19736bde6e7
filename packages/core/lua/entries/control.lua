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
  Output:
    'set', 'index': 1
    'list': { identity, expires_in_ms, reason, ... } of live blocks; ended ones met are removed
  The control key lives as long as its longest live entry: each entry's own `for`.
]]
-- @include now
local op, key = ARGV[1], KEYS[1]
local now_ms = math.floor(now_us / 1000)
if op == 'set' then
  local field, for_ms = ARGV[2], tonumber(ARGV[3])
  if for_ms > 0 then
    redis.call('HSET', key, field, string.format('%.0f', now_ms + for_ms))
    if field == 'b' then redis.call('HSET', key, 'r', ARGV[4]) end
  else
    redis.call('HDEL', key, field)
    if field == 'b' then redis.call('HDEL', key, 'r') end
  end
  local v = redis.call('HMGET', key, 'b', 'a')
  local b, a = tonumber(v[1]) or 0, tonumber(v[2]) or 0
  if b <= now_ms and a <= now_ms then
    redis.call('DEL', key)
  else
    redis.call('PEXPIREAT', key, string.format('%.0f', math.max(b, a)))
  end
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
