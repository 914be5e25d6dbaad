-- A reservation alone. KEYS: four per holder. ARGV[1]: now (0: the
-- server's clock); ARGV[2..]: as `hold` reads them.
local now, n = clock(ARGV[1]), #KEYS / 4
local missing = unseeded(1, n)
if #missing > 0 then return {1, unpack(missing)} end
return hold(1, 2, n, now)
