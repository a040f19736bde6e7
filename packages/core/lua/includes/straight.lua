--[[
  straight: a run of consumes of sliding-window (2) and fixed-window (1) pairs with one cost, decided in
  straight-line code: no function is created, and no table per call. consume.lua's lone call (lone.lua)
  and batch.lua's common shapes (one run of calls whose identities have no control key stored) are
  spliced before the algorithms and answered here, so they create none of the algorithms' functions.
  Each pair's decisions, stored values, TTLs and replies are those of ALG[1] and ALG[2]
  (fixed-window.lua, sliding-window.lua: the window by the value's parity q, and in a window's first
  50 ms by the expiry too), and a call of several pairs is checked on all of them before it spends on
  all or none (decide.lua's decide). A call of one pair spends first (INCRBY, below) and undoes what
  does not fit; under OOM that INCRBY, a denyoom command, is refused before the script has written,
  and the call reads and decides as the others.
  Input:
    s_n        pairs per call (>= 1); nil: nothing is done
    s_calls, s_from, s_cost
               how many calls, the first call's first key KEYS[s_from] (each call's n keys follow in
               order), their cost (>= 0)
    s_pol, s_stride
               pair i's policy is ARGV[s_pol + (i - 1) * s_stride] ('1' or '2'), then its limit and its
               window (ms)
    s_whole    each call's reply opens with its allowed (1 if every pair allowed), as consume.lua's and
               batch.lua's 'm' runs; else (batch.lua's 'x' runs, one pair) only the pair's 5
    s_raise    a write Redis refuses ends the script with its error (consume.lua), else the call is
               answered -1 and the error's message and the next one goes on (batch.lua)
    now_us, reply
               now.lua's time; reply[1] is now_us, and from reply[2] each call puts its allowed
               (s_whole), then per pair consume.lua's 5: allowed, remaining, reset_ms, retry_ms, tag
               (the window's number)
]]
if s_n then
  local cost, n = s_cost, s_n
  local now_ms = (now_us - now_us % 1000) / 1000          -- x - x % 1: floor(x) for x >= 0, no call
  -- a number sent to Redis is formatted (sprintf) on every command: the increment and a lone policy's
  -- expiry go as strings made once per run, the increment of the common cost 1 with no call at all
  local step = 2 * cost                                     -- what a spend adds to a stored value
  local inc, pxat = cost == 1 and '2' or string.format('%.0f', step), nil
  -- a pair's policy, all fixed for the run: algorithm, limit, window, elapsed, window number, its end,
  -- a spend's expiry and the reset it answers; set once for one pair, else per pair from `pol`
  local alg, limit, window, e, wid, wend, till, after
  local pol, st                                             -- several pairs: `st` holds a call's checks
  for i = 1, n do
    local b = s_pol + (i - 1) * s_stride
    alg, limit, window = ARGV[b], ARGV[b + 1] + 0, ARGV[b + 2] + 0
    e = now_ms % window                                     -- elapsed in the current window, ms
    wid, wend = (now_ms - e) / window, now_ms - e + window
    if alg == '2' then till, after = (wid + 2) * window, 2 * window - e else till, after = wend, wend - now_ms end
    if n > 1 then
      local o = (i - 1) * 8
      -- a table that grows is reallocated at each power of two: two pairs (the common several) get
      -- theirs at full size
      pol = pol or (n == 2 and { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 } or {})
      pol[o + 1], pol[o + 2], pol[o + 3], pol[o + 4], pol[o + 5], pol[o + 6] = alg, limit, window, e, wid, wend
      pol[o + 7], pol[o + 8] = till, after
      st = st or (n == 2 and { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 } or {})
    end
  end
  -- one pair a call, spending within its limit: INCRBY first. For a value of this window, the common
  -- call, that is the whole of it (one command, not GET then INCRBY); the value before is the result
  -- less the increment. A call it turns out not to fit is undone in the same script: a refusal takes
  -- the increment back, a value of another window (or a key INCRBY created, with no TTL) is SET.
  local first = n == 1 and cost > 0 and cost <= limit
  local undo = first and '-' .. inc
  local m, k = 1, s_from                                    -- reply[1] is now_us; the calls follow
  for _ = 1, s_calls do
    local all, err, at = 1, nil, m + 1                      -- at: the call's first place in reply
    if s_whole then m = at end
    for i = 1, n do
      if pol then
        local o = (i - 1) * 8
        alg, limit, window, e, wid, wend = pol[o + 1], pol[o + 2], pol[o + 3], pol[o + 4], pol[o + 5], pol[o + 6]
      end
      local key = KEYS[k]
      k = k + 1
      local v, pre = nil, false
      if first then
        -- an error (another type, not an integer, or OOM before the script's first write) reads as GET
        v = redis.pcall('INCRBY', key, inc)
        if type(v) == 'number' then v, pre = v - step, true else v = nil end
      end
      if not pre then
        v = redis.pcall('GET', key)
        v = type(v) == 'string' and tonumber(v)
      end
      -- a spend: INCRBY when the value is this window's (`held`), else SET it to `set`
      local allowed, remaining, reset, retry, held, set = 0, 0, 0, 0, false, 0
      if alg == '2' then
        local curr, prev, sw = 0, 0, nil
        if v and v >= 0 and v <= 9007199254740991 and v % 1 == 0 then
          local q = v % 2
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
            curr, prev = (v % 134217728 - q) / 2, (v - v % 134217728) / 134217728
          elseif sw then
            prev = (v % 134217728 - q) / 2
          end
        end
        local weighted = 0
        if prev > 0 then weighted = math.ceil(prev * (window - e) / window) end
        remaining = limit - weighted - curr
        reset = curr > 0 and 2 * window - e or (prev > 0 and window - e or 0)
        if cost <= limit and remaining >= cost then
          allowed = 1
          held, set = sw == wid, wid % 2 + 2 * (curr + cost) + prev * 134217728
        else
          retry = -1                                        -- never, for a cost over the limit
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
        local count = 0
        if v and v >= 0 and v <= 9007199254740991 and v % 1 == 0 and v % 2 == wid % 2 then
          count, held = (v - v % 2) / 2, true
        end
        remaining, reset = limit - count, count > 0 and wend - now_ms or 0
        if cost <= limit and count + cost <= limit then
          allowed = 1
          set = wid % 2 + 2 * (count + cost)
        else
          retry = cost > limit and -1 or wend - now_ms
          if remaining < 0 then remaining = 0 end
        end
      end
      if allowed == 0 then all = 0 end
      if not pol then
        -- one pair: the call is the pair, spent at once
        if allowed == 1 and cost > 0 then
          -- a value of 0 before the INCRBY may be a key it created, with no TTL: SET gives it one
          if not (held and (pre and v > 0 or not pre and type(redis.pcall('INCRBY', key, inc)) == 'number')) then
            pxat = pxat or string.format('%.0f', till)
            err = redis.pcall('SET', key, set, 'PXAT', pxat)
            if not (type(err) == 'table' and err.err) then err = nil end
          end
          remaining, reset = remaining - cost, after
        elseif pre then
          redis.pcall('INCRBY', key, undo)                  -- refused: nothing spent
        end
        reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, wid
        m = m + 5
      else
        local s = (i - 1) * 7
        st[s + 1], st[s + 2], st[s + 3], st[s + 4], st[s + 5], st[s + 6], st[s + 7] = key, allowed, remaining, reset, retry, held, set
      end
    end
    if pol then
      -- the writes, all pairs' or none; a write Redis refuses (the script's first, under maxmemory)
      -- ends the call there, as a raised error ends decide.lua's
      if all == 1 and cost > 0 then
        for i = 1, n do
          local s, o = (i - 1) * 7, (i - 1) * 8
          local key = st[s + 1]
          if not (st[s + 6] and type(redis.pcall('INCRBY', key, inc)) == 'number') then
            err = redis.pcall('SET', key, st[s + 7], 'PXAT', string.format('%.0f', pol[o + 7]))
            if type(err) == 'table' and err.err then break end
            err = nil
          end
          st[s + 3], st[s + 4] = st[s + 3] - cost, pol[o + 8]
        end
      end
      for i = 1, n do
        local s = (i - 1) * 7
        reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = st[s + 2], st[s + 3], st[s + 4], st[s + 5], pol[(i - 1) * 8 + 5]
        m = m + 5
      end
    end
    if err then
      if s_raise then return err end                      -- the script's error, as redis.call's
      reply[at], reply[at + 1], m = -1, err.err, at + 1     -- the call's place: -1 and the message
      for x = m + 1, m + 5 * n + 1 do reply[x] = nil end   -- whatever the call had put past it
    elseif s_whole then
      reply[at] = all
    end
  end
end
