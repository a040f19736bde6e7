--[[
  refund: give `cost` back to every pair of an earlier admitted consume, never below zero usage and never
  into a newer window than the one the spend was made in (the tags from consume's reply bound it).

  KEYS   the same keys as the consume being refunded, then optionally a marker key (in the first key's
         hash slot) naming this spend
  ARGV   [1] cost, then 5 per pair i, at 1 + 5(i-1) + 1..5: alg, limit, window_ms, burst, tag,
         then (with the marker) the spend's whole cost
  Reply  now_us

  The marker makes a refund idempotent whoever sends it and however often (a retry after a timeout, a
  second refund() of one decision, an adapter and the app both refunding): it holds the units already
  given back, and the spend's cost bounds their sum. It lives as long as any pair could still give
  something back (2 windows + the burst's drain time), and only refunds create one.
]]
local ALG = {}
--[[
  fixed-window: a counter per window aligned to the epoch (window index = floor(now_ms / window_ms)).

  State    KEYS[i]  string: the count spent in the current window (Redis shares the objects of integers
                    below 10,000: no value allocation), PEXPIREAT the window's end (TTL <= window). The
                    window is the expiry's: a count whose expiry is not this window's end belongs to an
                    older window (Redis keeps a key alive during the millisecond it expires) and reads as 0.
  ARGV     per pair: alg=1, limit, window_ms, burst (ignored)
  Reply    per pair: allowed, remaining, reset_ms (until the window ends), retry_ms (-1 = never), tag = window index
  Bound    at most `limit` per aligned window; up to 2 x limit across one boundary.
  Repair   anything else under the key (another type, a non-integer, negative or huge text, no TTL or the
           TTL of another window) reads as an empty window and is overwritten by the next spend: never
           more than a fresh key admits. In 0.1 a single-policy key ended in ':default': while the
           new key is missing, that one is read instead (same layout), so an upgrade admits nobody twice.
]]
-- The count under a key: nil when there is no string there, 0 when the string is not a count.
local function fw_count(key)
  local got = redis.pcall('GET', key)
  if type(got) ~= 'string' then return got and 0 or nil end  -- another type: 0, overwritten on spend
  local n = tonumber(got)
  if n and n >= 1 and n <= 9007199254740991 and n == math.floor(n) then return n end
  return 0                                                  -- NaN fails every comparison
end

-- Whether an expiry is the window end `wend`. To the nearest window end, not exactly: MIGRATE (cluster
-- resharding) restores a key with its remaining TTL, so the moved key's expiry shifts by the transfer time.
local function fw_ends(exp, wend, window)
  return exp > 0 and math.floor(exp / window + 0.5) * window == wend
end

ALG[1] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local wend = (wid + 1) * window
    local count = fw_count(key)
    local from = key
    if count == nil and string.byte(key, -1) == 125 then
      from = key .. ':default'                              -- the 0.1 name of a single-policy key
      count = fw_count(from)
    end
    count = count or 0
    -- Only in a window's first ms can the previous window's key still be alive (Redis expires a key once
    -- its clock passes the expiry; script time is frozen at its start); and a count that refuses must be
    -- this window's, not state with a longer TTL written by something else. Checked only there.
    if count > 0 and (now_ms - wid * window < 50 or count + cost > limit)
        and not fw_ends(redis.call('PEXPIRETIME', from), wend, window) then
      count = 0
    end
    local allowed, retry = 0, wend - now_ms
    if cost > limit then
      retry = -1
    elseif count + cost <= limit then
      allowed, retry = 1, 0
    end
    -- one constructor: a table grown field by field rehashes several times (measurable per call)
    return { allowed = allowed, retry = retry, remaining = math.max(0, limit - count),
             reset = (count > 0) and (wend - now_ms) or 0, tag = wid, count = count, wend = wend,
             now_ms = now_ms }
  end,
  commit = function(key, r, limit, window, burst, cost)
    -- SET, not INCRBY: one command either way, and it overwrites whatever was there (denyoom first).
    redis.call('SET', key, r.count + cost, 'PXAT', r.wend)
    r.remaining = limit - r.count - cost
    r.reset = r.wend - r.now_ms
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local now_ms = math.floor(now_us / 1000)
    if math.floor(now_ms / window) ~= tag then return end  -- the spend's window is over: nothing to give back
    local count = fw_count(key)
    if not count or count == 0 then return end
    if not fw_ends(redis.call('PEXPIRETIME', key), (tag + 1) * window, window) then return end
    local left = math.max(0, count - cost)
    if left == 0 then redis.call('DEL', key) else redis.call('SET', key, left, 'KEEPTTL') end
  end,
}

--[[
  sliding-window: two fixed windows, the previous one weighted by how much of it the sliding window still
  covers (Cloudflare's counter): estimate = floor(prev * (window - elapsed) / window) + curr.

  State    KEYS[i]  string: curr + prev x 2^26, one integer (Redis shares the objects of integers below
                    10,000, so a key with prev = 0 and curr < 10,000 allocates no value), PEXPIREAT the
                    end of the window after curr's (TTL <= 2 x window). curr's window index is not stored:
                    it is PEXPIRETIME / window - 2, rounded (a key moved by MIGRATE keeps its remaining
                    TTL, not its expiry). (limit < 2^26 keeps both counters exact in a double.)
  ARGV     per pair: alg=2, limit, window_ms, burst (ignored)
  Reply    per pair: allowed, remaining, reset_ms (until both windows have drained), retry_ms (-1 = never),
                     tag = window index of the spend
  Bound    at most `limit` per aligned window; in a sliding window, exact when the previous window's
           requests were evenly spread (see docs/algorithms.md for the worst case).
  Repair   anything else (another type, a non-integer, no TTL, a TTL that is not near a window end of
           this policy) reads as empty and is overwritten by the next spend. The 0.1 layout (a hash
           { w, c, p }) is still read, and so is the 0.1 name of a single-policy key (':default' suffix)
           while the new key is missing: an upgrade admits nobody twice.
]]
local SW_M = 67108864                                       -- 2^26

-- (window index of curr, curr, prev) under a key; nil, missing when there is nothing readable.
local function sw_read(key, window)
  local got = redis.pcall('GET', key)
  if type(got) == 'string' then
    local n = tonumber(got)
    if n and n >= 0 and n <= 4503599627370495 and n == math.floor(n) then
      -- To the nearest window end: MIGRATE (cluster resharding) restores a key with its remaining TTL,
      -- which shifts the moved key's expiry by the transfer time.
      local exp = redis.call('PEXPIRETIME', key)
      if exp > 0 then return math.floor(exp / window + 0.5) - 2, n % SW_M, math.floor(n / SW_M) end
    end
    return nil, false
  elseif not got then
    return nil, true
  end
  local h = redis.pcall('HMGET', key, 'w', 'c', 'p')          -- the 0.1 layout
  if h.err then return nil, false end
  local w, c, p = tonumber(h[1]), tonumber(h[2]), tonumber(h[3] or 0)
  if not (w and c and p and w == math.floor(w) and c >= 0 and p >= 0 and c < SW_M and p < SW_M
          and c == math.floor(c) and p == math.floor(p)) then
    return nil, false
  end
  return w, c, p
end

ALG[2] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local e = now_ms - wid * window                         -- elapsed in the current window, ms
    local sw, sc, sp = sw_read(key, window)
    if sw == nil and sc and string.byte(key, -1) == 125 then
      sw, sc, sp = sw_read(key .. ':default', window)       -- the 0.1 name of a single-policy key
    end
    local curr, prev = 0, 0
    if sw == wid then
      curr, prev = sc, sp
    elseif sw == wid - 1 then
      prev = sc
    end
    local weighted = math.floor(prev * (window - e) / window)
    local allowed, retry = 0, -1
    if cost > limit then
      retry = -1
    elseif weighted + curr + cost <= limit then
      allowed, retry = 1, 0
    elseif curr + cost <= limit then
      -- wait until floor(prev * (window - t) / window) <= limit - curr - cost, inside this window
      local a = limit - curr - cost
      retry = window - math.floor(((a + 1) * window + prev - 1) / prev) + 1 - e
    else
      -- wait into the next window, where this window's count becomes the weighted one
      local a = limit - cost
      retry = (window - e) + window - math.floor(((a + 1) * window + curr - 1) / curr) + 1
    end
    -- one constructor: a table grown field by field rehashes several times (measurable per call)
    return { allowed = allowed, retry = retry, remaining = math.max(0, limit - weighted - curr),
             reset = (curr > 0) and (2 * window - e) or ((prev > 0) and (window - e) or 0),
             tag = wid, curr = curr, prev = prev, weighted = weighted, e = e }
  end,
  commit = function(key, r, limit, window, burst, cost)
    -- SET with the expiry that encodes the window: one command, overwrites anything (denyoom first)
    redis.call('SET', key, string.format('%.0f', r.curr + cost + r.prev * SW_M), 'PXAT',
               string.format('%.0f', (r.tag + 2) * window))
    r.remaining = limit - r.weighted - r.curr - cost
    r.reset = 2 * window - r.e
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local sw, c, p = sw_read(key, window)
    if sw == nil then return end
    local now_wid = math.floor(math.floor(now_us / 1000) / window)
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
      redis.call('SET', key, string.format('%.0f', c + p * SW_M), 'PXAT', string.format('%.0f', (sw + 2) * window))
    end
  end,
}

--[[
  sliding-log: every admitted unit is one sorted-set member scored by its spend time in microseconds.
  Exact: no more than `limit` units in any window-long interval. Refused calls are never stored, and the
  set is trimmed before every add, so it never holds more than `limit` members.

  State    KEYS[i]  zset { "<spend_us>.<n>" -> spend_us }, PEXPIRE window + 1 after each add (TTL <= window + 1).
                    A member is live while spend_us > now_us - window_us.
  ARGV     per pair: alg=3, limit, window_ms, burst (ignored)
  Reply    per pair: allowed, remaining, reset_ms (until the newest member leaves), retry_ms (-1 = never),
                     tag = spend time in microseconds
  Repair   another type reads as empty and is replaced by the next spend; a set that would refuse but has
           no TTL or one longer than window + 1 was not written here and reads as empty too. In 0.1 a
           single-policy key ended in ':default': while the new key is missing that set is counted, and
           copied to the new name by the next spend, so an upgrade admits nobody twice.
]]
ALG[3] = {
  check = function(key, now_us, limit, window, burst, cost)
    local window_us = window * 1000
    local floor_us = string.format('(%.0f', now_us - window_us)
    local from = key
    local count = redis.pcall('ZCOUNT', key, floor_us, '+inf')
    local repair, legacy = false, false
    if count == 0 and string.byte(key, -1) == 125 and redis.call('EXISTS', key) == 0 then
      local old = key .. ':default'                         -- the 0.1 name of a single-policy key
      local n = redis.pcall('ZCOUNT', old, floor_us, '+inf')
      if type(n) == 'number' and n > 0 then from, count, legacy = old, n, old end
    end
    if type(count) == 'table' then repair, count = true, 0 end
    if count + cost > limit and count > 0 then
      local ttl = redis.call('PTTL', from)
      if ttl < 0 or ttl > window + 1 then repair, legacy, count = true, false, 0 end
    end
    local allowed, retry = 0, -1
    if cost > limit then
      retry = -1
    elseif count + cost <= limit then
      allowed, retry = 1, 0
    else
      -- the (count + cost - limit)-th oldest live member must leave first
      local k = count + cost - limit
      local m = redis.call('ZRANGE', from, floor_us, '+inf', 'BYSCORE', 'LIMIT', k - 1, 1, 'WITHSCORES')
      retry = math.ceil((tonumber(m[2]) + window_us - now_us) / 1000)
      if not (retry >= 0 and retry <= window + 1) then retry = window + 1 end  -- a score from elsewhere
    end
    -- reset: see settle, only needed if not charged. One constructor (no rehash per added field).
    return { allowed = allowed, retry = retry, remaining = math.max(0, limit - count), reset = 0,
             tag = now_us, count = count, repair = repair, legacy = legacy, key = from,
             window_us = window_us }
  end,
  commit = function(key, r, limit, window, burst, cost)
    local now = string.format('%.0f', r.tag)
    if r.repair then
      redis.call('SET', key, '')                            -- denyoom first: see consume.lua on OOM
      redis.call('DEL', key)
    elseif r.legacy then
      redis.call('COPY', r.legacy, key)                     -- denyoom too; the new key is missing
    end
    -- members are unique: one script per microsecond at most. ZADD in chunks: unpack() has a C-stack limit.
    local n = 0
    while n < cost do
      local args = {}
      for m = n + 1, math.min(cost, n + 200) do
        args[#args + 1] = now
        args[#args + 1] = now .. '.' .. (r.count + m)
      end
      redis.call('ZADD', key, unpack(args))
      n = n + 200
    end
    -- trim after adding: ZADD is the first write (denyoom), and the new members are all live
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', r.tag - window * 1000))
    redis.call('PEXPIRE', key, window + 1)
    r.remaining = limit - r.count - cost
    r.reset = window
  end,
  -- reset (until the newest member leaves) for a pair that was not charged (peek, or a refused call);
  -- a charged pair's reset is the window, so the ZRANGE is skipped on the common path.
  settle = function(r)
    if r.count > 0 then
      local newest = redis.call('ZRANGE', r.key, -1, -1, 'WITHSCORES')
      local reset = math.ceil((tonumber(newest[2]) + r.window_us - r.tag) / 1000)
      if not (reset >= 0 and reset <= r.window_us / 1000 + 1) then reset = r.window_us / 1000 + 1 end
      r.reset = reset
    end
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local at = string.format('%.0f', tag)
    local spent = redis.pcall('ZRANGE', key, at, at, 'BYSCORE', 'LIMIT', 0, cost)
    if type(spent) ~= 'table' or spent.err or #spent == 0 then return end   -- trimmed: already outside the window
    for i = 1, #spent, 200 do
      redis.call('ZREM', key, unpack(spent, i, math.min(#spent, i + 199)))
    end
  end,
}

--[[
  token-bucket: `burst` tokens of capacity, refilled one token every interval_us = ceil(window_us / limit)
  (so at most `limit` per window once the bucket is empty). Whole tokens only: exact integer arithmetic.

  One number is the whole state: F, the time the bucket is full again. Tokens now =
  min(burst, floor((now - F) / interval) + burst), and a spend of c sets F = max(F, now) + c x interval:
  exactly the (tokens, time of the last whole refill) pair of 0.1 (tokens x interval = the time the
  bucket took to refill them), with the same decisions as gcra given the same numbers.

  State    KEYS[i]  PEXPIREAT ceil(F / 1000) ms (when the bucket is full again, so a missing key is a full
                    bucket), and as value the microseconds the expiry overshoots F (0..999): an integer
                    below 10,000, whose object Redis shares. TTL <= burst x interval.
  ARGV     per pair: alg=4, limit, window_ms, burst (capacity)
  Reply    per pair: allowed, remaining (tokens), reset_ms (until full), retry_ms (-1 = never),
                     tag = F after this spend (bounds its refund)
  Bound    in any interval of length L: at most burst + floor(L / interval) units.
  Refund   gives back only the part of the spend the bucket has not refilled yet (min(c x interval,
           tag - now)): once the bucket has been full again the spend is gone, and a refund cannot
           create tokens (the bucket never holds more than it would have without the spend).
  Repair   another type, a value that is not an integer, no TTL, or a 0.1 hash with a missing or
           non-numeric field reads as a full bucket and is overwritten by the next spend; F further than
           burst x interval ahead counts as an empty bucket. The 0.1 hash { tk, ts } is still read,
           and so is the 0.1 name of a single-policy key (':default' suffix) while the new key is
           missing: an upgrade admits nobody twice.
]]
-- F under a key (us), or nil, missing.
local function tb_read(key, interval, burst)
  local got = redis.pcall('GET', key)
  if not got then return nil, true end
  if type(got) == 'string' then
    local n = tonumber(got)
    if not (n and n >= 0 and n < 1000 and n == math.floor(n)) then return nil, false end
    local exp = redis.call('PEXPIRETIME', key)
    if exp < 0 then return nil, false end
    return exp * 1000 - n
  end
  local h = redis.pcall('HMGET', key, 'tk', 'ts')              -- the 0.1 layout
  if h.err then return nil, false end
  local tk, ts = tonumber(h[1]), tonumber(h[2])
  if not (tk and ts and tk == math.floor(tk) and ts == math.floor(ts) and tk >= 0 and ts >= 0
          and tk <= burst and ts <= 9007199254740991) then
    return nil, false
  end
  return ts + (burst - tk) * interval
end

local function tb_write(key, full)
  local exp = math.ceil(full / 1000)
  redis.call('SET', key, exp * 1000 - full, 'PXAT', string.format('%.0f', exp))
end

ALG[4] = {
  check = function(key, now_us, limit, window, burst, cost)
    local interval = math.ceil(window * 1000 / limit)
    local cap = burst * interval
    local stored, missing = tb_read(key, interval, burst)
    if stored == nil and missing and string.byte(key, -1) == 125 then
      stored = tb_read(key .. ':default', interval, burst)  -- the 0.1 name of a single-policy key
    end
    local full = now_us
    if stored then full = math.min(math.max(stored, now_us), now_us + cap) end
    local tokens = math.floor((cap - (full - now_us)) / interval)
    local allowed, retry = 0, -1
    if cost > burst then
      retry = -1
    elseif tokens >= cost then
      allowed, retry = 1, 0
    else
      retry = math.ceil((full + cost * interval - cap - now_us) / 1000)
    end
    -- one constructor: a table grown field by field rehashes several times (measurable per call)
    return { allowed = allowed, retry = retry, remaining = tokens, reset = math.ceil((full - now_us) / 1000),
             tag = full + cost * interval, interval = interval, cap = cap, now = now_us }
  end,
  commit = function(key, r, limit, window, burst, cost)
    local ahead = r.tag - r.now
    r.remaining = math.floor((r.cap - ahead) / r.interval)
    r.reset = math.ceil(ahead / 1000)
    tb_write(key, r.tag)
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local interval = math.ceil(window * 1000 / limit)
    local stored = tb_read(key, interval, burst)
    if not stored then return end
    -- only the part of the spend the bucket has not refilled yet can be given back
    local refundable = math.min(cost * interval, math.max(0, tag - now_us))
    local full = math.max(now_us, math.min(stored, now_us + burst * interval) - refundable)
    if full <= now_us then redis.call('DEL', key) return end
    tb_write(key, full)
  end,
}

--[[
  gcra: the generic cell rate algorithm (redis_rate's, in integer microseconds). One number per key: the
  theoretical arrival time (TAT). Emission interval T = ceil(window_us / limit), burst tolerance
  tau = burst x T. A call of cost c is admitted when max(TAT, now) + c x T - now <= tau.

  State    KEYS[i]  PEXPIREAT ceil(TAT / 1000) ms, and as value the microseconds the expiry overshoots the
                    TAT (0..999): TAT = PEXPIRETIME x 1000 - value. The value is an integer below 10,000,
                    whose object Redis shares: the key costs no value allocation. TTL <= tau (<= window
                    when burst = limit).
  ARGV     per pair: alg=5, limit, window_ms, burst
  Reply    per pair: allowed, remaining, reset_ms (until TAT: full burst again), retry_ms (-1 = never),
                     tag = the TAT this spend produced (bounds its refund)
  Bound    in any interval of length L: at most burst + floor(L / T) units.
  Repair   another type, a value that is not an integer, or no TTL reads as empty and is overwritten by
           the next spend; a TAT further than tau ahead (written elsewhere) counts as tau ahead. The 0.1
           value (the TAT itself, >= 1000) is still read, and so is the 0.1 name of a single-policy key
           (':default' suffix) while the new key is missing: an upgrade admits nobody twice.
]]
-- The TAT under a key (us), or nil, missing.
local function gc_read(key)
  local got = redis.pcall('GET', key)
  if not got then return nil, true end
  if type(got) ~= 'string' then return nil, false end
  local n = tonumber(got)
  if not (n and n >= 0 and n <= 9007199254740991 and n == math.floor(n)) then return nil, false end
  if n >= 1000 then return n end                            -- 0.1: the TAT itself
  local exp = redis.call('PEXPIRETIME', key)
  if exp < 0 then return nil, false end
  return exp * 1000 - n
end

-- Writes a TAT: expiry rounded up to the ms, the overshoot as value.
local function gc_write(key, tat)
  local exp = math.ceil(tat / 1000)
  redis.call('SET', key, exp * 1000 - tat, 'PXAT', string.format('%.0f', exp))
end

ALG[5] = {
  check = function(key, now_us, limit, window, burst, cost)
    local T = math.ceil(window * 1000 / limit)
    local tau = burst * T
    local stored, missing = gc_read(key)
    if stored == nil and missing and string.byte(key, -1) == 125 then
      stored = gc_read(key .. ':default')                   -- the 0.1 name of a single-policy key
    end
    local tat = now_us
    if stored then tat = math.min(math.max(stored, now_us), now_us + tau) end
    local new_tat = tat + cost * T
    local allowed, retry = 0, -1
    if cost > burst then
      retry = -1
    elseif new_tat - now_us <= tau then
      allowed, retry = 1, 0
    else
      retry = math.ceil((new_tat - tau - now_us) / 1000)
    end
    -- one constructor: a table grown field by field rehashes several times (measurable per call)
    return { allowed = allowed, retry = retry, remaining = math.max(0, math.floor((tau - (tat - now_us)) / T)),
             reset = math.ceil((tat - now_us) / 1000), tat = tat, tag = new_tat, T = T, tau = tau,
             now = now_us }
  end,
  commit = function(key, r, limit, window, burst, cost)
    local ahead = r.tag - r.now
    r.remaining = math.floor((r.tau - ahead) / r.T)
    r.reset = math.ceil(ahead / 1000)
    gc_write(key, r.tag)
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local T = math.ceil(window * 1000 / limit)
    local stored = gc_read(key)
    if not stored then return end
    -- only the part of the spend that has not drained yet can be given back
    local refundable = math.min(cost * T, math.max(0, tag - now_us))
    local tat = math.max(now_us, math.min(stored, now_us + burst * T) - refundable)
    if tat <= now_us then redis.call('DEL', key) return end
    gc_write(key, tat)
  end,
}

--[[
  concurrency: at most `limit` units in flight per key. Each admitted unit is a lease: a sorted-set member
  (its id, an integer) scored by the ms it expires at. A lease ends when it is released (refund.lua or a
  batch refund with its tag: ZREM, so a second release, or one after expiry, changes nothing) or when its
  expiry passes, so a process that dies holding leases holds them for `lease` ms at most.

  State    KEYS[i]  zset { "<id>" -> expires_ms }, PEXPIREAT the newest lease's expiry (TTL <= lease).
                    A lease is live while now_ms < expires_ms <= now_ms + lease (a score further out was
                    not written with this lease and is ignored, then trimmed).
  ARGV     per pair: alg=6, limit (most units in flight), window_ms = the lease in ms, burst (= limit)
  Reply    per pair: allowed, remaining (free slots), reset_ms (until every live lease has expired),
                     retry_ms (until enough leases expire: an upper bound, a release frees a slot sooner;
                     -1 = never), tag = the first lease id of this spend (its ids are tag .. tag + cost - 1)
  Ids      the server's microseconds at the spend, moved up past any id the set holds: unique within the
           key (the calls of one batch share a time), and growing with the server's clock, so a late
           release (after expiry) names an id no newer lease holds.
  Repair   another type under the key reads as no lease and is replaced by the next spend.
]]
ALG[6] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local lo, hi = string.format('(%.0f', now_ms), string.format('%.0f', now_ms + window)
    local count = redis.pcall('ZCOUNT', key, lo, hi)
    local repair = false
    if type(count) == 'table' then repair, count = true, 0 end
    local allowed, retry = 0, -1
    if cost > limit then
      retry = -1
    elseif count + cost <= limit then
      allowed, retry = 1, 0
    else
      -- the (count + cost - limit)-th lease to expire must be gone first
      local m = redis.call('ZRANGE', key, lo, hi, 'BYSCORE', 'LIMIT', count + cost - limit - 1, 1, 'WITHSCORES')
      retry = tonumber(m[2]) - now_ms
    end
    -- reset: see settle, only needed if not charged. One constructor (no rehash per added field).
    return { allowed = allowed, retry = retry, remaining = math.max(0, limit - count), reset = 0,
             tag = now_us, count = count, repair = repair, key = key, now_ms = now_ms, lo = lo, hi = hi }
  end,
  commit = function(key, r, limit, window, burst, cost)
    if r.repair then
      redis.call('SET', key, '')                            -- denyoom first: see consume.lua on OOM
      redis.call('DEL', key)
    end
    -- cost consecutive ids that no member holds (reads: ZADD below stays the first denyoom write)
    local id, j = r.tag, 0
    while j < cost do
      if redis.call('ZSCORE', key, string.format('%.0f', id + j)) then
        id, j = id + j + 1, 0
      else
        j = j + 1
      end
    end
    local exp = string.format('%.0f', r.now_ms + window)
    local n = 0
    while n < cost do                                       -- in chunks: unpack() has a C-stack limit
      local args = {}
      for m = n, math.min(cost, n + 200) - 1 do
        args[#args + 1] = exp
        args[#args + 1] = string.format('%.0f', id + m)
      end
      redis.call('ZADD', key, unpack(args))
      n = n + 200
    end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', r.now_ms))
    redis.call('ZREMRANGEBYSCORE', key, '(' .. exp, '+inf')
    redis.call('PEXPIREAT', key, exp)
    r.tag = id
    r.remaining = limit - r.count - cost
    r.reset = window
  end,
  -- reset (until the newest live lease expires) for a pair that was not charged (peek, or a refused call)
  settle = function(r)
    if r.count > 0 then
      local newest = redis.call('ZRANGE', r.key, r.hi, r.lo, 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
      r.reset = tonumber(newest[2]) - r.now_ms
    end
  end,
  -- release: the spend's lease ids, whatever is left of them (ZREM of an absent id is a no-op)
  refund = function(key, now_us, limit, window, burst, tag, cost)
    for n = 0, cost - 1, 200 do
      local ids = {}
      for m = n, math.min(cost, n + 200) - 1 do ids[#ids + 1] = string.format('%.0f', tag + m) end
      redis.pcall('ZREM', key, unpack(ids))
    end
  end,
}

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local pairs_n = (#ARGV - 1 - (#ARGV - 1) % 5) / 5
local marker = KEYS[pairs_n + 1]
if marker then
  local spent = tonumber(ARGV[2 + 5 * pairs_n])
  local done = tonumber(redis.pcall('GET', marker)) or 0
  cost = math.min(cost, spent - done)
  if cost <= 0 then return now_us end
  local ttl = 1
  for i = 1, pairs_n do
    local b = 1 + (i - 1) * 5
    local limit, window, burst = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
    ttl = math.max(ttl, 2 * window + math.ceil(burst * math.ceil(window * 1000 / limit) / 1000) + 1)
  end
  redis.call('SET', marker, done + cost, 'PX', ttl)
end
for i = 1, pairs_n do
  local b = 1 + (i - 1) * 5
  ALG[tonumber(ARGV[b + 1])].refund(KEYS[i], now_us, tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), cost)
end
return now_us
