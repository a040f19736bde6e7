--[[
  sliding-window: two fixed windows, the previous one weighted by how much of it the sliding window still
  covers (Cloudflare's counter): estimate = floor(prev * (window - elapsed) / window) + curr.

  State    KEYS[i]  hash { w = current window index, c = count in it, p = count in the window before },
                    PEXPIREAT the end of the next window (TTL <= 2 x window).
  ARGV     per pair: alg=2, limit, window_ms, burst (ignored)
  Reply    per pair: allowed, remaining, reset_ms (until both windows have drained), retry_ms (-1 = never),
                     tag = window index of the spend
  Bound    at most `limit` per aligned window; in a sliding window, exact when the previous window's
           requests were evenly spread (see docs/algorithms.md for the worst case).
]]
ALG[2] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local e = now_ms - wid * window                         -- elapsed in the current window, ms
    local got = redis.pcall('HMGET', key, 'w', 'c', 'p')
    local curr, prev, sc = 0, 0, 0
    local repair = false
    if got.err then
      repair = true
    elseif got[1] then
      local sw = tonumber(got[1])
      sc = tonumber(got[2]) or 0
      if sw == wid then
        curr, prev = sc, tonumber(got[3]) or 0
      elseif sw == wid - 1 then
        prev = sc
      end
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
             tag = wid, curr = curr, prev = prev, weighted = weighted, e = e, repair = repair,
             same = (not repair) and got[1] and tonumber(got[1]) == wid }
  end,
  commit = function(key, r, limit, window, burst, cost)
    if r.repair then
      redis.call('SET', key, '')                            -- denyoom first: see consume.lua on OOM
      redis.call('DEL', key)
    elseif r.same then
      redis.call('HINCRBY', key, 'c', cost)                -- same window: its expiry is already set
      r.remaining = limit - r.weighted - r.curr - cost
      r.reset = 2 * window - r.e
      return
    end
    redis.call('HSET', key, 'w', r.tag, 'c', r.curr + cost, 'p', r.prev)
    redis.call('PEXPIREAT', key, (r.tag + 2) * window)
    r.remaining = limit - r.weighted - r.curr - cost
    r.reset = 2 * window - r.e
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local got = redis.pcall('HMGET', key, 'w', 'c', 'p')
    if got.err or not got[1] then return end
    local sw, c, p = tonumber(got[1]), tonumber(got[2]) or 0, tonumber(got[3]) or 0
    local now_wid = math.floor(math.floor(now_us / 1000) / window)
    if sw ~= now_wid and sw ~= now_wid - 1 then return end  -- state is stale: nothing still counts
    if sw == tag then
      c = math.max(0, c - cost)                            -- the spend is in the stored current window
    elseif sw == tag + 1 then
      p = math.max(0, p - cost)                            -- the spend is now the previous window
    else
      return                                               -- older than both windows: already forgotten
    end
    if c == 0 and p == 0 then redis.call('DEL', key) else redis.call('HSET', key, 'c', c, 'p', p) end
  end,
}
