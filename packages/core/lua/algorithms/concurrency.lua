--[[
  concurrency: at most `limit` units in flight per key. Each admitted unit is a lease: a sorted-set member
  (its id, an integer) scored by the ms it expires at. A lease ends when it is released (refund.lua or a
  batch refund with its tag: ZREM, so a second release, or one after expiry, changes nothing) or when its
  expiry passes, so a process that dies holding leases holds them for `lease` ms at most.
  Input:
    KEYS[i]   the pair's key
    ARGV      per pair: alg=6, limit (most units in flight), window_ms = the lease in ms, burst (= limit)
  Output:
    per pair: allowed, remaining (free slots), reset_ms (until every live lease has expired),
    retry_ms (until enough leases expire: an upper bound, a release frees a slot sooner; -1 = never),
    tag = the first lease id of this spend (its ids are tag .. tag + cost - 1)
  State:
    KEYS[i] is a zset { "<id>" -> expires_ms }, PEXPIREAT the newest lease's expiry (TTL <= lease). A
    lease is live while now_ms < expires_ms <= now_ms + lease (a score further out was not written with
    this lease and is ignored, then trimmed).
  Ids:
    the server's microseconds at the spend, moved up past any id the set holds: unique within the key
    (the calls of one batch share a time), and growing with the server's clock, so a late release
    (after expiry) names an id no newer lease holds.
  Repair:
    another type under the key reads as no lease and is replaced by the next spend.
  Defines:
    ALG[6] = { check, commit, settle, refund }, as lua/README.md describes
]]
-- @include verdict
ALG[6] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local lo, hi = string.format('(%.0f', now_ms), string.format('%.0f', now_ms + window)
    local count = redis.pcall('ZCOUNT', key, lo, hi)
    local repair = false
    if type(count) == 'table' then repair, count = true, 0 end
    local allowed, retry = verdict(cost, limit, count + cost <= limit)
    if not retry then
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
