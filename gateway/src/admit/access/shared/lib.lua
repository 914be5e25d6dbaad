-- Shared by every script (prepended to each): the clock, governor's GCRA
-- for requests and tokens per minute, and budget holds in integer
-- micro-dollars. Replies: {0} done; {1, i...} holders i (0-based) have no
-- spend yet this period (seed them from the ledger and retry); {2, i,
-- period (1 daily, 2 monthly), cap, committed} a budget cannot cover the
-- request; {3, which (1 requests, 2 tokens), wait us, owed, pair} a rate
-- limit refuses; {4, which, pair} the tokens alone exceed a minute's
-- allowance.

-- Microseconds: `given`, or the server's clock when it is 0.
local function clock(given)
  local now = tonumber(given)
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now
end

-- Large numbers as integers: Lua's tostring would write 1.8e+15.
local function int(x)
  return string.format('%d', x)
end

-- A limiter's state is its theoretical arrival time (TAT, us); it expires
-- once it is in the past, when it means no more than a fresh limiter.
local function put_tat(key, tat, now)
  redis.call('SET', key, int(tat), 'PX', int(math.ceil((tat - now) / 1000) + 1000))
end

-- Counts `n` units (t us each) against a limiter with a burst of `burst`,
-- as governor's check_n does; nil when admitted, else the refusal.
local function gcra(which, key, t, burst, n, now)
  local tat = tonumber(redis.call('GET', key) or now)
  local tau = t * (burst - 1)
  local extra = t * (n - 1)
  if extra > tau then return {4, which} end
  local earliest = tat + extra - tau
  if now < earliest then
    local owed = 0
    if tat - now > tau + t then owed = 1 end
    return {3, which, math.ceil(earliest - now), owed}
  end
  put_tat(key, math.ceil(math.max(tat, now) + n * t), now)
  return nil
end

-- Moves a limiter on by `n` units without a check: tokens used beyond the
-- estimate, and requests that ended before their check could be fused
-- with a reservation.
local function owe(key, t, n, now)
  local tat = tonumber(redis.call('GET', key) or now)
  put_tat(key, math.ceil(math.max(tat, now) + n * t), now)
end

-- One request and its tokens against m limiter pairs (the key's, then
-- its team's). KEYS[k+2i], KEYS[k+2i+1]: pair i's requests and tokens
-- limiters. ARGV[a]: m; then per pair: requests t (0: no limit), requests
-- burst, tokens t (0: no limit), tokens burst; then the tokens. Requests
-- are counted before tokens, as one process counts them (a request as it
-- arrives, its tokens once estimated).
local function rate_admit(k, a, now)
  local m = tonumber(ARGV[a])
  local tokens = tonumber(ARGV[a + 1 + 4*m])
  -- which = 1: one request against each requests limiter; 2: the tokens
  -- against each tokens limiter.
  for which = 1, 2 do
    local n = tokens
    if which == 1 then n = 1 end
    for i = 0, m - 1 do
      local t = tonumber(ARGV[a + 2*which - 1 + 4*i])
      if t > 0 and n > 0 then
        local burst = tonumber(ARGV[a + 2*which + 4*i])
        local refused = gcra(which, KEYS[k + 2*i + which - 1], t, burst, n, now)
        if refused then
          refused[#refused + 1] = i
          return refused
        end
      end
    end
  end
  return nil
end

-- Holders (from KEYS[k], four keys each: spent today, spent this month,
-- reserved, holds) whose period has not been started from the ledger.
local function unseeded(k, n)
  local missing = {}
  for i = 0, n - 1 do
    if redis.call('EXISTS', KEYS[k+4*i]) == 0 or redis.call('EXISTS', KEYS[k+4*i+1]) == 0 then
      missing[#missing + 1] = i
    end
  end
  return missing
end

-- Holds ARGV[a+2] micro-dollars on every holder, or refuses. ARGV[a..]:
-- member (rid|cloud|amount), cloud (1/0), amount, hold ttl (us), then per
-- holder: the field its scope counts (c: cloud, t: total), daily cap,
-- monthly cap (-1: none).
local function hold(k, a, n, now)
  local amount, cloud = tonumber(ARGV[a+2]), ARGV[a+1] == '1'
  for i = 0, n - 1 do
    local rv, hd = KEYS[k+4*i+2], KEYS[k+4*i+3]
    -- Holds whose replica stopped renewing them (it died) are released.
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', hd, '-inf', int(now), 'LIMIT', 0, 256)) do
      local c, held = string.match(m, '|(%d)|(%d+)$')
      redis.call('HINCRBY', rv, 't', -tonumber(held))
      if c == '1' then redis.call('HINCRBY', rv, 'c', -tonumber(held)) end
      redis.call('ZREM', hd, m)
    end
    local field = ARGV[a+4+3*i]
    local held = tonumber(redis.call('HGET', rv, field) or '0')
    for p = 1, 2 do
      local cap = tonumber(ARGV[a+4+3*i+p])
      local spent = tonumber(redis.call('HGET', KEYS[k+4*i+p-1], field) or '0')
      if cap >= 0 and spent + held + amount > cap then
        return {2, i, p, cap, spent + held}
      end
    end
  end
  local expiry = int(now + tonumber(ARGV[a+3]))
  for i = 0, n - 1 do
    redis.call('ZADD', KEYS[k+4*i+3], expiry, ARGV[a])
    redis.call('HINCRBY', KEYS[k+4*i+2], 't', amount)
    if cloud then redis.call('HINCRBY', KEYS[k+4*i+2], 'c', amount) end
  end
  return {0}
end
