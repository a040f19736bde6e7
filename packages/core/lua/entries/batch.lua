--[[
  batch: several calls of one store, gathered in one turn of Node's event loop, run in order in one
  script. Each call is evaluated exactly as consume.lua, peek.lua or refund.lua would evaluate it alone,
  one after the other: a call sees the writes of the calls before it, and a consume spends on all of its
  pairs or on none. Time is the server's, read once (the calls of one script are simultaneous).
  Input:
    KEYS      every call's keys, call after call: one per pair (four for a compact pair, keys.lua); for
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
      'l', cost, policy, count
              as 'x', of a compact policy's lean pairs (two keys each, keys.lua): a call that needs its
              bucket's other levels answers -4 and four 0s, nothing changed, for its caller to send whole
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
      '~', m  the batch's m control keys (control.lua), the next m KEYS: each call after it is decided
              under the entries of its pairs' identities (a block refuses it, allow entries admit it
              uncharged)
      'v', version
              a prefix's pattern table version (pattern.lua), its version key the next KEY; first in
              the batch: a newer version stored answers { now_us, -3 } for the whole batch, unchanged
      '=', m, then m values
              the pattern values of the '~' control keys that follow ('' none; pattern.lua)
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
  Pieces:
    decide.lua (a consume or peek call), give-back.lua (a refund or settlement call), penalty.lua;
    this file reads the ops and dispatches them, and creates those pieces' functions only when a call
    needs one.
]]
-- Globals are a hash lookup per use; the algorithms below use these on every pair.
local math, tonumber, type, redis = math, tonumber, type, redis
-- @include now
local reply = { now_us }

-- The common shapes, one run of consumes ('x': one pair each, 'm': several) of sliding or fixed window
-- policies declared in order, with the pattern version and the identities' control keys first: when
-- no control key is stored and the version is current, straight.lua decides the run before any of the
-- functions below is created. Anything else (peeks, more runs, other algorithms, patterns, a passed
-- act_by, a stored entry) goes the general way, which reads again what was read here.
local s_n, s_calls, s_from, s_cost, s_pol, s_stride, s_whole, s_raise
if ARGV[1] == 'v' then
  local argc, b, act = #ARGV, 3, 0
  if ARGV[3] == '@' then b, act = 5, ARGV[4] + 0 end
  -- ARGV[b] '~', m; the policies from d, 5 arguments each; then the run at r
  local d, np = b + 2, 0
  while ARGV[d + np * 5] == '#' and (ARGV[d + np * 5 + 1] == '1' or ARGV[d + np * 5 + 1] == '2') do
    np = np + 1
  end
  local r = d + np * 5
  local op, n = ARGV[r], 0
  if ARGV[b] == '~' and np > 0 and not (act > 0 and now_us > act * 1000) then
    if op == 'x' and np == 1 and argc == r + 3 and ARGV[r + 2] == '1' then
      n = 1
    elseif op == 'm' and argc == r + 3 + np and ARGV[r + 2] + 0 == np then
      n = np
      for i = 1, np do
        if ARGV[r + 3 + i] + 0 ~= i then n = 0 end        -- pair i of each call is policy i
      end
    end
  end
  if n > 0 and ARGV[r + 1] + 0 >= 0 then
    local m, count = ARGV[b + 1] + 0, ARGV[r + 3] + 0
    if m <= 998 and #KEYS == 1 + m + count * n then
      local ver, any = ARGV[2], 0
      if ver == '0' then
        -- as lone.lua: the version key counted twice, so any stored version or control key shows
        any = redis.call('EXISTS', KEYS[1], KEYS[1], unpack(KEYS, 2, m + 1))
      else
        if (tonumber(redis.call('GET', KEYS[1])) or 0) > ver + 0 then return { now_us, -3 } end
        if m > 0 then any = redis.call('EXISTS', unpack(KEYS, 2, m + 1)) end
      end
      if any == 0 then
        s_n, s_calls, s_from, s_cost, s_pol, s_stride, s_whole = n, count, m + 2, ARGV[r + 1] + 0, d + 1, 5, op == 'm'
      end
    end
  end
end
-- @include straight
if s_n then return reply end

-- @include compact-run
-- @include compact-straight
if c_alg and c_done == c_n then return reply end

local ALG = {}
-- @include algorithms

-- @include keys
-- @include control
-- @include horizon
local results = {}

-- the policies '#' declared, in order: { algorithm, limit, window_ms, burst, code }
local policies = {}

-- the live block and allow entries of the batch's identities ('~'), by control key, or nil; the
-- patterns their identities matched ('=')
local live, pat

-- a policy given inline at ARGV[a] (alg, limit, window_ms, burst); [6] is a compact pair's field
local function inline(a)
  local code = tonumber(ARGV[a])
  return { ALG[code], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]) or ARGV[a + 2], tonumber(ARGV[a + 3]), code, ARGV[a + 3] }
end

-- The functions of every other shape, created at the first call that needs one: a batch of runs
-- decided by their algorithm's loop (the common shape) does not pay Redis for creating them.
local decide_one, decide, decide_pen, inline_pairs, width, give_back, give_back_once
local function general()
-- penalties ('C', 'P'): pen_check, pen_settle
-- @include penalty
-- consume and peek calls: decide_one, decide, decide_pen, inline_pairs, width
-- @include decide
-- refund and settlement calls: give_back, give_back_once
-- @include give-back
  return decide_one, decide, decide_pen, inline_pairs, width, give_back, give_back_once
end
local function need_general()
  if not decide then decide_one, decide, decide_pen, inline_pairs, width, give_back, give_back_once = general() end
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
  elseif op == 'v' then
    -- a pattern table's version (pattern.lua): a newer one stored answers the whole batch, unchanged
    if (tonumber(redis.call('GET', KEYS[k + 1])) or 0) > cost then return { now_us, -3 } end
    a, n, ok = a + 2, 1, true
  elseif op == '=' then
    pat = {}
    for i = 1, cost do pat[i] = ARGV[a + 1 + i] end
    a, n, ok = a + 2 + cost, 0, true
  elseif op == '~' then
    live = ctl_live(k + 1, k + cost, math.floor(now_us / 1000), pat)
    a, n, ok = a + 2, cost, true
  elseif op == '$' then
    pending = {}
    for i = 1, cost do pending[i] = tonumber(ARGV[a + 1 + i]) end
    a, n, ok = a + 2 + cost, 0, true
  elseif op == 'x' or op == 'y' or op == 'l' then
    -- a run of one-pair consumes ('x', 'l') or peeks ('y') of one declared policy and one cost: op, cost,
    -- policy number, how many calls (one key each; four, or two for 'l', and a field after the run for a
    -- compact policy)
    local p, spend, count, lean = policies[n], op ~= 'y', tonumber(ARGV[a + 3]), op == 'l'
    local compact = p[5] == 7 or p[5] == 8
    local run, stride = p[1].run, compact and (lean and 2 or 4) or 1
    if spend and late then
      for _ = 1, count do expired() end
      k = k + count * stride
    elseif run and not live then
      -- the algorithm's own loop over the run (no table per call); a call that raises is found by the
      -- replies before it (5 each), answered as failed, and the run goes on after it
      -- the calls compact-straight.lua decided are answered already
      local j, m = 1 + c_done, #reply
      c_done = 0
      while j <= count do
        ok, err = pcall(run, j, count, k, a + 3, now_us, p[2], p[3], cost, spend, reply, lean)
        if ok then break end
        j = j + (#reply - m) / 5
        failed(err)
        j, m = j + 1, #reply
      end
      k = k + count * stride
    else
      need_general()
      for j = 1, count do
        ok, err = pcall(decide_one, p, k, compact and ARGV[a + 3 + j], cost, spend, false, lean)
        if not ok then failed(err) end
        k = k + stride
      end
    end
    a, n, ok = a + 4 + (compact and count or 0), 0, true
  elseif op == 'm' or op == 'q' then
    -- a run of n-pair consumes ('m') or peeks ('q') of declared policies and one cost: op, cost, n,
    -- how many calls, the n policy numbers (n keys per call, four for a compact pair), then the calls'
    -- compact fields
    need_general()
    local ps, spend, w, f = {}, op == 'm', n, 0
    for i = 1, n do
      ps[i] = policies[tonumber(ARGV[a + 3 + i])]
      if ps[i][5] == 7 or ps[i][5] == 8 then w, f = w + 3, f + 1 end
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
  else
    need_general()
    if op == 'R' or op == 'S' then
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
  end
  if not ok then failed(err) end
  k = k + n                                                 -- n: the keys the call took
end
return reply
