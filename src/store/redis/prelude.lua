-- tollgate: what both scripts start with; src/store/redis/mod.rs joins it in front of each.

-- Lua numbers are doubles: divide exactly (every value stays below 2^53).
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function cdiv(a, b)
  local q = idiv(a, b)
  if q * b < a then q = q + 1 end
  return q
end

-- Now in base units: ARGV[1], or Redis's clock (TIME, in microseconds) when it is "".
local function now_in_base_units()
  if ARGV[1] ~= '' then return tonumber(ARGV[1]) end
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end


-- A number as Redis takes it: digits, never an exponent.
local function num(s) return string.format('%.0f', s) end

-- The PX of a key whose state is worth keeping `ticks` more ticks, `per_ms` ticks a
-- millisecond (or, negated, milliseconds a tick): rounded up, and one more.
local function px(ticks, per_ms)
  local ms
  if per_ms > 0 then ms = cdiv(ticks, per_ms) else ms = ticks * -per_ms end
  -- A test clock's time does not pass with Redis's: keep its keys an hour at least.
  if ARGV[1] ~= '' then ms = math.max(ms, 3600000) end
  return num(ms + 1)
end
