--[[
  fixed: the fixed window's decision, shared by fixed-window and compact-fixed-window, which keep the
  same count in different places. Spliced once, after verdict, before the algorithms.
  Input:
    count        the count spent in the current window (0 when none, or when what was read is not this
                 window's)
    now_ms, wid, wend  the time, the window index and the window's end
    limit, cost
  Output:
    fw_decision: allowed, retry, remaining (before the spend), reset (before the spend), as values (a
    run of calls, batch.lua, decides without a table per call)
    fw_decide: the check's table of those, tag (the window index), and for the commit count, wend,
    now_ms
]]
local function fw_decision(count, now_ms, wend, limit, cost)
  local allowed, retry = verdict(cost, limit, count + cost <= limit)
  if not retry then retry = wend - now_ms end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  return allowed, retry, remaining, (count > 0) and (wend - now_ms) or 0
end

local function fw_decide(count, now_ms, wid, wend, limit, cost)
  local allowed, retry, remaining, reset = fw_decision(count, now_ms, wend, limit, cost)
  -- one constructor: a table grown field by field rehashes on the way
  return { allowed = allowed, retry = retry, remaining = remaining, reset = reset, tag = wid, count = count,
           wend = wend, now_ms = now_ms }
end
