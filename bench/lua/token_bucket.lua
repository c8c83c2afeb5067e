-- Token bucket for Redis, the way teams run rate limiting on Redis today:
-- one atomic script per decision, the server's clock, the bucket in a hash.
-- bench-compare loads it with SCRIPT LOAD and calls it with EVALSHA as the
-- baseline rlserver's RL.ALLOW is measured against, so it keeps the same
-- arguments and reply shape as RL.ALLOW.
--
--   EVALSHA <sha> 1 key capacity rate [cost]
--
-- KEYS[1]  the bucket: a hash with fields tokens (a float, tokens left after
--          the last call) and ts (server time of the last call, in ms with a
--          microsecond fraction)
-- ARGV[1]  capacity: the burst size, in tokens (>= 1)
-- ARGV[2]  rate: tokens added per second (> 0, may be fractional)
-- ARGV[3]  cost: tokens this call takes (>= 0, default 1)
--
-- Reply: {allowed 1/0, whole tokens left, retry_after_ms, reset_after_ms}.
-- retry_after_ms is 0 when allowed, -1 when cost > capacity (can never
-- succeed), else the wait until the same call would succeed; reset_after_ms
-- is the wait until the bucket is full again. A missing key is a full bucket.
--
-- Every call that could succeed rewrites the hash and sets its PEXPIRE to
-- the time the bucket needs to refill completely, so an idle key disappears
-- once it is indistinguishable from a missing one. TIME is allowed before
-- the writes because Redis (5 and later) replicates a script by its effects.

local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')
if capacity == nil or rate == nil or cost == nil or capacity < 1 or rate <= 0 or cost < 0 then
  return redis.error_reply('ERR capacity, rate or cost out of range')
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000

local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local last = tonumber(state[2])
if tokens == nil or last == nil then
  tokens = capacity
  last = now
end

-- Refill for the time elapsed; a clock that stepped back adds nothing and
-- keeps the later timestamp.
if now > last then
  tokens = math.min(capacity, tokens + (now - last) * rate / 1000)
  last = now
end

-- A cost above capacity can never succeed: answer without writing.
if cost > capacity then
  return {0, math.floor(tokens), -1, math.ceil((capacity - tokens) * 1000 / rate)}
end

local allowed = 0
local retry_ms = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  retry_ms = math.ceil((cost - tokens) * 1000 / rate)
end

-- PEXPIRE needs at least 1 ms: a full bucket lives 1 ms more than needed.
local reset_ms = math.ceil((capacity - tokens) * 1000 / rate)
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', last)
redis.call('PEXPIRE', KEYS[1], math.max(reset_ms, 1))

return {allowed, math.floor(tokens), retry_ms, reset_ms}
