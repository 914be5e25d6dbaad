-- Rate limits alone. KEYS[1], KEYS[2]: the requests and tokens limiters.
-- ARGV[1]: now (0: the server's clock); ARGV[2]: `admit` (check and
-- count), `count` (count without a check: a request that ended before
-- its check) or `debt` (tokens used beyond the estimate);
-- ARGV[3..7]: as `rate_admit` reads them.
local now, mode = clock(ARGV[1]), ARGV[2]
if mode == 'admit' then
  return rate_admit(1, 3, now) or {0}
end
local rpm_t, tpm_t, tokens = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[7])
if mode == 'count' and rpm_t > 0 then owe(KEYS[1], rpm_t, 1, now) end
if tpm_t > 0 and tokens > 0 then owe(KEYS[2], tpm_t, tokens, now) end
return {0}
