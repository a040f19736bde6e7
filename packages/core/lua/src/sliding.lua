--[[
  sliding: the sliding window's decision, shared by sliding-window and compact-sliding-window, which
  keep the same two counts in different places. Spliced once, after verdict, before the algorithms.
  Input:
    sw, sc, sp   the stored window index and its counts in that window and the one before (sw nil:
                 nothing stored)
    now_us, limit, window, cost
  Output:
    the check's table: allowed, retry, remaining, reset, tag (the window index), and for the commit
    curr, prev, weighted, e (ms elapsed in the window), sw, sc, sp
]]
local function sw_decide(sw, sc, sp, now_us, limit, window, cost)
  local now_ms = math.floor(now_us / 1000)
  local wid = math.floor(now_ms / window)
  local e = now_ms - wid * window                           -- elapsed in the current window, ms
  local curr, prev = 0, 0
  if sw == wid then
    curr, prev = sc, sp
  elseif sw == wid - 1 then
    prev = sc
  end
  local weighted = math.ceil(prev * (window - e) / window)
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
  -- one constructor: a table grown field by field rehashes on the way (16 slots: room for the
  -- algorithms' own few)
  return { allowed = allowed, retry = retry, remaining = math.max(0, limit - weighted - curr),
           reset = (curr > 0) and (2 * window - e) or ((prev > 0) and (window - e) or 0),
           tag = wid, curr = curr, prev = prev, weighted = weighted, e = e, sw = sw, sc = sc, sp = sp }
end
