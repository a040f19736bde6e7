--[[
  compact-lone: the common call of a compact pair alone (storage: 'compact', lone.lua's c_alg), decided
  in straight-line code before the algorithms' functions are built, past a window's first 50 ms: its
  field found in its bucket's first level holding counts, within the limit (for the sliding window,
  within the bucket's window: no roll) or refused where the bucket's expiry confirms the counts; or a
  new field in a first level with room that is new or this window's. Its
  reads, writes, replies and OOM order are those of ALG[7] and ALG[8] (compact-fixed-window.lua,
  compact-sliding-window.lua); anything else (a field in another level, a count of 0, a roll, a full or
  dead first level, a refusal the expiry contradicts, a cost over the limit) falls through to the
  general path, which reads again: nothing was written.
  Input:
    c_alg     '7' (fixed window) or '8' (sliding window); nil: nothing is done
    KEYS[1]   the bucket's first level; ARGV: cost, alg, limit, window, the field (consume.lua)
    now_us    now.lua's
  Output:
    returns consume.lua's reply { now_us, allowed, allowed, remaining, reset_ms, retry_ms, tag } for a
    call it takes
]]
if c_alg then
  local cost, limit, window, level, field = ARGV[1] + 0, ARGV[3] + 0, ARGV[4] + 0, KEYS[1], ARGV[5]
  local now_ms = (now_us - now_us % 1000) / 1000           -- x - x % 1: floor(x) for x >= 0, no call
  local e = now_ms % window
  local wid = (now_ms - e) / window
  if e >= 50 and cost <= limit then
    local v = redis.pcall('HGET', level, field)
    local x = type(v) == 'string' and tonumber(v)
    if v == false then
      -- a new field: its first level has room (so no level below holds it, compact.lua's rule) and is
      -- this window's, or is new; it starts with the cost, which fits (the count is 0)
      local n = redis.pcall('HLEN', level)
      local ok = type(n) == 'number' and n < 256
      if ok and n > 0 and c_alg == '8' then
        -- a fixed window's level with fields is this window's past its first ms; a sliding window's
        -- bucket is when its expiry says so (the window before's rolls: the general path)
        local i = redis.call('PEXPIRETIME', level) / window + 0.5
        ok = i - i % 1 == wid + 2
      end
      if ok then
        if cost == 0 then return { now_us, 1, 1, limit, 0, 0, wid } end
        local after = c_alg == '7' and window - e or 2 * window - e
        if c_alg == '7' then
          redis.call('HSET', level, field, ARGV[1])         -- denyoom: the call's first write
        else
          redis.call('HSET', level, field, wid % 2 + 2 * math.min(cost, 67108863))
        end
        if n == 0 then                                      -- a bucket starting: its window's expiry
          redis.call('PEXPIREAT', level, now_ms - e + (c_alg == '7' and 1 or 2) * window)
          redis.call('DEL', KEYS[2], KEYS[3])
        end
        return { now_us, 1, 1, limit - cost, after, 0, wid }
      end
    elseif x and x > 0 and x <= 9007199254740991 and x % 1 == 0 then
      -- a refusal is checked against the expiry's window index (compact.lua's cb_end), which is read
      -- for it only: `ends` holds PEXPIRETIME / window + 0.5 then, and its floor is that index
      local ends
      if c_alg == '7' then
        -- the field holds this window's count, unless its level is an older window's (then the expiry
        -- says so: checked for a refusal, which must be this window's)
        local wend = now_ms - e + window
        if x + cost <= limit then
          -- HINCRBY (denyoom: the call's first write) sends a string Redis need not format; HSET repairs
          -- a count written as text HINCRBY does not read
          if cost > 0 and type(redis.pcall('HINCRBY', level, field, ARGV[1])) ~= 'number' then
            redis.call('HSET', level, field, x + cost)
          end
          return { now_us, 1, 1, limit - x - cost, wend - now_ms, 0, wid }
        end
        ends = redis.call('PEXPIRETIME', level) / window + 0.5
        if ends - ends % 1 == wid + 1 then
          local left = limit - x
          if left < 0 then left = 0 end
          return { now_us, 0, 0, left, wend - now_ms, wend - now_ms, wid }
        end
      elseif x > 1 then
        -- q + 2 x curr + prev x 2^27 in the bucket's window E, which q tells: now's or the one before
        local q = x % 2
        local E = q == wid % 2 and wid or wid - 1
        local sc, sp = (x % 134217728 - q) / 2, (x - x % 134217728) / 134217728
        local curr, prev = 0, sc
        if E == wid then curr, prev = sc, sp end
        local weighted = 0
        if prev > 0 then weighted = math.ceil(prev * (window - e) / window) end
        local reset = curr > 0 and 2 * window - e or (prev > 0 and window - e or 0)
        if weighted + curr + cost <= limit then
          if cost == 0 then return { now_us, 1, 1, limit - weighted - curr, reset, 0, wid } end
          if E == wid and sc + cost <= 67108863 then
            local inc = cost == 1 and '2' or string.format('%.0f', 2 * cost)
            if type(redis.pcall('HINCRBY', level, field, inc)) ~= 'number' then
              redis.call('HSET', level, field, x + 2 * cost)
            end
            return { now_us, 1, 1, limit - weighted - curr - cost, 2 * window - e, 0, wid }
          end
        else
          ends = redis.call('PEXPIRETIME', level) / window + 0.5
        end
        if ends and ends - ends % 1 == E + 2 then           -- a refusal goes by the expiry
          local retry
          if curr + cost <= limit then
            retry = window - math.floor((limit - curr - cost) * window / prev) - e
          else
            retry = (window - e) + window - math.floor((limit - cost) * window / curr)
          end
          local left = limit - weighted - curr
          if left < 0 then left = 0 end
          return { now_us, 0, 0, left, reset, retry, wid }
        end
      end
    end
  end
end
