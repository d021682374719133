# Sourced by the scripts that run benches/layer.rs under valgrind
# (scripts/bench-instructions.sh, scripts/bench-footprint.sh).
source scripts/require.sh

# Builds the bench and sets BIN to its binary.
build_layer_bench() {
  require valgrind valgrind
  echo "==> cargo bench --bench layer --no-run"
  BIN=$(cargo bench --bench layer --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
  if [ -z "$BIN" ]; then
    echo "could not find the bench binary" >&2
    exit 1
  fi
}

# Runs REQUESTS requests to the bench's service `$1` under callgrind, given the valgrind
# options after it, and prints valgrind's summary. The bench first makes 256 requests to
# warm up (every client address once; the clocks calibrated); callgrind counts only inside
# the REQUESTS after them (`counted_request`: building the request, calling the service,
# reading and dropping the response), nothing of start-up or the warm-up, whose length
# varies from run to run.
count_requests() {
  local service=$1
  shift
  LAYER_COUNT=$service LAYER_REQUESTS=$REQUESTS valgrind --tool=callgrind \
    --toggle-collect='layer::counted_request*' "$@" "$BIN" 2>&1 >/dev/null
}

# The count valgrind's summary on standard input gives for `$1` (`I *refs`, `LLd misses`),
# per counted request.
per_request() {
  local total
  total=$(sed -n "s/.*$1: *\([0-9,]*\).*/\1/p" | tr -d ,)
  echo $(( total / REQUESTS ))
}

# The service `$1` is compared with: each `router-` service with `router-bare`, each `grpc-`
# one with `grpc-bare`, the others with `bare`.
bare_service_of() {
  case $1 in
    router-*) echo router-bare ;;
    grpc-*) echo grpc-bare ;;
    *) echo bare ;;
  esac
}

# A table row for each of SERVICES: the figures the command `$1` prints for the service
# (one or more, space-separated), each followed by what it adds to its bare service's. Each
# service is measured once, however many rows compare with it.
print_rows() {
  local measure=$1 service base i row
  local -A figures
  for service in "${SERVICES[@]}"; do
    base=$(bare_service_of "$service")
    for i in "$base" "$service"; do
      [ -n "${figures[$i]:-}" ] || figures[$i]=$("$measure" "$i")
    done
    local -a own=(${figures[$service]}) bare=(${figures[$base]})
    row="| $service"
    for i in "${!own[@]}"; do
      row+=" | ${own[i]} | $(( own[i] - bare[i] ))"
    done
    echo "$row |"
  done
}

# When, from which source and on which machine the figures above were counted.
print_run_details() {
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); source: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')"
  echo "- Machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(valgrind --version); $(rustc --version)"
}
