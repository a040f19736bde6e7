--[[
  verdict: the decision every algorithm's check opens with, spliced once before the algorithms.
  Input:
    cost    the units asked for
    cap     the most one call can ever get (limit, or burst for token-bucket and gcra)
    fits    whether `cost` fits in the state read now
  Output:
    allowed, retry: 0, -1 (never) when cost > cap; else 1, 0 when it fits; else 0, nil: the caller
    computes the wait, so a wait that needs a read (a zset's ZRANGE) runs only for a refusal.
]]
local function verdict(cost, cap, fits)
  if cost > cap then return 0, -1 end
  if fits then return 1, 0 end
  return 0, nil
end
