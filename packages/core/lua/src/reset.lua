--[[
  reset: forget the state of every pair.

  KEYS   the keys to forget
  ARGV   none
  Reply  how many keys existed

  A single-policy key (ending in its hash tag's '}') had a ':default' suffix in 0.1, and the scripts still
  read that name while the new one is missing: it goes too, or the reset would bring the old state back.
]]
local n = redis.call('DEL', unpack(KEYS))
for i = 1, #KEYS do
  if string.byte(KEYS[i], -1) == 125 then n = n + redis.call('DEL', KEYS[i] .. ':default') end
end
return n
