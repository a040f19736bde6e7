#!lua flags=no-writes
--[[
  peek: the check half of consume, read-only (runs under OOM; a caller may send it with EVALSHA_RO to read from a replica).
  `remaining` and `reset_ms` describe the state before any spend; `allowed` says whether a consume of
  `cost` would be admitted now.

  KEYS   as consume
  ARGV   as consume (a cost per pair included)
  Reply  as consume
]]
local ALG = {}
-- @include algorithms

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
-- One pair, the common call: as the loop below, in one table (see consume.lua).
if #KEYS == 1 then
  local alg = ALG[tonumber(ARGV[2])]
  local r = alg.check(KEYS[1], now_us, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), cost)
  if alg.settle then alg.settle(r) end
  return { now_us, r.allowed, r.allowed, r.remaining, r.reset, r.retry, r.tag }
end
local reply = { now_us, 1 }
local per = cost < 0 and 1 + 4 * #KEYS                      -- a cost per pair, as consume
for i = 1, #KEYS do
  local b = 1 + (i - 1) * 4
  if per then cost = tonumber(ARGV[per + i]) end
  local alg = ALG[tonumber(ARGV[b + 1])]
  local r = alg.check(KEYS[i], now_us, tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), cost)
  if alg.settle then alg.settle(r) end
  if r.allowed == 0 then reply[2] = 0 end
  reply[#reply + 1] = r.allowed
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset
  reply[#reply + 1] = r.retry
  reply[#reply + 1] = r.tag
end
return reply
