--[[
  reset: forget the state of every pair.

  KEYS   the keys to forget
  ARGV   none
  Reply  how many keys existed
]]
return redis.call('DEL', unpack(KEYS))
