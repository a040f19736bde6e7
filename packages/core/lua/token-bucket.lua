--[[
  token-bucket: `burst` tokens of capacity, refilled one token every interval_us = ceil(window_us / limit)
  (so at most `limit` per window once the bucket is empty). Whole tokens only: exact integer arithmetic.

  State    KEYS[i]  hash { tk = tokens left, ts = time of the last whole refill, us }, PEXPIRE when the
                    bucket would be full again (a missing key is a full bucket).
  ARGV     per pair: alg=4, limit, window_ms, burst (capacity)
  Reply    per pair: allowed, remaining (tokens), reset_ms (until full), retry_ms (-1 = never), tag = 0
  Bound    in any interval of length L: at most burst + floor(L / interval) units.
]]
local function bucket_state(key, now_us, limit, window, burst)
  local interval = math.ceil(window * 1000 / limit)
  local got = redis.pcall('HMGET', key, 'tk', 'ts')
  local tokens, ts, repair = burst, now_us, false
  if got.err then
    repair = true
  elseif got[1] then
    tokens, ts = tonumber(got[1]), tonumber(got[2])
    if ts > now_us then ts = now_us end                    -- a clock that stepped back refills nothing
    local n = math.floor((now_us - ts) / interval)
    tokens, ts = tokens + n, ts + n * interval
    if tokens >= burst then tokens, ts = burst, now_us end
  end
  return tokens, ts, interval, repair
end

local function bucket_reset(tokens, ts, now_us, interval, burst)
  if tokens >= burst then return 0 end
  return math.ceil(((burst - tokens) * interval - (now_us - ts)) / 1000)
end

ALG[4] = {
  check = function(key, now_us, limit, window, burst, cost)
    local tokens, ts, interval, repair = bucket_state(key, now_us, limit, window, burst)
    local allowed, retry = 0, -1
    if cost > burst then
      retry = -1
    elseif tokens >= cost then
      allowed, retry = 1, 0
    else
      retry = math.ceil(((cost - tokens) * interval - (now_us - ts)) / 1000)
    end
    -- one constructor: a table grown field by field rehashes several times (measurable per call)
    return { allowed = allowed, retry = retry, remaining = tokens,
             reset = bucket_reset(tokens, ts, now_us, interval, burst), tag = 0, tokens = tokens,
             ts = ts, interval = interval, now = now_us, repair = repair }
  end,
  commit = function(key, r, limit, window, burst, cost)
    local left = r.tokens - cost
    r.remaining = left
    r.reset = bucket_reset(left, r.ts, r.now, r.interval, burst)
    if r.repair then
      redis.call('SET', key, '')                            -- denyoom first: see consume.lua on OOM
      redis.call('DEL', key)
    end
    redis.call('HSET', key, 'tk', left, 'ts', string.format('%.0f', r.ts))
    redis.call('PEXPIRE', key, r.reset)
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local tokens, ts, interval, repair = bucket_state(key, now_us, limit, window, burst)
    if repair then return end
    tokens = math.min(burst, tokens + cost)
    if tokens >= burst then redis.call('DEL', key) return end
    redis.call('HSET', key, 'tk', tokens, 'ts', string.format('%.0f', ts))
    redis.call('PEXPIRE', key, bucket_reset(tokens, ts, now_us, interval, burst))
  end,
}
