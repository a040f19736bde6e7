--[[
  lone: the call RedisStore sends most, one sliding-window (2) or fixed-window (1) pair whose identity has
  no control key stored, decided in straight-line code. Spliced at the top of consume.lua, before the
  algorithms: a call it answers creates none of their functions or tables, the work a lone call paid for.
  Its reads, writes, TTLs, replies and OOM order are those of ALG[1] and ALG[2] (one-pair.lua's path with
  no control entry), and it answers a stale pattern table as pattern.lua does; anything else (a control
  key that exists, a pattern value for the identity, a cost per pair, another algorithm, more pairs)
  falls through to the general path.
  Input:
    KEYS      the pair's key, then optionally its identity's control key, then optionally the version key
              (consume.lua, pattern.lua)
    ARGV      cost (>= 0), alg, limit, window, burst, then optionally act_by, then optionally the pattern
              tail; only a bare one ('~<version>': no pattern matched the identity) is taken here
    now_us    now.lua's
  Output:
    returns { now_us, -3 } for a stale pattern table, or { now_us, -2 } past act_by; else, for a call
    it takes, straight.lua's input (s_n and the rest: one call of one pair, KEYS[1]) and `reply`
    (now_us, then room for the call), for consume.lua to decide the call there and answer its reply { now_us, allowed,
    allowed, remaining, reset_ms, retry_ms, tag }; else s_n nil, and the general path decides
]]
local lone, argc, keyc = ARGV[2], #ARGV, #KEYS
local s_n, s_calls, s_from, s_cost, s_pol, s_stride, s_whole, s_raise, reply
-- `+ 0` turns a numeric ARGV into a number without a function call, tonumber's cost on Redis
if lone ~= '2' and lone ~= '1' or argc < 5 or argc > 7 or ARGV[1] + 0 < 0 then
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
  if not (lone and (argc == 5 or argc == 6) and (keyc == 1 or keyc == 2)) then
    lone = nil
  else
    -- pattern.lua's check, first as there: a process that missed a pattern change changes nothing.
    -- A process holding version 0 (no pattern ever set) asks one EXISTS with the version key counted
    -- twice: 2 or 3 when a version is stored (its value then decides), odd when the control key is.
    local ctl = 0
    if ver == '0' and keyc == 2 then
      ctl = redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[3])
      if ctl >= 2 and (tonumber(redis.call('GET', KEYS[3])) or 0) > 0 then return { now_us, -3 } end
      ctl = ctl % 2
    else
      if ver and (tonumber(redis.call('GET', KEYS[keyc + 1])) or 0) > ver + 0 then return { now_us, -3 } end
      if keyc == 2 then ctl = redis.call('EXISTS', KEYS[2]) end
    end
    if argc == 6 and ARGV[6] ~= '0' then
      local act_by = ARGV[6] + 0
      if act_by > 0 and now_us > act_by * 1000 then return { now_us, -2 } end
    end
    -- a stored control key (block, allow, override) goes the general way
    if ctl == 1 then lone = nil end
  end
end
if lone then
  s_n, s_calls, s_from, s_cost, s_pol, s_stride = 1, 1, 1, ARGV[1] + 0, 2, 4
  s_whole, s_raise, reply = true, true, { now_us, 0, 0, 0, 0, 0, 0 }  -- sized: no growth on the way
end
