#!/usr/bin/env bash
# Redis's time per decision, algorithm by algorithm: the store's library functions, called as
# the store calls them, against a minimal single-purpose script of the same algorithm, and,
# for a fixed window, against envoyproxy/ratelimit's commands (INCRBY, then EXPIRE).
#
#   scripts/bench-redis-algorithms.sh            # 3 rounds, about 4 minutes
#   ROUNDS=5 scripts/bench-redis-algorithms.sh
#
# One redis-server (started here, pinned to CPU 0 when there are two) and redis-benchmark
# (CPU 1, 32 connections, keys spread over 10,000 clients): each limit admits 1,000 a minute,
# so every call is admitted but the log's "refused" row (100 clients, 2,000 calls each). The
# figures are Redis's own `usec_per_call` (INFO commandstats) per decision and the
# redis-server process's CPU per decision (/proc), medians of the rounds, each round running
# every row once in turn. "batch of 16" is one call of `acquire_batch` deciding 16 requests,
# as the store sends requests that wait for a busy connection.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/require.sh
require redis-server redis-server
require python3 python3

ROUNDS=${ROUNDS:-3}
CALLS=${CALLS:-200000}
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DIR=$(mktemp -d)
SERVER_CPU=() BENCH_CPU=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SERVER_CPU=(taskset -c 0) BENCH_CPU=(taskset -c 1)
fi
(cd "$DIR" && "${SERVER_CPU[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
  >/dev/null 2>&1 &)
cli() { redis-cli -p "$PORT" "$@"; }
trap 'cli SHUTDOWN NOSAVE >/dev/null 2>&1; rm -rf "$DIR"' EXIT
until cli PING >/dev/null 2>&1; do sleep 0.1; done
PID=$(cli INFO server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')

# The library as the store loads it (under a fixed name), and the minimal scripts.
{
  echo '#!lua name=tollgate_bench'
  cat src/store/redis/library.lua
  for f in acquire acquire_counter acquire_token_bucket acquire_log acquire_batch; do
    echo "redis.register_function('$f', $f)"
  done
} >"$DIR/library.lua"
cli FUNCTION LOAD REPLACE "$(cat "$DIR/library.lua")" >/dev/null

cat >"$DIR/fixed_window.lua" <<'EOF'
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
if count == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
if count > tonumber(ARGV[2]) then redis.call('DECRBY', KEYS[1], ARGV[1]); return 0 end
return 1
EOF
cat >"$DIR/token_bucket.lua" <<'EOF'
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local limit, period, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local anchor, level = now, burst
local v = redis.call('GET', KEYS[1])
if v then
  local a, l = string.match(v, '^(%d+) (%-?%d+)$')
  anchor, level = tonumber(a), tonumber(l)
end
local tokens = math.min(burst, level + math.floor((now - anchor) * limit / period))
if tokens < cost then return 0 end
redis.call('SET', KEYS[1], string.format('%d %d', now, tokens - cost), 'PX', math.floor(period * burst / limit / 1000) + 1)
return 1
EOF
cat >"$DIR/gcra.lua" <<'EOF'
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new = tat + cost * interval
if new - now > burst * interval then return 0 end
redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.floor((new - now) / 1000) + 1)
return 1
EOF
cat >"$DIR/sliding_window_counter.lua" <<'EOF'
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local limit, period, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local window = math.floor(now / period)
local current, previous = 0, 0
local v = redis.call('GET', KEYS[1])
if v then
  local w, c, p = string.match(v, '^(%d+) (%d+) (%d+)$')
  w, c, p = tonumber(w), tonumber(c), tonumber(p)
  if w == window then current, previous = c, p elseif w + 1 == window then previous = c end
end
local elapsed = now - window * period
if previous * (period - elapsed) + (current + cost) * period > limit * period then return 0 end
redis.call('SET', KEYS[1], string.format('%d %d %d', window, current + cost, previous), 'PX', math.floor(2 * period / 1000) + 1)
return 1
EOF
# A log that says when to retry, as tollgate's does, on refusal.
cat >"$DIR/sliding_window_log.lua" <<'EOF'
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local limit, period = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - period)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')
  return -(tonumber(oldest[2]) + period - now)
end
redis.call('ZADD', KEYS[1], now, now)
redis.call('PEXPIRE', KEYS[1], math.floor(period / 1000) + 1)
return 1
EOF
for script in fixed_window token_bucket gcra sliding_window_counter sliding_window_log; do
  eval "SHA_$script=$(cli SCRIPT LOAD "$(cat "$DIR/$script.lua")")"
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }

# measure KEYS_RANGE COMMAND... -> "usec_per_call cpu_us_per_call" for the commands the
# benchmark sent (the first word of COMMAND, and EXPIRE for envoy's pair).
measure() {
  local range=$1 stat=$2; shift 2
  cli CONFIG RESETSTAT >/dev/null
  local before; before=$(cpu_ticks)
  "${BENCH_CPU[@]}" redis-benchmark -p "$PORT" -c 32 -n "$CALLS" -r "$range" -q "$@" >/dev/null 2>&1
  local after; after=$(cpu_ticks)
  cli INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v stat="cmdstat_$stat" -v ticks=$((after - before)) \
    -v hz="$(getconf CLK_TCK)" '$1 == stat { printf "%s %.2f\n", $7, ticks * 1e6 / hz / $3 }'
}

# Every row: label, decisions per call, key range, then the command.
KEYS16=() ARGS_TB16=() ARGS_FW16=() ARGS_LOG16=() ARGS_GCRA16=()
for i in $(seq 1 16); do
  KEYS16+=("b$i:__rand_int__")
  ARGS_FW16+=(2 1 4 "" 60000000 1000 1 1000)
  ARGS_TB16+=(3 1 5 "" 60000000 1000 1000 1 1000)
  ARGS_LOG16+=(4 1 4 "" 60000000 1000 1 1000)
  ARGS_GCRA16+=(1 1 12 "" 6 1 1000 60000000 1000 0 -1 0 1 0 1000 0)
done
ROWS=(
  "fixed_window|tollgate|1|10000|fcall|FCALL acquire_counter 1 fw:__rand_int__ '' 60000000 1000 1 1000"
  "fixed_window|tollgate, batch of 16|16|10000|fcall|FCALL acquire_batch 16 ${KEYS16[*]} ${ARGS_FW16[*]@Q}"
  "fixed_window|minimal script|1|10000|evalsha|EVALSHA $SHA_fixed_window 1 mfw:__rand_int__ 1 1000 60000"
  "fixed_window|envoyproxy/ratelimit: INCRBY|1|10000|incrby|INCRBY efw:__rand_int__ 1"
  "fixed_window|envoyproxy/ratelimit: EXPIRE|1|10000|expire|EXPIRE efw:__rand_int__ 60"
  "token_bucket|tollgate|1|10000|fcall|FCALL acquire_token_bucket 1 tb:__rand_int__ '' 60000000 1000 1000 1 1000"
  "token_bucket|tollgate, batch of 16|16|10000|fcall|FCALL acquire_batch 16 ${KEYS16[*]} ${ARGS_TB16[*]@Q}"
  "token_bucket|minimal script|1|10000|evalsha|EVALSHA $SHA_token_bucket 1 mtb:__rand_int__ 1000 60000000 1000 1"
  "gcra|tollgate|1|10000|fcall|FCALL acquire 1 gc:__rand_int__ '' 6 1 1000 60000000 1000 0 -1 0 1 0 1000 0"
  "gcra|tollgate, batch of 16|16|10000|fcall|FCALL acquire_batch 16 ${KEYS16[*]} ${ARGS_GCRA16[*]@Q}"
  "gcra|minimal script|1|10000|evalsha|EVALSHA $SHA_gcra 1 mgc:__rand_int__ 60000 1000 1"
  "leaky_bucket (police)|tollgate|1|10000|fcall|FCALL acquire 1 lb:__rand_int__ '' 2 1 1000 60000000 0 999 -1 0 1 0 1000 0"
  "sliding_window_counter|tollgate|1|10000|fcall|FCALL acquire 1 sw:__rand_int__ '' 5 1 1000 60000000 0 0 -1 0 1 0 1000 0"
  "sliding_window_counter|minimal script|1|10000|evalsha|EVALSHA $SHA_sliding_window_counter 1 msw:__rand_int__ 1000 60000000 1"
  "sliding_window_log|tollgate|1|10000|fcall|FCALL acquire_log 1 lg:__rand_int__ '' 60000000 1000 1 1000"
  "sliding_window_log|tollgate, batch of 16|16|10000|fcall|FCALL acquire_batch 16 ${KEYS16[*]} ${ARGS_LOG16[*]@Q}"
  "sliding_window_log|minimal script|1|10000|evalsha|EVALSHA $SHA_sliding_window_log 1 mlg:__rand_int__ 1000 60000000"
  "sliding_window_log, refused|tollgate|1|100|fcall|FCALL acquire_log 1 hlg:__rand_int__ '' 60000000 1000 1 1000"
  "sliding_window_log, refused|minimal script|1|100|evalsha|EVALSHA $SHA_sliding_window_log 1 mhlg:__rand_int__ 1000 60000000"
)

declare -A RESULTS
for round in $(seq 1 "$ROUNDS"); do
  echo "==> round $round of $ROUNDS" >&2
  for row in "${ROWS[@]}"; do
    IFS='|' read -r algorithm who per_call range stat command <<<"$row"
    eval "set -- $command"
    read -r usec cpu <<<"$(measure "$range" "$stat" "$@")"
    RESULTS["$algorithm|$who"]+="$(python3 -c "print(f'{$usec / $per_call:.2f} {$cpu / $per_call:.2f}')");"
  done
done

median() { tr ';' '\n' | awk -v field="$1" 'NF { print $field }' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "| algorithm | caller | Redis µs per decision | redis-server CPU µs per decision |"
echo "|---|---|---:|---:|"
for row in "${ROWS[@]}"; do
  IFS='|' read -r algorithm who _ <<<"$row"
  values=${RESULTS["$algorithm|$who"]}
  echo "| $algorithm | $who | $(median 1 <<<"$values") | $(median 2 <<<"$values") |"
done
echo
echo "redis $(redis-server --version | awk '{print $3}'), $(nproc) CPUs, $CALLS calls a row, $ROUNDS rounds, $(date -u '+%Y-%m-%d %H:%M UTC')"
