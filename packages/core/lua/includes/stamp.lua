--[[
  stamp: one time in microseconds held by a key's expiry, the state of token-bucket (F, the time the
  bucket is full again) and gcra (the TAT). Spliced once before the algorithms that use it.
  State:
    PEXPIREAT  ceil(t / 1000) ms
    value      the microseconds the expiry overshoots t (0..999): t = PEXPIRETIME x 1000 - value. An
               integer below 10,000, whose object Redis shares: the key costs no value allocation.
  Read:
    stamp_read(key)      t, or nil for another type, a value that is not an integer below 1000, or no TTL
  Write:
    stamp_write(key, t)  one SET (denyoom): it overwrites whatever was there
]]
local function stamp_read(key)
  local got = redis.pcall('GET', key)
  if type(got) ~= 'string' then return nil end              -- missing, or another type
  local n = tonumber(got)
  if not (n and n >= 0 and n < 1000 and n == math.floor(n)) then return nil end
  local exp = redis.call('PEXPIRETIME', key)
  if exp < 0 then return nil end
  return exp * 1000 - n
end

local function stamp_write(key, t)
  local exp = math.ceil(t / 1000)
  redis.call('SET', key, exp * 1000 - t, 'PXAT', exp)         -- an integer: Redis writes it exactly (%.17g)
end
