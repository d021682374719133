#!/usr/bin/env bash
# Instructions per request that each layer adds, in process (benches/layer.rs), counted by
# valgrind: repeatable to about ±150 instructions per request from run to run, even on a noisy
# machine where timings vary by tens of percent.
#
#   scripts/bench-instructions.sh
#
# For each service the bench binary makes LOW and then HIGH requests under
# `valgrind --tool=cachegrind`; (instructions at HIGH - instructions at LOW) / (HIGH - LOW)
# is the cost of one request, without start-up (clock calibration, building the layers).
# The instruction count leaves out what an instruction costs: cache misses, and the traps of
# instructions a virtual machine intercepts (tower_governor's rejections run CPUID, which
# valgrind emulates at no cost but a VM traps at tens of microseconds: time those with
# `cargo bench --bench layer`).
set -euo pipefail
cd "$(dirname "$0")/.."

LOW=${LOW:-20000}
HIGH=${HIGH:-60000}
SERVICES=(bare tollgate tollgate-limited tollgate-limited-apart governor governor-limited)

source scripts/require.sh
require valgrind valgrind

echo "==> cargo bench --bench layer --no-run"
BIN=$(cargo bench --bench layer --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
if [ -z "$BIN" ]; then
  echo "could not find the bench binary" >&2
  exit 1
fi

instructions() {
  LAYER_COUNT=$1 LAYER_REQUESTS=$2 valgrind --tool=cachegrind --cache-sim=no \
    --cachegrind-out-file=/dev/null "$BIN" 2>&1 \
    | sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' | tr -d ,
}

echo
echo "| service | instructions per request | added to bare |"
echo "|---|---:|---:|"
bare=""
for service in "${SERVICES[@]}"; do
  low=$(instructions "$service" "$LOW")
  high=$(instructions "$service" "$HIGH")
  per_request=$(( (high - low) / (HIGH - LOW) ))
  [ -z "$bare" ] && bare=$per_request
  echo "| $service | $per_request | $(( per_request - bare )) |"
done
echo
echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); source: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')"
echo "- Machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(valgrind --version); $(rustc --version)"
echo "- Requests: $LOW and $HIGH per service (LOW, HIGH)"
