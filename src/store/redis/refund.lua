-- tollgate: give back what acquire.lua charged for a request that was not admitted after all
-- (a limit in another slot denied it, or another slot failed), or a queue place whose client
-- left before its turn, wherever no later request has built on the charge.
--
-- KEYS[i]  the state key of check i
-- ARGV[1]  now in base units, or "" to read Redis's clock
-- ARGV[1 + 7*(i-1) + k], k = 1..7: algorithm, ticks per base unit, limit, period, burst,
--          cost, mark (where acquire.lua filed the charge: its reply's mark)
-- Returns  how many charges were given back.

-- Each algorithm: (fields, now, q) -> the fields without the charge, or nil to leave them
-- (the charge is gone already, or later requests were scheduled after it).

local function token_bucket(s, now, q)
  return { s[1], math.min(q.burst, s[2] + q.cost) }
end

-- GCRA and leaky bucket: the charge moved the theoretical arrival time to `mark`. Only the
-- newest booking can be taken back: moving the time back under a later one would let two
-- requests share one emission interval.
local function schedule(s, now, q)
  if q.limit == 0 or s[1] ~= q.mark then return nil end
  return { math.max(now, q.mark - q.cost * cdiv(q.period, q.limit)) }
end

local function fixed_window(s, now, q)
  if s[1] ~= q.mark then return nil end
  return { s[1], math.max(0, s[2] - q.cost) }
end

local function sliding_window_counter(s, now, q)
  if s[1] == q.mark then return { s[1], math.max(0, s[2] - q.cost), s[3] } end
  if s[1] == q.mark + 1 then return { s[1], s[2], math.max(0, s[3] - q.cost) } end
  return nil
end

local function sliding_window_log(s, now, q)
  -- s = { total, t1, c1, t2, c2, ... }: take the cost off the entry filed at `mark`.
  for i = 2, #s, 2 do
    if s[i] == q.mark then
      local fields = { math.max(0, s[1] - q.cost) }
      for j = 2, #s, 2 do
        local count = s[j + 1]
        if j == i then count = count - q.cost end
        if count > 0 then
          fields[#fields + 1] = s[j]
          fields[#fields + 1] = count
        end
      end
      return fields
    end
  end
  return nil
end

local refunds = { token_bucket, schedule, fixed_window, sliding_window_log, sliding_window_counter, schedule }

local now_base = now_in_base_units()
local given = 0
for i = 1, #KEYS do
  local a = 1 + 7 * (i - 1)
  local q = {
    algorithm = tonumber(ARGV[a + 1]), div = tonumber(ARGV[a + 2]), limit = tonumber(ARGV[a + 3]),
    period = tonumber(ARGV[a + 4]), burst = tonumber(ARGV[a + 5]), cost = tonumber(ARGV[a + 6]),
    mark = tonumber(ARGV[a + 7]),
  }
  local now = idiv(now_base, q.div)
  local fields = state(redis.pcall('GET', KEYS[i]), state_fields[q.algorithm])
  if #fields > 0 then
    local refunded = refunds[q.algorithm](fields, now, q)
    if refunded then
      -- A schedule back at now is "never seen".
      if #refunded == 1 and refunded[1] <= now then
        redis.call('DEL', KEYS[i])
      else
        redis.call('SET', KEYS[i], joined(refunded), 'KEEPTTL')
      end
      given = given + 1
    end
  end
end
return given
