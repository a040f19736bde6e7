--[[
  refund: give `cost` back to every pair of an earlier admitted consume, never below zero usage and never
  into a newer window than the one the spend was made in (the tags from consume's reply bound it).
  A settlement (limiter.settle) is a refund with a signed cost: the spend becomes the actual cost, so a
  negative cost charges -cost more, bound to the spend's window the same way (each algorithm's refund
  says how far past the limit it goes).

  KEYS   the same keys as the consume being refunded, then optionally a marker key (in the first key's
         hash slot) naming this spend
  ARGV   [1] cost (> 0 gives back, < 0 charges more), then 5 per pair i, at 1 + 5(i-1) + 1..5: alg,
         limit, window_ms, burst, tag, then (with the marker) the spend's whole cost, then optionally 1:
         a settlement
  Reply  now_us

  The marker makes a refund idempotent whoever sends it and however often (a retry after a timeout, a
  second refund() of one decision, an adapter and the app both refunding): it holds the units already
  given back, and the spend's cost bounds their sum. A settlement applies only while no marker exists and
  leaves one holding the whole cost: once settled, or once anything was refunded, a spend changes no more.
  It lives as long as any pair could still change (2 windows + 3 times the burst's drain time), and only
  refunds and settlements create one.
]]
local ALG = {}
-- @include algorithms

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local pairs_n = (#ARGV - 1 - (#ARGV - 1) % 5) / 5
local marker = KEYS[pairs_n + 1]
if marker then
  local spent = tonumber(ARGV[2 + 5 * pairs_n])
  local got = redis.pcall('GET', marker)
  local done = tonumber(got) or 0
  if ARGV[3 + 5 * pairs_n] == '1' then
    if got then return now_us end                          -- refunded or settled already: no more
    done = spent
  else
    cost = math.min(cost, spent - done)
    if cost <= 0 then return now_us end
    done = done + cost
  end
  local ttl = 1
  for i = 1, pairs_n do
    local b = 1 + (i - 1) * 5
    local limit, window, burst = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
    ttl = math.max(ttl, 2 * window + 3 * math.ceil(burst * math.ceil(window * 1000 / limit) / 1000) + 1)
  end
  redis.call('SET', marker, done, 'PX', ttl)
end
if cost == 0 then return now_us end
for i = 1, pairs_n do
  local b = 1 + (i - 1) * 5
  ALG[tonumber(ARGV[b + 1])].refund(KEYS[i], now_us, tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), cost)
end
return now_us
