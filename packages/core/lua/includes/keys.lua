--[[
  keys: a pair's key as the algorithms take it. KEYS[k], or for a compact pair (alg 7, 8: compact.lua)
  a table of its three levels, KEYS[k .. k + 2], its field, which travels in the pair's burst slot of
  ARGV, and its identity's control key, KEYS[k + 3] (control.lua's ctl_of). Spliced into each entry
  script.
  Input:
    alg, k, f            the pair's algorithm code, the KEYS index of its first key, its field (ARGV's
                         burst slot; read only for a compact pair)
  Output:
    pair_key(alg, k, f)  the key, and the KEYS index of the next pair's
]]
local function pair_key(alg, k, f)
  if alg == 7 or alg == 8 then return { KEYS[k], KEYS[k + 1], KEYS[k + 2], f, KEYS[k + 3] }, k + 4 end
  return KEYS[k], k + 1
end
