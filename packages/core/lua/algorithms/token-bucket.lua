--[[
  token-bucket: `burst` tokens of capacity, refilled one token every interval_us = ceil(window_us / limit)
  (so at most `limit` per window once the bucket is empty). Whole tokens only: exact integer arithmetic.
  One number is the whole state: F, the time the bucket is full again. Tokens now =
  min(burst, floor((now - F) / interval) + burst), and a spend of c sets F = max(F, now) + c x interval:
  the same information as a (tokens, time of the last whole refill) pair (tokens x interval = the time
  the bucket took to refill them), with the same decisions as gcra given the same numbers.
  Input:
    KEYS[i]   the pair's key
    ARGV      per pair: alg=4, limit, window_ms, burst (capacity)
  Output:
    per pair: allowed, remaining (tokens), reset_ms (until full), retry_ms (-1 = never),
    tag = F after this spend (bounds its refund)
  State:
    KEYS[i] holds F as a stamp (stamp.lua): it expires when the bucket is full again, so a missing key
    is a full bucket. TTL <= burst x interval.
  Bound:
    in any interval of length L: at most burst + floor(L / interval) units.
  Refund:
    gives back only the part of the spend the bucket has not refilled yet (min(c x interval,
    tag - now)): once the bucket has been full again the spend is gone, and a refund cannot create
    tokens (the bucket never holds more than it would have without the spend).
  Settle:
    an over-charge of c moves F c x interval further, less what has refilled since the spend: the
    bucket goes into debt (remaining 0, refused until refilled), at most one burst deep, so F is at most
    2 x burst x interval ahead.
  Repair:
    another type, a value that is not an integer below 1000, or no TTL reads as a full bucket and is
    overwritten by the next spend; F further than 2 x burst x interval ahead counts as a bucket one
    burst in debt.
  Defines:
    ALG[4] = { check, commit, refund }, as lua/README.md describes
]]
-- @include verdict
-- @include stamp
ALG[4] = {
  check = function(key, now_us, limit, window, burst, cost)
    local interval = math.ceil(window * 1000 / limit)
    local cap = burst * interval
    local stored = stamp_read(key)
    local full = now_us
    if stored then full = math.min(math.max(stored, now_us), now_us + 2 * cap) end
    local tokens = math.floor((cap - (full - now_us)) / interval)
    local allowed, retry = verdict(cost, burst, tokens >= cost)
    if not retry then retry = math.ceil((full + cost * interval - cap - now_us) / 1000) end
    -- one constructor: a table grown field by field rehashes on the way
    return { allowed = allowed, retry = retry, remaining = math.max(0, tokens), reset = math.ceil((full - now_us) / 1000),
             tag = full + cost * interval, interval = interval, cap = cap, now = now_us }
  end,
  commit = function(key, r, limit, window, burst, cost)
    local ahead = r.tag - r.now
    r.remaining = math.floor((r.cap - ahead) / r.interval)
    r.reset = math.ceil(ahead / 1000)
    stamp_write(key, r.tag)
  end,
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local interval = math.ceil(window * 1000 / limit)
    local stored = stamp_read(key)
    if cost < 0 then
      -- a settlement charging more: the over-charge follows the spend, and only
      -- its part not refilled by now counts; the bucket may go one burst into debt (refused until refilled)
      local over = math.min(-cost * interval, 2 * burst * interval)
      local extra = math.min(over, tag + over - now_us)
      if extra <= 0 then return end
      local base = now_us
      if stored then base = math.min(math.max(stored, now_us), now_us + 2 * burst * interval) end
      stamp_write(key, math.min(base + extra, now_us + 2 * burst * interval))
      return
    end
    if not stored then return end
    -- only the part of the spend the bucket has not refilled yet can be given back
    local refundable = math.min(cost * interval, math.max(0, tag - now_us))
    local full = math.max(now_us, math.min(stored, now_us + 2 * burst * interval) - refundable)
    if full <= now_us then redis.call('DEL', key) return end
    stamp_write(key, full)
  end,
}
