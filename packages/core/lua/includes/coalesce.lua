--[[
  coalesce: same-key coalescing for batch.lua. When a key appears more than once in the batch (a hot
  key: one API key, one tenant, one abusive client), `redis` is, for the algorithms, a read memo in
  front of the real one: a string key's state is read once (GET, PEXPIRETIME) and then known from the
  calls' own writes. Writes still go to Redis at once, call by call, so a refused write (maxmemory,
  min-replicas) fails its own call exactly as before and leaves the memo as Redis is. Time is frozen
  inside a script, so a memo entry cannot expire under it.
  Input:
    redis, now_us        the entry's local `redis` (replaced here) and the server's time
    KEYS, ARGV           batch.lua's, read only to find whether any string key repeats
  Output:
    `redis` replaced by the memo when a string key repeats, else left as it is. Memoised: GET (call and
    pcall) and PEXPIRETIME, then updated by SET key v PXAT ms, SET key v KEEPTTL, INCRBY key n (call
    and pcall) and DEL key. Any other command on a memoised key (a zset, the penalty's pcall SET)
    drops it from the memo and goes through.
]]
-- Whether the batch has a string key: not when it is only compact policies ('#' of codes 7 and 8)
-- and runs of them ('x', 'y': a field per call follows), whose keys are all their buckets' levels. A
-- run's policy is declared before it, so a run reached here is of a compact policy.
local function strings()
  local a = 1
  while a <= #ARGV do
    local op = ARGV[a]
    if op == '#' and (ARGV[a + 1] == '7' or ARGV[a + 1] == '8') then
      a = a + 5
    elseif op == 'x' or op == 'y' then
      a = a + 4 + tonumber(ARGV[a + 3])
    elseif op == '@' or op == '~' or op == 'v' then
      a = a + 2
    elseif op == '=' then
      a = a + 2 + tonumber(ARGV[a + 1])
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
