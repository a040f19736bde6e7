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
    bucket expires as a whole two windows after the last one it counts), and each field holds
    q + 2 x curr + prev x 2^27: its counts in windows E and E - 1, and q = E mod 2. A live bucket's E is
    now's window or the one before, so q tells which, and a field read needs no expiry read; the expiry
    is read only in a window's first 50 ms, for a refusal, for a roll, and for a field with no counts
    (a reset writes 0 whatever E is). The first write of a window to a bucket of the window before
    rolls it: every field's curr becomes its prev, fields with nothing left go, and the fields left are
    packed level by level again (compact.lua's rule), in the call that writes: once per bucket per
    window.
  Bound, Settle:
    as sliding-window.
  Repair:
    a field holding anything but a count, or a q that its bucket's expiry contradicts, reads as 0; a
    bucket of another type or whose expiry is not near a window end of this policy reads as empty, and
    is replaced when written.
  Defines:
    ALG[8] = { check, commit, run, refund }, as lua/README.md describes
]]
-- @include verdict
-- @include sliding
-- @include compact
local CSW_P = 134217728                                     -- 2^27: prev's place
local CSW_TOP = 67108863                                    -- 2^26 - 1: the most either count holds
local CSW_EARLY = 50                                        -- ms into a window when q is checked (fixed-window's)

-- A field's value: E's parity, then its counts in E and E - 1.
local function csw_pack(E, c, p)
  return E % 2 + 2 * math.min(c, CSW_TOP) + math.min(p, CSW_TOP) * CSW_P
end

-- The bucket's window E by its first level's expiry: wid or wid - 1, else nil (it counts nothing now).
local function csw_window(level, wid, window)
  local e = cb_end(redis.pcall('PEXPIRETIME', level), window)
  if e and e - 2 >= wid - 1 and e - 2 <= wid then return e - 2 end
  return nil
end

-- A field's window E as its q says (wid or wid - 1) and its counts c, p, checked against the expiry of
-- its bucket's first level: the same E keeps them; another (or none) means q was not the bucket's, and
-- the field reads as 0 in the expiry's window.
local function csw_sure(level, wid, window, E, c, p)
  local e = csw_window(level, wid, window)
  if e ~= E then return e, 0, 0 end
  return E, c, p
end

-- What the identity has in window wid: (level, E, c, p, room, n, sure): the level that holds its field
-- (nil for a new one: room and n say where it goes, cb_find), the bucket's window E (wid or wid - 1; nil
-- for a bucket that counts nothing; false when not read: no counts, and the decision does not need it),
-- its counts in E and E - 1, and whether E is the expiry's (`sure` asks for that) rather than q's.
local function csw_read(k, wid, window, sure, v1)
  local j, v, n = cb_find(k, v1, window)
  if not j then return nil, false, 0, 0, v, n, false end
  local x = cb_int(v)
  local q = x % 2
  local c, p = (x % CSW_P - q) / 2, (x - x % CSW_P) / CSW_P
  if c == 0 and p == 0 then return j, false, 0, 0, nil, nil, false end
  local E = q == wid % 2 and wid or wid - 1
  if not sure then return j, E, c, p, nil, nil, false end
  E, c, p = csw_sure(k[1], wid, window, E, c, p)
  return j, E, c, p, nil, nil, true
end

-- Rolls the bucket to window wid (it is wid - 1's): the identity's field becomes `value`, every other
-- field's curr its prev (fields with none go), and the fields are packed again, the first CB_CAP in
-- level 1, the next in level 2, the rest in 3. HSET on level 1 (denyoom, and never empty: it holds the
-- identity's field or fields before it) is the first write.
local function csw_roll(k, wid, window, value)
  local order, vals, from, mine, wrong = {}, {}, {}, false, {}
  -- levels below the first count only with its expiry (cb_find): a stale one is dropped; a lean pair's
  -- first level has room (cb_short), so nothing below it counts
  local e1 = k[2] and cb_end(redis.pcall('PEXPIRETIME', k[1]), window)
  for j = 1, 3 do
    local all = k[j] and (j == 1 or cb_end(redis.pcall('PEXPIRETIME', k[j]), window) == e1)
      and redis.pcall('HGETALL', k[j])
    if not all then
      wrong[j] = k[j] and true
    elseif type(all) == 'table' and all.err == nil then
      for i = 1, #all, 2 do
        local f, x = all[i], nil
        if f == k[4] then
          x, mine = value, true
        else
          local y = cb_int(all[i + 1])
          local c = (y % CSW_P - y % 2) / 2
          if c > 0 then x = csw_pack(wid, 0, c) end
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
  for j = 1, k[2] and 3 or 1 do
    if wrong[j] then redis.call('DEL', k[j]) end
    local s = set[j]
    for i = 1, #s, 2000 do redis.call('HSET', k[j], unpack(s, i, math.min(i + 1999, #s))) end
    cb_hdel(k[j], del[j])
    redis.call('PEXPIREAT', k[j], (wid + 2) * window)
  end
end

-- Adds `delta` (> 0) to the identity's count of window `tag` (wid or wid - 1; wid is now's), as found
-- by csw_read (j, E, c, p, room, n, sure). A roll goes by the expiry, never by q alone.
local function csw_add(k, j, E, c, p, room, n, sure, wid, window, tag, delta)
  if E == false then
    E = csw_window(k[1], wid, window)
  elseif E == wid - 1 and tag == wid and not sure then
    E, c, p = csw_sure(k[1], wid, window, E, c, p)
  end
  if E == wid or (E == tag and E == wid - 1) then          -- within the bucket's window: no roll
    if tag == E then c = c + delta else p = p + delta end
    local value = csw_pack(E, c, p)
    if j then
      redis.call('HSET', k[j], k[4], value)                -- denyoom: the call's first write
    else
      local state = (type(n) ~= 'number' and 'wrong') or (n == 0 and 'fresh') or 'live'
      cb_put(k, room, state, value, (E + 2) * window)
    end
  elseif E == wid - 1 then                                 -- a spend in this window: roll the bucket
    csw_roll(k, wid, window, csw_pack(wid, delta, c))
  else                                                     -- nothing of the bucket counts any more
    local n1 = redis.pcall('HLEN', k[1])
    local state = (type(n1) ~= 'number' and 'wrong') or (n1 == 0 and 'fresh') or 'dead'
    cb_put(k, 1, state, tag == wid and csw_pack(wid, delta, 0) or csw_pack(wid, 0, delta), (wid + 2) * window)
  end
end

ALG[8] = {
  check = function(k, now_us, limit, window, burst, cost)
    if cb_short(k) then return { short = true } end  -- resend whole (keys.lua): a roll reads every level
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local j, E, sc, sp, room, n, sure = csw_read(k, wid, window, now_ms % window < CSW_EARLY)
    local r = sw_decide(E, sc, sp, now_us, limit, window, cost)
    if r.allowed == 0 and E and not sure then              -- a refusal goes by the expiry
      E, sc, sp = csw_sure(k[1], wid, window, E, sc, sp)
      sure, r = true, sw_decide(E, sc, sp, now_us, limit, window, cost)
    end
    r.j, r.room, r.n, r.sure = j, room, n, sure
    return r
  end,
  commit = function(k, r, limit, window, burst, cost)
    csw_add(k, r.j, r.sw, r.sc, r.sp, r.room, r.n, r.sure, r.tag, window, r.tag, cost)
    r.remaining = limit - r.weighted - r.curr - cost
    r.reset = 2 * window - r.e
  end,
  -- Calls `from` to `to` of a run of one-pair calls (batch.lua): as sliding-window's run, call j's keys
  -- from KEYS[k + 1 + step(j - 1)] (step 4, or 2 for lean pairs, keys.lua) and its field
  -- ARGV[fields + j]; one key table for the run.
  -- The common calls are decided inline: a field at level 1 with counts, past the window's first ms,
  -- admitted within the window, and a new field in a first level with room, new or this window's; any
  -- other goes through csw_read and csw_add; a lean one that needs the levels it was sent without
  -- (cb_short) is answered CB_RESEND.
  run = function(from, to, k, fields, now_us, limit, window, cost, spend, reply, lean)
    local m, key = #reply, {}
    local now_ms = (now_us - now_us % 1000) / 1000
    local wid = (now_ms - now_ms % window) / window
    local early, q = now_ms % window < CSW_EARLY, wid % 2
    local step, width = 2 * cost, lean and 2 or 4
    local inc = string.format('%.0f', step)                 -- HINCRBY's, formatted once
    for j = from, to do
      local at = k + 1 + width * (j - 1)                   -- call j's first level
      local level, field = KEYS[at], ARGV[fields + j]
      local v = redis.pcall('HGET', level, field)
      local x = not early and type(v) == 'string' and tonumber(v)
      local lv, E, sc, sp, room, n, sure
      local fast = x and x > 1 and x <= 9007199254740991 and x % 1 == 0
      local new, short = false, false
      if not fast and v == false and not early and cost <= limit then
        -- a new field in a first level with room that is new or this window's (its expiry says so)
        n = redis.pcall('HLEN', level)
        if type(n) == 'number' and n < CB_CAP then
          new = n == 0
          if not new then
            local i = redis.call('PEXPIRETIME', level) / window + 0.5
            new = i - i % 1 == wid + 2
          end
        end
      end
      if fast then
        local xq = x % 2
        lv, E, sc, sp = 1, xq == q and wid or wid - 1, (x % CSW_P - xq) / 2, (x - x % CSW_P) / CSW_P
      elseif new then
        E, sc, sp = false, 0, 0
      else
        cb_pair(key, at, field, lean)
        short = type(v) ~= 'string' and cb_short(key)
        if not short then lv, E, sc, sp, room, n, sure = csw_read(key, wid, window, early, v) end
      end
      local allowed, retry, remaining, reset, tag, curr, prev, weighted, e
      if not short then
        allowed, retry, remaining, reset, tag, curr, prev, weighted, e =
          sw_decision(E, sc, sp, now_us, limit, window, cost)
        if allowed == 0 and E and not sure then            -- a refusal goes by the expiry
          E, sc, sp = csw_sure(level, wid, window, E, sc, sp)
          fast, sure = false, true
          allowed, retry, remaining, reset, tag, curr, prev, weighted, e =
            sw_decision(E, sc, sp, now_us, limit, window, cost)
        end
      end
      if not short and spend and allowed == 1 and cost > 0 then
        if new then
          redis.call('HSET', level, field, csw_pack(wid, cost, 0))  -- denyoom: the call's first write
          if n == 0 then redis.call('PEXPIREAT', level, (wid + 2) * window) end  -- cb_put's 'fresh'
        elseif fast and E == wid and sc + cost <= CSW_TOP then
          -- denyoom: the call's first write; HSET for a count HINCRBY does not read (' 7')
          if type(redis.pcall('HINCRBY', level, field, inc)) ~= 'number' then
            redis.call('HSET', level, field, x + step)
          end
        else
          -- a roll reads every level: a lean pair whose first level is full is resent whole (nothing of
          -- this call was written yet)
          short = cb_short(cb_pair(key, at, field, lean))
          if not short then csw_add(key, lv, E, sc, sp, room, n, sure, tag, window, tag, cost) end
        end
        remaining, reset = limit - weighted - curr - cost, 2 * window - e
      end
      if short then allowed, remaining, reset, retry, tag = CB_RESEND, 0, 0, 0, 0 end
      reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, tag
      m = m + 5
    end
  end,
  refund = function(k, now_us, limit, window, burst, tag, cost)
    local wid = math.floor(math.floor(now_us / 1000) / window)
    if tag ~= wid and tag ~= wid - 1 then return end        -- older than both windows: already forgotten
    local j, E, c, p, room, n, sure = csw_read(k, wid, window, true)
    if cost < 0 then                                        -- a settlement charging more, past the limit if need be
      csw_add(k, j, E, c, p, room, n, sure, wid, window, tag, -cost)
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
    redis.call('HSET', k[j], k[4], csw_pack(E, c, p))      -- 0 stays: the field keeps its place
  end,
}
