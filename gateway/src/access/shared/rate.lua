-- Requests and tokens per minute for one key, as governor's GCRA counts
-- them in one process, shared by every replica: a limiter's state is its
-- theoretical arrival time (TAT, us), t the time one unit earns, and a
-- burst of a minute's allowance.
-- KEYS: the requests limiter, the tokens limiter.
-- ARGV: now (us; 0: the server's clock), requests t (0: no limit),
--       requests burst, tokens t (0: no limit), tokens burst, tokens,
--       mode: `admit` (a request arrives) or `debt` (tokens used beyond
--       the estimate, counted in full: the TAT moves on past the burst).
-- Returns {1} when admitted; {0, which (1 requests, 2 tokens), wait us,
-- owed (1 when earlier overruns fill the minute)}; {-1, 2} when the
-- tokens alone exceed the minute.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function put(key, tat)
  local ttl = math.ceil((tat - now) / 1000) + 1000
  redis.call('SET', key, string.format('%d', tat), 'PX', string.format('%d', ttl))
end
local tokens = tonumber(ARGV[6])
if ARGV[7] == 'debt' then
  local t = tonumber(ARGV[4])
  local tat = tonumber(redis.call('GET', KEYS[2]) or now)
  put(KEYS[2], math.ceil(math.max(tat, now) + tokens * t))
  return {1}
end
local function gcra(which, key, t, burst, n)
  local tat = tonumber(redis.call('GET', key) or now)
  local tau = t * (burst - 1)
  local extra = t * (n - 1)
  if extra > tau then return {-1, which} end
  local earliest = tat + extra - tau
  if now < earliest then
    local owed = 0
    if tat - now > tau + t then owed = 1 end
    return {0, which, math.ceil(earliest - now), owed}
  end
  put(key, math.ceil(math.max(tat, now) + n * t))
  return nil
end
local rpm_t, tpm_t = tonumber(ARGV[2]), tonumber(ARGV[4])
if rpm_t > 0 then
  local refused = gcra(1, KEYS[1], rpm_t, tonumber(ARGV[3]), 1)
  if refused then return refused end
end
if tpm_t > 0 and tokens > 0 then
  local refused = gcra(2, KEYS[2], tpm_t, tonumber(ARGV[5]), tokens)
  if refused then return refused end
end
return {1}
