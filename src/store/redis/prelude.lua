-- tollgate: what every script starts with; src/store/redis/mod.rs joins it in front of each.

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

-- The stored state of an algorithm whose state has `fields` numbers (0: any odd count, the
-- sliding window log). Anything else (a key of another type or algorithm, an old format,
-- garbage) counts as never seen, as in the memory store.
local function state(value, fields)
  local parts = {}
  if type(value) ~= 'string' then return parts end
  for part in string.gmatch(value, '%S+') do
    local n = tonumber(part)
    if not n or n ~= n or n == math.huge or n == -math.huge or n ~= math.floor(n) then return {} end
    parts[#parts + 1] = n
  end
  if (fields > 0 and #parts ~= fields) or (fields == 0 and #parts % 2 ~= 1) then return {} end
  return parts
end

-- How many numbers each algorithm's state has, by algorithm code: token bucket, leaky
-- bucket, fixed window, sliding window log, sliding window counter, GCRA.
local state_fields = { 2, 1, 2, 0, 3, 1 }

-- A state's numbers as Redis keeps them.
local function joined(fields)
  local parts = {}
  for k, v in ipairs(fields) do parts[k] = num(v) end
  return table.concat(parts, ' ')
end
