-- tollgate: give back the queue place of a request that left before its turn, if it is
-- still the newest booking of the leaky bucket (see src/algorithm/leaky_bucket.rs).
--
-- KEYS[1]  the leaky bucket's state key
-- ARGV     now in base units ("" to read TIME), ticks per base unit, limit, period, cost,
--          booked_until (ticks), ticks per ms (or ms per tick, negated)

local now_base = now_in_base_units()
local div, limit, period = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local cost, booked, per_ms = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = idiv(now_base, div)
local stored = redis.pcall('GET', KEYS[1])
local drained = type(stored) == 'string' and tonumber(stored) or nil
if limit == 0 or drained ~= booked then return 0 end
local interval = cdiv(period, limit)
local after = math.max(now, booked - cost * interval)
local ahead = after - now
if ahead <= 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('SET', KEYS[1], num(after), 'PX', px(ahead, per_ms))
return 1
