#!/usr/bin/env bash
# End-to-end HTTP benchmark: wrk against examples/bench_server.rs in seven modes (bare axum;
# bare axum answering with the two X-Ratelimit-* headers tollgate adds, without a limiter;
# tollgate and tower_governor with nothing limited; tower_governor sending the same two
# headers as tollgate (its use_headers); and both limiters with nearly everything limited).
#
#   scripts/bench-http.sh
#   ROUNDS=5 DURATION=10 scripts/bench-http.sh
#
# Environment (defaults in brackets):
#   ROUNDS [3]          rounds; each round runs every mode once, in turn
#   DURATION [5]        seconds of each measured wrk run
#   WARMUP [1]          seconds of an unmeasured wrk run before each measured one (0: none)
#   CONNECTIONS [32]    wrk connections (-c); wrk uses one thread (-t1)
#   PORT [3300]         the server's port on 127.0.0.1
#   BENCH_WORKERS [1]   Tokio workers of the server
#   MODES [the seven]   the modes to run, space-separated, `bare` among them (see
#                       examples/bench_server.rs; swc-redis and swc-sync need FEATURES=redis
#                       and a Redis at TOLLGATE_REDIS_URL, default redis://127.0.0.1:6379)
#   FEATURES []         cargo features of the server build, e.g. redis
#
# With taskset and at least 2 CPUs, the server is pinned to CPU 0 and wrk to CPU 1. The
# figures are medians over the rounds, and each mode's req/s is also taken against bare
# axum's in the same round (a machine's speed drifts less within a round than across rounds);
# the script prints markdown tables, the machine and the date at the end.
#
# Each measured run also records CPU time from /proc: the server's (per request, and as a
# share of one CPU), wrk's, every other process's, and the hypervisor's steal time. On a
# shared machine the last two say whether a run was disturbed; the server's CPU time per
# request is steadier than req/s when the load generator or neighbours are the limit.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONNECTIONS=${CONNECTIONS:-32}
PORT=${PORT:-3300}
export BENCH_WORKERS=${BENCH_WORKERS:-1}
# shellcheck disable=SC2206 # MODES is a space-separated list of words
MODES=(${MODES:-bare bare-headers tollgate tollgate-limited governor governor-headers governor-limited})
FEATURES=${FEATURES:-}
BIN=target/release/examples/bench_server
URL="http://127.0.0.1:${PORT}/"

source scripts/require.sh
require wrk wrk

echo "==> cargo build --release --example bench_server ${FEATURES:+--features $FEATURES}"
cargo build --release --example bench_server ${FEATURES:+--features "$FEATURES"}

# Pinning: server on CPU 0, wrk on CPU 1, when possible.
SERVER_PIN=()
WRK_PIN=()
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
  SERVER_PIN=(taskset -c 0)
  WRK_PIN=(taskset -c 1)
  PINNING="server on CPU 0, wrk on CPU 1 (taskset)"
else
  PINNING="not pinned (needs taskset and at least 2 CPUs)"
fi

WORK=$(mktemp -d)
SERVER_PID=""

stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_server() {
  local mode=$1
  if curl -s -o /dev/null --max-time 1 "$URL" 2>/dev/null; then
    echo "something already answers on $URL: stop it or choose another PORT" >&2
    exit 1
  fi
  "${SERVER_PIN[@]}" "$BIN" "$mode" "127.0.0.1:${PORT}" >"$WORK/server-$mode.log" 2>&1 &
  SERVER_PID=$!
  # Wait until it answers (any status: in the limited modes this first request is the one
  # that gets through).
  local tries
  for tries in $(seq 100); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "bench_server $mode exited:" >&2
      cat "$WORK/server-$mode.log" >&2
      exit 1
    fi
    if curl -s -o /dev/null --max-time 1 "$URL" 2>/dev/null; then
      return 0
    fi
    sleep 0.05
  done
  echo "bench_server $mode did not answer on $URL after $tries tries" >&2
  exit 1
}

# wrk's latency ("950.00us", "1.23ms", "2.00s", "1.00m") in milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
    else if (u != "ms") { print "?"; exit }
    printf "%.3f", n
  }'
}

# "pid ticks" for every process, ticks = its CPU time plus that of its reaped children
# (utime + stime + cutime + cstime, in clock ticks). One cat, so that the snapshot itself
# costs little.
snapshot() {
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk '{
    pid = $1; sub(/^.*\) /, "")   # the fields after "pid (comm) ", which may hold spaces
    print pid, $12 + $13 + $14 + $15
  }'
}

# Steal time of all CPUs, in clock ticks.
steal_ticks() {
  awk '$1 == "cpu" { print $9 }' /proc/stat
}

now_ns() {
  date +%s%N
}

# Median of the numbers on stdin (mean of the middle two for an even count).
median() {
  sort -g | awk '{ a[NR] = $1 } END {
    if (NR == 0) { print "?"; exit }
    if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2
  }'
}

TICK=$(getconf CLK_TCK)
# mode round rps p50_ms p99_ms requests non2xx socket_errors server_us_per_request
# server_cpu_pct wrk_cpu_pct others_cpu_pct steal_pct (CPU shares in % of one CPU)
RESULTS="$WORK/results.tsv"
: >"$RESULTS"

for round in $(seq "$ROUNDS"); do
  for mode in "${MODES[@]}"; do
    start_server "$mode"
    if [ "$WARMUP" != 0 ]; then
      "${WRK_PIN[@]}" wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" "$URL" >/dev/null
    fi
    out="$WORK/wrk-$mode-$round.txt"
    snapshot >"$WORK/before"
    steal_before=$(steal_ticks)
    start_ns=$(now_ns)
    "${WRK_PIN[@]}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "$URL" >"$out"
    end_ns=$(now_ns)
    steal_after=$(steal_ticks)
    snapshot >"$WORK/after"
    # CPU time over the run: the server's own; this shell's reaped children (wrk, and the
    # snapshots' few milliseconds); and every other process's.
    read -r server_ticks wrk_ticks other_ticks < <(awk -v server="$SERVER_PID" -v self="$$" '
      NR == FNR { before[$1] = $2; next }
      { d = $2 - before[$1]; if (d < 0) d = 0
        if ($1 == server) s += d; else if ($1 == self) w += d; else o += d }
      END { print s + 0, w + 0, o + 0 }' "$WORK/before" "$WORK/after")
    stop_server

    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$out")
    p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' "$out")")
    p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$out")")
    requests=$(awk '/requests in/ { print $1 }' "$out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
    socket_errors=$(awk -F'Socket errors: ' 'NF > 1 { print $2 }' "$out")
    read -r server_us server_pct wrk_pct others_pct steal_pct < <(awk \
      -v s="$server_ticks" -v w="$wrk_ticks" -v o="$other_ticks" -v st=$((steal_after - steal_before)) \
      -v tick="$TICK" -v ns=$((end_ns - start_ns)) -v n="${requests:-0}" 'BEGIN {
        wall = ns / 1e9; pct = 100 / (tick * wall)
        printf "%.2f %.1f %.1f %.1f %.1f\n", (n > 0 ? s / tick * 1e6 / n : 0), s * pct, w * pct, o * pct, st * pct
      }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$round" "${rps:-?}" \
      "$p50" "$p99" "${requests:-?}" "${non2xx:-0}" "${socket_errors:-none}" \
      "$server_us" "$server_pct" "$wrk_pct" "$others_pct" "$steal_pct" >>"$RESULTS"
    printf 'round %s/%s  %-17s %10s req/s  p50 %s ms  p99 %s ms  non-2xx %s of %s' \
      "$round" "$ROUNDS" "$mode" "${rps:-?}" "$p50" "$p99" "${non2xx:-0}" "${requests:-?}"
    printf '  | CPU: server %s %% (%s us/req), wrk %s %%, others %s %%, steal %s %%\n' \
      "$server_pct" "$server_us" "$wrk_pct" "$others_pct" "$steal_pct"
    if awk -v o="$others_pct" -v st="$steal_pct" 'BEGIN { exit !(o + st > 10) }'; then
      echo "  warning: other processes or steal took $others_pct % + $steal_pct % of a CPU during this run"
    fi
    if [ -n "$socket_errors" ]; then
      echo "  wrk socket errors: $socket_errors"
    fi
  done
done

column_of() { # mode, column number: that column over the rounds, one a line
  awk -F'\t' -v m="$1" -v c="$2" '$1 == m { print $c }' "$RESULTS"
}

round_ratios() { # mode: its req/s in % of bare axum's in the same round, one a line
  awk -F'\t' -v m="$1" '$1 == "bare" { bare[$2] = $3 }
    $1 == m && bare[$2] > 0 { print 100 * $3 / bare[$2] }' "$RESULTS"
}

bare_rps=$(column_of bare 3 | median)

echo
echo "## End-to-end HTTP (wrk): medians over $ROUNDS round(s)"
echo
echo "- Command: \`scripts/bench-http.sh\` (ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP" \
  "CONNECTIONS=$CONNECTIONS BENCH_WORKERS=$BENCH_WORKERS); each run:" \
  "\`wrk -t1 -c$CONNECTIONS -d${DURATION}s --latency $URL\`"
echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- Machine: $(nproc) CPUs (nproc), $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)," \
  "$(uname -sr) $(uname -m); $(rustc --version | awk '{ print $1, $2 }'); $(wrk --version 2>&1 | head -n 1 | awk '{ print $1, $2 }')"
echo "- Pinning: $PINNING; server with $BENCH_WORKERS Tokio worker(s)"
echo "- Source: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' with uncommitted changes')"
echo
bare_us=$(column_of bare 9 | median)
echo "| mode | req/s | p50 | p99 | req/s vs bare axum | same round vs bare axum | server CPU µs/request | vs bare axum |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for mode in "${MODES[@]}"; do
  rps=$(column_of "$mode" 3 | median)
  p50=$(column_of "$mode" 4 | median)
  p99=$(column_of "$mode" 5 | median)
  us=$(column_of "$mode" 9 | median)
  same_round=$(round_ratios "$mode" | median)
  awk -v m="$mode" -v rps="$rps" -v p50="$p50" -v p99="$p99" -v b="$bare_rps" -v r="$same_round" \
    -v us="$us" -v bus="$bare_us" \
    'BEGIN { printf "| %s | %.0f | %.3f ms | %.3f ms | %.1f %% | %.1f %% | %.2f | %.1f %% |\n", m, rps, p50, p99, 100 * rps / b, r, us, 100 * us / bus }'
done
echo
echo "Medians over the rounds, each column on its own. Same round vs bare axum = the median," \
  "over the rounds, of the mode's req/s in % of bare axum's in the same round: a round runs" \
  "every mode within about $(( ${#MODES[@]} * (DURATION + WARMUP + 1) )) s, so a machine whose speed drifts" \
  "from round to round moves this column less than the one before it. Server CPU" \
  "µs/request = the server process's CPU time (user + system, /proc) over the run ÷ the" \
  "requests wrk completed."

echo
echo "Every run, to show the spread and whether anything else ran (CPU shares in % of one CPU):"
echo
echo "| round | mode | req/s | p50 | p99 | server CPU | µs/request | wrk CPU | other processes | steal |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
awk -F'\t' '{ printf "| %s | %s | %.0f | %.3f ms | %.3f ms | %s %% | %s | %s %% | %s %% | %s %% |\n",
  $2, $1, $3, $4, $5, $10, $9, $11, $12, $13 }' "$RESULTS"

echo
echo "Status mix (wrk's \"Non-2xx or 3xx responses\" against all requests, every round):"
echo
echo "| mode | round | requests | non-2xx (429) | share limited | wrk socket errors |"
echo "|---|---:|---:|---:|---:|---|"
for mode in tollgate-limited governor-limited; do
  awk -F'\t' -v m="$mode" '$1 == m {
    share = ($6 > 0) ? sprintf("%.4f %%", 100 * $7 / $6) : "?"
    printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $6, $7, share, $8
  }' "$RESULTS"
done
