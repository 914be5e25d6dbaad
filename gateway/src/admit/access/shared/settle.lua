-- Ends reservations: releases each hold and counts its actual spend.
-- Idempotent per reservation (a marker key), so a batch retried after an
-- unknown outcome counts nothing twice; a hold already swept as expired
-- is not released twice, but its spend still counts.
-- ARGV[1]: settlements; then per settlement: member, cloud (1/0), amount
-- held, actual spend (micro-dollars), holders.
-- KEYS, per settlement: its marker, then per holder: spent-today,
-- spent-this-month, reserved, holds.
local k, a = 1, 2
for _ = 1, tonumber(ARGV[1]) do
  local marker = KEYS[k]
  k = k + 1
  local member, cloud = ARGV[a], ARGV[a+1] == '1'
  local amount, actual, holders = tonumber(ARGV[a+2]), tonumber(ARGV[a+3]), tonumber(ARGV[a+4])
  a = a + 5
  local fresh = redis.call('SET', marker, '1', 'NX', 'PX', 3600000)
  for _ = 1, holders do
    local sd, sm, rv, hd = KEYS[k], KEYS[k+1], KEYS[k+2], KEYS[k+3]
    k = k + 4
    if fresh then
      if redis.call('ZREM', hd, member) == 1 then
        redis.call('HINCRBY', rv, 't', -amount)
        if cloud then redis.call('HINCRBY', rv, 'c', -amount) end
      end
      if actual > 0 then
        -- A period nobody has seeded yet is left to its seed, which reads
        -- the ledger (and this request's row with it).
        for _, key in ipairs({sd, sm}) do
          if redis.call('EXISTS', key) == 1 then
            redis.call('HINCRBY', key, 't', actual)
            if cloud then redis.call('HINCRBY', key, 'c', actual) end
          end
        end
      end
    end
  end
end
return 1
