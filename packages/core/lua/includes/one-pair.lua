--[[
  one-pair: the common call, one (policy, identity) pair, shared by consume.lua and peek.lua. The same
  evaluation as their loops (allowed is 0 or 1, so the call's is the pair's) without their tables and
  lookups.
  Input:
    KEYS, ARGV[2..5]     the pair, as consume (then its identity's control key, if sent); a compact
                         pair with fewer than four keys before the version key is lean (keys.lua), its
                         control key the call's
    ctl_read, ctl_over, ctl_allowed, ctl_block, ctl_allow   control.lua's
    now_us, cost, n      read by the entry before this piece (n, the number of pairs)
    keyc, pat            pattern.lua's: the KEYS before the version key, the pattern values
    spend                true in consume (charge an admitted pair), false in peek
  Output:
    { now_us, allowed, allowed, remaining, reset_ms, retry_ms, tag }, as consume; { now_us, -4 } for a
    lean pair that needs the levels it was sent without (compact.lua's cb_short): nothing changed
]]
if n == 1 then
  local code = tonumber(ARGV[2])
  local lean = (code == 7 or code == 8) and keyc < 4
  local alg, key, kc = ALG[code], pair_key(code, 1, ARGV[5], lean)
  if lean then kc = 2 end                                   -- its control key is the call's
  local limit, window, burst = tonumber(ARGV[3]), tonumber(ARGV[4]) or ARGV[4], tonumber(ARGV[5])
  local ctl, left, ovr, ov = 0, 0, nil, nil
  if kc <= keyc then ctl, left, ovr = ctl_read(kc, keyc, math.floor(now_us / 1000), pat) end
  if ovr then
    ov, burst, window = ctl_over(ovr, key, limit, burst, window)
    if ov then limit = ov end
  end
  local r = alg.check(key, now_us, limit, window, burst, cost)
  if r.short then return { now_us, CB_RESEND } end
  if spend and ctl == 0 and r.allowed == 1 and cost > 0 then
    alg.commit(key, r, limit, window, burst, cost)
  elseif alg.settle then
    alg.settle(r)
  end
  if ctl == -1 then ctl_block(r, left) elseif ctl == 1 then ctl_allow(r) end
  r.ov = ov
  return { now_us, r.allowed, ctl_allowed(r), r.remaining, r.reset, r.retry, r.tag }
end
