-- The token bucket teams run on Redis today, as the articles in
-- ../shared/background describe it (distributed-rate-limiting-rust: "Atomic
-- token bucket in Lua"): the bucket is a hash {tokens, ts}, the caller
-- passes its own clock, and the key expires once the bucket would be full
-- again. kvcompare -scripts loads it with SCRIPT LOAD on both servers and
-- calls it by EVALSHA, unchanged.
--
--   EVALSHA <sha> 1 key capacity rate now_ms cost
--
-- Reply: {allowed 1/0, whole tokens left, retry_ms (0 when allowed)}.
local key      = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate     = tonumber(ARGV[2])   -- tokens per second
local now_ms   = tonumber(ARGV[3])
local cost     = tonumber(ARGV[4])

local data   = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(data[1])
local ts     = tonumber(data[2])
if tokens == nil then
  tokens = capacity
  ts = now_ms
end

local elapsed = math.max(0, now_ms - ts) / 1000.0
tokens = math.min(capacity, tokens + elapsed * rate)

local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end

redis.call('HSET', key, 'tokens', tokens, 'ts', now_ms)
redis.call('PEXPIRE', key, math.ceil(capacity / rate * 1000) + 1000)

local retry_ms = 0
if allowed == 0 then
  retry_ms = math.ceil((cost - tokens) / rate * 1000)
end
return { allowed, math.floor(tokens), retry_ms }
