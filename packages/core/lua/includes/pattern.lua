--[[
  pattern: the pattern overrides a consume or peek carries (`overrides.set('tenant:acme:*', ...)`). A
  prefix's patterns live in one table that each process holds and matches itself; the call sends its
  table's version and, for each identity, the value of the longest pattern its identity starts with. The
  version key says the latest version (the prefix's counter, or on a cluster the call's slot's copy of
  it): a newer one than the call's means the process missed a change, so the call is answered
  { now_us, -3 }, having changed nothing: the process reloads its table and sends the call again.
  Input:
    ARGV[#ARGV]  optional: '~<version>' (no pair argument starts with '~'), then ';<value>' per control key in KEYS order ('' where no
                 pattern matched; none at all when none did), each value '<end_ms>|<overrides>' as an
                 identity's own 'o' field (control.lua)
    KEYS[#KEYS]  with it: the version key (a missing key is version 0)
    now_us       read by the entry before this piece
  Defines:
    argc         #ARGV without the tail
    keyc         #KEYS without the version key
    pat          the values by control key position (1: the first control key), or nil
]]
local argc, keyc, pat = #ARGV, #KEYS, nil
if argc > 0 and string.byte(ARGV[argc]) == 126 then
  local v, rest = string.match(ARGV[argc], '^~(%d+)(.*)$')
  if (tonumber(redis.call('GET', KEYS[keyc])) or 0) > tonumber(v) then return { now_us, -3 } end
  argc, keyc = argc - 1, keyc - 1
  if rest ~= '' then
    pat = {}
    for s in string.gmatch(rest, ';([^;]*)') do pat[#pat + 1] = s end
  end
end
