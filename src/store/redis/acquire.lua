-- tollgate: decide every limit of one request, all or nothing, atomically.
--
-- The same arithmetic as src/algorithm/*.rs, in integer ticks. Lua numbers are doubles:
-- the Rust side picks each limit's tick so that every value stays below 2^53, and the
-- helpers of prelude.lua divide exactly.
--
-- KEYS     per check, in order: its state key, then the n keys it is carried from
-- ARGV[1]  now in base units, or "" to read Redis's clock (TIME, in microseconds)
-- ARGV     then per check, in order: 12 numbers: algorithm, ticks per base unit, limit,
--          period, burst, queue, max_delay (-1: none), shaping (1/0), cost, flags (1: shadow,
--          + 2: only checked, never charged), ticks per ms (0 when a tick is longer than a
--          millisecond: then ARGV is ms per tick, negated), n; then, for each key it is
--          carried from, 8: algorithm, ticks per base unit, limit, period, burst, queue,
--          max_delay, shaping (the limit a reload replaced, see src/algorithm/carry.rs)
-- Returns  { now (base units), then per check: allowed, limit, remaining, reset_after,
--          retry_after, delay, booked_until (-1: none), mark } with durations in the check's
--          ticks; mark says where the charge was filed, for refund.lua (a window, the time of
--          a log entry, the new theoretical arrival time; 0 for a token bucket).

local function decision(allowed, limit, remaining, reset, retry, delay, booked, mark)
  return { allowed and 1 or 0, limit, remaining, reset, retry, delay or 0, booked or -1, mark or 0 }
end

-- Each algorithm: (fields, now, q, cost) -> decision, new fields (kept when admitted).

local function token_bucket(s, now, q, cost)
  local limit, period = q.limit, q.period
  if limit == 0 then return decision(false, 0, 0, 0, period), s end
  local burst = q.burst
  local anchor, level = s[1] or now, s[2] or burst
  local elapsed = math.max(0, now - anchor)
  local periods = idiv(elapsed, period)
  local tokens
  if level + periods * limit >= burst then
    tokens = burst
  else
    tokens = level + periods * limit + idiv((elapsed - periods * period) * limit, period)
  end
  if tokens >= burst then
    anchor, level, tokens = now, burst, burst
  elseif periods > 0 then
    anchor, level = anchor + periods * period, level + periods * limit
  end
  local function time_until(wanted)
    local missing = wanted - level
    if missing <= 0 then return 0 end
    return math.max(0, anchor + cdiv(missing * period, limit) - now)
  end
  local allowed = cost <= tokens
  local retry = 0
  if not allowed then
    if cost > burst then retry = period else retry = time_until(cost) end
  else
    level, tokens = level - cost, tokens - cost
  end
  return decision(allowed, burst, math.max(tokens, 0), time_until(burst), retry), { anchor, level }
end

local function schedule(s, now, q, cost, slots, max_delay, shaping)
  local limit, period = q.limit, q.period
  if limit == 0 then return decision(false, 0, 0, 0, period), s end
  local interval = cdiv(period, limit)
  local tat = s[1] or now
  local start = math.max(now, tat)
  local booked = start + cost * interval
  local horizon = slots * interval
  local delay = start - now
  local within = max_delay < 0 or delay <= max_delay
  local allowed = booked - now <= horizon and within
  local after = allowed and booked or start
  local ahead = after - now
  local retry = 0
  if not allowed then
    if cost > slots then
      retry = period
    else
      local fits_at = math.max(0, booked - horizon)
      local waits_at = 0
      if max_delay >= 0 then waits_at = math.max(0, start - max_delay) end
      retry = math.max(0, math.max(fits_at, waits_at) - now)
    end
  end
  local max_limit, remaining = slots, idiv(math.max(0, horizon - ahead), interval)
  if max_delay >= 0 then
    local function within_wait(wait)
      if wait <= max_delay then return idiv(max_delay - wait, interval) + 1 end
      return 0
    end
    max_limit = math.min(max_limit, within_wait(0))
    remaining = math.min(remaining, within_wait(ahead))
  end
  local wait, booked_at = 0, -1
  if allowed and shaping then
    wait = delay
    if delay > 0 then booked_at = booked end
  end
  return decision(allowed, max_limit, remaining, ahead, retry, wait, booked_at, after), { after }
end

local function gcra(s, now, q, cost)
  return schedule(s, now, q, cost, q.burst, -1, false)
end

local function leaky_bucket(s, now, q, cost)
  local max_delay = q.shaping and q.max_delay or -1
  return schedule(s, now, q, cost, q.queue + 1, max_delay, q.shaping)
end

local function fixed_window(s, now, q, cost)
  local limit, period = q.limit, q.period
  local window = math.max(idiv(now, period), s[1] or 0)
  local count = 0
  if s[1] == window then count = s[2] end
  local until_next = math.max(0, (window + 1) * period - now)
  local allowed = count + cost <= limit
  if allowed then count = count + cost end
  local retry = 0
  if not allowed then
    if cost > limit then retry = period else retry = until_next end
  end
  local reset = 0
  if count > 0 then reset = until_next end
  return decision(allowed, limit, math.max(0, limit - count), reset, retry, 0, -1, window), { window, count }
end

local function sliding_window_counter(s, now, q, cost)
  local limit, period = q.limit, q.period
  local at = now
  if s[1] and s[1] > idiv(now, period) then at = s[1] * period end
  local window = idiv(at, period)
  local current, previous = 0, 0
  if s[1] == window then
    current, previous = s[2], s[3]
  elseif s[1] and s[1] + 1 == window then
    previous = s[2]
  end
  local start = window * period
  local elapsed = at - start
  local used = previous * (period - elapsed) + current * period
  local capacity = limit * period
  local allowed = used + cost * period <= capacity
  if allowed then
    current = current + cost
    used = used + cost * period
  end
  local retry = 0
  if not allowed then
    if cost > limit then
      retry = period
    else
      local retry_at
      if current + cost <= limit then
        local room = limit - current - cost
        retry_at = start + period - math.min(idiv(room * period, previous), period)
      else
        local room = limit - cost
        retry_at = start + 2 * period - math.min(idiv(room * period, current), period)
      end
      retry = math.max(0, retry_at - now)
    end
  end
  local reset_at = at
  if current > 0 then reset_at = start + 2 * period elseif previous > 0 then reset_at = start + period end
  local remaining = idiv(math.max(0, capacity - used), period)
  return decision(allowed, limit, remaining, math.max(0, reset_at - now), retry, 0, -1, window), { window, current, previous }
end

local function sliding_window_log(s, now, q, cost)
  local limit, period = q.limit, q.period
  -- s = { total, t1, c1, t2, c2, ... }, oldest first; drop what has left the window.
  local total = s[1] or 0
  local entries = {}
  for i = 2, #s, 2 do
    if s[i] + period > now then
      entries[#entries + 1] = { s[i], s[i + 1] }
    else
      total = total - s[i + 1]
    end
  end
  local newest = entries[#entries]
  local filed_at = now
  if newest and newest[1] > now then filed_at = newest[1] end
  local allowed = total + cost <= limit
  local retry = 0
  if not allowed then
    if cost > limit then
      retry = period
    else
      local still = total
      for _, entry in ipairs(entries) do
        still = still - entry[2]
        if still + cost <= limit then
          retry = math.max(0, entry[1] + period - now)
          break
        end
      end
    end
  end
  local used = total
  if allowed and cost > 0 then
    used = total + cost
    if newest and newest[1] == filed_at then
      newest[2] = newest[2] + cost
    else
      entries[#entries + 1] = { filed_at, cost }
    end
  end
  local reset = 0
  local last = entries[#entries]
  if last then reset = math.max(0, last[1] + period - now) end
  local fields = { used }
  for _, entry in ipairs(entries) do
    fields[#fields + 1] = entry[1]
    fields[#fields + 1] = entry[2]
  end
  return decision(allowed, limit, math.max(0, limit - used), reset, retry, 0, -1, filed_at), fields
end

local algorithms = { token_bucket, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter, gcra }

local now_base = now_in_base_units()

-- The most requests a limit admits at once (src/algorithm/mod.rs, capacity).
local function capacity(q)
  if q.algorithm == 1 or q.algorithm == 6 then return q.burst end
  if q.algorithm == 2 then return q.queue + 1 end
  return q.limit
end

-- The state of check q carried from `fields`, a key's state under the limit c that a reload
-- replaced (src/algorithm/carry.rs): as it is where it means the same (a log's entries, in
-- q's ticks; a window's counts under the same algorithm and period), a token bucket's tokens
-- into a token bucket, else the requests it had used, charged to a fresh state.
local function carried(q, c, fields)
  if c.algorithm == q.algorithm and q.algorithm == 4 then
    local entries = { fields[1] }
    for i = 2, #fields, 2 do
      entries[i], entries[i + 1] = cdiv(fields[i] * c.div, q.div), fields[i + 1]
    end
    return entries
  end
  local same_period = c.period * c.div == q.period * q.div
  if c.algorithm == q.algorithm and same_period and (q.algorithm == 3 or q.algorithm == 5) then
    return fields
  end
  local as_it_stands = algorithms[c.algorithm](fields, idiv(now_base, c.div), c, 0)
  local used = as_it_stands[2] - as_it_stands[3]
  if c.algorithm == 1 and q.algorithm == 1 then used = capacity(q) - as_it_stands[3] end
  local _, state = algorithms[q.algorithm]({}, q.now, q, math.max(0, math.min(used, capacity(q))))
  return state
end

local function quota(a)
  return {
    algorithm = tonumber(ARGV[a + 1]), div = tonumber(ARGV[a + 2]), limit = tonumber(ARGV[a + 3]),
    period = tonumber(ARGV[a + 4]), burst = tonumber(ARGV[a + 5]), queue = tonumber(ARGV[a + 6]),
    max_delay = tonumber(ARGV[a + 7]), shaping = ARGV[a + 8] == '1',
  }
end

local checks = {}
local a, k = 1, 1
while k <= #KEYS do
  local q = quota(a)
  q.cost, q.flags, q.per_ms = tonumber(ARGV[a + 9]), tonumber(ARGV[a + 10]), tonumber(ARGV[a + 11])
  q.key, q.shadow, q.check_only = KEYS[k], q.flags % 2 == 1, q.flags >= 2
  q.now = idiv(now_base, q.div)
  -- pcall: a key of another type reads as never seen (and is overwritten when charged).
  local kept = redis.pcall('GET', q.key)
  q.fields = state(kept, state_fields[q.algorithm])
  local n = tonumber(ARGV[a + 12])
  a, k = a + 12, k + 1
  for _ = 1, n do
    if type(kept) ~= 'string' and not q.carried_from then
      local c = quota(a)
      local fields = state(redis.pcall('GET', KEYS[k]), state_fields[c.algorithm])
      if #fields > 0 then q.fields, q.carried_from = carried(q, c, fields), KEYS[k] end
    end
    a, k = a + 8, k + 1
  end
  q.decision, q.next = algorithms[q.algorithm](q.fields, q.now, q, q.cost)
  if q.check_only and q.decision[1] == 1 then
    -- Nothing is charged: what remains, and when the limit is full again, as they stand.
    local as_it_stands = algorithms[q.algorithm](q.fields, q.now, q, 0)
    q.decision[3], q.decision[4], q.decision[7] = as_it_stands[3], as_it_stands[4], -1
  end
  checks[#checks + 1] = q
end

local admitted = true
for _, q in ipairs(checks) do
  if q.decision[1] == 0 and not q.shadow then admitted = false end
end

local reply = { now_base }
for _, q in ipairs(checks) do
  if admitted and q.decision[1] == 1 and not q.check_only then
    redis.call('SET', q.key, joined(q.next), 'PX', px(q.decision[4], q.per_ms))
  elseif q.carried_from then
    -- Carried, not charged: the state moves to its new key all the same.
    local reset = algorithms[q.algorithm](q.fields, q.now, q, 0)[4]
    if reset > 0 then redis.call('SET', q.key, joined(q.fields), 'PX', px(reset, q.per_ms)) end
  end
  if q.carried_from then redis.call('DEL', q.carried_from) end
  for _, v in ipairs(q.decision) do reply[#reply + 1] = v end
end
return reply
