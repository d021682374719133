#!/bin/sh
# Cargo runs this in place of rustdoc for tests/public_api.rs, which needs rustdoc's unstable JSON
# output on the stable toolchain. Setting RUSTC_BOOTSTRAP here, and not for the whole cargo run,
# keeps it away from build scripts that watch it (proc-macro2's), which would rebuild dependencies.
RUSTC_BOOTSTRAP=1 exec rustdoc "$@"
