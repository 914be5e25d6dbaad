-- Pushes back the expiry of holds whose requests are still running.
-- ARGV[1]: the hold ttl (us); KEYS[i] is a holder's holds, ARGV[i+1] the
-- member to renew there. XX: a hold already settled or swept stays gone.
local t = redis.call('TIME')
local expiry = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[1]))
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', 'GT', expiry, ARGV[i+1])
end
return #KEYS
