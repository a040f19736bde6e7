--[[
  compact: the counters of many identities as the fields of a few hashes (fixed-window and
  sliding-window under RedisStore's `storage: 'compact'`), each small enough for Redis' listpack
  encoding, where a field costs a few bytes instead of a key each. Spliced once before the algorithms
  that use it.
  Input (a pair's key, a table):
    [1], [2], [3]  the levels of the identity's bucket: three hashes in one hash slot ([2] and [3]
                   false for a lean pair, keys.lua)
    [4]            the identity's field in them
    [5]            its identity's control key (control.lua)
  State:
    A level is a hash of field -> count. Every level of a bucket has the same expiry, its window's
    (each algorithm says which). Levels 1 and 2 hold at most CB_CAP fields each, within Redis' default
    hash-max-listpack-entries (512), and level 3 whatever they cannot, so a flood of fresh identities
    leaves every other identity's level as it was, listpack included.
  Rule:
    A level holds fields only while every level above it is full: a new field goes to the first level
    with room, and no field leaves a level before its window is over (a count given back to zero stays,
    as 0). So a lookup that misses a level with room is over: the identity is new. A level below the
    first counts only while its expiry is the first level's: a first level starting again leaves the
    levels below in place (a call then needs its first level only), and they read as stale.
  Output (for compact-fixed-window and compact-sliding-window):
    CB_CAP                              the most fields levels 1 and 2 hold
    CB_RESEND                           the allowed of a lean call that needs its levels: nothing changed
    cb_pair(key, at, field, lean)       a batch run's call as a key table
    cb_short(k)                         whether a lean pair (keys.lua) needs the levels it was sent without
    cb_find(k, v1, window)              where the identity's field is, or where a new one goes
    cb_int(v)                           a stored count, 0 for anything else
    cb_end(exp, window)                 the window index an expiry ends, nil for none
    cb_hdel(key, fields)                HDEL in chunks
    cb_state(k, j, n, wid, window, span)  what level j holds for a new field: live, prev, fresh, dead, wrong
    cb_put(k, j, state, value, at)      writes a new field at level j, starting the level when it must
]]
local CB_CAP = 256
-- A lean pair's answer when it needs the levels it was sent without: resend it whole (wire.ts).
local CB_RESEND = -4

-- A stored count: an integer from 0 to 2^53 - 1, else 0 (text written by something else).
local function cb_int(v)
  local n = tonumber(v)
  if n and n >= 0 and n <= 9007199254740991 and n == math.floor(n) then return n end
  return 0
end

-- The window index an expiry ends (to the nearest window end: MIGRATE restores a key with its remaining
-- TTL, which shifts the expiry by the transfer time); nil for no expiry.
local function cb_end(exp, window)
  if type(exp) ~= 'number' or exp <= 0 then return nil end
  return math.floor(exp / window + 0.5)
end

-- A batch run's call as a key table (keys.lua), reusing `key`: its first level KEYS[at], then levels 2
-- and 3 unless the run is lean, and its field.
local function cb_pair(key, at, field, lean)
  key[1], key[4] = KEYS[at], field
  if lean then key[2], key[3] = false, false else key[2], key[3] = KEYS[at + 1], KEYS[at + 2] end
  return key
end

-- Whether a lean pair (keys.lua) needs the levels below its first: the first is full, so its field may
-- be below, or goes there. Its call then changes nothing and answers "resend whole".
local function cb_short(k)
  if k[2] ~= false then return false end
  local n = redis.pcall('HLEN', k[1])
  return type(n) == 'number' and n >= CB_CAP
end

-- Where the identity's field is: (level, value) when a level holds it; else (nil, the level a new
-- field goes to, that level's HLEN or, for another type or a stale level, not a number). `v1`: level
-- 1's HGET, when read.
local function cb_find(k, v1, window)
  local e1
  for j = 1, 3 do
    local v = v1
    if j > 1 then
      -- a level whose expiry is not the first level's is stale: it is replaced as one of another type
      e1 = e1 or cb_end(redis.call('PEXPIRETIME', k[1]), window)
      if cb_end(redis.call('PEXPIRETIME', k[j]), window) ~= e1 then return nil, j, false end
      v = redis.pcall('HGET', k[j], k[4])
    elseif v == nil then
      v = redis.pcall('HGET', k[j], k[4])
    end
    if type(v) == 'string' then return j, v end
    local n = redis.pcall('HLEN', k[j])
    if j == 3 or type(n) ~= 'number' or n < CB_CAP then return nil, j, n end
  end
end

-- Removes fields of a hash, a thousand at a time (unpack's stack bound).
local function cb_hdel(key, fields)
  for i = 1, #fields, 1000 do redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields))) end
end

-- What level j (HLEN n, see cb_find) holds for a new field in window wid: 'live' (its window's), 'prev'
-- (the window before, for sliding-window), 'fresh' (nothing), 'dead' (a window that no longer counts,
-- or an expiry no window of this policy gives) or 'wrong' (another type). `span`: how many windows past
-- its own a level's expiry lies (1 fixed-window, 2 sliding-window).
local function cb_state(k, j, n, wid, window, span)
  if type(n) ~= 'number' then return 'wrong' end
  if n == 0 then return 'fresh' end
  local e = cb_end(redis.call('PEXPIRETIME', k[j]), window)
  if e == wid + span then return 'live' end
  if span == 2 and e == wid + 1 then return 'prev' end
  return 'dead'                                             -- Redis keeps a key alive in its expiry's ms
end

-- Writes a new field at level j in state `state`, the expiry `at` on a level it starts. HSET, denyoom,
-- is the first write (so under maxmemory the call fails having changed nothing), except for a level of
-- another type, which must go first. A first level starting again leaves the levels below it: they
-- count only while their expiry is its own (cb_find).
local function cb_put(k, j, state, value, at)
  if state == 'wrong' then redis.call('DEL', k[j]) end
  redis.call('HSET', k[j], k[4], value)
  if state == 'dead' then                                  -- what the level held no longer counts
    local fields, drop = redis.call('HKEYS', k[j]), {}
    for i = 1, #fields do
      if fields[i] ~= k[4] then drop[#drop + 1] = fields[i] end
    end
    cb_hdel(k[j], drop)
  end
  if state ~= 'live' then redis.call('PEXPIREAT', k[j], at) end
end
