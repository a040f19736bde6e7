--[[
  reset: forget the state of every pair.

  KEYS   the keys to forget (each pair's key, and its penalty key if it has one)
  ARGV   none
  Reply  how many keys existed
]]
return redis.call('DEL', unpack(KEYS))
