--[[
  fixed-window: a counter per window aligned to the epoch (window index = floor(now_ms / window_ms)).

  State    KEYS[i]  string holding the count spent in the current window, PEXPIREAT the window's end
                    (TTL <= window). A count whose expiry is not this window's end belongs to an older
                    window (Redis keeps a key alive during the millisecond it expires) and is read as 0.
  ARGV     per pair: alg=1, limit, window_ms, burst (ignored)
  Reply    per pair: allowed, remaining, reset_ms (until the window ends), retry_ms (-1 = never), tag = window index
  Bound    at most `limit` per aligned window; up to 2 x limit across one boundary.
]]
ALG[1] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local wid = math.floor(now_ms / window)
    local wend = (wid + 1) * window
    local got = redis.pcall('GET', key)
    local count = 0
    local repair = false
    if type(got) == 'table' and got.err then
      repair = true                                         -- wrong type: start afresh, never unlimited
    elseif got then
      count = tonumber(got) or 0
      -- Only in a window's first ms can the previous window's key still be alive (Redis expires a key
      -- once its clock passes the expiry; script time is frozen at its start): check there, not always.
      if count > 0 and now_ms - wid * window < 50 and redis.call('PEXPIRETIME', key) ~= wend then count = 0 end
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
             now_ms = now_ms, repair = repair }
  end,
  commit = function(key, r, limit, window, burst, cost)
    if r.count == 0 then
      redis.call('SET', key, cost, 'PXAT', r.wend)          -- also overwrites a stale or wrong-typed key
    else
      redis.call('INCRBY', key, cost)
    end
    r.remaining = limit - r.count - cost
    r.reset = r.wend - r.now_ms
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local now_ms = math.floor(now_us / 1000)
    if math.floor(now_ms / window) ~= tag then return end  -- the spend's window is over: nothing to give back
    local got = redis.pcall('GET', key)
    if type(got) ~= 'string' then return end
    if redis.call('PEXPIRETIME', key) ~= (tag + 1) * window then return end
    local left = math.max(0, (tonumber(got) or 0) - cost)
    if left == 0 then redis.call('DEL', key) else redis.call('SET', key, left, 'KEEPTTL') end
  end,
}
