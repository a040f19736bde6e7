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
  Defines:
    ALG[7] = { check, commit, run, refund }, as lua/README.md describes
]]
-- @include verdict
-- @include fixed
-- @include compact

-- Whether level j of k ends at `wend` (to the nearest window end, see cb_end).
local function cfw_ends(k, j, wend, window)
  return cb_end(redis.call('PEXPIRETIME', k[j]), window) == wend / window
end

-- (level, count, where a new field goes, its HLEN, whether a level found was dead) of the identity in
-- window wid: the level nil when none of this window holds it (v1: level 1's HGET, when read). As fixed-window, only in a window's first
-- ms (`early`) can an older window's level still be alive, and a count that refuses must be this
-- window's: checked then, and for a 0 (refunded or reset), which a spend would otherwise write into a
-- level that dies with the old window.
local function cfw_read(k, wid, window, early, cost, limit, v1)
  local j, v, n = cb_find(k, v1, window)
  if not j then return nil, 0, v, n end
  local count = cb_int(v)
  if (early or count == 0 or count + cost > limit) and not cfw_ends(k, j, (wid + 1) * window, window) then
    return nil, 0, j, 1, true
  end
  return j, count
end

-- Sets the identity's count in window wid: at level j (where it is), else as a new field (cb_find's
-- `room` and HLEN `n`). A new field's first level goes by its expiry, as a 0 found there does
-- (cfw_read): one of no window or another is replaced. A level below with fields is this window's,
-- except early (see cfw_read) or when one was found dead (`early` true then too); past level 1, a
-- dead first level means a dead bucket, which starts again there.
local function cfw_set(k, j, value, room, n, wid, window, early)
  if j then
    redis.call('HSET', k[j], k[4], value)                  -- denyoom: the call's first write
    return
  end
  local state = 'live'
  if early and room > 1 and cb_state(k, 1, 1, wid, window, 1) == 'dead' then
    room, state = 1, 'dead'
  elseif early or room == 1 or type(n) ~= 'number' or n == 0 then
    state = cb_state(k, room, n, wid, window, 1)
  end
  cb_put(k, room, state, value, (wid + 1) * window)
end

ALG[7] = {
  check = function(k, now_us, limit, window, burst, cost)
    -- a lean pair needs the levels below only for a field its full first level lacks (keys.lua)
    local v1
    if k[2] == false then
      v1 = redis.pcall('HGET', k[1], k[4])
      if type(v1) ~= 'string' and cb_short(k) then return { short = true } end
    end
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local wend = (wid + 1) * window
    local early = now_ms - wid * window < 50
    local j, count, room, n, dead = cfw_read(k, wid, window, early, cost, limit, v1)
    local r = fw_decide(count, now_ms, wid, wend, limit, cost)
    r.j, r.room, r.n, r.early = j, room, n, early or dead
    return r
  end,
  commit = function(k, r, limit, window, burst, cost)
    cfw_set(k, r.j, math.min(r.count + cost, 9007199254740991), r.room, r.n, r.tag, window, r.early)
    r.remaining = limit - r.count - cost
    r.reset = r.wend - r.now_ms
  end,
  -- Calls `from` to `to` of a run of one-pair calls (batch.lua): as fixed-window's run, call j's keys
  -- from KEYS[k + 1 + step(j - 1)] (step 4, or 2 for lean pairs, keys.lua) and its field
  -- ARGV[fields + j]; one key table for the run.
  -- The common calls, past the window's first ms, are decided inline: a field at level 1 with a count,
  -- admitted, and a new field in a first level with room (this window's: it has fields, or a new one);
  -- any other goes through cfw_read and cfw_set, which read again; a lean one that needs the levels it
  -- was sent without (cb_short) is answered CB_RESEND.
  run = function(from, to, k, fields, now_us, limit, window, cost, spend, reply, lean)
    local m, key = #reply, {}
    local now_ms = (now_us - now_us % 1000) / 1000        -- x - x % 1: floor(x), without a call
    local e = now_ms % window
    local wid = (now_ms - e) / window
    local wend, early = (wid + 1) * window, e < 50
    -- HINCRBY's increment as a string made once: a number is formatted on every command
    local inc = string.format('%.0f', cost)
    local step = lean and 2 or 4
    for j = from, to do
      local at = k + 1 + step * (j - 1)                    -- call j's first level
      local level, field = KEYS[at], ARGV[fields + j]
      local v, lv, count, room, n, dead
      if not early then v = redis.pcall('HGET', level, field) end
      local x = type(v) == 'string' and tonumber(v)
      local fast = x and x > 0 and x + cost <= limit and x % 1 == 0
      local new, short = false, false
      if fast then
        lv, count = 1, x
      else
        if v == false and cost <= limit then
          n = redis.pcall('HLEN', level)
          new = type(n) == 'number' and n < CB_CAP
          if new and n > 0 then new = cb_end(redis.call('PEXPIRETIME', level), window) == wid + 1 end
        end
        if new then
          count = 0
        else
          cb_pair(key, at, field, lean)
          if lean and v == nil then v = redis.pcall('HGET', level, field) end
          short = type(v) ~= 'string' and cb_short(key)
          if not short then lv, count, room, n, dead = cfw_read(key, wid, window, early, cost, limit, v) end
        end
      end
      if short then
        reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = CB_RESEND, 0, 0, 0, 0
      else
        local allowed, retry, remaining, reset = fw_decision(count, now_ms, wend, limit, cost)
        if spend and allowed == 1 and cost > 0 then
          if new then
            redis.call('HSET', level, field, inc)          -- denyoom: the call's first write
            if n == 0 then redis.call('PEXPIREAT', level, wend) end  -- a bucket starting (cb_put's 'fresh')
          elseif not fast then
            cfw_set(key, lv, math.min(count + cost, 9007199254740991), room, n, wid, window, early or dead)
          elseif type(redis.pcall('HINCRBY', level, field, inc)) ~= 'number' then
            redis.call('HSET', level, field, count + cost) -- a count HINCRBY does not read (' 3')
          end
          remaining, reset = limit - count - cost, wend - now_ms
        end
        reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, wid
      end
      m = m + 5
    end
  end,
  refund = function(k, now_us, limit, window, burst, tag, cost)
    local now_ms = math.floor(now_us / 1000)
    if math.floor(now_ms / window) ~= tag then return end  -- the spend's window is over: nothing to give back
    local j, count, room, n = cfw_read(k, tag, window, true, 0, 0)
    if cost < 0 then                                       -- a settlement charging more, past the limit if need be
      cfw_set(k, j, math.min(count - cost, 9007199254740991), room, n, tag, window, true)
      return
    end
    if count == 0 then return end
    redis.call('HSET', k[j], k[4], math.max(0, count - cost))  -- 0 stays: the field keeps its place
  end,
}
