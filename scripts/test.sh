#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, all tests with all features, and the docs.
# The tests need nothing beyond cargo today; when a test needs a tool (redis-server for the
# Redis store), this script installs it when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    echo "==> installing $component"
    rustup component add "$component"
  fi
done

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy"
cargo clippy --all-targets --all-features -- -D warnings

echo "==> cargo test --all-features"
cargo test --all-features

echo "==> cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features --quiet
