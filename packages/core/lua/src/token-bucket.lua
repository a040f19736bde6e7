--[[
  token-bucket: `burst` tokens of capacity, refilled one token every interval_us = ceil(window_us / limit)
  (so at most `limit` per window once the bucket is empty). Whole tokens only: exact integer arithmetic.

  One number is the whole state: F, the time the bucket is full again. Tokens now =
  min(burst, floor((now - F) / interval) + burst), and a spend of c sets F = max(F, now) + c x interval:
  the same information as a (tokens, time of the last whole refill) pair (tokens x interval = the time
  the bucket took to refill them), with the same decisions as gcra given the same numbers.

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
  Settle   an over-charge of c moves F c x interval further, less what has
           refilled since the spend: the bucket goes into debt (remaining 0, refused until refilled), at
           most one burst deep, so F is at most 2 x burst x interval ahead.
  Repair   another type, a value that is not an integer below 1000, or no TTL reads as a full bucket
           and is overwritten by the next spend; F further than 2 x burst x interval ahead counts as a
           bucket one burst in debt.
]]
-- F under a key (us), or nil.
local function tb_read(key)
  local got = redis.pcall('GET', key)
  if type(got) ~= 'string' then return nil end              -- missing, or another type
  local n = tonumber(got)
  if not (n and n >= 0 and n < 1000 and n == math.floor(n)) then return nil end
  local exp = redis.call('PEXPIRETIME', key)
  if exp < 0 then return nil end
  return exp * 1000 - n
end

local function tb_write(key, full)
  local exp = math.ceil(full / 1000)
  redis.call('SET', key, exp * 1000 - full, 'PXAT', exp)                      -- an integer: Redis writes it exactly (%.17g)
end

ALG[4] = {
  check = function(key, now_us, limit, window, burst, cost)
    local interval = math.ceil(window * 1000 / limit)
    local cap = burst * interval
    local stored = tb_read(key)
    local full = now_us
    if stored then full = math.min(math.max(stored, now_us), now_us + 2 * cap) end
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
    return { allowed = allowed, retry = retry, remaining = math.max(0, tokens), reset = math.ceil((full - now_us) / 1000),
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
    local stored = tb_read(key)
    if cost < 0 then
      -- a settlement charging more: the over-charge follows the spend, and only
      -- its part not refilled by now counts; the bucket may go one burst into debt (refused until refilled)
      local over = math.min(-cost * interval, 2 * burst * interval)
      local extra = math.min(over, tag + over - now_us)
      if extra <= 0 then return end
      local base = now_us
      if stored then base = math.min(math.max(stored, now_us), now_us + 2 * burst * interval) end
      tb_write(key, math.min(base + extra, now_us + 2 * burst * interval))
      return
    end
    if not stored then return end
    -- only the part of the spend the bucket has not refilled yet can be given back
    local refundable = math.min(cost * interval, math.max(0, tag - now_us))
    local full = math.max(now_us, math.min(stored, now_us + 2 * burst * interval) - refundable)
    if full <= now_us then redis.call('DEL', key) return end
    tb_write(key, full)
  end,
}
