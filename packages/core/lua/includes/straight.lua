--[[
  straight: a run of one-pair consumes of one sliding-window (2) or fixed-window (1) policy and one
  cost, decided in straight-line code: no function or table is created per call. consume.lua's lone
  call (lone.lua) and batch.lua's common shape (runs of such calls whose identities have no control key
  stored) are spliced before the algorithms and answered here, so they create none of the algorithms'
  functions. Each call's reads, writes, TTLs, replies and OOM order are those of ALG[1] and ALG[2]
  (fixed-window.lua, sliding-window.lua: check then commit, the window by the value's parity q, and in
  a window's first 50 ms by the expiry too).
  Input:
    s_alg      '1' or '2'; nil: nothing is done
    s_from, s_to, s_cost, s_limit, s_window
               the calls' keys KEYS[s_from .. s_to], one call each, in order; their cost (>= 0), limit
               and window (ms)
    s_raise    a write Redis refuses ends the script with its error (consume.lua), else the call is
               answered -1 and the error's message and the next one goes on (batch.lua)
    now_us, reply
               now.lua's time; each call appends consume.lua's 5 for its pair: allowed, remaining,
               reset_ms, retry_ms, tag (the window's number)
]]
if s_alg then
  local cost, limit, window = s_cost, s_limit, s_window
  local now_ms = (now_us - now_us % 1000) / 1000          -- x - x % 1: floor(x) for x >= 0, no call
  local e = now_ms % window                                 -- elapsed in the current window, ms
  local wid = (now_ms - e) / window
  local wend = now_ms - e + window
  -- a number sent to Redis is formatted (sprintf) on every command: the increment and the expiry go
  -- as strings made once per run, the increment of the common cost 1 with no call at all
  local inc, pxat = cost == 1 and '2' or string.format('%.0f', 2 * cost), nil
  local m = #reply
  for j = s_from, s_to do
    local key = KEYS[j]
    local got = redis.pcall('GET', key)
    local allowed, remaining, reset, retry, err = 0, 0, 0, 0, nil
    if s_alg == '2' then
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
      remaining = limit - weighted - curr
      reset = curr > 0 and 2 * window - e or (prev > 0 and window - e or 0)
      if cost <= limit and remaining >= cost then
        allowed = 1
        if cost > 0 then
          if not (sw == wid and type(redis.pcall('INCRBY', key, inc)) == 'number') then
            pxat = pxat or string.format('%.0f', (wid + 2) * window)
            err = redis.pcall('SET', key, wid % 2 + 2 * (curr + cost) + prev * 134217728, 'PXAT', pxat)
          end
          remaining, reset = remaining - cost, 2 * window - e
        end
      else
        retry = -1                                          -- never, for a cost over the limit
        if cost <= limit then
          if curr + cost <= limit then
            retry = window - math.floor((limit - curr - cost) * window / prev) - e
          else
            retry = (window - e) + window - math.floor((limit - cost) * window / curr)
          end
        end
        if remaining < 0 then remaining = 0 end
      end
    else
      local count, held = 0, false
      if type(got) == 'string' then
        local n = tonumber(got)
        if n and n >= 0 and n <= 9007199254740991 and n % 1 == 0 and n % 2 == wid % 2 then
          count, held = (n - n % 2) / 2, true
        end
      end
      remaining, reset = limit - count, count > 0 and wend - now_ms or 0
      if cost <= limit and count + cost <= limit then
        allowed = 1
        if cost > 0 then
          if not (held and type(redis.pcall('INCRBY', key, inc)) == 'number') then
            pxat = pxat or string.format('%.0f', wend)
            err = redis.pcall('SET', key, wid % 2 + 2 * (count + cost), 'PXAT', pxat)
          end
          remaining, reset = remaining - cost, wend - now_ms
        end
      else
        retry = cost > limit and -1 or wend - now_ms
        if remaining < 0 then remaining = 0 end
      end
    end
    if type(err) == 'table' and err.err then
      if s_raise then return err end                      -- the script's error, as redis.call's
      reply[m + 1], reply[m + 2] = -1, err.err
      m = m + 2
    else
      reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, wid
      m = m + 5
    end
  end
end
