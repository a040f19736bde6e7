--[[
  refund: give `cost` back to every pair of an earlier admitted consume, never below zero usage and never
  into a newer window than the one the spend was made in (the tags from consume's reply bound it).

  KEYS   the same keys as the consume being refunded
  ARGV   [1] cost, then 5 per pair i, at 1 + 5(i-1) + 1..5: alg, limit, window_ms, burst, tag
  Reply  now_us
]]
local ALG = {}
-- @include algorithms

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
for i = 1, #KEYS do
  local b = 1 + (i - 1) * 5
  ALG[tonumber(ARGV[b + 1])].refund(KEYS[i], now_us, tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), cost)
end
return now_us
