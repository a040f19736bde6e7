--[[
  compact-run: batch.lua's other common shape, one run ('x', or 'l' of lean pairs) of one compact policy
  (storage: 'compact'),
  with or without an act-by ('@'), spliced after straight.lua: when no identity of the batch has a
  control key stored and the pattern version is current, compact-straight.lua decides its calls from
  the first until one it does not take, and that one and the rest go batch.lua's general way. A run
  past its act-by, a stored control key, pattern values ('='), or any other shape is left to the general
  way, which reads again what was read here.
  Input:
    ARGV      optionally 'v', version; optionally '@', act_by; with 'v', '~', m; then '#', alg, limit,
              window, burst, then 'x' (or 'l'), cost, 1, count, then the count calls' fields
    KEYS      with 'v' the version key, then the m control keys; then the calls' keys, four each (three
              levels and the identity's control key), or two for 'l' (keys.lua)
    now_us    now.lua's
  Output:
    compact-straight.lua's input, c_alg nil for any other shape; returns { now_us, -3 } for a stale
    pattern table (pattern.lua), having changed nothing
]]
local c_alg, c_n, c_from, c_step, c_field, c_cost, c_limit, c_window, c_whole, c_raise
do
  local b, act, ver, m = 1, 0, nil, 0
  if ARGV[1] == 'v' then ver, b = ARGV[2], 3 end
  if ARGV[b] == '@' then act, b = ARGV[b + 1] + 0, b + 2 end
  if ver and ARGV[b] == '~' then m, b = ARGV[b + 1] + 0, b + 2 end
  local alg, count = ARGV[b + 1], tonumber(ARGV[b + 8])
  local from, op = (ver and 2 or 1) + m, ARGV[b + 5]
  local step = op == 'l' and 2 or 4
  if ARGV[b] == '#' and (alg == '7' or alg == '8') and (op == 'x' or op == 'l') and ARGV[b + 7] == '1' and count
    and #ARGV == b + 8 + count and #KEYS == from - 1 + step * count and ARGV[b + 6] + 0 >= 0 and m <= 998
    and not (act > 0 and now_us > act * 1000) then
    -- as batch.lua's first shape: the version key counted twice, so any stored version or control key
    -- shows
    local any = 0
    if ver == '0' then
      any = redis.call('EXISTS', KEYS[1], KEYS[1], unpack(KEYS, 2, m + 1))
    elseif ver then
      if (tonumber(redis.call('GET', KEYS[1])) or 0) > ver + 0 then return { now_us, -3 } end
      if m > 0 then any = redis.call('EXISTS', unpack(KEYS, 2, m + 1)) end
    end
    if any == 0 then
      c_alg, c_n, c_from, c_step, c_field, c_cost = alg, count, from, step, b + 8, ARGV[b + 6] + 0
      c_limit, c_window, c_whole, c_raise = ARGV[b + 2] + 0, ARGV[b + 3] + 0, false, false
    end
  end
end
