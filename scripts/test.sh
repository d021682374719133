#!/usr/bin/env bash
# Runs every check CI runs, over the whole workspace (the library and the `tollgate-cli`
# command): formatting, lints, all tests with all features, and the docs.
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

echo "==> cargo clippy (the workspace with all features, then the library's default ones)"
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo clippy --package tollgate --all-targets -- -D warnings

echo "==> cargo test --workspace --all-features"
cargo test --workspace --all-features

echo "==> cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features --quiet
