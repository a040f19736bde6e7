--[[
  sliding: the sliding window's decision, shared by sliding-window and compact-sliding-window, which
  keep the same two counts in different places. Spliced once, after verdict, before the algorithms.
  Input:
    sw, sc, sp   the stored window index and its counts in that window and the one before (sw nil:
                 nothing stored)
    now_us, limit, window, cost
  Output:
    sw_decision: allowed, retry, remaining (before the spend), reset (before the spend), tag (the
    window index), curr, prev, weighted, e (ms elapsed in the window), as values (a run of calls,
    batch.lua, decides without a table per call)
    sw_decide: the check's table of those, with sw, sc, sp
]]
local function sw_decision(sw, sc, sp, now_us, limit, window, cost)
  -- integer arithmetic without math.floor's function call: x - x % 1 is floor(x) for x >= 0
  local now_ms = (now_us - now_us % 1000) / 1000
  local e = now_ms % window                                 -- elapsed in the current window, ms
  local wid = (now_ms - e) / window
  local curr, prev = 0, 0
  if sw == wid then
    curr, prev = sc, sp
  elseif sw == wid - 1 then
    prev = sc
  end
  local weighted = 0
  if prev > 0 then weighted = math.ceil(prev * (window - e) / window) end
  local allowed, retry = verdict(cost, limit, weighted + curr + cost <= limit)
  if not retry then
    if curr + cost <= limit then
      -- wait until ceil(prev * (window - t) / window) <= limit - curr - cost, inside this window
      retry = window - math.floor((limit - curr - cost) * window / prev) - e
    else
      -- wait into the next window, where this window's count becomes the weighted one
      retry = (window - e) + window - math.floor((limit - cost) * window / curr)
    end
  end
  local remaining = limit - weighted - curr
  if remaining < 0 then remaining = 0 end
  return allowed, retry, remaining, (curr > 0) and (2 * window - e) or ((prev > 0) and (window - e) or 0),
    wid, curr, prev, weighted, e
end

local function sw_decide(sw, sc, sp, now_us, limit, window, cost)
  local allowed, retry, remaining, reset, wid, curr, prev, weighted, e =
    sw_decision(sw, sc, sp, now_us, limit, window, cost)
  -- one constructor: a table grown field by field rehashes on the way (16 slots: room for the
  -- algorithms' own few)
  return { allowed = allowed, retry = retry, remaining = remaining, reset = reset, tag = wid, curr = curr,
           prev = prev, weighted = weighted, e = e, sw = sw, sc = sc, sp = sp }
end
