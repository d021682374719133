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

echo "==> cargo clippy (the workspace with all features, then without --all-features)"
cargo clippy --workspace --all-targets --all-features -- -D warnings
# The tests, examples and benches with the features the library's dev-dependency on itself
# turns on (axum, reload): what `cargo test` builds.
cargo clippy --package tollgate --all-targets -- -D warnings

# The library with no feature, then with each feature alone, as a dependent may build it:
# a `cfg` that only the full set satisfies fails here. (cargo-hack's --each-feature, spelled
# out; the list is Cargo.toml's [features] less `default`.)
for feature in "" axum tonic reload redis metrics client; do
  echo "==> cargo clippy --package tollgate --lib --no-default-features --features '$feature'"
  cargo clippy --package tollgate --lib --no-default-features --features "$feature" -- -D warnings
done

echo "==> cargo test --workspace --all-features"
cargo test --workspace --all-features

echo "==> cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features --quiet
