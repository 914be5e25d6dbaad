-- A request's rate limits and its first reservation in one round trip.
-- KEYS[1], KEYS[2]: the requests and tokens limiters; then four per
-- holder. ARGV[1]: now (0: the server's clock); ARGV[2..6]: as
-- `rate_admit` reads them; ARGV[7..]: as `hold` reads them.
-- A seed is asked for before anything counts, so the retry counts once;
-- a budget's refusal leaves the request counted, as one process does.
local now, n = clock(ARGV[1]), (#KEYS - 2) / 4
local missing = unseeded(3, n)
if #missing > 0 then return {1, unpack(missing)} end
local refused = rate_admit(1, 2, now)
if refused then return refused end
return hold(3, 7, n, now)
