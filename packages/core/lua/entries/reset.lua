--[[
  reset: forget the state of every pair.
  Input:
    KEYS      the keys to forget: each pair's key, and its penalty key if it has one; then each compact
              pair's three levels (keys.lua)
    ARGV      none; or, with compact pairs, how many keys come before their levels, then each one's field
  Output:
    how many keys existed, plus how many levels held a compact pair's field
  Compact:
    the field is set to 0, not removed: a field leaves its level only when its window is over
    (compact.lua's rule).
]]
local m = tonumber(ARGV[1]) or #KEYS
local n = 0
if m > 0 then n = redis.call('DEL', unpack(KEYS, 1, m)) end
for i = 2, #ARGV do
  local b = m + (i - 2) * 3
  for j = 1, 3 do
    if redis.pcall('HEXISTS', KEYS[b + j], ARGV[i]) == 1 then -- a level of another type holds nothing
      redis.call('HSET', KEYS[b + j], ARGV[i], 0)
      n = n + 1
    end
  end
end
return n
