--[[
  decide: how batch.lua evaluates one consume or peek call, exactly as consume.lua / peek.lua would.
  Input (the entry's locals, read and written in place):
    ALG, now_us, pair_key  the algorithms, the server's time, and keys.lua's key of a pair
    inline                 batch.lua's: a policy given inline at ARGV[a]
    reply                  the batch's reply: each call appends its part
    results                scratch for one call's check tables
    pen_check, pen_settle  penalty.lua's, for a call with penalties
    live, ctl_call, ctl_over, ctl_allowed, ctl_block, ctl_allow   control.lua's: the batch's live
                           block, allow and override entries
  A policy (p, ps[i]):
    { algorithm (ALG[code]), limit, window_ms, burst, code, a compact pair's field or nil }
  Output (functions):
    decide_one(p, k, f, cost, spend, whole, lean)  a one-pair call of policy p, its key from KEYS[k + 1]
                           (a lean compact pair's answers CB_RESEND when it needs its levels, compact.lua)
    decide(ps, k, n, cost, spend, fa)        a call of n pairs of policies ps
    decide_pen(a, k, n, cost, spend, w)      a call with penalties ('C', 'P'), answers its m
    inline_pairs(a, n)                       the policies of a call given inline in ARGV (the entry's
                                             inline(a) for each)
    width(a, n, stride)                      how many keys n pairs given inline take
    Each appends to reply only once every command of the call has run: a call that raises leaves no
    half reply.
]]
-- consume (spend = true) or peek of a one-pair call (the common shape): straight line, each argument
-- read once. `p` is a policy, `f` a compact pair's field; `whole`: the reply carries the call's allowed
-- first ('c', 'p'; not 'x', 'y')
local function decide_one(p, k, f, cost, spend, whole, lean)
  local alg, key, limit, window, burst = p[1], pair_key(p[5], k + 1, f, lean), p[2], p[3], p[4]
  local ctl, left, ovr, ov = 0, 0, nil, nil
  if live then ctl, left, ovr = ctl_call(live, { key }, 1) end
  if ovr then
    ov, burst, window = ctl_over(ovr, key, limit, burst, window)
    if ov then limit = ov end
  end
  local r = alg.check(key, now_us, limit, window, burst, cost)
  local m = #reply
  if r.short then                                           -- a lean pair's run ('l'): 5, nothing changed
    reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = CB_RESEND, 0, 0, 0, 0
    return
  end
  if spend and ctl == 0 and r.allowed == 1 and cost > 0 then
    alg.commit(key, r, limit, window, burst, cost)
  elseif alg.settle then
    alg.settle(r)
  end
  if ctl == -1 then ctl_block(r, left) elseif ctl == 1 then ctl_allow(r) end
  r.ov = ov
  if whole then
    m = m + 1
    reply[m] = r.allowed
  end
  reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = ctl_allowed(r), r.remaining, r.reset, r.retry, r.tag
end

-- How many keys n pairs given inline from ARGV[a] (`stride` arguments each, the code first) take.
local function width(a, n, stride)
  local w = n
  for i = 1, n do
    local c = ARGV[a + (i - 1) * stride]
    if c == '7' or c == '8' then w = w + 3 end
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
    if (p[5] == 7 or p[5] == 8) and not f then
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
-- `ovr`: the call's overrides (ctl_call's), or nil
local function check_pairs(ps, keys, n, cost, ovr)
  local all, per = 1, type(cost) == 'table'
  for i = 1, n do
    local p = ps[i]
    local limit, burst, window, ov = p[2], p[4], p[3], nil
    if ovr then
      ov, burst, window = ctl_over(ovr, keys[i], limit, burst, window)
      if ov then limit = ov end
    end
    local r = p[1].check(keys[i], now_us, limit, window, burst, per and cost[i] or cost)
    r.ov, r.ob = ov, ov and burst
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
    local r = results[i]
    if charge and c > 0 then
      p[1].commit(keys[i], r, r.ov or p[2], p[3], r.ob or p[4], c)
    elseif p[1].settle then
      p[1].settle(results[i])
    end
  end
end

-- after the writes, a call its block or allow entries decided ('~'): each pair's numbers, and its `all`
local function held(ctl, left, n)
  for i = 1, n do
    if ctl == -1 then ctl_block(results[i], left) else ctl_allow(results[i]) end
  end
  return ctl == 1 and 1 or 0
end

-- appended only once every command of the call has run: a call that raises leaves no half reply
local function append_results(all, n)
  local m = #reply
  reply[m + 1] = all
  for i = 1, n do
    local r = results[i]
    local c = m + 2 + (i - 1) * 5
    reply[c], reply[c + 1], reply[c + 2], reply[c + 3], reply[c + 4] = ctl_allowed(r), r.remaining, r.reset, r.retry, r.tag
  end
end

-- a call of n pairs of policies `ps` (declared for a run 'm' / 'q', or inline), keys from KEYS[k + 1]
-- and compact fields from ARGV[fa] (see call_keys): as consume.lua
local function decide(ps, k, n, cost, spend, fa)
  local keys = call_keys(ps, k, n, fa)
  local ctl, left, ovr = 0, 0, nil
  if live then ctl, left, ovr = ctl_call(live, keys, n) end
  local all = check_pairs(ps, keys, n, cost, ovr)
  commit_pairs(ps, keys, n, cost, spend and ctl == 0 and all == 1)
  if ctl ~= 0 then all = held(ctl, left, n) end
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
  local ctl, left, ovr = 0, 0, nil
  if live then ctl, left, ovr = ctl_call(live, keys, n) end
  local all = check_pairs(ps, keys, n, cost, ovr)
  if blocked then all = 0 end
  commit_pairs(ps, keys, n, cost, spend and ctl == 0 and all == 1)
  -- a call its entries decided is not its policies' refusal: it counts towards no penalty
  if ctl == 0 then pen_settle(results, states, at, k + w, m, now_ms, spend) else all = held(ctl, left, n) end
  append_results(all, n)
  return m
end
