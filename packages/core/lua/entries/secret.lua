--[[
  secret: the secret that places a prefix's identities under `storage: 'compact'` when the stores are
  given none. It is kept in Redis, one per prefix, so every process finds the same one; a store reads it
  at its first call for a prefix and again every minute.
  Input:
    KEYS[1]  <prefix>:{~h:s}
    ARGV[1]  the store's proposal: the secret it already uses for this prefix, or a fresh random one
             before it has any, so that a store checking after FLUSHALL or an eviction writes back the
             secret every process already uses
  Output:
    the value Redis holds: ARGV[1] when it held none (then it is stored, with no expiry), else what it
    holds, left as it is (another store's secret, or the fingerprint of a store given `secret`).
]]
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
