#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, all tests with all features, and the docs.
# Installs what the tests need when it is missing: redis-server (the Redis store's tests start
# their own servers), rustfmt and clippy.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# The Redis store's tests start their own redis-server processes.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "==> installing redis-server"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi

for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    echo "==> installing $component"
    rustup component add "$component"
  fi
done

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy (all features, then the default ones users build)"
cargo clippy --all-targets --all-features -- -D warnings
cargo clippy --all-targets -- -D warnings

echo "==> cargo test --all-features"
cargo test --all-features

echo "==> cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features --quiet
