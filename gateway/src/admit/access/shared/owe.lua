-- Rate limiters moved on without a check, in a batch: tokens requests
-- used beyond their estimates (`debt`: the tokens limiters only), and
-- requests that ended before their check was sent (`count`: one request
-- and its tokens). ARGV[1]: entries; then per entry: mode, m, per pair
-- requests t, requests burst, tokens t, tokens burst, then the tokens.
-- KEYS: per entry, 2m limiters (requests, tokens for each pair).
local now = clock(0)
local k, a = 1, 2
for _ = 1, tonumber(ARGV[1]) do
  local mode, m = ARGV[a], tonumber(ARGV[a+1])
  local tokens = tonumber(ARGV[a + 2 + 4*m])
  for i = 0, m - 1 do
    local rpm_t, tpm_t = tonumber(ARGV[a + 2 + 4*i]), tonumber(ARGV[a + 4 + 4*i])
    if mode == 'count' and rpm_t > 0 then owe(KEYS[k + 2*i], rpm_t, 1, now) end
    if tpm_t > 0 and tokens > 0 then owe(KEYS[k + 2*i + 1], tpm_t, tokens, now) end
  end
  k = k + 2*m
  a = a + 3 + 4*m
end
return 1
