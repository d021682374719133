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

# The service `$1` is compared with: each `router-` service with `router-bare`, each `grpc-`
# one with `grpc-bare`, the others with `bare`.
bare_service_of() {
  case $1 in
    router-*) echo router-bare ;;
    grpc-*) echo grpc-bare ;;
    *) echo bare ;;
  esac
}

# When, from which source and on which machine the figures above were counted.
print_run_details() {
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); source: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')"
  echo "- Machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(valgrind --version); $(rustc --version)"
}
