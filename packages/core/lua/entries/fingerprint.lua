--[[
  fingerprint: the fingerprint of the secret that places a prefix's identities under
  `storage: 'compact'`. Processes with different secrets put one identity in two places and would each
  grant its limit, so a store checks, per prefix, that Redis holds its own fingerprint before it counts.
  Input:
    KEYS[1]  <prefix>:{~h:s}
    ARGV[1]  the store's fingerprint: a keyed hash of a fixed text under the secret, never the secret
    ARGV[2]  how long the fingerprint lives past this check, ms
  Output:
    the fingerprint Redis holds: ARGV[1] when it held none (then it is stored) or the same (its life
    renewed); another one is left as it is.
]]
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]
