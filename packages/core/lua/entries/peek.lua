#!lua flags=no-writes
--[[
  peek: the check half of consume, read-only: it runs under OOM, and a caller may send it with
  EVALSHA_RO to read from a replica. `remaining` and `reset_ms` describe the state before any spend;
  `allowed` says whether a consume of `cost` would be admitted now.
  Input:
    KEYS[i]   as consume
    ARGV      as consume (a cost per pair included, the pattern tail too), without act_by
  Output:
    as consume
]]
local ALG = {}
-- @include algorithms

-- @include now
-- @include keys
-- @include control
local cost = tonumber(ARGV[1])
-- @include pattern
local n = (argc - 1) / (cost < 0 and 5 or 4)
local spend = false
-- @include one-pair
local reply = { now_us, 1 }
local per = cost < 0 and 1 + 4 * n                          -- a cost per pair, as consume
local keys, k = {}, 1
for i = 1, n do
  keys[i], k = pair_key(tonumber(ARGV[i * 4 - 2]), k, ARGV[i * 4 + 1])
end
-- the identities' control keys follow the pairs' (consume.lua)
local ctl, left, ovr = 0, 0, nil
if k <= keyc then ctl, left, ovr = ctl_read(k, keyc, math.floor(now_us / 1000), pat) end
local results = {}
for i = 1, n do
  local b = 1 + (i - 1) * 4
  if per then cost = tonumber(ARGV[per + i]) end
  local alg = ALG[tonumber(ARGV[b + 1])]
  local limit, burst = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 4])
  local window, ov = tonumber(ARGV[b + 3]) or ARGV[b + 3], nil
  if ovr then ov, burst, window = ctl_over(ovr, keys[i], limit, burst, window) end
  if ov then limit = ov end
  local r = alg.check(keys[i], now_us, limit, window, burst, cost)
  if alg.settle then alg.settle(r) end
  r.ov = ov
  results[i] = r
end
for i = 1, n do
  local r = results[i]
  if ctl == -1 then ctl_block(r, left) elseif ctl == 1 then ctl_allow(r) end
  if r.allowed == 0 then reply[2] = 0 end
  reply[#reply + 1] = ctl_allowed(r)
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset
  reply[#reply + 1] = r.retry
  reply[#reply + 1] = r.tag
end
return reply
