#!/usr/bin/env bash
# What a limit's extras cost Redis: examples/bench_server.rs in `swc-redis` (a per-IP
# sliding window counter in Redis) and modes that add to it, by default
# `swc-concurrency-redis` (a per-IP concurrency limit of 1000 beside it, in Redis too),
# alternated, under wrk; for each run, requests/s, Redis calls (FCALL) and commands (ZREM) a
# request from INFO commandstats, and redis-server's CPU time a request from /proc.
#
#   scripts/bench-redis-concurrency.sh
#   MODES="swc-redis swc-settle-redis" scripts/bench-redis-concurrency.sh
#   ROUNDS=5 DURATION=10 scripts/bench-redis-concurrency.sh
#
# Environment (defaults in brackets): MODES ["swc-redis swc-concurrency-redis"], ROUNDS [3],
# DURATION [8] seconds a run, CONNECTIONS [32], REDIS_PORT [26390] (a redis-server started
# and stopped here), PORT [3310].
# The server is pinned to CPU 0 and wrk to CPU 1; redis-server is not pinned.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-32}
REDIS_PORT=${REDIS_PORT:-26390}
PORT=${PORT:-3310}
# shellcheck disable=SC2206 # MODES is a space-separated list of words
MODES=(${MODES:-swc-redis swc-concurrency-redis})

source scripts/require.sh
require wrk wrk
require redis-server redis-server

cargo build --release --example bench_server --features redis
redis-server --port "$REDIS_PORT" --save "" --appendonly no >/dev/null 2>&1 &
REDIS_PID=$!
trap 'kill $REDIS_PID 2>/dev/null || true' EXIT
sleep 0.5
export TOLLGATE_REDIS_URL="redis://127.0.0.1:${REDIS_PORT}"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
calls() { awk -F'[:=,]' -v name="cmdstat_$1" '$1 == name {print $3}' <<<"$2"; }

for round in $(seq "$ROUNDS"); do
  for mode in "${MODES[@]}"; do
    taskset -c 0 target/release/examples/bench_server "$mode" "127.0.0.1:${PORT}" >/dev/null 2>&1 &
    server=$!
    sleep 0.5
    wrk -t1 -c"$CONNECTIONS" -d1s "http://127.0.0.1:${PORT}/" >/dev/null   # warm-up
    redis-cli -p "$REDIS_PORT" CONFIG RESETSTAT >/dev/null
    before=$(cpu_ticks "$REDIS_PID")
    out=$(taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "http://127.0.0.1:${PORT}/")
    after=$(cpu_ticks "$REDIS_PID")
    stats=$(redis-cli -p "$REDIS_PORT" INFO commandstats | tr -d '\r')
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    rate=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    fcall=$(calls fcall "$stats"); zrem=$(calls zrem "$stats")
    echo "round $round $mode: ${rate} req/s," \
      "FCALL/request $(bc <<<"scale=2; ${fcall:-0} / $requests")," \
      "ZREM/request $(bc <<<"scale=2; ${zrem:-0} / $requests")," \
      "redis-server CPU µs/request $(bc <<<"scale=2; ($after - $before) * 1000000 / $(getconf CLK_TCK) / $requests")"
    kill "$server"; wait "$server" 2>/dev/null || true
  done
done
