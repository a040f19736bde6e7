--[[
  compact-run: batch.lua's other common shape, one run ('x') of one compact policy (storage: 'compact'),
  with or without an act-by first ('@'), spliced after straight.lua: compact-straight.lua decides its
  calls from the first until one it does not take, and that one and the rest go batch.lua's general
  way. A run past its act-by, or any other shape, is left to the general way.
  Input:
    ARGV      '@', act_by (optional), then '#', alg, limit, window, burst, then 'x', cost, 1, count, then
              the count calls' fields; KEYS the calls' levels, three each
    now_us    now.lua's
  Output:
    compact-straight.lua's input, c_alg nil for any other shape
]]
local c_alg, c_n, c_from, c_field, c_cost, c_limit, c_window, c_whole, c_raise
if ARGV[1] == '#' or (ARGV[1] == '@' and ARGV[3] == '#') then
  local b = ARGV[1] == '@' and 3 or 1
  local alg, count = ARGV[b + 1], tonumber(ARGV[b + 8])
  if (alg == '7' or alg == '8') and ARGV[b + 5] == 'x' and ARGV[b + 7] == '1' and count and #ARGV == b + 8 + count
    and #KEYS == 3 * count and ARGV[b + 6] + 0 >= 0 and not (b == 3 and ARGV[2] + 0 > 0 and now_us > ARGV[2] * 1000) then
    c_alg, c_n, c_from, c_field, c_cost = alg, count, 1, b + 8, ARGV[b + 6] + 0
    c_limit, c_window, c_whole, c_raise = ARGV[b + 2] + 0, ARGV[b + 3] + 0, false, false
  end
end
