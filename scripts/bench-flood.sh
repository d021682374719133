#!/usr/bin/env bash
# What a flood of distinct clients costs the demo server in memory: its resident size before
# and after one request from each of CLIENTS addresses (127.64.0.1 on: Linux routes all of
# 127.0.0.0/8 to loopback), in memory and local-first with Redis down.
#
#   scripts/bench-flood.sh                       # the demo's local-first rules
#   RULES=my-rules.yaml CLIENTS=200000 scripts/bench-flood.sh
#
# RULES must have local-first limits (`sync_every`) for the second run to mean anything; the
# memory store ignores `sync_every` and decides the same limits exactly.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/require.sh
require redis-server redis-server
require python3 python3

RULES=${RULES:-examples/local-first.yaml}
CLIENTS=${CLIENTS:-200000}

echo "==> cargo build --release --example server --features redis"
cargo build --release --example server --features redis --quiet
SERVER=target/release/examples/server

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# One GET / from each of $2 distinct source addresses to 127.0.0.1:$1; prints the statuses.
flood() {
  python3 - "$1" "$2" <<'PY'
import socket, sys
from concurrent.futures import ThreadPoolExecutor
port, clients = int(sys.argv[1]), int(sys.argv[2])
def one(i):
    source = f"127.{64 + i // 65024}.{(i // 254) % 256}.{i % 254 + 1}"
    s = socket.socket()
    s.settimeout(5)
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: flood\r\nConnection: close\r\n\r\n")
        return s.recv(64)[9:12].decode()
    except OSError:
        return "error"
    finally:
        s.close()
statuses = {}
with ThreadPoolExecutor(32) as pool:
    for status in pool.map(one, range(clients), chunksize=256):
        statuses[status] = statuses.get(status, 0) + 1
print(" ".join(f"{count} × {status}" for status, count in sorted(statuses.items())))
PY
}

rss_kb() {
  awk '/VmRSS/ { print $2 }' "/proc/$1/status"
}

# Runs the demo with the environment in "$@", floods it, and prints what it grew by.
measure() {
  local mode=$1
  shift
  local port
  port=$(free_port)
  env "$@" TOLLGATE_RULES="$RULES" TOLLGATE_LISTEN="127.0.0.1:$port" "$SERVER" >/dev/null 2>&1 &
  local server=$!
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.1; done
  if [ -n "${REDIS_PID:-}" ]; then
    kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=
  fi
  local before after
  before=$(rss_kb "$server")
  local statuses
  statuses=$(flood "$port" "$CLIENTS")
  sleep 1
  after=$(rss_kb "$server")
  kill "$server"
  wait "$server" 2>/dev/null || true
  echo "| $mode | $((before / 1024)) | $(((after - before) / 1024)) | $(((after - before) * 1024 / CLIENTS)) | $statuses |"
}

echo
echo "| store | resident before (MiB) | grew by (MiB) | bytes per client | answers |"
echo "|---|---:|---:|---:|---|"
measure memory
redis_port=$(free_port)
redis-server --port "$redis_port" --save "" --appendonly no >/dev/null &
REDIS_PID=$!
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.1; done
measure "local-first, Redis down" TOLLGATE_REDIS_URL="redis://127.0.0.1:$redis_port"
echo
echo "- $CLIENTS clients, one request each; rules: $RULES; $(date -u '+%Y-%m-%d %H:%M UTC'); source: $(git rev-parse --short HEAD)"
