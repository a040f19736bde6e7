--[[
  gcra: the generic cell rate algorithm (redis_rate's, in integer microseconds). One number per key: the
  theoretical arrival time (TAT). Emission interval T = ceil(window_us / limit), burst tolerance
  tau = burst x T. A call of cost c is admitted when max(TAT, now) + c x T - now <= tau.

  State    KEYS[i]  string TAT in us, PX until the TAT (TTL <= tau, so <= window when burst = limit).
  ARGV     per pair: alg=5, limit, window_ms, burst
  Reply    per pair: allowed, remaining, reset_ms (until TAT: full burst again), retry_ms (-1 = never),
                     tag = the TAT this spend produced (bounds its refund)
  Bound    in any interval of length L: at most burst + floor(L / T) units.
]]
ALG[5] = {
  check = function(key, now_us, limit, window, burst, cost)
    local T = math.ceil(window * 1000 / limit)
    local tau = burst * T
    local got = redis.pcall('GET', key)
    local tat, repair = now_us, false
    if type(got) == 'table' and got.err then
      repair = true
    elseif got then
      tat = math.max(tonumber(got) or now_us, now_us)
    end
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
             now = now_us, repair = repair }
  end,
  commit = function(key, r, limit, window, burst, cost)
    local ahead = r.tag - r.now
    r.remaining = math.floor((r.tau - ahead) / r.T)
    r.reset = math.ceil(ahead / 1000)
    redis.call('SET', key, string.format('%.0f', r.tag), 'PX', r.reset)
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local T = math.ceil(window * 1000 / limit)
    local got = redis.pcall('GET', key)
    if type(got) ~= 'string' then return end
    -- only the part of the spend that has not drained yet can be given back
    local refundable = math.min(cost * T, math.max(0, tag - now_us))
    local tat = math.max(now_us, (tonumber(got) or now_us) - refundable)
    if tat <= now_us then redis.call('DEL', key) return end
    redis.call('SET', key, string.format('%.0f', tat), 'PX', math.ceil((tat - now_us) / 1000))
  end,
}
