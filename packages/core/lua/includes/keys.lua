--[[
  keys: a pair's key as the algorithms take it. KEYS[k], or for a compact pair (alg 7, 8: compact.lua)
  a table of its levels, its field, which travels in the pair's burst slot of ARGV, and its identity's
  control key (control.lua's ctl_of). A compact pair is sent whole, four keys (its bucket's three
  levels, KEYS[k .. k + 2], and its control key, KEYS[k + 3]), or lean, two (its first level and its
  control key): levels 2 and 3 are false then, and a call that needs them answers "resend whole"
  (compact.lua's cb_short). Spliced into each entry script.
  Input:
    alg, k, f, lean      the pair's algorithm code, the KEYS index of its first key, its field (ARGV's
                         burst slot; read only for a compact pair), whether a compact pair is lean
  Output:
    pair_key(alg, k, f, lean)  the key, and the KEYS index of the next pair's
]]
local function pair_key(alg, k, f, lean)
  if alg == 7 or alg == 8 then
    if lean then return { KEYS[k], false, false, f, KEYS[k + 1] }, k + 2 end
    return { KEYS[k], KEYS[k + 1], KEYS[k + 2], f, KEYS[k + 3] }, k + 4
  end
  return KEYS[k], k + 1
end
