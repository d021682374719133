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

