#!/usr/bin/env bash
# What each layer of benches/layer.rs touches per request, counted by valgrind: the 64-byte
# lines of code it runs on every request, and the lines of data it reads or writes once the
# caches have lost them. In a server the kernel's network stack runs between two requests
# and evicts both, so each of these lines is fetched again on every request, and a layer's
# cost there follows its lines more than its instructions.
#
#   scripts/bench-footprint.sh                     # the router- services
#   scripts/bench-footprint.sh router-tollgate     # some, each with its bare service
#
# One callgrind run per service counts REQUESTS requests after a warm-up (see
# `count_requests` in scripts/layer-bench.sh), and before each of them the bench writes over
# 2 MiB (LAYER_EVICT), uncounted.
# Code: callgrind counts how often each instruction runs (`--dump-instr=yes`); a line of
# code is run on every request when one of its instructions ran at least REQUESTS times.
# Data: callgrind simulates a 32 KiB first-level data cache and a 1 MiB last level, which
# the writing-over empties; the last-level misses per request are the data lines the request
# touched. Both counts include what building the request and reading the response cost;
# subtract the bare service's (the columns "added") for what the layer adds.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-4000}
export LAYER_EVICT=$((2 * 1024 * 1024))
SERVICES=(router-bare router-tollgate router-tollgate-limited
  router-governor router-governor-headers router-governor-limited)
if [ $# -gt 0 ]; then
  SERVICES=("$@")
fi

source scripts/layer-bench.sh
build_layer_bench
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The lines of code that `$1` runs on every request, then the lines of data it touches.
footprint() {
  local summary
  summary=$(count_requests "$1" --dump-instr=yes --compress-pos=no --compress-strings=no \
    --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=1048576,16,64 \
    --callgrind-out-file="$WORK/$1")
  # Cost lines are `address line Ir ...`; the line after `calls=` is a call's inclusive
  # cost, not the instruction's own.
  awk -v requests="$REQUESTS" '
    function hex(text,   value, i) {
      value = 0
      for (i = 3; i <= length(text); i++)
        value = value * 16 + index("0123456789abcdef", substr(text, i, 1)) - 1
      return value
    }
    /^calls=/ { skip = 1; next }
    /^0x/ {
      if (skip) { skip = 0; next }
      count[$1] += $3
    }
    END {
      for (address in count) {
        line = int(hex(address) / 64)
        if (count[address] >= requests && !(line in hot)) {
          hot[line] = 1
          lines++
        }
      }
      printf "%d ", lines
    }' "$WORK/$1"
  per_request 'LLd misses' <<<"$summary"
}

echo
echo "| service | code lines run per request | added to its bare service | data lines touched per request | added to its bare service |"
echo "|---|---:|---:|---:|---:|"
print_rows footprint
echo
print_run_details
echo "- Requests: $REQUESTS counted per service (REQUESTS), after 256 to warm up; lines of 64 bytes"
