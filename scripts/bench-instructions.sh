#!/usr/bin/env bash
# Instructions per request that each layer adds, in process (benches/layer.rs), counted by
# valgrind: repeatable to about ±150 instructions per request from run to run, even on a noisy
# machine where timings vary by tens of percent.
#
#   scripts/bench-instructions.sh                        # every service of the bench
#   scripts/bench-instructions.sh router-tollgate-limited # some, each with its bare service
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
SERVICES=(bare tollgate tollgate-limited tollgate-limited-apart governor governor-limited
  router-bare router-tollgate router-tollgate-limited router-governor router-governor-limited
  grpc-bare grpc-tollgate-limited)
if [ $# -gt 0 ]; then
  SERVICES=("$@")
fi

source scripts/layer-bench.sh
build_layer_bench

instructions() {
  LAYER_COUNT=$1 LAYER_REQUESTS=$2 valgrind --tool=cachegrind --cache-sim=no \
    --cachegrind-out-file=/dev/null "$BIN" 2>&1 \
    | sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' | tr -d ,
}

echo
echo "| service | instructions per request | added to its bare service |"
echo "|---|---:|---:|"
declare -A per_request
# Counts `$1`'s instructions per request into per_request, once.
count() {
  if [ -z "${per_request[$1]:-}" ]; then
    local low high
    low=$(instructions "$1" "$LOW")
    high=$(instructions "$1" "$HIGH")
    per_request[$1]=$(( (high - low) / (HIGH - LOW) ))
  fi
}
for service in "${SERVICES[@]}"; do
  base=$(bare_service_of "$service")
  count "$base"
  count "$service"
  echo "| $service | ${per_request[$service]} | $(( per_request[$service] - per_request[$base] )) |"
done
echo
print_run_details
echo "- Requests: $LOW and $HIGH per service (LOW, HIGH)"
