--[[
  top: the identities a limiter refused most, per policy and period. One sorted set per (policy, period),
  identity -> refusals, capped at a number of members; written only when calls were refused (a limiter
  sends what it counted, about once a second), never by an admitted call.
  Input:
    ARGV[1]   'add' or 'read'
    add:  KEYS[1]  <prefix>:{~h:t}:<policy>:<period_ms>:<period index> (keys.ts)
          ARGV[2]  cap: the most members kept; ARGV[3] expiry, PXAT ms (the end of the next period);
          then identity, count pairs
    read: KEYS     the sets to read (a policy's current and previous period)
  Output:
    add: the members the set keeps
    read: per key, { identity, refusals, ... } (refusals as text), most refused first
  Bound:
    after each add the set keeps its `cap` members with the most refusals (ties: the greater identity).
    A member trimmed away loses its count: an identity missing from the set was refused at most as often
    as the least refused member kept when it was trimmed (in that period), so the top is exact for every
    identity refused more than that.
]]
if ARGV[1] == 'read' then
  local out = {}
  for i = 1, #KEYS do out[i] = redis.call('ZRANGE', KEYS[i], 0, -1, 'REV', 'WITHSCORES') end
  return out
end
local key = KEYS[1]
for i = 4, #ARGV - 1, 2 do redis.call('ZINCRBY', key, ARGV[i + 1], ARGV[i]) end
local cap = tonumber(ARGV[2])
local n = redis.call('ZCARD', key)
if n > cap then
  redis.call('ZREMRANGEBYRANK', key, 0, n - cap - 1)
  n = cap
end
redis.call('PEXPIREAT', key, ARGV[3])
return n
