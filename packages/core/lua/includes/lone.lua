--[[
  lone: the call RedisStore sends most, of sliding-window (2) and fixed-window (1) pairs whose identities
  have no control key stored, decided in straight-line code. Spliced at the top of consume.lua, before
  the algorithms: a call it answers creates none of their functions or tables, the work a lone call paid
  for. Its reads, writes, TTLs, replies and OOM order are those of ALG[1] and ALG[2] (one-pair.lua's path
  with no control entry, consume.lua's for several pairs), and it answers a stale pattern table as
  pattern.lua does; anything else (a control key that exists, a pattern value for the identity, a cost
  per pair, another algorithm) falls through to the general path.
  Input:
    KEYS      a key per pair, then optionally the identities' control keys, then optionally the version
              key (consume.lua, pattern.lua)
    ARGV      cost (>= 0), then per pair alg, limit, window, burst, then optionally act_by, then
              optionally the pattern tail; only a bare one ('~<version>': no pattern matched the
              identity) is taken here
    now_us    now.lua's
  Output:
    returns { now_us, -3 } for a stale pattern table, or { now_us, -2 } past act_by; for a compact
    pair alone (KEYS[1 .. 4] its levels and control key, or lean, KEYS[1] its first level and KEYS[2]
    the call's control key, keys.lua; ARGV[5] its field) whose identity has no control key stored,
    compact-straight.lua's input (c_alg and the
    rest) and `reply`; else, for a call it takes, straight.lua's input (s_n and the rest: one call of s_n pairs from KEYS[1]) and `reply`
    (now_us, then room for the call), for consume.lua to decide the call there and answer its reply
    { now_us, allowed, then 5 per pair: allowed, remaining, reset_ms, retry_ms, tag }; else s_n nil,
    and the general path decides
]]
local lone, argc, keyc = ARGV[2], #ARGV, #KEYS
local s_n, s_calls, s_from, s_cost, s_pol, s_stride, s_whole, s_raise, reply
-- a compact pair alone: compact-straight.lua's input
local c_alg, c_n, c_from, c_step, c_field, c_cost, c_limit, c_window, c_whole, c_raise
-- `+ 0` turns a numeric ARGV into a number without a function call, tonumber's cost on Redis
if lone == '7' or lone == '8' then
  -- a compact pair alone: its bucket's three levels and its identity's control key, then that key again
  -- (the call's control keys), or lean its first level and the call's control key; then the version
  -- key; ARGV the pair's 5, optionally act_by, the pattern tail. As below: a stale version answers, a
  -- stored control key or a pattern value goes the general way.
  local tail = ARGV[argc]
  if (keyc == 6 or keyc == 3) and (argc == 6 or argc == 7) and ARGV[1] + 0 >= 0 and string.byte(tail) == 126 then
    local ver, ctl = tail == '~0' and '0' or string.match(tail, '^~(%d+)$'), 1
    if ver == '0' then
      ctl = redis.call('EXISTS', KEYS[keyc - 1], KEYS[keyc], KEYS[keyc])
      if ctl >= 2 and (tonumber(redis.call('GET', KEYS[keyc])) or 0) > 0 then return { now_us, -3 } end
      ctl = ctl % 2
    elseif ver then
      if (tonumber(redis.call('GET', KEYS[keyc])) or 0) > ver + 0 then return { now_us, -3 } end
      ctl = redis.call('EXISTS', KEYS[keyc - 1])
    end
    if ctl == 0 then
      if argc == 7 and ARGV[6] ~= '0' then
        local act_by = ARGV[6] + 0
        if act_by > 0 and now_us > act_by * 1000 then return { now_us, -2 } end
      end
      c_alg, c_n, c_from, c_step, c_field = lone, 1, 1, keyc - 2, 4
      c_cost, c_limit, c_window = ARGV[1] + 0, ARGV[3] + 0, ARGV[4] + 0
      c_whole, c_raise, reply = true, true, { now_us, 0, 0, 0, 0, 0, 0 }
    end
  end
  lone = nil
elseif lone ~= '2' and lone ~= '1' or argc < 5 or ARGV[1] + 0 < 0 then
  lone = nil
else
  local ver = nil
  local tail = ARGV[argc]
  if tail == '~0' then                                      -- the common tail, compared without a call
    ver, argc, keyc = '0', argc - 1, keyc - 1
  elseif string.byte(tail) == 126 then                      -- '~': the pattern tail, and the version key
    ver = string.match(tail, '^~(%d+)$')
    if not ver then lone = nil end                          -- a pattern value: the general path applies it
    argc, keyc = argc - 1, keyc - 1
  end
  -- n pairs of 4 arguments after the cost, then optionally act_by; a key each, then the control keys
  local n, extra = (argc - 1 - (argc - 1) % 4) / 4, (argc - 1) % 4
  if extra > 1 or keyc < n or (n == 1 and keyc > 2) then lone = nil end
  for i = 2, lone and n or 0 do
    local alg = ARGV[4 * i - 2]
    if alg ~= '1' and alg ~= '2' then lone = nil end
  end
  if lone then
    -- pattern.lua's check, first as there: a process that missed a pattern change changes nothing.
    -- A process holding version 0 (no pattern ever set) asks one EXISTS with the version key counted
    -- twice: 2 or 3 when a version is stored (its value then decides), odd when the control key is.
    local ctl = 0
    if n > 1 then
      -- several pairs: a stored version or control key sends the call the general way, which reads them
      -- again
      if ver == '0' then
        ctl = redis.call('EXISTS', KEYS[keyc + 1], KEYS[keyc + 1], unpack(KEYS, n + 1, keyc))
      else
        if ver and (tonumber(redis.call('GET', KEYS[keyc + 1])) or 0) > ver + 0 then return { now_us, -3 } end
        if keyc > n then ctl = redis.call('EXISTS', unpack(KEYS, n + 1, keyc)) end
      end
    elseif ver == '0' and keyc == 2 then
      ctl = redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[3])
      if ctl >= 2 and (tonumber(redis.call('GET', KEYS[3])) or 0) > 0 then return { now_us, -3 } end
      ctl = ctl % 2
    else
      if ver and (tonumber(redis.call('GET', KEYS[keyc + 1])) or 0) > ver + 0 then return { now_us, -3 } end
      if keyc == 2 then ctl = redis.call('EXISTS', KEYS[2]) end
    end
    if ctl ~= 0 then
      lone = nil                                            -- a stored entry (block, allow, override)
    elseif extra == 1 and ARGV[argc] ~= '0' then
      local act_by = ARGV[argc] + 0
      if act_by > 0 and now_us > act_by * 1000 then return { now_us, -2 } end
    end
  end
  if lone then s_n = n end
end
if lone then
  s_calls, s_from, s_cost, s_pol, s_stride, s_whole, s_raise = 1, 1, ARGV[1] + 0, 2, 4, true, true
  -- sized for one or two pairs: no growth on the way
  reply = s_n == 1 and { now_us, 0, 0, 0, 0, 0, 0 } or s_n == 2 and { now_us, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
    or { now_us }
end
