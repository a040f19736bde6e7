--[[
  count: reading a calendar window's count from a string key (the fixed window's value also carries
  its window's parity, fixed-window.lua's fw_read; the compact fixed window keeps its counts in a hash
  field). Spliced once, before the algorithms.
  Input:
    key   a pair's key
  Output:
    fw_count: nil when there is no string there, 0 when the string is not a count (another type, a
    non-integer, a negative or huge value: overwritten by the next spend), else the count
]]
local function fw_count(key)
  local got = redis.pcall('GET', key)
  if type(got) ~= 'string' then return got and 0 or nil end  -- another type: 0, overwritten on spend
  local n = tonumber(got)
  if n and n >= 1 and n <= 9007199254740991 and n == math.floor(n) then return n end
  return 0                                                  -- NaN fails every comparison
end
