--[[
  refund: give `cost` back to every pair of an earlier admitted consume, never below zero usage and never
  into a newer window than the one the spend was made in (the tags from consume's reply bound it). A
  settlement (limiter.settle) is a refund with a signed cost: the spend becomes the actual cost, so a
  negative cost charges -cost more, bound to the spend's window the same way (each algorithm's refund
  says how far past the limit it goes).
  Input:
    KEYS           the keys of the consume being refunded (keys.lua)
    then           optional: a marker key (in the first key's hash slot) naming this spend
    ARGV[1]        cost (> 0 gives back, < 0 charges more)
    ARGV[1 + 5(i-1) + 1..5]  pair i: alg, limit, window_ms, burst, tag
    ARGV[2 + 5n]   with the marker: the spend's whole cost
    ARGV[3 + 5n]   optional: 1, a settlement
  Input, a cost per pair:
    ARGV[1]        '*'
    ARGV[1 + 7(i-1) + 1..7]  pair i: alg, limit, window_ms, burst, tag, cost (signed, 0 leaves the pair
                   alone), the pair's whole spend
    ARGV[2 + 7n]   optional: 1, a settlement
  Output:
    now_us
  Marker:
    It makes a refund idempotent whoever sends it and however often (a retry after a timeout, a second
    refund() of one decision, an adapter and the app both refunding, a copy of the decision in another
    process): it holds the units already given back, one number (the same for every pair) or one per
    pair, comma-separated, and each pair's spend bounds its sum. A settlement applies only while no
    marker exists and leaves one that no spend reaches (2^53 - 1 given back on every pair): once
    settled, or once anything was refunded, a spend changes no more. It expires when no pair of the
    spend can change any more (horizon.lua), and none is written after that; only refunds and
    settlements create one.
]]
local ALG = {}
-- @include algorithms

-- @include now
-- @include keys
-- @include horizon
local per = ARGV[1] == '*'
local stride = per and 7 or 5
local pairs_n = (#ARGV - 1 - (#ARGV - 1) % stride) / stride
local keys, k = {}, 1
for i = 1, pairs_n do
  local b = 1 + (i - 1) * stride
  keys[i], k = pair_key(tonumber(ARGV[b + 1]), k, ARGV[b + 4])
end
local marker = KEYS[k]
local cost = tonumber(ARGV[1])
local costs
if per then
  costs = {}
  for i = 1, pairs_n do costs[i] = tonumber(ARGV[7 * i]) end
end
if marker then
  local tail = 2 + stride * pairs_n
  local got = redis.pcall('GET', marker)
  local settle = ARGV[per and tail or tail + 1] == '1'
  if settle and got then return now_us end                 -- refunded or settled already: no more
  local spent, before, done = {}, {}, {}
  for i = 1, pairs_n do spent[i] = tonumber(per and ARGV[7 * i + 1] or ARGV[tail]) end
  if type(got) == 'string' and not settle then
    for d in string.gmatch(got, '[^,]+') do before[#before + 1] = tonumber(d) end
  end
  costs = costs or {}
  local any, same = false, true
  for i = 1, pairs_n do
    local d = before[i] or before[1] or 0
    if settle then
      costs[i] = costs[i] or cost
    else
      local c = math.max(0, math.min(costs[i] or cost, spent[i] - d))
      costs[i], d = c, d + c
      if c ~= 0 then any = true end
    end
    done[i] = d
    if d ~= done[1] then same = false end
  end
  if not any and not settle then return now_us end
  local value = settle and '9007199254740991' or same and done[1] or table.concat(done, ',', 1, pairs_n)
  local last = 0
  for i = 1, pairs_n do
    local b = 1 + (i - 1) * stride
    last = math.max(last, spend_horizon(tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]),
      tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5])))
  end
  -- past the last pair's horizon a later refund changes nothing either: no marker needed
  if last > (now_us - now_us % 1000) / 1000 then
    redis.call('SET', marker, value, 'PXAT', string.format('%.0f', last))
  end
end
for i = 1, pairs_n do
  local b = 1 + (i - 1) * stride
  local c = costs and costs[i] or cost
  if c ~= 0 then
    ALG[tonumber(ARGV[b + 1])].refund(keys[i], now_us, tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]) or ARGV[b + 3], tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), c)
  end
end
return now_us
