--[[
  control: an identity's block and allow entries, read before its call is decided. Each identity has
  one control key, <prefix>:{<identity>}:~c (keys.ts: the identity's own slot), a small hash:
    b   the block's end, server ms; r its reason (never read here)
    a   the allow entry's end, server ms
    o   the identity's limit overrides: '<end_ms>|<policy>=<limit>,...' (end 0: none; policy '' for a
        limiter with one inline policy, whose keys name no policy); a calendar month's may carry a
        billing day, '<policy>=<limit>@<day>', or '<policy>=@<day>' to keep the policy's limit
  A key that is missing, or whose times have passed, changes nothing. Spliced into consume.lua,
  peek.lua and batch.lua.
  Input:
    KEYS[from .. to]     the call's control keys, one per distinct identity
  Defines:
    ctl_read(from, to, now_ms, pat)  -1 and the longest block left (ms) if any identity is blocked; 1
                         if every identity is allowed (and none blocked); else 0; then the live
                         overrides by control key, or nil; `pat` (pattern.lua), by position from
                         `from`: the pattern value of an identity with no override of its own
    ctl_over(ovr, key, limit, burst, window)  a pair's overridden limit (or nil), its burst (which
                         follows the limit when it was the default) and its window (a calendar
                         window gains '@<day>' under a billing day, calendar.lua)
    ctl_allowed(r)       a pair's allowed as replied: 2 + 2 * its overridden limit + allowed when one
                         applied, so the client learns the effective limit in the same integers
    ctl_of(key)          the control key of a pair key (the part up to its hash tag's '}', then ':~c'),
                         or the one a compact pair carries (keys.lua)
    ctl_block(r, left)   a pair refused by a block: nothing spent, retry and reset at least its end,
                         tag -2
    ctl_allow(r)         a pair admitted by an allow entry, uncharged: tag -3
    ctl_live(from, to, now_ms, pat), ctl_call(live, keys, n)   batch.lua's: the live entries of a batch's
                         control keys, and one call's state among them
]]
-- an 'o' field's overrides by policy name, or nil when it is missing or has ended
local function ctl_parse(o, now_ms)
  if not o then return nil end
  local ends, spec = string.match(o, '^(%d+)|(.*)$')
  ends = tonumber(ends)
  if not ends or (ends > 0 and ends <= now_ms) then return nil end
  local t = {}
  for name, limit, day in string.gmatch(spec, '([^=,]*)=(%d*)@?(%d*)') do
    if limit ~= '' then t[name] = tonumber(limit) end
    if day ~= '' then
      t[0] = t[0] or {}
      t[0][name] = day
    end
  end
  return t
end

local function ctl_read(from, to, now_ms, pat)
  local state, left, allowed, ovr = 0, 0, 0, nil
  for c = from, to do
    local v = redis.call('HMGET', KEYS[c], 'b', 'a', 'o')
    local b, a = tonumber(v[1]), tonumber(v[2])
    if b and b > now_ms then
      state = -1
      if b - now_ms > left then left = b - now_ms end
    elseif a and a > now_ms then
      allowed = allowed + 1
    end
    local o = v[3] and ctl_parse(v[3], now_ms)
    -- no live override of its own: the pattern its identity matched, if any (pattern.lua)
    if not o and pat and pat[c - from + 1] then o = ctl_parse(pat[c - from + 1], now_ms) end
    if o then
      ovr = ovr or {}
      ovr[KEYS[c]] = o
    end
  end
  if state == 0 and allowed == to - from + 1 then state = 1 end
  return state, left, ovr
end

local function ctl_of(key)
  if type(key) ~= 'string' then return key[5] end           -- a compact pair's (keys.lua)
  local tag = string.match(key, '^[^}]*}')
  return tag and tag .. ':~c'
end

-- the policy name in a pair key: '<prefix>:{<tag>}:<policy>:<sig>', or '' for '<prefix>:{<tag>}:<sig>'
-- (a compact pair's first level ends as its pair key would)
local function ctl_over(ovr, key, limit, burst, window)
  local o = ovr[ctl_of(key) or '']
  if not o then return nil, burst, window end
  local name = string.match(type(key) == 'string' and key or key[1], '}:([^:]+):[^:]*$') or ''
  local day = o[0] and o[0][name]
  if day and type(window) == 'string' then window = window .. '@' .. day end
  local v = o[name]
  if not v then return nil, burst, window end
  return v, burst == limit and v or burst, window
end

local function ctl_allowed(r)
  return r.ov and 2 + 2 * r.ov + r.allowed or r.allowed
end

local function ctl_block(r, left)
  r.allowed = 0
  r.tag = -2
  if r.retry ~= -1 and r.retry < left then r.retry = left end
  if r.reset < left then r.reset = left end
end

local function ctl_allow(r)
  r.allowed = 1
  r.retry = 0
  r.tag = -3
end

-- batch.lua: the live entries of KEYS[from .. to] by control key ({ state, left, overrides }); nil if
-- none
local function ctl_live(from, to, now_ms, pat)
  -- one EXISTS for the whole batch: with no entry stored (the common case) nothing else is read
  local any = 0
  for c = from, to, 1000 do
    any = any + redis.call('EXISTS', unpack(KEYS, c, math.min(c + 999, to)))
  end
  local live
  if any == 0 then
    -- only the patterns the identities matched, if any ('=' of batch.lua)
    for c = from, to do
      local o = pat and pat[c - from + 1] and ctl_parse(pat[c - from + 1], now_ms)
      if o then
        live = live or {}
        live[KEYS[c]] = { 0, 0, o }
      end
    end
    return live
  end
  for c = from, to do
    local st, left, ovr = ctl_read(c, c, now_ms, pat and { pat[c - from + 1] or '' })
    if st ~= 0 or ovr then
      live = live or {}
      live[KEYS[c]] = { st, left, ovr and ovr[KEYS[c]] }
    end
  end
  return live
end

-- batch.lua: a call's state under `live`, from its n pair keys: as ctl_read for the call's identities,
-- its overrides as ctl_read's (by control key), or nil
local function ctl_call(live, keys, n)
  local state, left, ovr = 1, 0, nil
  for i = 1, n do
    local c = ctl_of(keys[i]) or ''
    local e = live[c]
    if not e or e[1] == 0 then
      if state == 1 then state = 0 end
    elseif e[1] == -1 then
      state = -1
      if e[2] > left then left = e[2] end
    end
    if e and e[3] then
      ovr = ovr or {}
      ovr[c] = e[3]
    end
  end
  return state, left, ovr
end
