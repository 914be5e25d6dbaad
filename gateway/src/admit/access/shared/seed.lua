-- Starts a period's spend from the ledger, unless another replica did
-- first (HSETNX): a late seed never overwrites spend counted since.
-- KEYS, per holder: spent-today, spent-this-month.
-- ARGV, per holder: today's cloud and total spend, this month's cloud and
-- total spend (micro-dollars).
for i = 0, #KEYS / 2 - 1 do
  local day, month = KEYS[2*i+1], KEYS[2*i+2]
  redis.call('HSETNX', day, 'c', ARGV[4*i+1])
  redis.call('HSETNX', day, 't', ARGV[4*i+2])
  redis.call('PEXPIRE', day, 259200000)
  redis.call('HSETNX', month, 'c', ARGV[4*i+3])
  redis.call('HSETNX', month, 't', ARGV[4*i+4])
  redis.call('PEXPIRE', month, 3456000000)
end
return 1
