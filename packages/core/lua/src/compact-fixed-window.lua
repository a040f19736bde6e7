--[[
  compact-fixed-window: fixed-window (fixed-window.lua) with the count kept as a field of its bucket
  (compact.lua) instead of a key of its own.
  Input:
    the pair's key table (compact.lua)
    ARGV      per pair: alg=7, limit, window_ms, the identity's field
  Output:
    as fixed-window
  State:
    each level: field -> the count spent in the current window, PEXPIREAT the window's end: a window's
    bucket expires as a whole when the window does. A level whose expiry is not this window's end
    belongs to an older window and reads as empty.
  Bound, Settle:
    as fixed-window.
  Repair:
    a field holding anything but a count reads as 0 and is overwritten by the next spend; a level of
    another type or with another expiry reads as empty and is replaced when written.
]]
-- @include verdict
-- @include compact

-- Whether level j of k ends at `wend` (to the nearest window end, see cb_end).
local function cfw_ends(k, j, wend, window)
  return cb_end(redis.call('PEXPIRETIME', k[j]), window) == wend / window
end

-- Adds `delta` (> 0) to the identity's count in window `wid`, `count` being what it holds there now:
-- at level j (found, of this window), else where a new field goes.
local function cfw_add(k, j, count, delta, wid, window)
  local value = math.min(count + delta, 9007199254740991)
  if j then
    redis.call('HSET', k[j], k[4], value)                  -- denyoom: the call's first write
    return
  end
  local l, state = cb_slot(k, wid, window, 1)
  cb_put(k, l, state, value, (wid + 1) * window)
end

ALG[7] = {
  check = function(k, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local wend = (wid + 1) * window
    local j, v = cb_find(k)
    local count = j and cb_int(v) or 0
    if count == 0 then j = nil end                         -- nothing to add to: written as a new field
    -- as fixed-window: only in a window's first ms can an older window's level still be alive, and a
    -- count that refuses must be this window's
    if count > 0 and (now_ms - wid * window < 50 or count + cost > limit) and not cfw_ends(k, j, wend, window) then
      count, j = 0, nil
    end
    local allowed, retry = verdict(cost, limit, count + cost <= limit)
    if not retry then retry = wend - now_ms end
    return { allowed = allowed, retry = retry, remaining = math.max(0, limit - count),
             reset = (count > 0) and (wend - now_ms) or 0, tag = wid, count = count, wend = wend,
             now_ms = now_ms, j = j }
  end,
  commit = function(k, r, limit, window, burst, cost)
    local wid = r.tag
    cfw_add(k, r.j, r.count, cost, wid, window)
    r.remaining = limit - r.count - cost
    r.reset = r.wend - r.now_ms
  end,
  refund = function(k, now_us, limit, window, burst, tag, cost)
    local now_ms = math.floor(now_us / 1000)
    if math.floor(now_ms / window) ~= tag then return end  -- the spend's window is over: nothing to give back
    local wend = (tag + 1) * window
    local j, v = cb_find(k)
    if j and not cfw_ends(k, j, wend, window) then j = nil end
    local count = j and cb_int(v) or 0
    if cost < 0 then
      cfw_add(k, j, count, -cost, tag, window)             -- a settlement charging more, past the limit if need be
      return
    end
    if count == 0 then return end
    local left = math.max(0, count - cost)
    if left == 0 then redis.call('HDEL', k[j], k[4]) else redis.call('HSET', k[j], k[4], left) end
  end,
}
