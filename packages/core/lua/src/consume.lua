--[[
  consume: check every (policy, key) pair of one call WITHOUT writing, then spend `cost` on all of them,
  or on none if any pair refuses. One round trip, atomic. Time is the server's, read once.

  KEYS   one key per (policy, identity) pair, built as <prefix>:{<identity>}:<policy>:<sig> (keys.ts);
         a script reads and writes these keys and nothing else
  ARGV   [1] cost (integer >= 0), or -1: a cost per pair, for two pairs or more (then ARGV[1 + 4n + i]
         is pair i's, n = #KEYS)
         then 4 per pair i, at 1 + 4(i-1) + 1..4:
           alg      1 fixed-window | 2 sliding-window | 3 sliding-log | 4 token-bucket | 5 gcra | 6 concurrency
           limit    units per window (integer > 0)
           window   window length in ms (integer > 0)
           burst    capacity for token-bucket and gcra (integer > 0; = limit for the others)
         With a cost per pair, every pair is checked with its own cost, and a pair of cost 0 is not charged.
  No shebang on purpose: a `#!lua` line costs ~20% of Redis' time per call (measured on 7.0), and it is
  not needed for OOM safety. Without it Redis refuses, under maxmemory, the script's FIRST write if that
  is a denyoom command, and lets later writes through (scriptVerifyOOM: "we can't stop in the middle").
  So every write comes after every check, and each algorithm's commit starts with a denyoom command
  (SET, INCRBY, ZADD; a repair starts with SET): under OOM the script fails before changing state.

  Reply  { now_us, allowed (1 if every pair allowed), then 5 per pair:
           allowed, remaining, reset_ms, retry_ms (0 if allowed, -1 = never), tag (what refund needs) }
         Integers only: Redis truncates Lua floats, and RESP3 would turn booleans into another type.
]]
local ALG = {}
-- @include algorithms

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
-- One pair, the common call: the same evaluation as the loops below (allowed is 0 or 1, so `all` is the
-- pair's), without their tables and lookups: ~10 % of Redis' CPU for a lone call (benchmarks/script-cost.mts).
if #KEYS == 1 then
  local alg = ALG[tonumber(ARGV[2])]
  local limit, window, burst = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  local r = alg.check(KEYS[1], now_us, limit, window, burst, cost)
  if r.allowed == 1 and cost > 0 then
    alg.commit(KEYS[1], r, limit, window, burst, cost)
  elseif alg.settle then
    alg.settle(r)
  end
  return { now_us, r.allowed, r.allowed, r.remaining, r.reset, r.retry, r.tag }
end
local results = {}
local all = 1
-- a cost per pair (limiter.consume(key, { cost: { tokens: n } })): pair i's is after the pairs
local per = cost < 0 and 1 + 4 * #KEYS
for i = 1, #KEYS do
  local b = 1 + (i - 1) * 4
  if per then cost = tonumber(ARGV[per + i]) end
  local r = ALG[tonumber(ARGV[b + 1])].check(KEYS[i], now_us, tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), cost)
  results[i] = r
  if r.allowed == 0 then all = 0 end
end
local charge = all == 1 and (per or cost > 0)
for i = 1, #KEYS do
  local b = 1 + (i - 1) * 4
  local alg = ALG[tonumber(ARGV[b + 1])]
  if per then cost = tonumber(ARGV[per + i]) end
  if charge and cost > 0 then
    alg.commit(KEYS[i], results[i], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), cost)
  elseif alg.settle then
    alg.settle(results[i])                               -- numbers only an uncharged pair needs
  end
end
local reply = { now_us, all }
for i = 1, #KEYS do
  local r = results[i]
  reply[#reply + 1] = r.allowed
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset
  reply[#reply + 1] = r.retry
  reply[#reply + 1] = r.tag
end
return reply
