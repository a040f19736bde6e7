--[[
  compact-sliding-window: sliding-window (sliding-window.lua) with the two counts kept as a field of
  the identity's bucket (compact.lua) instead of a key of its own.
  Input:
    the pair's key table (compact.lua)
    ARGV      per pair: alg=8, limit, window_ms, the identity's field
  Output:
    as sliding-window
  State:
    a bucket has a window index E, which its levels' expiry encodes (PEXPIREAT (E + 2) x window, so a
    bucket expires as a whole two windows after the last one it counts), and each field holds curr +
    prev x 2^26: its counts in windows E and E - 1. The first write of a window to a bucket of the window
    before rolls it: every field's curr becomes its prev, fields with nothing left go, and the fields
    left are packed level by level again (compact.lua's rule), in the call that writes: once per bucket
    per window.
  Bound, Settle:
    as sliding-window.
  Repair:
    a field holding anything but a count reads as 0; a bucket of another type or whose expiry is not near
    a window end of this policy reads as empty, and is replaced when written.
]]
-- @include verdict
-- @include sliding
-- @include compact
local CSW_M = 67108864                                      -- 2^26
local CSW_TOP = CSW_M - 1

-- What the identity has in window wid: (level, E, c, p, room, n): the level that holds its field, the
-- bucket's window E (wid or wid - 1), its counts in E and E - 1, and where a new field goes (cb_find).
-- The level is nil for a new field; E is nil for a bucket that no longer counts.
local function csw_read(k, wid, window)
  local j, v, n = cb_find(k)
  local e = cb_end(redis.pcall('PEXPIRETIME', k[1]), window)
  if not e or e - 2 < wid - 1 or e - 2 > wid then return nil, nil, 0, 0 end
  if not j then return nil, e - 2, 0, 0, v, n end
  local x = cb_int(v)
  return j, e - 2, x % CSW_M, math.floor(x / CSW_M)
end

-- Rolls the bucket to window wid (it is wid - 1's): the identity's field becomes `value`, every other
-- field's curr its prev (fields with none go), and the fields are packed again, the first CB_CAP in
-- level 1, the next in level 2, the rest in 3. HSET on level 1 (denyoom, and never empty: it holds the
-- identity's field or fields before it) is the first write.
local function csw_roll(k, wid, window, value)
  local order, vals, from, mine, wrong = {}, {}, {}, false, {}
  for j = 1, 3 do
    local all = redis.pcall('HGETALL', k[j])
    if type(all) == 'table' and all.err == nil then
      for i = 1, #all, 2 do
        local f, x = all[i], nil
        if f == k[4] then
          x, mine = value, true
        else
          local c = cb_int(all[i + 1]) % CSW_M
          if c > 0 then x = c * CSW_M end
        end
        if x then
          order[#order + 1] = f
          vals[f] = x
        end
        from[f] = j
      end
    else
      wrong[j] = true
    end
  end
  if not mine then
    order[#order + 1] = k[4]
    vals[k[4]] = value
  end
  local set, del, to = { {}, {}, {} }, { {}, {}, {} }, {}
  for i = 1, #order do
    local f = order[i]
    local l = (i <= CB_CAP and 1) or (i <= 2 * CB_CAP and 2) or 3
    to[f] = l
    local s = set[l]
    s[#s + 1] = f
    s[#s + 1] = vals[f]
  end
  for f, j in pairs(from) do
    if to[f] ~= j then
      local d = del[j]
      d[#d + 1] = f
    end
  end
  for j = 1, 3 do
    if wrong[j] then redis.call('DEL', k[j]) end
    local s = set[j]
    for i = 1, #s, 2000 do redis.call('HSET', k[j], unpack(s, i, math.min(i + 1999, #s))) end
    cb_hdel(k[j], del[j])
    redis.call('PEXPIREAT', k[j], (wid + 2) * window)
  end
end

-- Adds `delta` (> 0) to the identity's count of window `tag` (wid or wid - 1; wid is now's), as found
-- by csw_read (j, E, c, p, room, n).
local function csw_add(k, j, E, c, p, room, n, wid, window, tag, delta)
  if E == wid or (E == tag and E == wid - 1) then          -- within the bucket's window: no roll
    if tag == E then c = c + delta else p = p + delta end
    local value = math.min(c, CSW_TOP) + math.min(p, CSW_TOP) * CSW_M
    if j then
      redis.call('HSET', k[j], k[4], value)                -- denyoom: the call's first write
    else
      local state = (type(n) ~= 'number' and 'wrong') or (n == 0 and 'fresh') or 'live'
      cb_put(k, room, state, value, (E + 2) * window)
    end
  elseif E == wid - 1 then                                 -- a spend in this window: roll the bucket
    csw_roll(k, wid, window, math.min(delta, CSW_TOP) + c * CSW_M)
  else                                                     -- nothing of the bucket counts any more
    local n1 = redis.pcall('HLEN', k[1])
    local state = (type(n1) ~= 'number' and 'wrong') or (n1 == 0 and 'fresh') or 'dead'
    delta = math.min(delta, CSW_TOP)
    cb_put(k, 1, state, tag == wid and delta or delta * CSW_M, (wid + 2) * window)
  end
end

ALG[8] = {
  check = function(k, now_us, limit, window, burst, cost)
    local j, E, sc, sp, room, n = csw_read(k, math.floor(math.floor(now_us / 1000) / window), window)
    local r = sw_decide(E, sc, sp, now_us, limit, window, cost)
    r.j, r.room, r.n = j, room, n
    return r
  end,
  commit = function(k, r, limit, window, burst, cost)
    csw_add(k, r.j, r.sw, r.sc, r.sp, r.room, r.n, r.tag, window, r.tag, cost)
    r.remaining = limit - r.weighted - r.curr - cost
    r.reset = 2 * window - r.e
  end,
  -- Calls `from` to `to` of a run of one-pair calls (batch.lua): as sliding-window's run, the levels of
  -- call j KEYS[k + 3j - 2 .. k + 3j] and its field ARGV[fields + j]; one key table for the run.
  run = function(from, to, k, fields, now_us, limit, window, cost, spend, reply)
    local m, key = #reply, {}
    local now_ms = (now_us - now_us % 1000) / 1000
    local wid = (now_ms - now_ms % window) / window
    for j = from, to do
      local at = k + 3 * j
      key[1], key[2], key[3], key[4] = KEYS[at - 2], KEYS[at - 1], KEYS[at], ARGV[fields + j]
      local lv, E, sc, sp, room, n = csw_read(key, wid, window)
      local allowed, retry, remaining, reset, tag, curr, prev, weighted, e =
        sw_decision(E, sc, sp, now_us, limit, window, cost)
      if spend and allowed == 1 and cost > 0 then
        csw_add(key, lv, E, sc, sp, room, n, tag, window, tag, cost)
        remaining, reset = limit - weighted - curr - cost, 2 * window - e
      end
      reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, tag
      m = m + 5
    end
  end,
  refund = function(k, now_us, limit, window, burst, tag, cost)
    local wid = math.floor(math.floor(now_us / 1000) / window)
    if tag ~= wid and tag ~= wid - 1 then return end        -- older than both windows: already forgotten
    local j, E, c, p, room, n = csw_read(k, wid, window)
    if cost < 0 then                                        -- a settlement charging more, past the limit if need be
      csw_add(k, j, E, c, p, room, n, wid, window, tag, -cost)
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
    redis.call('HSET', k[j], k[4], c + p * CSW_M)          -- 0 stays: the field keeps its place
  end,
}
