--[[
  fixed-window: a counter per window aligned to the epoch (window index = floor(now_ms / window_ms)).
  Input:
    KEYS[i]   the pair's key
    ARGV      per pair: alg=1, limit, window_ms, burst (ignored)
  Output:
    per pair: allowed, remaining, reset_ms (until the window ends), retry_ms (-1 = never),
    tag = window index
  State:
    KEYS[i] is a string: the count spent in the current window (Redis shares the objects of integers
    below 10,000: no value allocation), PEXPIREAT the window's end (TTL <= window). The window is the
    expiry's: a count whose expiry is not this window's end belongs to an older window (Redis keeps a
    key alive during the millisecond it expires) and reads as 0.
  Bound:
    at most `limit` per aligned window; up to 2 x limit across one boundary.
  Settle:
    an over-charge adds to the spend's window while it lasts (the count may pass `limit`, refusing
    until the window ends) and is dropped once that window is over.
  Repair:
    anything else under the key (another type, a non-integer, negative or huge text, no TTL or the TTL
    of another window) reads as an empty window and is overwritten by the next spend: never more than a
    fresh key admits.
  Defines:
    ALG[1] = { check, commit, run, refund }, as lua/README.md describes
]]
-- @include verdict
-- @include fixed
-- @include count

-- Whether an expiry is the window end `wend`. To the nearest window end, not exactly: MIGRATE (cluster
-- resharding) restores a key with its remaining TTL, so the moved key's expiry shifts by the transfer time.
local function fw_ends(exp, wend, window)
  return exp > 0 and math.floor(exp / window + 0.5) * window == wend
end

-- The count the key holds for the window ending at wend (`early`: in the window's first 50 ms).
local function fw_read(key, early, cost, limit, wend, window)
  local count = fw_count(key) or 0
  -- Only in a window's first ms can the previous window's key still be alive (Redis expires a key once
  -- its clock passes the expiry; script time is frozen at its start); and a count that refuses must be
  -- this window's, not state with a longer TTL written by something else. Checked only there.
  if count > 0 and (early or count + cost > limit) and not fw_ends(redis.call('PEXPIRETIME', key), wend, window) then
    return 0
  end
  return count
end

ALG[1] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local wend = (wid + 1) * window
    local count = fw_read(key, now_ms - wid * window < 50, cost, limit, wend, window)
    return fw_decide(count, now_ms, wid, wend, limit, cost)
  end,
  commit = function(key, r, limit, window, burst, cost)
    -- SET, not INCRBY: one command either way, and it overwrites whatever was there (denyoom first).
    redis.call('SET', key, r.count + cost, 'PXAT', r.wend)
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
      local count = fw_read(key, e < 50, cost, limit, wend, window)
      local allowed, retry, remaining, reset = fw_decision(count, now_ms, wend, limit, cost)
      if spend and allowed == 1 and cost > 0 then
        redis.call('SET', key, count + cost, 'PXAT', wend)
        remaining, reset = limit - count - cost, wend - now_ms
      end
      reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, wid
      m = m + 5
    end
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local now_ms = math.floor(now_us / 1000)
    if math.floor(now_ms / window) ~= tag then return end  -- the spend's window is over: nothing to give back
    local count = fw_count(key)
    if cost < 0 then
      -- a settlement charging more: the window's count may pass the limit (the work is done), which
      -- refuses the identity until the window ends; a count of another window reads as 0
      if count and count > 0 and not fw_ends(redis.call('PEXPIRETIME', key), (tag + 1) * window, window) then
        count = 0
      end
      redis.call('SET', key, math.min((count or 0) - cost, 9007199254740991), 'PXAT', (tag + 1) * window)
      return
    end
    if not count or count == 0 then return end
    if not fw_ends(redis.call('PEXPIRETIME', key), (tag + 1) * window, window) then return end
    local left = math.max(0, count - cost)
    if left == 0 then redis.call('DEL', key) else redis.call('SET', key, left, 'KEEPTTL') end
  end,
}
