--[[
  sliding-window: two fixed windows, the previous one weighted by how much of it the sliding window still
  covers (Cloudflare's counter): estimate = ceil(prev * (window - elapsed) / window) + curr, rounded up so
  that `estimate + cost <= limit` is exactly Cloudflare's comparison of the unrounded estimate (rounding
  down admits one more right after every window boundary).
  Input:
    KEYS[i]   the pair's key
    ARGV      per pair: alg=2, limit, window_ms, burst (ignored)
  Output:
    per pair: allowed, remaining, reset_ms (until both windows have drained), retry_ms (-1 = never),
    tag = window index of the spend
  State:
    KEYS[i] is a string, one integer: q + 2 x curr + prev x 2^27, where q = curr's window index mod 2
    (as compact-sliding-window's fields; Redis shares the objects of integers below 10,000, so a key
    with prev = 0 and curr < 5,000 allocates no value), PEXPIREAT the end of the window after curr's
    (TTL <= 2 x window). A live key's window is now's or the one before, so q tells which and a
    decision reads no expiry, except in a window's first 50 ms, where the key of two windows ago may
    still be alive: there the expiry (PEXPIRETIME / window - 2, rounded: a key moved by MIGRATE keeps
    its remaining TTL, not its expiry) is read too. limit < 2^26 keeps both counters exact in a double.
  Settle:
    an over-charge adds to the spend's window while it still counts (current or previous), past the
    limit if need be: refused until the weighted count drains; older spends are forgotten.
  Bound:
    at most `limit` per aligned window; in a sliding window, exact when the previous window's requests
    were evenly spread (see docs/algorithms.md for the worst case).
  Repair:
    another type or a non-integer reads as empty and is overwritten by the next spend. An integer
    with no TTL, or one that is not a window end of q's parity, reads as q says: never less than a fresh
    key counts, and rewritten with this policy's expiry by the first spend of a later window.
  Defines:
    ALG[2] = { check, commit, run, refund }, as lua/README.md describes
]]
-- @include verdict
-- @include sliding
local SW_M = 134217728                                      -- 2^27: prev's place
local SW_TOP = 67108863                                     -- 2^26 - 1: the most either count holds
local SW_EARLY = 50                                         -- ms into a window when q is checked

-- The value of counts c, p in window sw (q + 2 x c + p x 2^27).
local function sw_pack(sw, c, p)
  return sw % 2 + 2 * c + p * SW_M
end

-- (window index of curr, curr, prev) under a key, nil when nothing counts. The window is q's: now's (wid)
-- or the one before. Where `early` (a window's first ms), the expiry is read too: a key two windows
-- older than q says (still alive during the millisecond it expires, or moved by MIGRATE) counts
-- nothing; an expiry that is no window end of this parity (state this script did not write) leaves
-- q's reading, which counts no less than a fresh key and is rewritten by the next window's spend.
local function sw_read(key, window, wid, early)
  local got = redis.pcall('GET', key)
  if type(got) ~= 'string' then return nil end               -- missing, or another type
  local n = tonumber(got)
  if not (n and n >= 0 and n <= 9007199254740991 and n % 1 == 0) then return nil end
  local q = n % 2
  local sw = q == wid % 2 and wid or wid - 1
  if early then
    local exp = redis.call('PEXPIRETIME', key)
    if exp > 0 then
      local x = exp / window + 0.5                          -- x - x % 1: floor(x), without a call
      x = x - x % 1 - 2
      if x < sw and (sw - x) % 2 == 0 then return nil end
    end
  end
  return sw, (n % SW_M - q) / 2, (n - n % SW_M) / SW_M
end

-- Spends `cost` in window wid, whose counts were read as curr, prev (`inc`: the key holds wid's).
local function sw_spend(key, inc, curr, prev, wid, window, cost)
  -- The key holds this window's count: the spend adds 2 x cost (curr's place), and the expiry stays
  -- the window's. INCRBY is cheaper for Redis than SET ... PXAT with two numbers to format
  -- (docs/benchmarks.md); denyoom, so still refused first under maxmemory.
  -- pcall: a key the script did not write may hold text Lua reads as an integer and INCRBY refuses
  -- ('-0', ' 5', '1e3'); then the SET below writes the count that was read, plus the spend. Under
  -- maxmemory the pcall wrote nothing and the SET raises the OOM error: the script still fails whole.
  if not (inc and type(redis.pcall('INCRBY', key, 2 * cost)) == 'number') then
    -- SET with the expiry that encodes the window: one command, overwrites anything (denyoom first).
    -- Numbers as they are: Redis writes a Lua number with %.17g, exact for these integers (< 2^53).
    redis.call('SET', key, sw_pack(wid, curr + cost, prev), 'PXAT', (wid + 2) * window)
  end
end

ALG[2] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = (now_us - now_us % 1000) / 1000
    local e = now_ms % window
    local sw, sc, sp = sw_read(key, window, (now_ms - e) / window, e < SW_EARLY)
    local r = sw_decide(sw, sc, sp, now_us, limit, window, cost)
    r.inc = sw == r.tag
    return r
  end,
  commit = function(key, r, limit, window, burst, cost)
    sw_spend(key, r.inc, r.curr, r.prev, r.tag, window, cost)
    r.remaining = limit - r.weighted - r.curr - cost
    r.reset = 2 * window - r.e
  end,
  -- Calls `from` to `to` of a run of one-pair calls (batch.lua), the key of call j KEYS[k + j]: each as
  -- check, then commit when `spend`, without a table per call. Appends each call's 5 to `reply` once
  -- its commands have run.
  run = function(from, to, k, fields, now_us, limit, window, cost, spend, reply)
    local m = #reply
    local now_ms = (now_us - now_us % 1000) / 1000
    local e0 = now_ms % window
    local wid, early = (now_ms - e0) / window, e0 < SW_EARLY
    for j = from, to do
      local key = KEYS[k + j]
      local sw, sc, sp = sw_read(key, window, wid, early)
      local allowed, retry, remaining, reset, _, curr, prev, weighted, e =
        sw_decision(sw, sc, sp, now_us, limit, window, cost)
      if spend and allowed == 1 and cost > 0 then
        sw_spend(key, sw == wid, curr, prev, wid, window, cost)
        remaining, reset = limit - weighted - curr - cost, 2 * window - e
      end
      reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, wid
      m = m + 5
    end
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local now_wid = math.floor(math.floor(now_us / 1000) / window)
    local sw, c, p = sw_read(key, window, now_wid, true)
    if cost < 0 then
      -- a settlement charging more: into the spend's window while it still counts (current, or the
      -- previous one, weighted), past the limit if need be; a spend older than that is forgotten
      if tag ~= now_wid and tag ~= now_wid - 1 then return end
      if sw ~= now_wid and sw ~= now_wid - 1 then sw, c, p = tag, 0, 0 end
      if sw == tag then
        c = c - cost
      elseif sw == tag + 1 then
        p = p - cost
      else                                                 -- the stored window is the previous one now
        sw, c, p = tag, -cost, c
      end
      redis.call('SET', key, string.format('%.0f', sw_pack(sw, math.min(c, SW_TOP), math.min(p, SW_TOP))),
        'PXAT', string.format('%.0f', (sw + 2) * window))
      return
    end
    if sw == nil then return end
    if sw ~= now_wid and sw ~= now_wid - 1 then return end  -- state is stale: nothing still counts
    if sw == tag then
      c = math.max(0, c - cost)                            -- the spend is in the stored current window
    elseif sw == tag + 1 then
      p = math.max(0, p - cost)                            -- the spend is now the previous window
    else
      return                                               -- older than both windows: already forgotten
    end
    if c == 0 and p == 0 then
      redis.call('DEL', key)
    else
      redis.call('SET', key, string.format('%.0f', sw_pack(sw, c, p)), 'PXAT', string.format('%.0f', (sw + 2) * window))
    end
  end,
}
