--[[
  now: the server's time, read once per script, so every pair and every call of a script is decided at
  one instant and no client clock is trusted.
  Input:
    none: one TIME call
  Output:
    now_us  TIME as integer microseconds
]]
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
