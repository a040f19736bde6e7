--[[
  penalty: blocks a (policy, identity) pair for a while once it has been refused `after` times within
  `within_ms`, each block of a repeat offence `factor` times longer (up to `max_ms`). Spliced into
  batch.lua (ops 'C' and 'P'); twin of src/penalty.ts.
  Input:
    KEYS[pk + j]  penalised pair j's state key, <pair key>!p (the pair's hash tag: same slot)
    ARGV[at + 7(j-1) + 0..6]  penalised pair j: pair index, after, within_ms, block_ms, factor, max_ms,
                  forget_ms
  State:
    "until_ms level count since_ms"
      until_ms    the end of the last block (in the past once it has ended)
      level       blocks served in a row: the next one lasts block x factor^level (at most max)
      count       refusals counted since since_ms (a counting window of `within` ms)
    Expires when nothing in it matters any more: the counting window's end, or the last block's end +
    `forget` (the level is remembered that long). Anything else there reads as empty.
  Output:
    A pair under a block is refused (remaining 0, retry and reset = the block's end, tag -1). A refusal
    by the pair's own policy (not one it can never grant: retry -1) counts; the one that reaches `after`
    starts a block, and its own retry is the block's. Refusals during a block do not count (the block
    would never end for a client that keeps knocking).
  Defines (decide.lua's decide_pen calls them around the call's own decision):
    pen_check(at, pk, m, now_ms)  before: each pair's state, and whether any pair is blocked now
                  (at: the call's first penalty argument; pk: the index of its first state key - 1)
    pen_settle(results, states, at, pk, m, now_ms, spend)  after: a blocked pair reports its block, a
                  consume counts its pairs' own refusals and may start a block
]]
local function pen_read(pkey)
  local s = redis.pcall('GET', pkey)
  if type(s) ~= 'string' then return 0, 0, 0, 0 end
  local u, l, c, since = string.match(s, '^(%d+) (%d+) (%d+) (%d+)$')
  if not u then return 0, 0, 0, 0 end
  return tonumber(u), tonumber(l), tonumber(c), tonumber(since)
end

-- The length of the block at `level` (1 = the first): block, then x factor each time, capped at max.
local function pen_length(level, block, factor, max)
  local d = math.min(block, max)
  for _ = 2, level do
    if d >= max then break end
    d = math.min(max, math.floor(d * factor))
  end
  return d
end

-- A pair's numbers while it is blocked for `left` more ms. Tag -1 says "blocked" (a refused pair's tag
-- is never used: only admitted calls are refunded; every real tag is >= 0).
local function pen_blocked(r, left)
  r.allowed = 0
  r.remaining = 0
  r.tag = -1
  if r.retry ~= -1 and r.retry < left then r.retry = left end
  if r.reset < left then r.reset = left end
end

-- Before the call is decided: each penalised pair's state; whether any pair is blocked now.
-- `at`: the first of the call's penalty arguments; `pk`: the index of its first penalty key - 1.
local function pen_check(at, pk, m, now_ms)
  local states, blocked = {}, false
  for j = 1, m do
    local u, l, c, s = pen_read(KEYS[pk + j])
    states[j] = { u, l, c, s }
    if u > now_ms then blocked = true end
  end
  return states, blocked
end

-- After: a blocked pair reports its block; a consume counts its pairs' own refusals and may start a block.
local function pen_settle(results, states, at, pk, m, now_ms, spend)
  for j = 1, m do
    local b = at + (j - 1) * 7
    local r = results[tonumber(ARGV[b])]
    local st = states[j]
    local u, l, c, s = st[1], st[2], st[3], st[4]
    if u > now_ms then
      pen_blocked(r, u - now_ms)
    elseif spend and r.allowed == 0 and r.retry ~= -1 then
      local after, within, block = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
      local factor, max, forget = tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])
      if c == 0 or now_ms - s >= within then c, s = 0, now_ms end
      c = c + 1
      if l > 0 and now_ms >= u + forget then l = 0 end   -- the last offence is forgotten
      local expire = s + within
      if c >= after then
        if pen_length(l, block, factor, max) < max or l == 0 then l = l + 1 end
        u = now_ms + pen_length(l, block, factor, max)
        c, s = 0, now_ms
        expire = u + forget
      elseif l > 0 then
        expire = math.max(expire, u + forget)
      end
      -- pcall: under maxmemory the refusal stands without its penalty (never an error, never an admit)
      local ok = redis.pcall('SET', KEYS[pk + j], string.format('%.0f %d %d %.0f', u, l, c, s), 'PXAT', expire)
      if type(ok) == 'table' and ok.ok and u > now_ms then pen_blocked(r, u - now_ms) end
    end
  end
end
