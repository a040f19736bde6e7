--[[
  batch: several calls of one store, gathered in one turn of Node's event loop, run in order in one
  script. Each call is evaluated exactly as consume.lua, peek.lua or refund.lua would evaluate it alone,
  one after the other: a call sees the writes of the calls before it, and a consume spends on all of its
  pairs or on none. Time is the server's, read once (the calls of one script are simultaneous).
  Input:
    KEYS      every call's keys, call after call: one per pair (three for a compact pair, keys.lua); for
              'C', 'P' then one per penalised pair; for 'R', 'S' then the spend's marker
    ARGV      ops, each followed by its arguments:
      '#', alg, limit, window_ms, burst
              declares a policy (numbered 1, 2, ... in order)
      'x' | 'y', cost, policy, count
              a run of `count` one-pair consumes ('x') or peeks ('y') of one declared policy and one
              cost, one key each: the common shape, in 4 arguments for the whole run instead of 7 per
              call (fewer for Node to encode and for Redis to parse); for a compact policy, the calls'
              fields follow, one per call; an algorithm with a `run` decides the run in its own loop,
              exactly as the calls one by one
      'm' | 'q', cost, n, count, then n policy numbers
              a run of `count` consumes ('m') or peeks ('q') of n pairs each, of those declared
              policies in that order and one cost, n keys each; then, call after call, the fields of
              its compact pairs
      'c' | 'p', cost, n, then 4 per pair: alg, limit, window_ms, burst (a compact pair's field)
              one consume | peek, as consume.lua
      'r', cost, n, then 5 per pair: alg, limit, window_ms, burst, tag
              one refund, as refund.lua
      'R', cost, n, then 5 per pair as 'r', then the spend's whole cost
              a refund that names its spend; its marker key (refund.lua's) follows its pair keys
      'S', as 'R' with a signed cost (< 0 charges more)
              a settlement, applied only while the spend has no marker (refund.lua's settlement)
      'C' | 'P', as 'c' | 'p', then m, then 7 per penalised pair (see penalty.lua)
              a consume | peek with penalties; the m state keys follow the call's pair keys
      '@', act_by
              the last server time (ms) at which the consumes that follow may still act (0 = no bound);
              a consume ('x', 'm', 'c', 'C') of a script that starts later is not evaluated
      '$', m, then m numbers
              a cost per pair for the call that follows ('c', 'p', 'C', 'P', 'r', 'R', 'S'; its own
              cost is then ignored): the first n are its pairs' costs, and for 'R', 'S' the next n
              their whole spends (as refund.lua's cost per pair)
  Output:
    { now_us, then per call ('#' and '$' add nothing):
      'x', 'y'     per call of the run, the pair's 5 as consume.lua
      'c', 'p', 'C', 'P', and per call of an 'm', 'q' run
                   allowed (1 if every pair allowed, else 0), then 5 per pair as consume.lua
      'r', 'R', 'S'  1
      a consume past its act_by ('@')
                   -2 alone (for 'x' too): nothing read, nothing changed; its caller was answered
                   without it
      a call that raised
                   -1, the error message (the call is left as the error found it, like a single
                   script that raised; the calls before and after it are unaffected) }
  OOM:
    No shebang, as consume.lua. Redis refuses only the script's first denyoom write under maxmemory;
    every call writes only after all of its checks, so the refused write is a call's first and the call
    (caught here) changed nothing. A later call may then write: a batch never lets through a partial
    call.
]]
-- Globals are a hash lookup per use; the algorithms below use these on every pair.
local math, tonumber, type, redis = math, tonumber, type, redis
local ALG = {}
-- @include algorithms

-- @include penalty

-- @include now
-- @include keys
-- @include horizon
local reply = { now_us }
local results = {}

--[[
  Same-key coalescing. When a key appears more than once in the batch (a hot key: one API key, one
  tenant, one abusive client), `redis` is, for the algorithms above, a read memo in front of the real
  one: a string key's state is read once (GET, PEXPIRETIME) and then known from the calls' own writes.
  Writes still go to Redis at once, call by call, so a refused write (maxmemory, min-replicas) fails
  its own call exactly as before and leaves the memo as Redis is. Time is frozen inside a script, so a
  memo entry cannot expire under it.
  Memoised: GET (call and pcall) and PEXPIRETIME, then updated by SET key v PXAT ms, SET key v KEEPTTL,
  INCRBY key n (call and pcall) and DEL key. Any other command on a memoised key (a zset, the
  penalty's pcall SET) drops it from the memo and goes through.
]]
-- Whether the batch has a string key: not when it is only compact policies ('#' of codes 7 and 8)
-- and runs of them ('x', 'y': a field per call follows), whose keys are all their buckets' levels. A
-- run's policy is declared before it, so a run reached here is of a compact policy.
local function strings()
  local a = 1
  while a <= #ARGV do
    local op = ARGV[a]
    if op == '#' and tonumber(ARGV[a + 1]) > 6 then
      a = a + 5
    elseif op == 'x' or op == 'y' then
      a = a + 4 + tonumber(ARGV[a + 3])
    elseif op == '@' then
      a = a + 2
    else
      return true
    end
  end
  return false
end

local dup, seen = false, {}
for i = 1, strings() and #KEYS or 0 do
  local key = KEYS[i]
  -- a compact bucket's levels (hashes: nothing to memoise) repeat whenever two calls share a bucket
  if seen[key] and not string.find(key, '{~h:c', 1, true) then dup = true break end
  seen[key] = true
end
seen = nil
if dup then
  local real, memo = redis, {}
  local now_ms = math.floor(now_us / 1000)
  local function str(v)
    if type(v) == 'number' then return string.format('%.17g', v) end
    return v
  end
  local function incremented(m, out)                          -- INCRBY's reply is the new value
    m.v = str(out)
    if m.exp == -2 then m.exp = -1 end                        -- a key INCRBY creates has no TTL
  end
  redis = setmetatable({
    pcall = function(cmd, key, ...)
      if cmd == 'GET' and select('#', ...) == 0 then
        local m = memo[key]
        if m then return m.v end
        local got = real.pcall('GET', key)
        if got == false or type(got) == 'string' then memo[key] = { v = got } end
        return got
      end
      if cmd == 'INCRBY' and select('#', ...) == 1 then       -- sliding-window's spend (pcall: see there)
        local m, out = memo[key], real.pcall('INCRBY', key, ...)
        if m and type(out) == 'number' then
          incremented(m, out)
        else
          memo[key] = nil                                     -- refused: Redis is as it was, read it again
        end
        return out
      end
      if key ~= nil then memo[key] = nil end
      return real.pcall(cmd, key, ...)
    end,
    call = function(cmd, key, ...)
      if key == nil then return real.call(cmd) end
      local m, n = memo[key], select('#', ...)
      if m and n == 0 then
        if cmd == 'GET' then return m.v end
        if cmd == 'PEXPIRETIME' then
          if m.exp == nil then m.exp = real.call('PEXPIRETIME', key) end
          return m.exp
        end
      end
      local out = real.call(cmd, key, ...)                    -- raises (and memoises nothing) if refused
      local v, opt, at = ...
      if cmd == 'SET' and n == 3 and opt == 'PXAT' then
        local ms = tonumber(at)
        if ms <= now_ms then memo[key] = { v = false, exp = -2 }  -- an expiry already past deletes the key
        else memo[key] = { v = str(v), exp = ms } end
      elseif m and cmd == 'SET' and n == 2 and opt == 'KEEPTTL' then
        m.v = str(v)
        if m.exp == -2 then m.exp = -1 end                    -- a key that did not exist has no TTL
      elseif m and cmd == 'INCRBY' and n == 1 then
        incremented(m, out)
      elseif cmd == 'DEL' and n == 0 then
        memo[key] = { v = false, exp = -2 }
      elseif m and cmd ~= 'PEXPIRETIME' then
        memo[key] = nil
      end
      return out
    end,
  }, { __index = real })
end

-- the policies '#' declared, in order: { algorithm, limit, window_ms, burst, code }
local policies = {}

-- consume (spend = true) or peek of a one-pair call (the common shape): straight line, each argument
-- read once. `p` is a policy, `f` a compact pair's field; `whole`: the reply carries the call's allowed
-- first ('c', 'p'; not 'x', 'y')
local function decide_one(p, k, f, cost, spend, whole)
  local alg, key, limit, window, burst = p[1], pair_key(p[5], k + 1, f), p[2], p[3], p[4]
  local r = alg.check(key, now_us, limit, window, burst, cost)
  if spend and r.allowed == 1 and cost > 0 then
    alg.commit(key, r, limit, window, burst, cost)
  elseif alg.settle then
    alg.settle(r)
  end
  local m = #reply
  if whole then
    m = m + 1
    reply[m] = r.allowed
  end
  reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = r.allowed, r.remaining, r.reset, r.retry, r.tag
end

-- a policy given inline at ARGV[a] (alg, limit, window_ms, burst); [6] is a compact pair's field
local function inline(a)
  local code = tonumber(ARGV[a])
  return { ALG[code], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), code, ARGV[a + 3] }
end

-- How many keys n pairs given inline from ARGV[a] (`stride` arguments each, the code first) take.
local function width(a, n, stride)
  local w = n
  for i = 1, n do
    if tonumber(ARGV[a + (i - 1) * stride]) > 6 then w = w + 2 end
  end
  return w
end

-- The keys of a call of n pairs of policies `ps` from KEYS[k + 1] (keys.lua): a compact pair's field is
-- its inline policy's, else the next from ARGV[fa]. Returns the keys and the next fa.
local function call_keys(ps, k, n, fa)
  local keys, at = {}, k + 1
  for i = 1, n do
    local p = ps[i]
    local f = p[6]
    if p[5] > 6 and not f then
      f = ARGV[fa]
      fa = fa + 1
    end
    keys[i], at = pair_key(p[5], at, f)
  end
  return keys, fa
end

-- the policies of a call given inline, n pairs from ARGV[a] (4 each)
local function inline_pairs(a, n)
  local ps = {}
  for i = 1, n do ps[i] = inline(a + (i - 1) * 4) end
  return ps
end

-- the checks of a call of n pairs of policies `ps` and keys `keys`: 1 if every pair allows `cost`: one
-- for every pair, or a table of one per pair ('$')
local function check_pairs(ps, keys, n, cost)
  local all, per = 1, type(cost) == 'table'
  for i = 1, n do
    local p = ps[i]
    local r = p[1].check(keys[i], now_us, p[2], p[3], p[4], per and cost[i] or cost)
    results[i] = r
    if r.allowed == 0 then all = 0 end
  end
  return all
end

-- then the writes: the spend on every pair when `charge`, else each algorithm's settle
local function commit_pairs(ps, keys, n, cost, charge)
  local per = type(cost) == 'table'
  for i = 1, n do
    local p = ps[i]
    local c = per and cost[i] or cost
    if charge and c > 0 then
      p[1].commit(keys[i], results[i], p[2], p[3], p[4], c)
    elseif p[1].settle then
      p[1].settle(results[i])
    end
  end
end

-- appended only once every command of the call has run: a call that raises leaves no half reply
local function append_results(all, n)
  local m = #reply
  reply[m + 1] = all
  for i = 1, n do
    local r = results[i]
    local c = m + 2 + (i - 1) * 5
    reply[c], reply[c + 1], reply[c + 2], reply[c + 3], reply[c + 4] = r.allowed, r.remaining, r.reset, r.retry, r.tag
  end
end

-- a call of n pairs of policies `ps` (declared for a run 'm' / 'q', or inline), keys from KEYS[k + 1]
-- and compact fields from ARGV[fa] (see call_keys): as consume.lua
local function decide(ps, k, n, cost, spend, fa)
  local keys = call_keys(ps, k, n, fa)
  local all = check_pairs(ps, keys, n, cost)
  commit_pairs(ps, keys, n, cost, spend and all == 1)
  append_results(all, n)
end

-- a call with penalties ('C' spend = true, 'P'): as decide, with every penalised pair's block applied
-- before the call is decided and its refusals counted after (penalty.lua); its pairs take w keys
local function decide_pen(a, k, n, cost, spend, w)
  local at = a + 4 * n + 1
  local m = tonumber(ARGV[at - 1])
  local now_ms = math.floor(now_us / 1000)
  local states, blocked = pen_check(at, k + w, m, now_ms)
  local ps = inline_pairs(a, n)
  local keys = call_keys(ps, k, n)
  local all = check_pairs(ps, keys, n, cost)
  if blocked then all = 0 end
  commit_pairs(ps, keys, n, cost, spend and all == 1)
  pen_settle(results, states, at, k + w, m, now_ms, spend)
  append_results(all, n)
  return m
end

local function give_back(a, k, n, cost)
  local per, at = type(cost) == 'table', k + 1
  for i = 1, n do
    local b = a + (i - 1) * 5
    local c = per and cost[i] or cost
    local key
    key, at = pair_key(tonumber(ARGV[b]), at, ARGV[b + 3])
    if c ~= 0 then
      ALG[tonumber(ARGV[b])].refund(key, now_us, tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), c)
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

-- a call that raised: -1 and the error's message in its place of the reply
local function failed(err)
  reply[#reply + 1] = -1
  reply[#reply + 1] = type(err) == 'table' and tostring(err.err) or tostring(err)
end

-- a consume after its act_by: its caller was answered by the failure policy, so it must change nothing
local late = false
local function expired()
  reply[#reply + 1] = -2
end

local a, k = 1, 0
local pending                                               -- the next call's cost per pair ('$')
while a <= #ARGV do
  local op, cost, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local ok, err
  if pending then cost, pending = pending, nil end
  if op == '@' then
    late = cost > 0 and now_us > cost * 1000
    a, n, ok = a + 2, 0, true
  elseif op == '$' then
    pending = {}
    for i = 1, cost do pending[i] = tonumber(ARGV[a + 1 + i]) end
    a, n, ok = a + 2 + cost, 0, true
  elseif op == 'x' or op == 'y' then
    -- a run of one-pair consumes ('x') or peeks ('y') of one declared policy and one cost: op, cost,
    -- policy number, how many calls (one key each; three and a field after the run for a compact policy)
    local p, spend, count = policies[n], op == 'x', tonumber(ARGV[a + 3])
    local compact = p[5] > 6
    local run, stride = p[1].run, compact and 3 or 1
    if spend and late then
      for _ = 1, count do expired() end
      k = k + count * stride
    elseif run then
      -- the algorithm's own loop over the run (no table per call); a call that raises is found by the
      -- replies before it (5 each), answered as failed, and the run goes on after it
      local j, m = 1, #reply
      while j <= count do
        ok, err = pcall(run, j, count, k, a + 3, now_us, p[2], p[3], cost, spend, reply)
        if ok then break end
        j = j + (#reply - m) / 5
        failed(err)
        j, m = j + 1, #reply
      end
      k = k + count * stride
    else
      for j = 1, count do
        ok, err = pcall(decide_one, p, k, compact and ARGV[a + 3 + j], cost, spend, false)
        if not ok then failed(err) end
        k = k + stride
      end
    end
    a, n, ok = a + 4 + (compact and count or 0), 0, true
  elseif op == 'm' or op == 'q' then
    -- a run of n-pair consumes ('m') or peeks ('q') of declared policies and one cost: op, cost, n,
    -- how many calls, the n policy numbers (n keys per call, three for a compact pair), then the calls'
    -- compact fields
    local ps, spend, w, f = {}, op == 'm', n, 0
    for i = 1, n do
      ps[i] = policies[tonumber(ARGV[a + 3 + i])]
      if ps[i][5] > 6 then w, f = w + 2, f + 1 end
    end
    local count, fa = tonumber(ARGV[a + 3]), a + 4 + n
    for _ = 1, count do
      if spend and late then
        expired()
      else
        ok, err = pcall(decide, ps, k, n, cost, spend, fa)
        if not ok then failed(err) end
      end
      k, fa = k + w, fa + f
    end
    a, n, ok = fa, 0, true
  elseif op == '#' then
    local p = inline(a + 1)
    p[6] = nil                                              -- a compact policy's fields come per call
    policies[#policies + 1] = p
    a, n, ok = a + 5, 0, true
  elseif op == 'R' or op == 'S' then
    local w = width(a + 3, n, 5)
    ok, err = pcall(give_back_once, a + 3, k, n, cost, op == 'S', w)
    a = a + 4 + 5 * n
    n = w + 1
  elseif op == 'r' then
    ok, err = pcall(give_back, a + 3, k, n, cost)
    a, n = a + 3 + 5 * n, width(a + 3, n, 5)
  elseif op == 'C' or op == 'P' then
    local m, w = tonumber(ARGV[a + 3 + 4 * n]), width(a + 3, n, 4)
    if late and op == 'C' then
      expired()
      ok = true
    else
      ok, err = pcall(decide_pen, a + 3, k, n, cost, op == 'C', w)
    end
    a = a + 4 + 4 * n + 7 * m
    n = w + m
  elseif late and op == 'c' then
    expired()
    ok = true
    a, n = a + 3 + 4 * n, width(a + 3, n, 4)
  elseif n == 1 then
    ok, err = pcall(decide_one, inline(a + 3), k, ARGV[a + 6], cost, op == 'c', true)
    a, n = a + 7, width(a + 3, 1, 4)
  else
    ok, err = pcall(decide, inline_pairs(a + 3, n), k, n, cost, op == 'c')
    a, n = a + 3 + 4 * n, width(a + 3, n, 4)
  end
  if not ok then failed(err) end
  k = k + n                                                 -- n: the keys the call took
end
return reply
