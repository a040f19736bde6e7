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
    returns consume's reply { now_us, allowed, allowed, remaining, reset_ms, retry_ms, tag }, or
    { now_us, -3 } for a stale pattern table, or { now_us, -2 } past act_by; else nothing, and the
    general path decides
]]
local lone, argc, keyc = ARGV[2], #ARGV, #KEYS
-- `+ 0` turns a numeric ARGV into a number without a function call, tonumber's cost on Redis
if lone ~= '2' and lone ~= '1' or argc < 5 or argc > 7 or ARGV[1] + 0 < 0 then
  lone = nil
else
  local ver = nil
  if string.byte(ARGV[argc]) == 126 then                    -- '~': the pattern tail, and the version key
    ver = string.match(ARGV[argc], '^~(%d+)$')
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
  local key, cost, limit, window = KEYS[1], ARGV[1] + 0, ARGV[3] + 0, ARGV[4] + 0
  local now_ms = (now_us - now_us % 1000) / 1000          -- x - x % 1: floor(x) for x >= 0, no call
  local e = now_ms % window                                 -- elapsed in the current window, ms
  local wid = (now_ms - e) / window
  local got = redis.pcall('GET', key)
  if lone == '2' then
    -- sliding-window.lua's sw_read, sw_decision and sw_spend: the window by the value's parity q, and in
    -- a window's first 50 ms by the expiry too
    local curr, prev, sw = 0, 0, nil
    if type(got) == 'string' then
      local n = tonumber(got)
      if n and n >= 0 and n <= 9007199254740991 and n % 1 == 0 then
        local q = n % 2
        sw = q == wid % 2 and wid or wid - 1
        if e < 50 then
          local exp = redis.call('PEXPIRETIME', key)
          if exp > 0 then
            local x = exp / window + 0.5
            x = x - x % 1 - 2
            if x < sw and (sw - x) % 2 == 0 then sw = nil end
          end
        end
        if sw == wid then
          curr, prev = (n % 134217728 - q) / 2, (n - n % 134217728) / 134217728
        elseif sw then
          prev = (n % 134217728 - q) / 2
        end
      end
    end
    local weighted = 0
    if prev > 0 then weighted = math.ceil(prev * (window - e) / window) end
    local remaining = limit - weighted - curr
    if cost <= limit and remaining >= cost then
      if cost > 0 then
        if not (sw == wid and type(redis.pcall('INCRBY', key, 2 * cost)) == 'number') then
          redis.call('SET', key, wid % 2 + 2 * (curr + cost) + prev * 134217728, 'PXAT', (wid + 2) * window)
        end
        return { now_us, 1, 1, remaining - cost, 2 * window - e, 0, wid }
      end
      return { now_us, 1, 1, remaining, curr > 0 and 2 * window - e or (prev > 0 and window - e or 0), 0, wid }
    end
    local retry = -1                                        -- never, for a cost over the limit
    if cost <= limit then
      if curr + cost <= limit then
        retry = window - math.floor((limit - curr - cost) * window / prev) - e
      else
        retry = (window - e) + window - math.floor((limit - cost) * window / curr)
      end
    end
    if remaining < 0 then remaining = 0 end
    return { now_us, 0, 0, remaining, curr > 0 and 2 * window - e or (prev > 0 and window - e or 0), retry, wid }
  end
  -- fixed-window.lua's fw_read, fw_decision and fw_spend: the count is this window's when its parity q
  -- says so
  local count, held = 0, false
  if type(got) == 'string' then
    local n = tonumber(got)
    if n and n >= 0 and n <= 9007199254740991 and n % 1 == 0 and n % 2 == wid % 2 then
      count, held = (n - n % 2) / 2, true
    end
  end
  local wend = now_ms - e + window
  if cost <= limit and count + cost <= limit then
    if cost > 0 then
      if not (held and type(redis.pcall('INCRBY', key, 2 * cost)) == 'number') then
        redis.call('SET', key, wid % 2 + 2 * (count + cost), 'PXAT', wend)
      end
      return { now_us, 1, 1, limit - count - cost, wend - now_ms, 0, wid }
    end
    return { now_us, 1, 1, limit - count, count > 0 and wend - now_ms or 0, 0, wid }
  end
  local remaining = limit - count
  if remaining < 0 then remaining = 0 end
  return { now_us, 0, 0, remaining, count > 0 and wend - now_ms or 0, cost > limit and -1 or wend - now_ms, wid }
end
