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
  Settle   an over-charge of c pushes the TAT c x T further, less what would have drained
           since the spend: refused until it drains. The TAT is at most 2 x tau ahead (a bucket one
           burst in debt), so TTL <= 2 x tau once settled.
  Repair   another type, a value that is not an integer below 1000, or no TTL reads as empty and is
           overwritten by the next spend; a TAT further than 2 x tau ahead (written elsewhere) counts as
           2 x tau ahead.
]]
-- The TAT under a key (us), or nil.
local function gc_read(key)
  local got = redis.pcall('GET', key)
  if type(got) ~= 'string' then return nil end              -- missing, or another type
  local n = tonumber(got)
  if not (n and n >= 0 and n < 1000 and n == math.floor(n)) then return nil end
  local exp = redis.call('PEXPIRETIME', key)
  if exp < 0 then return nil end
  return exp * 1000 - n
end

-- Writes a TAT: expiry rounded up to the ms, the overshoot as value.
local function gc_write(key, tat)
  local exp = math.ceil(tat / 1000)
  redis.call('SET', key, exp * 1000 - tat, 'PXAT', exp)                      -- an integer: Redis writes it exactly (%.17g)
end

ALG[5] = {
  check = function(key, now_us, limit, window, burst, cost)
    local T = math.ceil(window * 1000 / limit)
    local tau = burst * T
    local stored = gc_read(key)
    local tat = now_us
    if stored then tat = math.min(math.max(stored, now_us), now_us + 2 * tau) end
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
    if cost < 0 then
      -- a settlement charging more: the over-charge (at most 2 x tau) follows the spend's TAT, and only its
      -- part still ahead of now counts; the TAT may pass tau (refused until it drains), up to 2 x tau
      local over = math.min(-cost * T, 2 * burst * T)
      local extra = math.min(over, tag + over - now_us)
      if extra <= 0 then return end
      local base = now_us
      if stored then base = math.min(math.max(stored, now_us), now_us + 2 * burst * T) end
      gc_write(key, math.min(base + extra, now_us + 2 * burst * T))
      return
    end
    if not stored then return end
    -- only the part of the spend that has not drained yet can be given back
    local refundable = math.min(cost * T, math.max(0, tag - now_us))
    local tat = math.max(now_us, math.min(stored, now_us + 2 * burst * T) - refundable)
    if tat <= now_us then redis.call('DEL', key) return end
    gc_write(key, tat)
  end,
}
