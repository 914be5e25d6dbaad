-- Holds `amount` micro-dollars on every budget a request falls under, or
-- says which budget cannot cover it. Atomic across replicas: one script.
-- KEYS, per holder: spent-today, spent-this-month, reserved, holds.
-- ARGV: member (rid|cloud|amount), cloud (1/0), amount, hold ttl (us),
--       now (us; 0: the server's clock), then per holder: the field its
--       scope counts (c: cloud, t: total), daily cap, monthly cap (-1: none).
-- Returns {0} when held; {1, i...} when holders i (0-based) have no spend
-- yet this period (the caller seeds them from the ledger and retries);
-- {2, i, period (1 daily, 2 monthly), cap, committed} when refused.
local now = tonumber(ARGV[5])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local amount, cloud, n = tonumber(ARGV[3]), ARGV[2] == '1', #KEYS / 4
local unseeded = {}
for i = 0, n - 1 do
  if redis.call('EXISTS', KEYS[4*i+1]) == 0 or redis.call('EXISTS', KEYS[4*i+2]) == 0 then
    unseeded[#unseeded + 1] = i
  end
end
if #unseeded > 0 then
  return {1, unpack(unseeded)}
end
for i = 0, n - 1 do
  local rv, hd = KEYS[4*i+3], KEYS[4*i+4]
  -- Holds whose replica stopped renewing them (it died) are released.
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', hd, '-inf', string.format('%d', now), 'LIMIT', 0, 256)) do
    local c, a = string.match(m, '|(%d)|(%d+)$')
    redis.call('HINCRBY', rv, 't', -tonumber(a))
    if c == '1' then redis.call('HINCRBY', rv, 'c', -tonumber(a)) end
    redis.call('ZREM', hd, m)
  end
  local field = ARGV[6 + 3*i]
  local held = tonumber(redis.call('HGET', rv, field) or '0')
  for p = 1, 2 do
    local cap = tonumber(ARGV[6 + 3*i + p])
    local spent = tonumber(redis.call('HGET', KEYS[4*i+p], field) or '0')
    if cap >= 0 and spent + held + amount > cap then
      return {2, i, p, cap, spent + held}
    end
  end
end
local expiry = string.format('%d', now + tonumber(ARGV[4]))
for i = 0, n - 1 do
  redis.call('ZADD', KEYS[4*i+4], expiry, ARGV[1])
  redis.call('HINCRBY', KEYS[4*i+3], 't', amount)
  if cloud then redis.call('HINCRBY', KEYS[4*i+3], 'c', amount) end
end
return {0}
