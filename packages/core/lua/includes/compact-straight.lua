--[[
  compact-straight: the common calls of compact pairs (storage: 'compact'), one pair each, decided in
  straight-line code before the algorithms' functions are built: consume.lua's lone call (lone.lua) and
  batch.lua's run of one compact policy. Past a window's first 50 ms, a call is taken when its field is
  in its bucket's first level with counts, within the limit (for the sliding window, within the
  bucket's window: no roll) or refused where the bucket's expiry confirms the counts; or when it is a
  new field in a first level with room that is new or this window's. Reads, writes, replies and OOM
  order are those of ALG[7] and ALG[8] (compact-fixed-window.lua, compact-sliding-window.lua). The
  first call not taken (a field in another level, no counts, a roll, a full or dead first level, a
  refusal the expiry contradicts) ends the loop: it and the calls after it go the general way, which
  reads again (nothing of theirs was written here).
  A spend sends HINCRBY first: for a field with counts, the common call, that is the whole write, and
  the count before is the result less the increment. A call it turns out not to fit takes it back
  (HINCRBY of the opposite), so the general way reads what was stored. A count of 0 before is a new
  field or one given back to 0; in a first level with room either is the identity's there, and its
  write is the same. Where it does not fit it is taken back: HDEL when the level went past its cap
  (the field was new), else by HINCRBY: a field new there is left as a 0 in its place, which the
  general way reads as it reads no field, and writes. (A lean pair whose first level that 0 fills, at a
  roll, is then answered "resend whole" before it rolls: the same end, one round trip more.)
  Input:
    c_alg      '7' (fixed window) or '8' (sliding window); nil: nothing is done
    c_n, c_from, c_step, c_field
               how many calls; call j's keys are KEYS[c_from + c_step(j - 1) ..], its first level first
               (c_step 4 for a pair sent whole, 2 for a lean one: keys.lua), its field ARGV[c_field + j];
               none of the calls' identities has a control key stored
    c_cost, c_limit, c_window
               the calls' cost (>= 0), the policy's limit and window (ms)
    c_whole    each call's reply opens with its allowed (consume.lua); else only the pair's 5 (batch.lua)
    c_raise    a write Redis refuses ends the script with its error (consume.lua), else the call is
               answered -1 and the error's message and the next one goes on (batch.lua)
    now_us, reply
               now.lua's time; reply[1] is now_us
  Output:
    c_done     how many calls, from the first, were decided, their replies in `reply`
]]
local c_done = 0
if c_alg then
  local cost, limit, window = c_cost, c_limit, c_window
  local now_ms = (now_us - now_us % 1000) / 1000           -- x - x % 1: floor(x) for x >= 0, no call
  local e = now_ms % window
  local wid = (now_ms - e) / window
  if e >= 50 and cost <= limit then
    local fixed = c_alg == '7'
    local step = fixed and cost or 2 * cost                 -- what a spend adds to the field
    -- HINCRBY's increment as a string made once: a number is formatted on every command
    local inc = cost == 1 and (fixed and '1' or '2') or string.format('%.0f', step)
    local undo = '-' .. inc
    local m = 1                                             -- reply[1] is now_us; the calls follow
    for j = 1, c_n do
      local level, field = KEYS[c_from + c_step * (j - 1)], ARGV[c_field + j]
      -- an error (another type, not an integer, OOM before the script's first write) reads as HGET
      local r = cost > 0 and redis.pcall('HINCRBY', level, field, inc)
      local v, x
      if type(r) == 'number' then
        x = r - step
      else
        r = false
        v = redis.pcall('HGET', level, field)
        x = type(v) == 'string' and tonumber(v)
      end
      -- the call's numbers (allowed nil: not taken), and its write: HINCRBY `inc` (`set` the value to
      -- HSET should HINCRBY not read the count), or HSET of a new field `set` (`n` 0: a bucket starting);
      -- `hincr` with `r`: HINCRBY first was the write
      local allowed, remaining, reset, retry, set, n, hincr = nil, 0, 0, 0, nil, nil, false
      if r and x == 0 then
        -- a field new or given back to 0, now holding the spend: the identity's in its first level when
        -- the level had room (HLEN after <= 256) or held it, and the level is new or this window's
        n = redis.call('HLEN', level)
        local ok = n <= 256
        if ok then
          -- its expiry says whether the level is this window's. One holding only this field starts
          -- with its window's expiry (a sliding one only from none: another rolls); any other goes
          -- the general way, which rolls it or replaces it
          local t = redis.call('PEXPIRETIME', level)
          local i = t / window + 0.5
          i = t > 0 and i - i % 1
          if i ~= wid + (fixed and 1 or 2) then
            if n == 1 and (fixed or t == -1) then
              redis.call('PEXPIREAT', level, now_ms - e + (fixed and 1 or 2) * window)
            else
              ok = false                                    -- a roll, or a level of another window
            end
          end
        end
        if ok then
          allowed, remaining, hincr = 1, limit - cost, true
          reset = fixed and window - e or 2 * window - e
          if not fixed and wid % 2 == 1 then redis.call('HSET', level, field, r + 1) end  -- q
        else
          if n > 256 then redis.call('HDEL', level, field) else redis.call('HINCRBY', level, field, undo) end
          break
        end
      elseif v == false then
        -- a new field: its first level has room (so no level below holds it, compact.lua's rule) and is
        -- this window's or new; its count is 0, so the cost fits
        n = redis.pcall('HLEN', level)
        local ok = type(n) == 'number' and n < 256
        if ok and n > 0 then
          -- a level with fields is this window's when its expiry says so (a sliding window's of the
          -- window before rolls, a level of no window or another is replaced: the general path)
          local i = redis.call('PEXPIRETIME', level) / window + 0.5
          ok = i - i % 1 == wid + (fixed and 1 or 2)
        end
        if ok then
          allowed, remaining = 1, limit
          if cost > 0 then
            remaining, reset = limit - cost, fixed and window - e or 2 * window - e
            set = fixed and inc or wid % 2 + 2 * math.min(cost, 67108863)
          end
        end
      elseif x and x > 0 and x <= 9007199254740991 and x % 1 == 0 then
        if fixed then
          -- this window's count, unless the level is an older window's: the expiry, read for a
          -- refusal (which must be this window's), says so
          if x + cost <= limit then
            allowed, remaining, reset = 1, limit - x - cost, window - e
            if cost > 0 then hincr, set = true, x + cost end
          else
            local i = redis.call('PEXPIRETIME', level) / window + 0.5
            if i - i % 1 == wid + 1 then
              allowed, remaining, reset, retry = 0, limit - x, window - e, window - e
              if remaining < 0 then remaining = 0 end
            end
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
          reset = curr > 0 and 2 * window - e or (prev > 0 and window - e or 0)
          if weighted + curr + cost <= limit then
            if cost == 0 then
              allowed, remaining = 1, limit - weighted - curr
            elseif E == wid and sc + cost <= 67108863 then
              allowed, remaining, reset = 1, limit - weighted - curr - cost, 2 * window - e
              hincr, set = true, x + 2 * cost
            end
          else
            local i = redis.call('PEXPIRETIME', level) / window + 0.5
            if i - i % 1 == E + 2 then                      -- a refusal goes by the expiry
              if curr + cost <= limit then
                retry = window - math.floor((limit - curr - cost) * window / prev) - e
              else
                retry = (window - e) + window - math.floor((limit - cost) * window / curr)
              end
              allowed, remaining = 0, limit - weighted - curr
              if remaining < 0 then remaining = 0 end
            end
          end
        end
      end
      -- HINCRBY first, for a call refused or not taken: nothing spent
      if r and not hincr then redis.call('HINCRBY', level, field, undo) end
      if allowed == nil then break end
      -- the write (denyoom: the call's first); a level starting gets its window's expiry (cb_put's
      -- 'fresh')
      local err
      if set and not r then
        if not (hincr and type(redis.pcall('HINCRBY', level, field, inc)) == 'number') then
          err = redis.pcall('HSET', level, field, set)
          if type(err) == 'table' and err.err then
            if c_raise then return err end                  -- the script's error, as redis.call's
          else
            err = nil
            if n == 0 then redis.call('PEXPIREAT', level, now_ms - e + (fixed and 1 or 2) * window) end
          end
        end
      end
      if err then
        reply[m + 1], reply[m + 2], m = -1, err.err, m + 2  -- the call's place: -1 and the message
      else
        if c_whole then
          reply[m + 1] = allowed
          m = m + 1
        end
        reply[m + 1], reply[m + 2], reply[m + 3], reply[m + 4], reply[m + 5] = allowed, remaining, reset, retry, wid
        m = m + 5
      end
      c_done = j
    end
  end
end
