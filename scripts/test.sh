#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, all tests with all features, and the docs.
# Installs what the tests need when it is missing: redis-server (the Redis store's tests start
# their own servers), rustfmt and clippy.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/require.sh

# The Redis store's tests start their own redis-server processes.
require redis-server redis-server
require redis-cli redis-server

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
