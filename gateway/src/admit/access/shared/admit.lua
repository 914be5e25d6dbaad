-- A request's rate limits and its first reservation in one round trip.
-- KEYS: 2m rate limiters (see `rate_admit`), then four per holder.
-- ARGV[1]: now (0: the server's clock); ARGV[2..3+4m]: as `rate_admit`
-- reads them (m first); then as `hold` reads them.
-- A seed is asked for before anything counts, so the retry counts once;
-- a budget's refusal leaves the request counted, as one process does.
local now, m = clock(ARGV[1]), tonumber(ARGV[2])
local n = (#KEYS - 2*m) / 4
local missing = unseeded(2*m + 1, n)
if #missing > 0 then return {1, unpack(missing)} end
local refused = rate_admit(1, 2, now)
if refused then return refused end
return hold(2*m + 1, 4 + 4*m, n, now)
