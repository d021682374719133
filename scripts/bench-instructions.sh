#!/usr/bin/env bash
# Instructions per request that each layer adds, in process (benches/layer.rs), counted by
# valgrind: repeatable to a few instructions per request from run to run, even on a noisy
# machine where timings vary by tens of percent.
#
#   scripts/bench-instructions.sh                        # every service of the bench
#   scripts/bench-instructions.sh router-tollgate-limited # some, each with its bare service
#
# For each service, callgrind counts the instructions of REQUESTS requests after a warm-up
# (see `count_requests` in scripts/layer-bench.sh).
# The instruction count leaves out what an instruction costs: cache misses, and the traps of
# instructions a virtual machine intercepts (tower_governor's rejections run CPUID, which
# valgrind emulates at no cost but a VM traps at tens of microseconds: time those with
# `cargo bench --bench layer`).
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-20000}
SERVICES=(bare tollgate tollgate-limited tollgate-limited-apart
  governor governor-headers governor-limited
  router-bare router-tollgate router-tollgate-limited
  router-governor router-governor-headers router-governor-limited
  grpc-bare grpc-tollgate-limited)
if [ $# -gt 0 ]; then
  SERVICES=("$@")
fi

source scripts/layer-bench.sh
build_layer_bench

# Instructions per counted request of `$1`.
instructions() {
  count_requests "$1" --callgrind-out-file=/dev/null | per_request 'I *refs'
}

echo
echo "| service | instructions per request | added to its bare service |"
echo "|---|---:|---:|"
print_rows instructions
echo
print_run_details
echo "- Requests: $REQUESTS counted per service (REQUESTS), after 256 to warm up"
