-- tollgate: the Redis side of the store, one library of functions (`FUNCTION LOAD`, Redis 7)
-- or, on a Redis without functions, scripts of the same text (see src/store/redis/program.rs).
--
-- Everything at the top level is defined once, when the library is loaded; a call runs only
-- its function. (A library's top level sees no globals but `redis.register_function`: the
-- functions reach `math`, `string` and `redis` when they run.) The arithmetic is src/algorithm/*.rs's, in integer ticks: Lua numbers are
-- doubles, and the Rust side picks each limit's tick so that every value stays below 2^53;
-- `idiv` and `cdiv` divide exactly.

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

-- Redis's clock: TIME, in microseconds.
local function clock()
  local time = redis.call('TIME')
  return time[1] * 1000000 + time[2]
end

-- Now in base units: `given`, or Redis's clock when it is "": `time` when a batch read it
-- already (see `acquire_batch`).
local function now_in_base_units(given, time)
  if given ~= '' then return tonumber(given) end
  return time or clock()
end

-- Now in ticks of the base unit and ticks per ms, for one of the functions that decide one
-- limit: its arguments from args[a] are now ("" for Redis's clock: `time` when a batch read
-- it already), `count` numbers, then, with a given now, ticks per ms.
local function now_and_per_ms(args, a, time, count)
  if args[a] == '' then return time or clock(), 1000 end
  return tonumber(args[a]), tonumber(args[a + count + 1])
end

-- An integer read from Redis, or nil for anything else (garbage, an old format, a float).
local function int(text)
  local n = tonumber(text)
  if n and n == math.floor(n) and n - n == 0 then return n end
  return nil
end

-- A number as the digits a command takes. (Redis writes a number given to `redis.call` with
-- "%.17g", which costs it more than the command itself.)
local function digits(n) return string.format('%d', n) end

-- The PX of a key whose state is worth keeping `ticks` more ticks, `per_ms` ticks a
-- millisecond (or, negated, milliseconds a tick): rounded up, and one more. A test clock's
-- time does not pass with Redis's: its keys are kept an hour at least.
local function px(ticks, per_ms, test_clock)
  local ms
  if per_ms > 0 then ms = cdiv(ticks, per_ms) else ms = ticks * -per_ms end
  if test_clock then ms = math.max(ms, 3600000) end
  return digits(ms + 1)
end

local function decision(allowed, limit, remaining, reset, retry, delay, booked, mark)
  return { allowed and 1 or 0, limit, remaining, reset, retry, delay or 0, booked or -1, mark or 0 }
end

-- Each algorithm: how its state is kept (read: the stored text to numbers, {} when there is
-- none or it is not this algorithm's; write: numbers to text), and
-- decide(s, now, q, cost) -> decision, the state to keep when admitted.

local function read_one(text)
  local n = int(text)
  if n then return { n } end
  return {}
end

local function read_two(text)
  local a, b = string.match(text, '^(%S+) (%S+)$')
  a, b = int(a), int(b)
  if a and b then return { a, b } end
  return {}
end

local function read_three(text)
  local a, b, c = string.match(text, '^(%S+) (%S+) (%S+)$')
  a, b, c = int(a), int(b), int(c)
  if a and b and c then return { a, b, c } end
  return {}
end

-- A sliding window log: { total, t1, c1, t2, c2, ... }, oldest first.
local function read_log(text)
  local parts = {}
  for part in string.gmatch(text, '%S+') do
    local n = int(part)
    if not n then return {} end
    parts[#parts + 1] = n
  end
  if #parts % 2 ~= 1 then return {} end
  return parts
end

local function write_one(s) return string.format('%d', s[1]) end
local function write_two(s) return string.format('%d %d', s[1], s[2]) end
local function write_three(s) return string.format('%d %d %d', s[1], s[2], s[3]) end
local function write_log(s)
  local parts = {}
  for k, v in ipairs(s) do parts[k] = string.format('%d', v) end
  return table.concat(parts, ' ')
end

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
  local allowed = cost <= tokens
  local retry = 0
  if not allowed then
    if cost > burst then
      retry = period
    else
      retry = math.max(0, anchor + cdiv((cost - level) * period, limit) - now)
    end
  else
    level, tokens = level - cost, tokens - cost
  end
  local reset = 0
  if burst > level then reset = math.max(0, anchor + cdiv((burst - level) * period, limit) - now) end
  return decision(allowed, burst, math.max(tokens, 0), reset, retry), { anchor, level }
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

-- The window of `now` and the requests counted in it, from a fixed window's state: a
-- multiple of the period since the epoch, or a calendar's, numbered and bounded by the
-- server (q.window, q.window_end; src/algorithm/calendar.rs).
local function fixed_window(s, now, q, cost)
  local limit, period = q.limit, q.period
  local window, until_next
  if q.window and q.window >= 0 then
    window = math.max(q.window, s[1] or 0)
    until_next = math.max(0, q.window_end - now)
  else
    window = math.max(idiv(now, period), s[1] or 0)
    until_next = math.max(0, (window + 1) * period - now)
  end
  local count = 0
  if s[1] == window then count = s[2] end
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

-- A fixed window kept as one integer, `(window + 1) * scale + count` (q.scale above twice the
-- limit and one, so that a count and a request's cost never reach it; the window shifted by
-- one, so that a key INCRBY creates never passes for one of a window): read as
-- { window, count }, so that it decides as `fixed_window`, and charged with INCRBY in its
-- own window (see `keep`).
local function read_counter(text, q)
  local v = int(text)
  if not v or v < q.scale then return {} end
  local stamp = idiv(v, q.scale)
  return { stamp - 1, v - stamp * q.scale }
end

local function write_counter(s, q) return string.format('%d', (s[1] + 1) * q.scale + s[2]) end

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

-- A sliding window log kept as a sorted set: one member a request unit, scored by the tick
-- it was filed at and named `tick:n`, n (zero-padded) counting the units filed at that tick,
-- so that the set's order is the log's. Read as a view (`read_log_set`): the total and the
-- newest unit, asking Redis for an older unit only when a refused request needs its time;
-- or, as the source of a carried state, whole, as `read_log` reads the log kept as text.
local function unit_name(tick, n) return string.format('%d:%010d', tick, n) end

-- The log at `key` at `now`, units past the window dropped.
local function read_log_set(key, now, q)
  -- pcall: a key of another type reads as never seen (and is overwritten when charged).
  local dropped = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', digits(now - q.period))
  if type(dropped) ~= 'number' then return { view = true, total = 0, other_type = true }, false end
  local total = redis.call('ZCARD', key)
  if total == 0 then return { view = true, total = 0 }, false end
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return {
    view = true, key = key, total = total, newest = tonumber(newest[2]),
    newest_n = tonumber(string.match(newest[1], ':(%d+)$')) or total,
  }, true
end

-- The whole log at `key`, as `read_log` reads it: { total, t1, c1, t2, c2, ... }.
local function read_log_set_whole(key)
  local units = redis.pcall('ZRANGE', key, 0, -1, 'WITHSCORES')
  if type(units) ~= 'table' or #units == 0 then return {}, false end
  local fields = { #units / 2 }
  for i = 2, #units, 2 do
    local tick = tonumber(units[i])
    if fields[#fields - 1] == tick and #fields > 1 then
      fields[#fields] = fields[#fields] + 1
    else
      fields[#fields + 1], fields[#fields + 2] = tick, 1
    end
  end
  return fields, true
end

-- As `sliding_window_log`, on a view; the state to keep is the units to add: { filed_at,
-- first (their first n), count }. On a whole log (a carried state), as `sliding_window_log`.
local function sliding_window_log_set(s, now, q, cost)
  if not s.view then return sliding_window_log(s, now, q, cost) end
  local limit, period, total = q.limit, q.period, s.total
  local filed_at = now
  if s.newest and s.newest > now then filed_at = s.newest end
  local allowed = total + cost <= limit
  local retry = 0
  if not allowed then
    if cost > limit then
      retry = period
    else
      -- The oldest units whose expiry makes room: the request fits once this one is gone.
      local index = digits(total + cost - limit - 1)
      local unit = redis.call('ZRANGE', s.key, index, index, 'WITHSCORES')
      retry = math.max(0, tonumber(unit[2]) + period - now)
    end
  end
  local used, last = total, s.newest
  if allowed and cost > 0 then used, last = total + cost, filed_at end
  local reset = 0
  if last then reset = math.max(0, last + period - now) end
  local first = 1
  if s.newest == filed_at then first = s.newest_n + 1 end
  local units = { filed_at = filed_at, first = first, count = cost, other_type = s.other_type }
  return decision(allowed, limit, math.max(0, limit - used), reset, retry, 0, -1, filed_at), units
end

-- By algorithm code: token bucket, leaky bucket, fixed window (as text: `window count`),
-- sliding window log (as text), sliding window counter, GCRA, fixed window (as one
-- integer), sliding window log (as a sorted set).
local decide = {
  token_bucket, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter, gcra, fixed_window,
  sliding_window_log_set,
}
local read = { read_two, read_one, read_two, read_log, read_three, read_one, read_counter }
local write = { write_two, write_one, write_two, write_log, write_three, write_one, write_counter }

-- The codes `decide` is indexed by (src/store/redis/layout.rs).
local TOKEN_BUCKET, LEAKY_BUCKET, FIXED_WINDOW, LOG, SLIDING_WINDOW_COUNTER, GCRA = 1, 2, 3, 4, 5, 6
local COUNTER, LOG_SET = 7, 8
local logs = { [LOG] = true, [LOG_SET] = true }
local windows = { [FIXED_WINDOW] = true, [COUNTER] = true }

-- The most requests a limit admits at once (src/algorithm/mod.rs, capacity).
local function capacity(q)
  local algorithm = q.algorithm
  if algorithm == TOKEN_BUCKET or algorithm == GCRA then return q.burst end
  if algorithm == LEAKY_BUCKET then return q.queue + 1 end
  return q.limit
end

-- A limit's numbers from args[a + 1 ..]: algorithm, ticks per base unit, limit, period,
-- burst (a counter's scale), queue, max_delay (-1: none), shaping; only those its
-- algorithm reads.
local function quota(args, a)
  local algorithm = tonumber(args[a + 1])
  local q = {
    algorithm = algorithm, div = tonumber(args[a + 2]), limit = tonumber(args[a + 3]),
    period = tonumber(args[a + 4]),
  }
  if algorithm == TOKEN_BUCKET or algorithm == GCRA then
    q.burst = tonumber(args[a + 5])
  elseif algorithm == COUNTER then
    q.scale = tonumber(args[a + 5])
  elseif algorithm == LEAKY_BUCKET then
    q.queue, q.max_delay, q.shaping = tonumber(args[a + 6]), tonumber(args[a + 7]), args[a + 8] == '1'
  end
  if windows[algorithm] then
    -- In place of a queue and a delay: a calendar's window and its end (-1: none).
    q.window, q.window_end = tonumber(args[a + 6]), tonumber(args[a + 7])
  end
  return q
end

-- The stored state of a key under limit q at `now` (nil: a carried state, read whole): the
-- numbers, {} for none; and whether the key holds anything.
local function state_of(key, q, now)
  if q.algorithm == LOG_SET then
    if now then return read_log_set(key, now, q) end
    return read_log_set_whole(key)
  end
  -- pcall: a key of another type reads as never seen (and is overwritten when charged).
  local text = redis.pcall('GET', key)
  if type(text) ~= 'string' then return {}, false end
  return read[q.algorithm](text, q), true
end

-- The state of check q carried from `fields`, a key's state under the limit c that a reload
-- replaced (src/algorithm/carry.rs): as it is where it means the same (a log's entries, in
-- q's ticks; a window's counts under the same period, whichever way it is kept), a token
-- bucket's tokens into a token bucket, else the requests it had used, charged to a fresh
-- state.
local function carried(q, c, fields, now_base)
  if logs[c.algorithm] and logs[q.algorithm] then
    local entries = { fields[1] }
    for i = 2, #fields, 2 do
      entries[i], entries[i + 1] = cdiv(fields[i] * c.div, q.div), fields[i + 1]
    end
    return entries
  end
  -- A calendar's windows (numbered by the server) carry as the requests they counted.
  local calendar = (q.window or -1) >= 0 or (c.window or -1) >= 0
  local same_period = c.period * c.div == q.period * q.div and not calendar
  local same_algorithm = c.algorithm == q.algorithm or (windows[c.algorithm] and windows[q.algorithm])
  if same_algorithm and same_period and (windows[q.algorithm] or q.algorithm == SLIDING_WINDOW_COUNTER) then
    return fields
  end
  local as_it_stands = decide[c.algorithm](fields, idiv(now_base, c.div), c, 0)
  local used = as_it_stands[2] - as_it_stands[3]
  if c.algorithm == TOKEN_BUCKET and q.algorithm == TOKEN_BUCKET then used = capacity(q) - as_it_stands[3] end
  local _, state = decide[q.algorithm]({}, q.now, q, math.max(0, math.min(used, capacity(q))))
  return state
end

-- Keeps a log as a sorted set: `s` the units to add (see `sliding_window_log_set`), or a whole
-- log (a carried state) that replaces what the key held.
local function keep_log_set(q, s, reset, test_clock)
  local units = {}
  if s.filed_at then
    if s.other_type then redis.call('DEL', q.key) end
    local tick = digits(s.filed_at)
    for n = s.first, s.first + s.count - 1 do
      units[#units + 1], units[#units + 2] = tick, unit_name(s.filed_at, n)
    end
  else
    redis.call('DEL', q.key)
    for i = 2, #s, 2 do
      for n = 1, s[i + 1] do units[#units + 1], units[#units + 2] = digits(s[i]), unit_name(s[i], n) end
    end
  end
  if #units > 0 then
    redis.call('ZADD', q.key, unpack(units))
    redis.call('PEXPIRE', q.key, px(reset, q.per_ms, test_clock))
  end
end

-- Keeps `s`, the state of check q, under its key for `reset` ticks (stored as q's algorithm
-- keeps it). A counter charged in its own window takes INCRBY: one number, and its TTL kept.
local function keep(q, s, reset, test_clock)
  if q.algorithm == LOG_SET then
    keep_log_set(q, s, reset, test_clock)
  elseif q.algorithm == COUNTER and q.stored_window == s[1] then
    redis.call('INCRBY', q.key, digits(s[2] - q.stored_count))
  else
    redis.call('SET', q.key, write[q.algorithm](s, q), 'PX', px(reset, q.per_ms, test_clock))
  end
end

-- The functions that decide take (keys, args) from FCALL, or, from `acquire_batch`, one
-- request among others: (keys, args, time, k, a, last_key), its keys from keys[k] to
-- keys[last_key] and its arguments from args[a], `time` Redis's clock if read already.

-- Decides a request of one check carried from nothing, as `acquire` does, without its lists.
local function acquire_one(keys, args, time, k, a)
  local test_clock = args[a] ~= ''
  local now_base = now_in_base_units(args[a], time)
  local q = quota(args, a)
  local cost, flags = tonumber(args[a + 9]), tonumber(args[a + 10])
  q.key, q.per_ms = keys[k], tonumber(args[a + 11])
  local now = idiv(now_base, q.div)
  local fields = state_of(q.key, q, now)
  if q.algorithm == COUNTER and fields[1] then
    q.stored_window, q.stored_count = fields[1], fields[2]
  end
  local d, next = decide[q.algorithm](fields, now, q, cost)
  if flags >= 2 then
    if d[1] == 1 then
      -- Only checked: what remains, and when the limit is full again, as they stand.
      local as_it_stands = decide[q.algorithm](fields, now, q, 0)
      d[3], d[4], d[7] = as_it_stands[3], as_it_stands[4], -1
    end
  elseif d[1] == 1 then
    keep(q, next, d[4], test_clock)
  end
  return { now_base, d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8] }
end

-- Decides every limit of one request, all or nothing, atomically.
--
-- keys     per check, in order: its state key, then the n keys it is carried from
-- args[1]  now in base units, or "" to read Redis's clock (TIME, in microseconds)
-- args     then per check, in order: 12 numbers: algorithm, ticks per base unit, limit,
--          period, burst (a counter's scale), queue, max_delay (-1: none), shaping (1/0),
--          cost, flags (1: shadow, + 2: only checked, never charged), ticks per ms (0 when
--          a tick is longer than a millisecond: then ms per tick, negated), n; then, for
--          each key it is carried from, 8: algorithm, ticks per base unit, limit, period,
--          burst, queue, max_delay, shaping (the limit a reload replaced)
-- Returns  { now (base units), then per check: allowed, limit, remaining, reset_after,
--          retry_after, delay, booked_until (-1: none), mark } with durations in the check's
--          ticks; mark says where the charge was filed, for `refund` (a window, the time of a
--          log entry, the new theoretical arrival time; 0 for a token bucket).
local function acquire(keys, args, time, k, a, last_key)
  k, a, last_key = k or 1, a or 1, last_key or #keys
  -- One check, carried from nothing (the most requests): no lists.
  if k == last_key then return acquire_one(keys, args, time, k, a) end
  local test_clock = args[a] ~= ''
  local now_base = now_in_base_units(args[a], time)
  local checks = {}
  while k <= last_key do
    local q = quota(args, a)
    q.cost, q.flags, q.per_ms = tonumber(args[a + 9]), tonumber(args[a + 10]), tonumber(args[a + 11])
    q.key, q.shadow, q.check_only = keys[k], q.flags % 2 == 1, q.flags >= 2
    q.now = idiv(now_base, q.div)
    local fields, kept = state_of(q.key, q, q.now)
    if q.algorithm == COUNTER and fields[1] then
      q.stored_window, q.stored_count = fields[1], fields[2]
    end
    local n = tonumber(args[a + 12])
    a, k = a + 12, k + 1
    for _ = 1, n do
      if not kept and not q.carried_from then
        local c = quota(args, a)
        local old = state_of(keys[k], c)
        if #old > 0 then fields, q.carried_from = carried(q, c, old, now_base), keys[k] end
      end
      a, k = a + 8, k + 1
    end
    q.fields = fields
    q.decision, q.next = decide[q.algorithm](fields, q.now, q, q.cost)
    if q.check_only and q.decision[1] == 1 then
      -- Nothing is charged: what remains, and when the limit is full again, as they stand.
      local as_it_stands = decide[q.algorithm](fields, q.now, q, 0)
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
      keep(q, q.next, q.decision[4], test_clock)
    elseif q.carried_from then
      -- Carried, not charged: the state moves to its new key all the same.
      local reset = decide[q.algorithm](q.fields, q.now, q, 0)[4]
      q.stored_window = nil
      if reset > 0 then keep(q, q.fields, reset, test_clock) end
    end
    if q.carried_from then redis.call('DEL', q.carried_from) end
    for _, v in ipairs(q.decision) do reply[#reply + 1] = v end
  end
  return reply
end

-- Decides one fixed window kept as one integer (see `read_counter`), charged when admitted:
-- the request of most limits, at the cost of one INCRBY (and, once a window, one SET), in
-- ticks of the base unit. Written for Redis's time: its answer is one integer, since a table
-- costs Redis more than the rest of the decision.
--
-- keys[1]  the state key
-- args     now ("" for TIME), period, limit, cost, and, with a given now, ticks per ms
-- Returns  until_next * scale + code, scale = 2 * limit + 2: until_next the ticks to the
--          window's end, code the count of the window after the request when admitted
--          (at most limit), else limit + 1 + the count before it.
local function acquire_counter(keys, args, time, k, a)
  k, a = k or 1, a or 1
  local key = keys[k]
  local now, per_ms = now_and_per_ms(args, a, time, 3)
  local period, limit, cost = tonumber(args[a + 1]), tonumber(args[a + 2]), tonumber(args[a + 3])
  local scale = limit * 2 + 2
  -- idiv, inline: a call costs Redis more than the division.
  local window = math.floor(now / period)
  if window * period > now then window = window - 1 elseif (window + 1) * period <= now then window = window + 1 end
  local until_next = (window + 1) * period - now
  local base = (window + 1) * scale
  -- pcall: a key of another type or format does not count (and is overwritten below).
  local stored = redis.pcall('INCRBY', key, args[a + 3])
  if type(stored) == 'number' and stored >= base + scale then
    -- A later window, written by a clock ahead of this one: decided in it, as
    -- `fixed_window` decides, its end capped where the answer stays exact.
    local later = math.floor(stored / scale)
    base = later * scale
    until_next = math.min(later * period - now, math.floor(9007199254740992 / scale) - 1)
  end
  if type(stored) == 'number' and stored > base and stored < base + scale then
    local count = stored - base
    if count <= limit then return until_next * scale + count end
    redis.call('DECRBY', key, args[a + 3])
    return until_next * scale + limit + 1 + count - cost
  end
  if cost > limit then
    -- Never admitted, and nothing counted in this window: no state.
    redis.call('DEL', key)
    return until_next * scale + limit + 1
  end
  -- This window's first request (the key was new, of another window, or garbage).
  redis.call('SET', key, digits(base + cost), 'PX', px(until_next, per_ms, args[a] ~= ''))
  return until_next * scale + cost
end

-- Decides one token bucket, charged when admitted: as `token_bucket`, in ticks of the base
-- unit, without the tables of `acquire` (they cost Redis more than the arithmetic).
--
-- keys[1]  the state key
-- args     now ("" for TIME), period, limit (above 0), burst, cost, and, with a given now,
--          ticks per ms
-- Returns  { remaining (admitted), or -1 - remaining (refused), reset_after, retry_after }
local function acquire_token_bucket(keys, args, time, k, a)
  k, a = k or 1, a or 1
  local key = keys[k]
  local now, per_ms = now_and_per_ms(args, a, time, 4)
  local period, limit = tonumber(args[a + 1]), tonumber(args[a + 2])
  local burst, cost = tonumber(args[a + 3]), tonumber(args[a + 4])
  local anchor, level = now, burst
  local text = redis.pcall('GET', key)
  if type(text) == 'string' then
    local a, l = string.match(text, '^(%-?%d+) (%-?%d+)$')
    if a then anchor, level = tonumber(a), tonumber(l) end
  end
  local elapsed = now - anchor
  if elapsed < 0 then elapsed = 0 end
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
  if cost > tokens then
    local retry = period
    if cost <= burst then retry = math.max(0, anchor + cdiv((cost - level) * period, limit) - now) end
    local reset = 0
    if burst > level then reset = math.max(0, anchor + cdiv((burst - level) * period, limit) - now) end
    -- A settled charge may leave the bucket in debt: nothing remains.
    return { -1 - math.max(tokens, 0), reset, retry }
  end
  level = level - cost
  local reset = math.max(0, anchor + cdiv((burst - level) * period, limit) - now)
  redis.call('SET', key, string.format('%d %d', anchor, level), 'PX', px(reset, per_ms, args[a] ~= ''))
  return { math.max(tokens - cost, 0), reset, 0 }
end

-- Decides one sliding window log kept as a sorted set, charged when admitted: as
-- `sliding_window_log_set`, in ticks of the base unit, without the tables of `acquire`.
--
-- keys[1]  the state key
-- args     now ("" for TIME), period, limit (above 0), cost, and, with a given now, ticks
--          per ms
-- Returns  { remaining (admitted), or -1 - remaining (refused), reset_after, retry_after }
local function acquire_log(keys, args, time, k, a)
  k, a = k or 1, a or 1
  local key = keys[k]
  local now, per_ms = now_and_per_ms(args, a, time, 3)
  local period, limit, cost = tonumber(args[a + 1]), tonumber(args[a + 2]), tonumber(args[a + 3])
  local s = read_log_set(key, now, { period = period })
  local total, newest = s.total, s.newest
  if total + cost > limit then
    local retry = period
    if cost <= limit then
      local index = digits(total + cost - limit - 1)
      local unit = redis.call('ZRANGE', key, index, index, 'WITHSCORES')
      retry = math.max(0, tonumber(unit[2]) + period - now)
    end
    local reset = 0
    if newest then reset = math.max(0, newest + period - now) end
    return { -1 - math.max(0, limit - total), reset, retry }
  end
  local filed_at, first = now, 1
  if newest and newest >= now then filed_at, first = newest, s.newest_n + 1 end
  if s.other_type then redis.call('DEL', key) end
  local units, tick = {}, digits(filed_at)
  for n = first, first + cost - 1 do
    units[#units + 1], units[#units + 2] = tick, unit_name(filed_at, n)
  end
  redis.call('ZADD', key, unpack(units))
  local reset = filed_at + period - now
  redis.call('PEXPIRE', key, px(reset, per_ms, args[a] ~= ''))
  return { limit - total - cost, reset, 0 }
end

-- The slots of concurrency limits: a key's sorted set of leases, one member a request in
-- flight (a number its server chose), scored by when it expires (ms of Redis's clock). A
-- lease not renewed in time is dropped by the next call that counts the key, so that a
-- server that died frees its slots.

-- Keeps `key` at least `lease` ms: as long as its newest lease.
local function keep_leases(key, lease)
  if redis.call('PTTL', key) < lease then redis.call('PEXPIRE', key, digits(lease)) end
end

-- Takes a slot of each key for one request, all or nothing: none when an enforced key is
-- full; a shadow key's whatever its count.
--
-- keys     per slot, its key's leases
-- args     "" (leases expire on Redis's clock), then 4 numbers per key: max_in_flight, flags
--          (1: shadow), lease (ms), member
-- Returns  { 1 when taken (else 0), then per key the leases held before }
local function take_slots(keys, args, time, k, a, last_key)
  k, a, last_key = k or 1, a or 1, last_key or #keys
  local now = idiv(time or clock(), 1000)
  local reply = { 1 }
  for i = k, last_key do
    local key, b = keys[i], a + 1 + (i - k) * 4
    -- A key of another type (written by hand) is replaced.
    local expired = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', digits(now))
    if type(expired) == 'table' and expired.err then redis.call('DEL', key) end
    local held = redis.call('ZCARD', key)
    reply[#reply + 1] = held
    if held >= tonumber(args[b]) and args[b + 1] ~= '1' then reply[1] = 0 end
  end
  if reply[1] == 1 then
    for i = k, last_key do
      local key, b = keys[i], a + 1 + (i - k) * 4
      local lease = tonumber(args[b + 2])
      redis.call('ZADD', key, digits(now + lease), args[b + 3])
      keep_leases(key, lease)
    end
  end
  return reply
end

-- Gives slots back: each key's lease is removed.
--
-- keys     per lease, its key
-- args     "", then per key its lease's member
-- Returns  how many leases were held.
local function release_slots(keys, args, time, k, a, last_key)
  k, a, last_key = k or 1, a or 1, last_key or #keys
  local released = 0
  for i = k, last_key do
    released = released + redis.call('ZREM', keys[i], args[a + 1 + i - k])
  end
  return released
end

-- Renews leases still held: each expires `lease` ms from now. A lease that expired already
-- stays gone (its slot may have been taken since).
--
-- keys     per lease, its key
-- args     "", then 2 numbers per key: lease (ms), member
-- Returns  how many leases were renewed.
local function renew_slots(keys, args)
  local now = idiv(clock(), 1000)
  local renewed = 0
  for i, key in ipairs(keys) do
    local lease, member = tonumber(args[2 * i]), args[2 * i + 1]
    if redis.call('ZSCORE', key, member) then
      redis.call('ZADD', key, 'XX', digits(now + lease), member)
      keep_leases(key, lease)
      renewed = renewed + 1
    end
  end
  return renewed
end

-- Runs the calls of several requests, each as its own call of `acquire`, `acquire_counter`,
-- `acquire_token_bucket`, `acquire_log`, `take_slots` or `release_slots` would, in one call:
-- the store sends together the calls that arrive while its calls are in flight
-- (src/store/redis/coalesce.rs). Redis's clock is read once.
--
-- keys     each call's keys, in order
-- args     per call: its function (1: acquire, 2: acquire_counter, 3: acquire_token_bucket,
--          4: acquire_log, 5: take_slots, 6: release_slots, 7: settle), its number of keys
--          and of arguments after now, then now and its arguments, as its own call takes them
-- Returns  per call, what its own call returns, or the text of its error: a call that
--          fails (a bug, or arguments its function does not take) fails no other.
-- (7: settle, defined below, is added to it there.)
local batched = { acquire, acquire_counter, acquire_token_bucket, acquire_log, take_slots, release_slots }
-- The keys and the arguments after now that each function takes (`acquire`: any).
local batched_shapes = { [2] = { 1, 4 }, [3] = { 1, 5 }, [4] = { 1, 4 }, [7] = { 1, 10 } }
-- The arguments after now per key, of the functions that take any number of keys.
local batched_per_key = { [5] = 4, [6] = 1 }

local function batched_reply(entry, key_count, arg_count, keys, args, time, k, a)
  local decide, shape, per_key = batched[entry], batched_shapes[entry], batched_per_key[entry]
  if not decide or (shape and (shape[1] ~= key_count or shape[2] ~= arg_count))
    or (per_key and arg_count ~= per_key * key_count) then
    return string.format('no function %s of %d keys and %d arguments', tostring(entry),
      key_count, arg_count)
  end
  local ok, reply = pcall(decide, keys, args, time, k, a, k + key_count - 1)
  if ok then return reply end
  if type(reply) == 'table' then reply = reply.err end
  return tostring(reply)
end

local function acquire_batch(keys, args)
  local replies, time, a, k = {}, nil, 1, 1
  local last = #args
  while a <= last do
    local entry, key_count, arg_count = tonumber(args[a]), tonumber(args[a + 1]), tonumber(args[a + 2])
    a = a + 3
    if args[a] == '' and not time then time = clock() end
    replies[#replies + 1] = batched_reply(entry, key_count, arg_count, keys, args, time, k, a)
    a, k = a + 1 + arg_count, k + key_count
  end
  return replies
end

-- Each algorithm: (fields, now, q) -> the fields without the charge, or nil to leave them
-- (the charge is gone already, or later requests were scheduled after it).
local function refund_token_bucket(s, now, q)
  return { s[1], math.min(q.burst, s[2] + q.cost) }
end

-- GCRA and leaky bucket: the charge moved the theoretical arrival time to `mark`. Only the
-- newest booking can be taken back: moving the time back under a later one would let two
-- requests share one emission interval.
local function refund_schedule(s, now, q)
  if q.limit == 0 or s[1] ~= q.mark then return nil end
  return { math.max(now, q.mark - q.cost * cdiv(q.period, q.limit)) }
end

local function refund_fixed_window(s, now, q)
  if s[1] ~= q.mark then return nil end
  return { s[1], math.max(0, s[2] - q.cost) }
end

local function refund_sliding_window_counter(s, now, q)
  if s[1] == q.mark then return { s[1], math.max(0, s[2] - q.cost), s[3] } end
  if s[1] == q.mark + 1 then return { s[1], s[2], math.max(0, s[3] - q.cost) } end
  return nil
end

local function refund_sliding_window_log(s, now, q)
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

local refunds = {
  refund_token_bucket, refund_schedule, refund_fixed_window, refund_sliding_window_log,
  refund_sliding_window_counter, refund_schedule, refund_fixed_window,
}

-- Gives back what `acquire` charged for a request that was not admitted after all (a limit
-- in another slot denied it, or another slot failed), or a queue place whose client left
-- before its turn, wherever no later request has built on the charge.
--
-- keys[i]  the state key of check i
-- args[1]  now in base units, or "" to read Redis's clock
-- args     then 7 numbers per check: algorithm, ticks per base unit, limit, period, burst
--          (a counter's scale), cost, mark (where `acquire` filed the charge: its reply's
--          mark)
-- Returns  how many charges were given back.
local function refund(keys, args)
  local now_base = now_in_base_units(args[1])
  local given = 0
  for i = 1, #keys do
    local a = 1 + 7 * (i - 1)
    local q = {
      algorithm = tonumber(args[a + 1]), div = tonumber(args[a + 2]), limit = tonumber(args[a + 3]),
      period = tonumber(args[a + 4]), burst = tonumber(args[a + 5]), scale = tonumber(args[a + 5]),
      cost = tonumber(args[a + 6]), mark = tonumber(args[a + 7]),
    }
    local now = idiv(now_base, q.div)
    if q.algorithm == LOG_SET then
      -- The units filed at the mark, the last first.
      local mark = digits(q.mark)
      local units = redis.pcall('ZREVRANGEBYSCORE', keys[i], mark, mark, 'LIMIT', 0, digits(q.cost))
      if type(units) == 'table' and #units > 0 then
        redis.call('ZREM', keys[i], unpack(units))
        given = given + 1
      end
    end
    local fields = {}
    if q.algorithm ~= LOG_SET then fields = state_of(keys[i], q, now) end
    if #fields > 0 then
      local refunded = refunds[q.algorithm](fields, now, q)
      if refunded then
        -- A schedule back at now is "never seen".
        if #refunded == 1 and refunded[1] <= now then
          redis.call('DEL', keys[i])
        else
          redis.call('SET', keys[i], write[q.algorithm](refunded, q), 'KEEPTTL')
        end
        given = given + 1
      end
    end
  end
  return given
end

-- A number kept in a hash field: a window's count or a schedule's tat (0 if none).
local function hash_count(key, field)
  local value = tonumber(redis.call('HGET', key, field))
  if not value or value < 0 then return 0 end
  return value
end

-- One server's counts of local-first limits go in, the fleet's totals come out.
--
-- args[1]: now (see `now_in_base_units`). args[2]: 1 when keys[1] is the registry of servers
-- (a sorted set), 0 when there is none. args[3]: this server's id. args[4]: how long a
-- server stays counted, in base units, and args[5] in milliseconds.
-- Then 7 numbers per key (after the registry): the kind (1: windows, 2: a schedule), how long
-- the key is worth keeping (ms), and
--   windows: the current window, then two (window, count to add) pairs;
--   a schedule: after, add (base units), then 0, 0, 0; its bookings move the theoretical
--   arrival time `tat` to math.max(tat, after) + add (with add 0: at least after).
-- Answers now (base units), the servers counted (-1 without a registry), then two numbers
-- per key: windows, the counts of the current window and of the one before; a schedule,
-- its tat and 0.
local function sync(keys, args)
  local test_clock = args[1] ~= ''
  local now = now_in_base_units(args[1])
  local reply = { now, -1 }
  local first = 1

  if args[2] == '1' then
    local registry = keys[1]
    redis.call('ZADD', registry, string.format('%d', now), args[3])
    redis.call('ZREMRANGEBYSCORE', registry, '-inf', string.format('%d', now - tonumber(args[4])))
    redis.call('PEXPIRE', registry, args[5])
    reply[2] = redis.call('ZCARD', registry)
    first = 2
  end

  for i = first, #keys do
    local key = keys[i]
    local a = 5 + (i - first) * 7
    local kind = tonumber(args[a + 1])
    local keep_ms = tonumber(args[a + 2])
    local kept = redis.call('TYPE', key).ok
    if kept ~= 'hash' and kept ~= 'none' then redis.call('DEL', key) end
    if kind == 1 then
      local current = tonumber(args[a + 3])
      for j = 0, 1 do
        local window, added = args[a + 4 + 2 * j], args[a + 5 + 2 * j]
        if added ~= '0' and tonumber(window) + 1 >= current then
          -- As sent (a Lua number would lose digits); a count that cannot be added (past
          -- 2^63) spoils neither this key nor the others.
          redis.pcall('HINCRBY', key, window, added)
        end
      end
      for _, field in ipairs(redis.call('HKEYS', key)) do
        local window = tonumber(field)
        if not window or window + 1 < current then redis.call('HDEL', key, field) end
      end
      reply[#reply + 1] = hash_count(key, string.format('%d', current))
      reply[#reply + 1] = hash_count(key, string.format('%d', current - 1))
    else
      local after, add = tonumber(args[a + 3]), tonumber(args[a + 4])
      local tat = hash_count(key, 'tat')
      -- No length but a later start: "the schedule is at least this far" (a carried one).
      if add > 0 or after > tat then
        tat = math.max(tat, after) + add
        redis.call('HSET', key, 'tat', string.format('%d', tat))
      end
      reply[#reply + 1] = tat
      reply[#reply + 1] = 0
    end
    if test_clock then keep_ms = math.max(keep_ms, 3600000) end
    if redis.call('EXISTS', key) == 1 then redis.call('PEXPIRE', key, string.format('%d', keep_ms)) end
  end

  return reply
end


-- Settling what a request admitted earlier turned out to cost (src/algorithm/*.rs, settle):
-- per algorithm, the state `s` at `now` with `extra` more charged, past the limit if need
-- be, or `-extra` given back (never below a fresh key's).

-- q, with room for any charge: a charge past the limit is kept.
local function with_room(q)
  local roomy = {}
  for name, value in pairs(q) do roomy[name] = value end
  roomy.limit = 4503599627370496
  return roomy
end

local function settled_token_bucket(s, now, q, extra)
  if q.limit == 0 then return s end
  local _, at_now = token_bucket(s, now, q, 0)
  local anchor, level = at_now[1], at_now[2]
  local tokens = math.min(q.burst, level + idiv((now - anchor) * q.limit, q.period))
  -- Anchored at now, as the memory store settles it.
  return { now, math.min(q.burst, tokens - extra) }
end

local function settled_schedule(s, now, q, extra)
  if q.limit == 0 then return s end
  local interval = cdiv(q.period, q.limit)
  local tat = s[1] or now
  if extra >= 0 then return { math.max(tat, now) + extra * interval } end
  return { math.max(now, tat + extra * interval) }
end

local function settled_fixed_window(s, now, q, extra)
  local _, at_now = fixed_window(s, now, q, 0)
  local count = math.max(0, at_now[2] + extra)
  -- Kept as one integer, a count and a request's cost stay below its scale: a count past
  -- the limit is kept as the limit, which refuses as much until the window ends.
  if q.algorithm == COUNTER then count = math.min(count, q.limit) end
  return { at_now[1], count }
end

local function settled_sliding_window_counter(s, now, q, extra)
  local _, at_now = sliding_window_counter(s, now, q, 0)
  return { at_now[1], math.max(0, at_now[2] + extra), at_now[3] }
end

local function settled_log(s, now, q, extra)
  if extra >= 0 then
    local _, charged = sliding_window_log(s, now, with_room(q), extra)
    return charged
  end
  local _, log = sliding_window_log(s, now, q, 0)
  local left = -extra
  while left > 0 and #log >= 3 do
    local last = #log
    local taken = math.min(left, log[last])
    log[last], log[1], left = log[last] - taken, log[1] - taken, left - taken
    if log[last] == 0 then log[last], log[last - 1] = nil, nil end
  end
  return log
end

local settled = {
  [TOKEN_BUCKET] = settled_token_bucket, [LEAKY_BUCKET] = settled_schedule,
  [FIXED_WINDOW] = settled_fixed_window, [LOG] = settled_log,
  [SLIDING_WINDOW_COUNTER] = settled_sliding_window_counter, [GCRA] = settled_schedule,
  [COUNTER] = settled_fixed_window,
}

-- Settles one key: charges `extra` more, or gives `-extra` back. As the functions that
-- decide, from FCALL or from `acquire_batch` (keys[k], args from args[a]).
--
-- keys[1]  the state key
-- args     now ("" for TIME), the limit's 8 numbers as `acquire` takes them (algorithm,
--          ticks per base unit, limit, period, burst or scale, queue or window, max_delay or
--          window end, shaping), extra, ticks per ms
-- Returns  1
local function settle(keys, args, time, k, a)
  k, a = k or 1, a or 1
  local test_clock = args[a] ~= ''
  local q = quota(args, a)
  local extra = tonumber(args[a + 9])
  q.key, q.per_ms = keys[k], tonumber(args[a + 10])
  local now = idiv(now_in_base_units(args[a], time), q.div)
  if q.algorithm == LOG_SET then
    if extra < 0 then
      -- The newest units, one a request unit.
      redis.pcall('ZPOPMAX', q.key, digits(-extra))
      return 1
    end
    local view = read_log_set(q.key, now, q)
    local charged, units = sliding_window_log_set(view, now, with_room(q), extra)
    keep_log_set(q, units, charged[4], test_clock)
    return 1
  end
  local next = settled[q.algorithm](state_of(q.key, q, now), now, q, extra)
  local reset = decide[q.algorithm](next, now, q, 0)[4]
  if reset > 0 then
    redis.call('SET', q.key, write[q.algorithm](next, q), 'PX', px(reset, q.per_ms, test_clock))
  else
    redis.call('DEL', q.key)
  end
  return 1
end

batched[7] = settle
