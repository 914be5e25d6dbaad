-- A request's rate check alone (no budget to reserve). KEYS: 2m limiters
-- (see `rate_admit`). ARGV[1]: now (0: the server's clock); ARGV[2..]: as
-- `rate_admit` reads them.
return rate_admit(1, 2, clock(ARGV[1])) or {0}
