#!/usr/bin/env bash
# Instructions per request that each layer adds, in process (benches/layer.rs), counted by
# valgrind: repeatable to a few instructions per request from run to run, even on a noisy
# machine where timings vary by tens of percent.
#
#   scripts/bench-instructions.sh                        # every service of the bench
#   scripts/bench-instructions.sh router-tollgate-limited # some, each with its bare service
#
# For each service the bench binary makes 256 requests to warm up (every client address
# once; the clocks calibrated), then REQUESTS more under `valgrind --tool=callgrind`, which
# counts only the instructions run inside those (`counted_request`: building the request,
# calling the service, reading and dropping the response), nothing of start-up or the
# warm-up, whose length varies from run to run.
# The instruction count leaves out what an instruction costs: cache misses, and the traps of
# instructions a virtual machine intercepts (tower_governor's rejections run CPUID, which
# valgrind emulates at no cost but a VM traps at tens of microseconds: time those with
# `cargo bench --bench layer`).
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-20000}
SERVICES=(bare tollgate tollgate-limited tollgate-limited-apart governor governor-limited
  router-bare router-tollgate router-tollgate-limited router-governor router-governor-limited
  grpc-bare grpc-tollgate-limited)
if [ $# -gt 0 ]; then
  SERVICES=("$@")
fi

source scripts/layer-bench.sh
build_layer_bench

# Instructions per counted request of `$1`.
instructions() {
  local total
  total=$(LAYER_COUNT=$1 LAYER_REQUESTS=$REQUESTS valgrind --tool=callgrind \
    --toggle-collect='layer::counted_request*' --callgrind-out-file=/dev/null "$BIN" 2>&1 \
    | sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' | tr -d ,)
  echo $(( total / REQUESTS ))
}

echo
echo "| service | instructions per request | added to its bare service |"
echo "|---|---:|---:|"
declare -A per_request
# Counts `$1`'s instructions per request into per_request, once.
count() {
  if [ -z "${per_request[$1]:-}" ]; then
    per_request[$1]=$(instructions "$1")
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
echo "- Requests: $REQUESTS counted per service (REQUESTS), after 256 to warm up"
