--[[
  horizon: until when a refund or a settlement of a spend can still change its pair, from the tag the
  spend's consume returned, as the algorithms' refunds bound it: a refund-once marker need last no longer.
  Spliced into refund.lua and batch.lua.
  Input:
    alg, limit, window (ms), burst, tag   the pair, as in ARGV (a compact pair's burst slot holds its field)
  Output:
    spend_horizon(...)  epoch ms:
      fixed window (1, 7)       the end of the spend's window
      calendar (9)              the end of the spend's period (tag: that end)
      sliding window (2, 8)     the end of the window after it (the spend counts there, weighted)
      sliding log (3)           when the spend leaves the window (tag: its time in us)
      concurrency (6)           when the spend's leases expire (tag: the first lease id, at least its time)
      token bucket, gcra (4, 5) the spend drained (tag: F or TAT after it), then the furthest an
                                over-charge reaches past it (2 bursts)
]]
local function spend_horizon(alg, limit, window, burst, tag)
  if alg == 9 then return tag end
  if alg == 1 or alg == 7 then return (tag + 1) * window end
  if alg == 2 or alg == 8 then return (tag + 2) * window end
  if alg == 3 or alg == 6 then return math.ceil(tag / 1000) + window end
  return math.ceil((tag + 2 * burst * math.ceil(window * 1000 / limit)) / 1000)
end
