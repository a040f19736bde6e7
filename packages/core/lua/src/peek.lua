#!lua flags=no-writes
--[[
  peek: the check half of consume, read-only (runs under OOM; a caller may send it with EVALSHA_RO to read from a replica).
  `remaining` and `reset_ms` describe the state before any spend; `allowed` says whether a consume of
  `cost` would be admitted now.

  KEYS   as consume
  ARGV   as consume
  Reply  as consume
]]
local ALG = {}
-- @include algorithms

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local reply = { now_us, 1 }
for i = 1, #KEYS do
  local b = 1 + (i - 1) * 4
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
