--[[
  now: the server's time, read once per script, so every pair and every call of a script is decided at
  one instant and no client clock is trusted.
  Input:
    none: one TIME call
  Output:
    now_us  TIME as integer microseconds
]]
local t = redis.call('TIME')
-- arithmetic reads TIME's two integer strings without tonumber's function call, which Redis pays for
local now_us = t[1] * 1000000 + t[2]
