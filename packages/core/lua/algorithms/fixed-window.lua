--[[
  fixed-window: a counter per window aligned to the epoch (window index = floor(now_ms / window_ms)).
  Input:
    KEYS[i]   the pair's key
    ARGV      per pair: alg=1, limit, window_ms, burst (ignored)
  Output:
    per pair: allowed, remaining, reset_ms (until the window ends), retry_ms (-1 = never),
    tag = window index
  State:
    KEYS[i] is a string, one integer: q + 2 x count, the count spent in the current window and q its
    index mod 2 (Redis shares the objects of integers below 10,000: no value allocation up to 4,999),
    PEXPIREAT the window's end (TTL <= window). A live key is this window's, or in the window's first
    ms the previous one's (Redis keeps a key alive during the millisecond it expires), and q tells
    which: a decision reads no expiry.
  Bound:
    at most `limit` per aligned window; up to 2 x limit across one boundary.
  Settle:
    an over-charge adds to the spend's window while it lasts (the count may pass `limit`, refusing
    until the window ends) and is dropped once that window is over.
  Repair:
    another type or a non-integer reads as an empty window and is overwritten by the next spend. An
    integer with no TTL or another's reads as q says: never less than a fresh key counts, and
    rewritten with this window's expiry once q says another window.
  Defines:
    ALG[1] = { check, commit, run, refund }, as lua/README.md describes
]]
-- @include verdict
-- @include fixed

local FW_TOP = 4503599627370495                             -- (2^53 - 1) / 2: the most a count holds

-- The count the key holds for window wid, and whether the key is wid's (`held`: a spend may INCRBY it).
-- No expiry is read: a live key whose q is wid's is wid's (one of an older window of that parity would
-- have to outlive its end by a whole window; its expiry, rounded to the nearest window end as MIGRATE
-- requires, would not tell it apart then either).
local function fw_read(key, wid)
  local got = redis.pcall('GET', key)
  if type(got) ~= 'string' then return 0, false end          -- missing, or another type
  local n = tonumber(got)
  if not (n and n >= 0 and n <= 9007199254740991 and n % 1 == 0) then return 0, false end
  local q = n % 2
  if q ~= wid % 2 then return 0, false end                  -- the previous window's, in its last ms
  return (n - q) / 2, true
end

-- Spends `cost` on a count of window wid (`held`: the key holds it, under the window's expiry): INCRBY
-- is cheaper for Redis than SET ... PXAT; pcall: text Lua reads as an integer and INCRBY refuses
-- (' 5') falls to the SET. Under maxmemory the pcall wrote nothing and the SET raises the OOM error.
local function fw_spend(key, held, count, wid, wend, cost)
  if not (held and type(redis.pcall('INCRBY', key, 2 * cost)) == 'number') then
    redis.call('SET', key, wid % 2 + 2 * (count + cost), 'PXAT', wend)
  end
end

ALG[1] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local wend = (wid + 1) * window
    local count, held = fw_read(key, wid)
    local r = fw_decide(count, now_ms, wid, wend, limit, cost)
    r.held = held
    return r
  end,
  commit = function(key, r, limit, window, burst, cost)
    fw_spend(key, r.held, r.count, r.tag, r.wend, cost)
    r.remaining = limit - r.count - cost
    r.reset = r.wend - r.now_ms
  end,
  -- Calls `from` to `to` of a run of one-pair calls (batch.lua), the key of call j KEYS[k + j]: each as
  -- check, then commit when `spend`, without a table per call. Appends each call's 5 to `reply` once
  -- its commands have run.
  run = function(from, to, k, fields, now_us, limit, window, cost, spend, reply)
    local m = #reply
    local now_ms = (now_us - now_us % 1000) / 1000        -- x - x % 1: floor(x), without a call
    local e = now_ms % window
    local wid = (now_ms - e) / window
    local wend = (wid + 1) * window
    for j = from, to do
      local key = KEYS[k + j]
      local count, held = fw_read(key, wid)
      local allowed, retry, remaining, reset = fw_decision(count, now_ms, wend, limit, cost)
      if spend and allowed == 1 and cost > 0 then
        fw_spend(key, held, count, wid, wend, cost)
        remaining, reset = limit - count - cost, wend - now_ms
      end
      reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, wid
      m = m + 5
    end
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local now_ms = math.floor(now_us / 1000)
    if math.floor(now_ms / window) ~= tag then return end  -- the spend's window is over: nothing to give back
    local count, held = fw_read(key, tag)
    if cost < 0 then
      -- a settlement charging more: the window's count may pass the limit (the work is done), which
      -- refuses the identity until the window ends; a count of another window reads as 0
      redis.call('SET', key, tag % 2 + 2 * math.min(count - cost, FW_TOP), 'PXAT', (tag + 1) * window)
      return
    end
    if not held or count == 0 then return end
    local left = math.max(0, count - cost)
    if left == 0 then redis.call('DEL', key) else redis.call('SET', key, tag % 2 + 2 * left, 'KEEPTTL') end
  end,
}
