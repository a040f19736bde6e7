--[[
  compact-sliding-window: sliding-window (sliding-window.lua) with the two counts kept as a field of
  the identity's bucket (compact.lua) instead of a key of its own.
  Input:
    the pair's key table (compact.lua)
    ARGV      per pair: alg=8, limit, window_ms, the identity's field
  Output:
    as sliding-window
  State:
    each level has a window index E, which its expiry encodes (PEXPIREAT (E + 2) x window, so a bucket
    expires as a whole two windows after the last one it counts), and each field holds curr + prev x
    2^26: its counts in windows E and E - 1. The first write of a window to a level of the window before
    rolls the level (every field's curr becomes its prev; fields with nothing left go): once per level
    per window, in the call that writes.
  Bound, Settle:
    as sliding-window.
  Repair:
    a field holding anything but a count reads as 0; a level of another type or whose expiry is not near
    a window end of this policy reads as empty, and is replaced when written.
]]
-- @include verdict
-- @include compact
local CSW_M = 67108864                                      -- 2^26

-- Rolls level j to window wid (it holds wid - 1): the identity's field becomes `value`, every other
-- field keeps its curr as prev. HSET first (denyoom), then the fields with nothing left go.
local function csw_roll(k, j, wid, window, value)
  local all = redis.call('HGETALL', k[j])
  local set, drop = { k[4], value }, {}
  for i = 1, #all, 2 do
    if all[i] ~= k[4] then
      local c = cb_int(all[i + 1]) % CSW_M
      if c > 0 then
        set[#set + 1] = all[i]
        set[#set + 1] = c * CSW_M
      else
        drop[#drop + 1] = all[i]
      end
    end
  end
  for i = 1, #set, 2000 do redis.call('HSET', k[j], unpack(set, i, math.min(i + 1999, #set))) end
  cb_hdel(k[j], drop)
  redis.call('PEXPIREAT', k[j], (wid + 2) * window)
end

-- Adds `delta` (> 0) to the identity's count of window `tag` (wid or wid - 1; wid is now's). (j, E, c, p)
-- is where it was found: level j, whose window is E (wid or wid - 1), holding c in E and p in E - 1;
-- j nil for a new field.
local function csw_add(k, j, E, c, p, wid, window, tag, delta)
  local top = CSW_M - 1
  if j and E == wid then
    if tag == wid then c = c + delta else p = p + delta end
    redis.call('HSET', k[j], k[4], math.min(c, top) + math.min(p, top) * CSW_M)
    return
  end
  if j then                                                 -- E == wid - 1
    if tag == E then
      redis.call('HSET', k[j], k[4], math.min(c + delta, top) + p * CSW_M)
    else
      csw_roll(k, j, wid, window, math.min(delta, top) + c * CSW_M)
    end
    return
  end
  local l, state = cb_slot(k, wid, window, 2)
  delta = math.min(delta, top)
  if state == 'prev' then                                   -- the level's window is wid - 1
    if tag == wid - 1 then redis.call('HSET', k[l], k[4], delta) else csw_roll(k, l, wid, window, delta) end
    return
  end
  cb_put(k, l, state, tag == wid and delta or delta * CSW_M, (wid + 2) * window)
end

-- (level, E, c, p) of the identity's field: where it is, its level's window and its two counts; nil
-- when no level of window wid or wid - 1 holds it.
local function csw_read(k, wid, window)
  local j, v = cb_find(k)
  if not j then return nil end
  local n = cb_int(v)
  local e = cb_end(redis.call('PEXPIRETIME', k[j]), window)
  if n == 0 or not e or e - 2 < wid - 1 or e - 2 > wid then return nil end
  return j, e - 2, n % CSW_M, math.floor(n / CSW_M)
end

ALG[8] = {
  check = function(k, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local e = now_ms - wid * window                         -- elapsed in the current window, ms
    local j, E, sc, sp = csw_read(k, wid, window)
    local curr, prev = 0, 0
    if E == wid then
      curr, prev = sc, sp
    elseif E == wid - 1 then
      prev = sc
    end
    local weighted = math.ceil(prev * (window - e) / window)
    local allowed, retry = verdict(cost, limit, weighted + curr + cost <= limit)
    if not retry then
      if curr + cost <= limit then
        retry = window - math.floor((limit - curr - cost) * window / prev) - e
      else
        retry = (window - e) + window - math.floor((limit - cost) * window / curr)
      end
    end
    return { allowed = allowed, retry = retry, remaining = math.max(0, limit - weighted - curr),
             reset = (curr > 0) and (2 * window - e) or ((prev > 0) and (window - e) or 0),
             tag = wid, curr = curr, prev = prev, weighted = weighted, e = e,
             j = j, E = E, sc = sc, sp = sp }
  end,
  commit = function(k, r, limit, window, burst, cost)
    csw_add(k, r.j, r.E, r.sc, r.sp, r.tag, window, r.tag, cost)
    r.remaining = limit - r.weighted - r.curr - cost
    r.reset = 2 * window - r.e
  end,
  refund = function(k, now_us, limit, window, burst, tag, cost)
    local wid = math.floor(math.floor(now_us / 1000) / window)
    if tag ~= wid and tag ~= wid - 1 then return end        -- older than both windows: already forgotten
    local j, E, c, p = csw_read(k, wid, window)
    if cost < 0 then
      csw_add(k, j, E, c, p, wid, window, tag, -cost)       -- a settlement charging more, past the limit if need be
      return
    end
    if not j then return end
    if E == tag then
      c = math.max(0, c - cost)
    elseif E == tag + 1 then
      p = math.max(0, p - cost)
    else
      return
    end
    if c == 0 and p == 0 then redis.call('HDEL', k[j], k[4]) else redis.call('HSET', k[j], k[4], c + p * CSW_M) end
  end,
}
