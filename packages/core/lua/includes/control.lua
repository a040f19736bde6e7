--[[
  control: an identity's block and allow entries, read before its call is decided. Each identity has
  one control key, <prefix>:{<identity>}:~c (keys.ts: the identity's own slot), a small hash:
    b   the block's end, server ms; r its reason (never read here)
    a   the allow entry's end, server ms
  A key that is missing, or whose times have passed, changes nothing. Spliced into consume.lua,
  peek.lua and batch.lua.
  Input:
    KEYS[from .. to]     the call's control keys, one per distinct identity
  Defines:
    ctl_read(from, to, now_ms)  -1 and the longest block left (ms) if any identity is blocked; 1 if
                         every identity is allowed (and none blocked); else 0
    ctl_of(key)          the control key of a pair key (the part up to its hash tag's '}', then ':~c')
    ctl_block(r, left)   a pair refused by a block: nothing spent, retry and reset at least its end,
                         tag -2
    ctl_allow(r)         a pair admitted by an allow entry, uncharged: tag -3
    ctl_live(from, to, now_ms), ctl_call(live, keys, n)   batch.lua's: the live entries of a batch's
                         control keys, and one call's state among them
]]
local function ctl_read(from, to, now_ms)
  local state, left, allowed = 0, 0, 0
  for c = from, to do
    local v = redis.call('HMGET', KEYS[c], 'b', 'a')
    local b, a = tonumber(v[1]), tonumber(v[2])
    if b and b > now_ms then
      state = -1
      if b - now_ms > left then left = b - now_ms end
    elseif a and a > now_ms then
      allowed = allowed + 1
    end
  end
  if state == 0 and allowed == to - from + 1 then state = 1 end
  return state, left
end

local function ctl_of(key)
  if type(key) ~= 'string' then return nil end
  local tag = string.match(key, '^[^}]*}')
  return tag and tag .. ':~c'
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

-- batch.lua: the live entries of KEYS[from .. to] by control key ({ -1, left } or { 1 }); nil if none
local function ctl_live(from, to, now_ms)
  -- one EXISTS for the whole batch: with no entry stored (the common case) nothing else is read
  local any = 0
  for c = from, to, 1000 do
    any = any + redis.call('EXISTS', unpack(KEYS, c, math.min(c + 999, to)))
  end
  if any == 0 then return nil end
  local live
  for c = from, to do
    local st, left = ctl_read(c, c, now_ms)
    if st ~= 0 then
      live = live or {}
      live[KEYS[c]] = { st, left }
    end
  end
  return live
end

-- batch.lua: a call's state under `live`, from its n pair keys: as ctl_read for the call's identities
local function ctl_call(live, keys, n)
  local state, left = 1, 0
  for i = 1, n do
    local e = live[ctl_of(keys[i]) or '']
    if not e then
      if state == 1 then state = 0 end
    elseif e[1] == -1 then
      state = -1
      if e[2] > left then left = e[2] end
    end
  end
  return state, left
end
