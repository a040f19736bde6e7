--[[
  sliding-log: every admitted unit is one sorted-set member scored by its spend time in microseconds.
  Exact: no more than `limit` units in any window-long interval. Refused calls are never stored, and the
  set is trimmed before every add, so it never holds more than `limit` members.
  Input:
    KEYS[i]   the pair's key
    ARGV      per pair: alg=3, limit, window_ms, burst (ignored)
  Output:
    per pair: allowed, remaining, reset_ms (until the newest member leaves), retry_ms (-1 = never),
    tag = spend time in microseconds
  State:
    KEYS[i] is a zset { "<spend_us>.<n>" -> spend_us }, PEXPIRE window + 1 after each add
    (TTL <= window + 1). A member is live while spend_us > now_us - window_us.
  Settle:
    an over-charge adds units at the spend's time while it is in the window, keeping the newest
    `limit`: refused until the spend leaves the window (a spend that has left it is not charged).
  Repair:
    another type reads as empty and is replaced by the next spend; a set that would refuse but has no
    TTL or one longer than window + 1 was not written here and reads as empty too.
  Defines:
    ALG[3] = { check, commit, settle, refund }, as lua/README.md describes
]]
-- @include verdict
ALG[3] = {
  check = function(key, now_us, limit, window, burst, cost)
    local window_us = window * 1000
    local floor_us = string.format('(%.0f', now_us - window_us)
    local count = redis.pcall('ZCOUNT', key, floor_us, '+inf')
    local repair = false
    if type(count) == 'table' then repair, count = true, 0 end
    if count + cost > limit and count > 0 then
      local ttl = redis.call('PTTL', key)
      if ttl < 0 or ttl > window + 1 then repair, count = true, 0 end
    end
    local allowed, retry = verdict(cost, limit, count + cost <= limit)
    if not retry then
      -- the (count + cost - limit)-th oldest live member must leave first
      local k = count + cost - limit
      local m = redis.call('ZRANGE', key, floor_us, '+inf', 'BYSCORE', 'LIMIT', k - 1, 1, 'WITHSCORES')
      retry = math.ceil((tonumber(m[2]) + window_us - now_us) / 1000)
      if not (retry >= 0 and retry <= window + 1) then retry = window + 1 end  -- a score from elsewhere
    end
    -- reset: see settle, only needed if not charged. One constructor (no rehash per added field).
    return { allowed = allowed, retry = retry, remaining = math.max(0, limit - count), reset = 0,
             tag = now_us, count = count, repair = repair, key = key,
             window_us = window_us }
  end,
  commit = function(key, r, limit, window, burst, cost)
    local now = string.format('%.0f', r.tag)
    if r.repair then
      redis.call('SET', key, '')                            -- denyoom first: see consume.lua on OOM
      redis.call('DEL', key)
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
    if cost < 0 then
      -- A settlement charging more: -cost more units at the spend's time, while it is in the window. The
      -- log keeps only its newest `limit` units: every decision and retry time it gives is the one the
      -- whole log would give (refusals last until the dropped oldest would have left anyway).
      if tag <= now_us - window * 1000 then return end
      local there = redis.pcall('ZRANGE', key, at, at, 'BYSCORE')
      if type(there) ~= 'table' or there.err then
        redis.call('SET', key, '')                          -- another type: replaced (denyoom first)
        redis.call('DEL', key)
        there = {}
      end
      local top = 0                                         -- members are "<spend_us>.<n>": n continues
      for j = 1, #there do top = math.max(top, tonumber(string.match(there[j], '%.(%d+)$')) or 0) end
      local add, n = math.min(-cost, limit), 0
      while n < add do
        local args = {}
        for m = n + 1, math.min(add, n + 200) do
          args[#args + 1] = at
          args[#args + 1] = at .. '.' .. (top + m)
        end
        redis.call('ZADD', key, unpack(args))
        n = n + 200
      end
      redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now_us - window * 1000))
      local over = redis.call('ZCARD', key) - limit
      if over > 0 then redis.call('ZREMRANGEBYRANK', key, 0, over - 1) end
      local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      redis.call('PEXPIREAT', key, math.floor(tonumber(newest[2]) / 1000) + window + 1)
      return
    end
    local spent = redis.pcall('ZRANGE', key, at, at, 'BYSCORE', 'LIMIT', 0, cost)
    if type(spent) ~= 'table' or spent.err or #spent == 0 then return end   -- trimmed: already outside the window
    for i = 1, #spent, 200 do
      redis.call('ZREM', key, unpack(spent, i, math.min(#spent, i + 199)))
    end
  end,
}
