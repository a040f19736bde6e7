--[[
  gcra: the generic cell rate algorithm (redis_rate's, in integer microseconds). One number per key: the
  theoretical arrival time (TAT). Emission interval T = ceil(window_us / limit), burst tolerance
  tau = burst x T. A call of cost c is admitted when max(TAT, now) + c x T - now <= tau.
  Input:
    KEYS[i]   the pair's key
    ARGV      per pair: alg=5, limit, window_ms, burst
  Output:
    per pair: allowed, remaining, reset_ms (until TAT: full burst again), retry_ms (-1 = never),
    tag = the TAT this spend produced (bounds its refund)
  State:
    KEYS[i] holds the TAT as a stamp (stamp.lua). TTL <= tau (<= window when burst = limit).
  Bound:
    in any interval of length L: at most burst + floor(L / T) units.
  Settle:
    an over-charge of c pushes the TAT c x T further, less what would have drained since the spend:
    refused until it drains. The TAT is at most 2 x tau ahead (a bucket one burst in debt), so
    TTL <= 2 x tau once settled.
  Repair:
    another type, a value that is not an integer below 1000, or no TTL reads as empty and is overwritten
    by the next spend; a TAT further than 2 x tau ahead (written elsewhere) counts as 2 x tau ahead.
  Defines:
    ALG[5] = { check, commit, refund }, as lua/README.md describes
]]
-- @include verdict
-- @include stamp
ALG[5] = {
  check = function(key, now_us, limit, window, burst, cost)
    local T = math.ceil(window * 1000 / limit)
    local tau = burst * T
    local stored = stamp_read(key)
    local tat = now_us
    if stored then tat = math.min(math.max(stored, now_us), now_us + 2 * tau) end
    local new_tat = tat + cost * T
    local allowed, retry = verdict(cost, burst, new_tat - now_us <= tau)
    if not retry then retry = math.ceil((new_tat - tau - now_us) / 1000) end
    -- one constructor: a table grown field by field rehashes on the way
    return { allowed = allowed, retry = retry, remaining = math.max(0, math.floor((tau - (tat - now_us)) / T)),
             reset = math.ceil((tat - now_us) / 1000), tat = tat, tag = new_tat, T = T, tau = tau,
             now = now_us }
  end,
  commit = function(key, r, limit, window, burst, cost)
    local ahead = r.tag - r.now
    r.remaining = math.floor((r.tau - ahead) / r.T)
    r.reset = math.ceil(ahead / 1000)
    stamp_write(key, r.tag)
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local T = math.ceil(window * 1000 / limit)
    local stored = stamp_read(key)
    if cost < 0 then
      -- a settlement charging more: the over-charge (at most 2 x tau) follows the spend's TAT, and only its
      -- part still ahead of now counts; the TAT may pass tau (refused until it drains), up to 2 x tau
      local over = math.min(-cost * T, 2 * burst * T)
      local extra = math.min(over, tag + over - now_us)
      if extra <= 0 then return end
      local base = now_us
      if stored then base = math.min(math.max(stored, now_us), now_us + 2 * burst * T) end
      stamp_write(key, math.min(base + extra, now_us + 2 * burst * T))
      return
    end
    if not stored then return end
    -- only the part of the spend that has not drained yet can be given back
    local refundable = math.min(cost * T, math.max(0, tag - now_us))
    local tat = math.max(now_us, math.min(stored, now_us + 2 * burst * T) - refundable)
    if tat <= now_us then redis.call('DEL', key) return end
    stamp_write(key, tat)
  end,
}
