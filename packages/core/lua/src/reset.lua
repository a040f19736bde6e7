--[[
  reset: forget the state of every pair.
  Input:
    KEYS[i]   the keys to forget: each pair's key, and its penalty key if it has one
  Output:
    how many keys existed
]]
return redis.call('DEL', unpack(KEYS))
