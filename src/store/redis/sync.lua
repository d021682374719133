-- tollgate: one server's counts of local-first limits go in, the fleet's totals come out.
--
-- ARGV[1]: now (see the prelude). ARGV[2]: 1 when KEYS[1] is the registry of servers (a
-- sorted set), 0 when there is none. ARGV[3]: this server's id. ARGV[4]: how long a server
-- stays counted, in base units, and ARGV[5] in milliseconds.
-- Then 7 numbers per key (after the registry): the kind (1: windows, 2: a schedule), how long
-- the key is worth keeping (ms), and
--   windows: the current window, then two (window, count to add) pairs;
--   a schedule: after, add (base units), then 0, 0, 0; its bookings move the theoretical
--   arrival time `tat` to max(tat, after) + add (with add 0: at least after).
-- Answers now (base units), the servers counted (-1 without a registry), then two numbers
-- per key: windows, the counts of the current window and of the one before; a schedule,
-- its tat and 0.

local now = now_in_base_units()
local reply = { now, -1 }
local first = 1

if ARGV[2] == '1' then
  local registry = KEYS[1]
  redis.call('ZADD', registry, num(now), ARGV[3])
  redis.call('ZREMRANGEBYSCORE', registry, '-inf', num(now - tonumber(ARGV[4])))
  redis.call('PEXPIRE', registry, ARGV[5])
  reply[2] = redis.call('ZCARD', registry)
  first = 2
end

-- A number kept in a hash field: a window's count or a schedule's tat (0 if none).
local function count(key, field)
  local value = tonumber(redis.call('HGET', key, field))
  if not value or value < 0 then return 0 end
  return value
end

for i = first, #KEYS do
  local key = KEYS[i]
  local a = 5 + (i - first) * 7
  local kind = tonumber(ARGV[a + 1])
  local keep = tonumber(ARGV[a + 2])
  local kept = redis.call('TYPE', key).ok
  if kept ~= 'hash' and kept ~= 'none' then redis.call('DEL', key) end
  if kind == 1 then
    local current = tonumber(ARGV[a + 3])
    for j = 0, 1 do
      local window, added = ARGV[a + 4 + 2 * j], ARGV[a + 5 + 2 * j]
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
    reply[#reply + 1] = count(key, num(current))
    reply[#reply + 1] = count(key, num(current - 1))
  else
    local after, add = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    local tat = count(key, 'tat')
    -- No length but a later start: "the schedule is at least this far" (a carried one).
    if add > 0 or after > tat then
      tat = math.max(tat, after) + add
      redis.call('HSET', key, 'tat', num(tat))
    end
    reply[#reply + 1] = tat
    reply[#reply + 1] = 0
  end
  -- A test clock's time does not pass with Redis's: keep its keys an hour at least.
  if ARGV[1] ~= '' then keep = math.max(keep, 3600000) end
  if redis.call('EXISTS', key) == 1 then redis.call('PEXPIRE', key, num(keep)) end
end

return reply
