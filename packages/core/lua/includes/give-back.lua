--[[
  give-back: how batch.lua evaluates one refund or settlement call, exactly as refund.lua would.
  Input (the entry's locals):
    ALG, now_us, pair_key, spend_horizon  the algorithms, the server's time, keys.lua's key of a pair
                                          and horizon.lua's last time a spend can still change
    reply                                 the batch's reply: each call appends 1
  Output (functions):
    give_back(a, k, n, cost)                    a refund ('r'): n pairs from ARGV[a] (5 each), keys
                                                from KEYS[k + 1]; cost one number or one per pair
    give_back_once(a, k, n, cost, final, w)     a refund that names its spend ('R'), or a settlement
                                                ('S', final = true), with its marker after the w keys
                                                of its pairs
]]
local function give_back(a, k, n, cost)
  local per, at = type(cost) == 'table', k + 1
  for i = 1, n do
    local b = a + (i - 1) * 5
    local c = per and cost[i] or cost
    local key
    key, at = pair_key(tonumber(ARGV[b]), at, ARGV[b + 3])
    if c ~= 0 then
      ALG[tonumber(ARGV[b])].refund(key, now_us, tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]) or ARGV[b + 2], tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), c)
    end
  end
  reply[#reply + 1] = 1
end

-- a refund that names its spend ('R'): as refund.lua with its marker, KEYS[k + w + 1] (its pairs take w
-- keys), and the spend's whole cost at ARGV[a + 5n] (or per pair after its costs in a '$' table). The
-- marker bounds what all refunds of that spend give back together, per pair. A settlement ('S', final =
-- true): as refund.lua's, only while the spend has no marker, which it then sets past any spend.
local function give_back_once(a, k, n, cost, final, w)
  local marker = KEYS[k + w + 1]
  local got = redis.pcall('GET', marker)
  if final and got then                                    -- refunded or settled already: no more
    reply[#reply + 1] = 1
    return
  end
  local per = type(cost) == 'table'
  local whole = tonumber(ARGV[a + 5 * n])
  local costs, before, done = {}, {}, {}
  if type(got) == 'string' and not final then
    for d in string.gmatch(got, '[^,]+') do before[#before + 1] = tonumber(d) end
  end
  local any, same = false, true
  for i = 1, n do
    local c, d = per and cost[i] or cost, before[i] or before[1] or 0
    if not final then
      c = math.max(0, math.min(c, (per and cost[n + i] or whole) - d))
      d = d + c
    end
    if c ~= 0 then any = true end
    costs[i], done[i] = c, d
    if d ~= done[1] then same = false end
  end
  if not any and not final then
    reply[#reply + 1] = 1
    return
  end
  local value = final and '9007199254740991' or same and done[1] or table.concat(done, ',', 1, n)
  local last = 0
  for i = 1, n do
    local b = a + (i - 1) * 5
    last = math.max(last, spend_horizon(tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]),
      tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])))
  end
  -- past the last pair's horizon a later refund changes nothing either: no marker needed (refund.lua)
  if last > (now_us - now_us % 1000) / 1000 then
    redis.call('SET', marker, value, 'PXAT', string.format('%.0f', last))
  end
  give_back(a, k, n, costs)
end
