--[[
  consume: check every (policy, identity) pair of one call without writing, then spend `cost` on all of
  them, or on none if any pair refuses. One round trip, atomic; time is the server's, read once.
  Input:
    KEYS      one key per (policy, identity) pair, <prefix>:{<identity>}:<policy>:<sig> (keys.ts), or
              four for a compact pair (keys.lua); the script reads and writes these keys and nothing else;
              then, optionally, the control key of each distinct identity (control.lua), read only
    ARGV[1]   cost (integer >= 0), or -1: a cost per pair, for two pairs or more
    ARGV[1 + 4(i-1) + 1]  alg: 1 fixed-window | 2 sliding-window | 3 sliding-log | 4 token-bucket |
                          5 gcra | 6 concurrency | 7 compact-fixed-window | 8 compact-sliding-window |
                          9 calendar
    ARGV[1 + 4(i-1) + 2]  limit: units per window (integer > 0)
    ARGV[1 + 4(i-1) + 3]  window: window length in ms (integer > 0); for calendar, its period
                          boundaries 'b0,b1,b2,b3' (calendar.lua), passed to the algorithm as a string
    ARGV[1 + 4(i-1) + 4]  burst: capacity for token-bucket and gcra (integer > 0; = limit for the others;
                          a compact pair's field)
    ARGV[1 + 4n + i]      with ARGV[1] = -1: pair i's cost (n pairs); each pair is checked with its own
                          cost, and a pair of cost 0 is not charged
    then, optional, after everything above: act_by, the last server time (ms) at which the call may
                          still act; 0 = no bound
    then, optional, last: the pattern tail '~<version>;...' (pattern.lua), the version key the last KEY
  Output:
    { now_us, allowed (1 if every pair allowed), then 5 per pair:
      allowed, remaining, reset_ms, retry_ms (0 if allowed, -1 = never), tag (what refund needs) }
    A pair whose identity's override set its limit answers allowed as 2 + 2 * that limit + allowed.
    A call refused by a block has tag -2 on every pair, one admitted by allow entries -3 (control.lua).
    { now_us, -3 } when the version key is newer than the pattern tail's: nothing changed (pattern.lua)
    { now_us, -2 } when the script starts after act_by: it read nothing and changed nothing (its caller
      was answered without it)
    Integers only: Redis truncates Lua floats, and RESP3 would turn booleans into another type.
  OOM:
    No shebang: a `#!lua` line makes every call cost Redis more (docs/benchmarks.md), and OOM safety does
    not need it. Without one, Redis refuses under maxmemory the script's first write if that is a denyoom
    command, and lets later writes through. So every write comes after every check, and each
    algorithm's commit starts with a denyoom command (SET, INCRBY, ZADD; a repair starts with SET):
    under OOM the script fails before changing state.
]]
-- @include now
-- @include lone
-- @include straight
if s_n then return reply end
-- @include compact-straight
if c_done == 1 then return reply end
local ALG = {}
-- @include algorithms

-- @include keys
-- @include control
-- @include pattern
local cost = tonumber(ARGV[1])
local stride = cost < 0 and 5 or 4
local n = math.floor((argc - 1) / stride)
-- an act_by is the one argument past the pairs: a caller answered by then must not be charged now
if (argc - 1) % stride == 1 then
  local act_by = tonumber(ARGV[argc])
  if act_by > 0 and now_us > act_by * 1000 then return { now_us, -2 } end
end
local spend = true
-- @include one-pair
local results = {}
local all = 1
-- a cost per pair (limiter.consume(key, { cost: { tokens: n } })): pair i's is after the pairs
local per = cost < 0 and 1 + 4 * n
local keys, k = {}, 1
for i = 1, n do
  keys[i], k = pair_key(tonumber(ARGV[i * 4 - 2]), k, ARGV[i * 4 + 1])
end
-- the identities' control keys follow the pairs': a block refuses the call, an allow admits it
-- uncharged, an override sets a pair's limit (and its burst when that was the limit)
local ctl, left, ovr = 0, 0, nil
if k <= keyc then ctl, left, ovr = ctl_read(k, keyc, math.floor(now_us / 1000), pat) end
for i = 1, n do
  local b = 1 + (i - 1) * 4
  local limit, burst = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 4])
  local window, ov = tonumber(ARGV[b + 3]) or ARGV[b + 3], nil
  if ovr then ov, burst, window = ctl_over(ovr, keys[i], limit, burst, window) end
  if ov then limit = ov end
  if per then cost = tonumber(ARGV[per + i]) end
  local r = ALG[tonumber(ARGV[b + 1])].check(keys[i], now_us, limit, window, burst, cost)
  -- an overridden pair's limit and burst, for its commit (as decide.lua's check_pairs)
  r.ov, r.ob = ov, ov and burst
  results[i] = r
  if r.allowed == 0 then all = 0 end
end
local charge = ctl == 0 and all == 1 and (per or cost > 0)
for i = 1, n do
  local b = 1 + (i - 1) * 4
  local alg = ALG[tonumber(ARGV[b + 1])]
  if per then cost = tonumber(ARGV[per + i]) end
  if charge and cost > 0 then
    local r = results[i]
    alg.commit(keys[i], r, r.ov or tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]) or ARGV[b + 3], r.ob or tonumber(ARGV[b + 4]), cost)
  elseif alg.settle then
    alg.settle(results[i])                               -- numbers only an uncharged pair needs
  end
end
if ctl ~= 0 then all = ctl == 1 and 1 or 0 end
local reply = { now_us, all }
for i = 1, n do
  local r = results[i]
  if ctl == -1 then ctl_block(r, left) elseif ctl == 1 then ctl_allow(r) end
  reply[#reply + 1] = ctl_allowed(r)
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset
  reply[#reply + 1] = r.retry
  reply[#reply + 1] = r.tag
end
return reply
