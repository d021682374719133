-- tollgate: give back the queue place of a request that left before its turn, if it is
-- still the newest booking of the leaky bucket (see src/algorithm/leaky_bucket.rs).
--
-- KEYS[1]  the leaky bucket's state key
-- ARGV     now in base units ("" to read TIME), ticks per base unit, limit, period, cost,
--          booked_until (ticks), ticks per ms (or ms per tick, negated)

local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local now_base
if ARGV[1] == '' then
  local time = redis.call('TIME')
  now_base = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now_base = tonumber(ARGV[1])
end
local div, limit, period = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local cost, booked, per_ms = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = idiv(now_base, div)
local stored = redis.pcall('GET', KEYS[1])
local drained = type(stored) == 'string' and tonumber(stored) or nil
if limit == 0 or drained ~= booked then return 0 end
local interval = idiv(period, limit)
if interval * limit < period then interval = interval + 1 end
local after = math.max(now, booked - cost * interval)
local ahead = after - now
if ahead <= 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
local px
if per_ms > 0 then px = idiv(ahead, per_ms) + 1 else px = ahead * -per_ms end
if ARGV[1] ~= '' then px = math.max(px, 3600000) end
redis.call('SET', KEYS[1], string.format('%.0f', after), 'PX', string.format('%.0f', px + 1))
return 1
