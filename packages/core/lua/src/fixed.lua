--[[
  fixed: the fixed window's decision, shared by fixed-window and compact-fixed-window, which keep the
  same count in different places. Spliced once, after verdict, before the algorithms.
  Input:
    count        the count spent in the current window (0 when none, or when what was read is not this
                 window's)
    now_ms, wid, wend  the time, the window index and the window's end
    limit, cost
  Output:
    the check's table: allowed, retry, remaining, reset, tag (the window index), and for the commit
    count, wend, now_ms
]]
local function fw_decide(count, now_ms, wid, wend, limit, cost)
  local allowed, retry = verdict(cost, limit, count + cost <= limit)
  if not retry then retry = wend - now_ms end
  -- one constructor: a table grown field by field rehashes on the way
  return { allowed = allowed, retry = retry, remaining = math.max(0, limit - count),
           reset = (count > 0) and (wend - now_ms) or 0, tag = wid, count = count, wend = wend,
           now_ms = now_ms }
end
