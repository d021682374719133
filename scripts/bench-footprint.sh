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
# Code: `valgrind --tool=callgrind --dump-instr=yes` counts how often each instruction runs,
# for LOW and for HIGH requests; a line of code is run on every request when one of its
# instructions ran at least HIGH - LOW times more in the second run (start-up runs the same
# in both).
# Data: `valgrind --tool=cachegrind` simulates a 32 KiB first-level data cache and a 1 MiB
# last level, and the bench writes over 2 MiB before each request (LAYER_EVICT): the
# last-level misses per request, less the 32,768 lines written over, are the data lines the
# request touched. Both counts include what building the request and reading the response
# cost; subtract the bare service's (the last column) for what the layer adds.
set -euo pipefail
cd "$(dirname "$0")/.."

LOW=${LOW:-2000}
HIGH=${HIGH:-6000}
EVICT_BYTES=$((2 * 1024 * 1024))
SERVICES=(router-bare router-tollgate router-tollgate-limited router-governor router-governor-limited)
if [ $# -gt 0 ]; then
  SERVICES=("$@")
fi

source scripts/layer-bench.sh
build_layer_bench
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Instruction counts by address of `$1` at `$2` requests, into $WORK/$1.$2.
callgrind() {
  LAYER_COUNT=$1 LAYER_REQUESTS=$2 valgrind --tool=callgrind --dump-instr=yes \
    --compress-pos=no --compress-strings=no --callgrind-out-file="$WORK/$1.$2" "$BIN" \
    >/dev/null 2>&1
}

# Lines of code that `$1` runs on every request.
code_lines() {
  callgrind "$1" "$LOW"
  callgrind "$1" "$HIGH"
  # Cost lines are `address line count`; the line after `calls=` is a call's inclusive cost,
  # not the instruction's own.
  awk -v requests=$((HIGH - LOW)) '
    function hex(text,   value, i) {
      value = 0
      for (i = 3; i <= length(text); i++)
        value = value * 16 + index("0123456789abcdef", substr(text, i, 1)) - 1
      return value
    }
    FNR == 1 { run++ }
    /^calls=/ { skip = 1; next }
    /^0x/ {
      if (skip) { skip = 0; next }
      count[$1] += (run == 1 ? -$3 : $3)
    }
    END {
      for (address in count) {
        line = int(hex(address) / 64)
        if (count[address] >= requests && !(line in hot)) {
          hot[line] = 1
          lines++
        }
      }
      print lines + 0
    }' "$WORK/$1.$LOW" "$WORK/$1.$HIGH"
}

# Last-level data misses of `$1` at `$2` requests, writing over EVICT_BYTES before each.
data_misses() {
  LAYER_COUNT=$1 LAYER_REQUESTS=$2 LAYER_EVICT=$EVICT_BYTES valgrind --tool=cachegrind \
    --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 --LL=1048576,16,64 \
    --cachegrind-out-file=/dev/null "$BIN" 2>&1 \
    | sed -n 's/.*LLd misses: *\([0-9,]*\).*/\1/p' | tr -d ,
}

# Lines of data that `$1` touches per request.
data_lines() {
  local low high
  low=$(data_misses "$1" "$LOW")
  high=$(data_misses "$1" "$HIGH")
  echo $(( (high - low) / (HIGH - LOW) - EVICT_BYTES / 64 ))
}

echo
echo "| service | code lines run per request | added to its bare service | data lines touched per request | added to its bare service |"
echo "|---|---:|---:|---:|---:|"
declare -A code data
# Measures `$1` into code and data, once.
measure() {
  if [ -z "${code[$1]:-}" ]; then
    code[$1]=$(code_lines "$1")
    data[$1]=$(data_lines "$1")
  fi
}
for service in "${SERVICES[@]}"; do
  base=$(bare_service_of "$service")
  measure "$base"
  measure "$service"
  echo "| $service | ${code[$service]} | $(( code[$service] - code[$base] )) | ${data[$service]} | $(( data[$service] - data[$base] )) |"
done
echo
print_run_details
echo "- Requests: $LOW and $HIGH per service (LOW, HIGH); lines of 64 bytes"
