--[[
  calendar: a fixed window that follows the calendar in a time zone (day, ISO week, month, year). Lua has
  no zone rules, so the client sends the period boundaries around its own clock, and Redis' clock picks
  the period it falls in: the app's clock only proposes, never decides.
  Input:
    KEYS[i]   the pair's key
    ARGV      per pair: alg=9, limit, window = 'b0,b1,b2,b3' (the starts of the previous, the current and
              the next period and the end of the next, epoch ms, ascending), burst (ignored); for a month,
              then '|<months>|<day>:<offset>,...' (calendar.ts anchorTable: the month two before the
              current one as y * 12 + m - 1, and from each epoch day on, how many ms before its UTC
              midnight a day starts); with '@<d>' appended (an override's billing day, control.lua) the
              months start on day d instead (or a shorter month's last day), computed from that table
  Output:
    per pair: allowed, remaining, reset_ms (until the period's real end), retry_ms (-1 = never),
    tag = the period's end (epoch ms): it names the period, and is when a refund of it stops mattering
  State:
    KEYS[i] is a string: the count spent in the period, PEXPIREAT the period's end (TTL ends with the
    period). A count whose expiry is not this period's end belongs to another period and reads as 0.
  Error:
    when the server's time lies in none of the periods sent (the app's clock and Redis' are further
    apart than a period), the call raises: no period can be trusted, so nothing is decided or written.
  Bound:
    at most `limit` per period; up to 2 x limit across one boundary.
  Settle, Repair:
    as fixed-window.lua.
  Defines:
    ALG[9] = { check, commit, refund }, as lua/README.md describes
]]
-- @include verdict
-- @include fixed
-- @include count
-- The epoch day of the 1st of month x (y * 12 + m - 1), proleptic Gregorian (days_from_civil).
local function cal_first(x)
  local y, m = math.floor(x / 12), x % 12 + 1
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((m + 9) % 12) + 2) / 5)
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

-- The period holding now_ms of a month anchored on day `at` of the window's table, or nil.
local function cal_anchored(window, at, now_ms)
  local anchor = tonumber(string.sub(window, at + 1))
  local x0, runs = string.match(window, '|(%d+)|([^@]*)')
  if not anchor or not x0 then return nil end
  local offs = {}
  for d, o in string.gmatch(runs, '(%d+):(-?%d+)') do
    offs[#offs + 1] = tonumber(d)
    offs[#offs + 1] = tonumber(o)
  end
  local function start(x)
    local first = cal_first(x)
    local day = first + math.min(anchor, cal_first(x + 1) - first) - 1
    local off = offs[2]
    for i = 3, #offs, 2 do if day >= offs[i] then off = offs[i + 1] end end
    return day * 86400000 - off
  end
  x0 = tonumber(x0)
  local s = start(x0)
  for x = x0 + 1, x0 + 4 do
    local e = start(x)
    if now_ms >= s and now_ms < e then return s, e, true end
    s = e
  end
end

-- The period [start, end) of `window` that holds now_ms, or nil when none does.
local function cal_find(window, now_ms)
  local at = string.find(window, '@', 1, true)
  if at then return cal_anchored(window, at, now_ms) end
  local b0, b1, b2, b3 = string.match(window, '^(%d+),(%d+),(%d+),(%d+)')
  b0, b1, b2, b3 = tonumber(b0), tonumber(b1), tonumber(b2), tonumber(b3)
  if b3 and now_ms < b3 then
    if now_ms >= b2 then return b2, b3 end
    if now_ms >= b1 then return b1, b2 end
    if now_ms >= b0 then return b0, b1 end
  end
end

-- As cal_find, raising when no period holds now_ms: a decision with no trusted period is no decision.
local function cal_period(window, now_ms)
  local start, wend, anchored = cal_find(window, now_ms)
  if not start then
    error('tollgate calendar: server time outside the periods sent (app and Redis clocks apart by more than a period)')
  end
  return start, wend, anchored
end

-- Whether an expiry is the end of the period [start, wend): nearer to it than to the start, as a moved
-- key (MIGRATE) keeps its remaining TTL, not its exact expiry.
local function cal_ends(exp, start, wend)
  return exp > 0 and math.abs(exp - wend) < (wend - start) / 2
end

ALG[9] = {
  check = function(key, now_us, limit, window, burst, cost)
    local now_ms = math.floor(now_us / 1000)
    local start, wend, anchored = cal_period(window, now_ms)
    local count = fw_count(key) or 0
    -- Only in a period's first ms can the previous period's key still be alive (Redis expires a key once
    -- its clock passes the expiry), and a count that refuses must be this period's: checked only there.
    -- Under a billing day, always: a changed day leaves a count that ends elsewhere.
    if count > 0 and (now_ms - start < 50 or count + cost > limit or anchored)
      and not cal_ends(redis.call('PEXPIRETIME', key), start, wend) then
      count = 0
    end
    return fw_decide(count, now_ms, wend, wend, limit, cost)
  end,
  commit = function(key, r, limit, window, burst, cost)
    redis.call('SET', key, r.count + cost, 'PXAT', r.wend)
    r.remaining = limit - r.count - cost
    r.reset = r.wend - r.now_ms
  end,
  -- The tag is the spend's period end: the period the refund was asked in is not needed (a billing
  -- day would move it), only whether the spend's period still runs and the key is still its count.
  refund = function(key, now_us, limit, window, burst, tag, cost)
    local b1, b2 = string.match(window, '^%d+,(%d+),(%d+)')
    local wend, start = tag, tag - (tonumber(b2) - tonumber(b1))
    if math.floor(now_us / 1000) >= wend then return end    -- the spend's period is over: nothing to give back
    local count = fw_count(key)
    local ours = count and count > 0 and cal_ends(redis.call('PEXPIRETIME', key), start, wend)
    if cost < 0 then
      -- a settlement charging more: into the spend's period while it lasts, past the limit if need be
      redis.call('SET', key, math.min((ours and count or 0) - cost, 9007199254740991), 'PXAT', wend)
      return
    end
    if not ours then return end
    local left = math.max(0, count - cost)
    if left == 0 then redis.call('DEL', key) else redis.call('SET', key, left, 'KEEPTTL') end
  end,
}
