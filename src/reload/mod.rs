//! Hot reload: a limiter follows its rules file while the server runs (feature `reload`).
//!
//! A [`RulesWatcher`] listens for file-system events about the rules file in its directory
//! (so that a file replaced by a rename, as editors and `mv` do, or through a Kubernetes
//! ConfigMap's `..data` symlink, is seen as well as one written in place) and in the
//! directory of each symlink on the way to it. On its own thread it reads the file, and when
//! the content changed, reads it again once the file was quiet for a debounce: when both
//! readings agree and compile, it swaps the new rules in with
//! [`Limiter::set_rules`](crate::Limiter::set_rules). Limits whose descriptor entries,
//! algorithm and quota are unchanged keep their counters; requests being decided finish
//! under the rules they started with.
//!
//! Replace the file atomically (write another file in the same directory, then rename it
//! over the rules) and a half-written file is never read. On Linux, a file written in place
//! is also safe: it is read only once its writer has closed it, if it does so within the
//! [poll interval](RulesWatcherBuilder::poll_interval) (5 s without one). Elsewhere no event
//! tells that a writer is done, and a writer pausing longer than the debounce mid-file may
//! have a prefix read, which is applied if it is valid rules on its own. A writer that keeps
//! the file open longer on Linux (a log-like writer, a stuck editor) does not stop reloads:
//! a warning is logged, and until that writer closes the file it is read as elsewhere, once
//! two readings a debounce apart agree.
//!
//! A file that cannot be read or does not compile never replaces working rules: every error
//! is logged with `tracing` at error level, with line and column, and counted in
//! [`ReloadStats`]. Fix the file and the next change is picked up.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::reload::{ReloadOutcome, RulesWatcher};
//! use tollgate::{Limiter, RateLimitLayer};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("rules.yaml");
//! let limits = |n: u32| format!(
//!     "domain: api\ndescriptors:\n  - key: remote_address\n    rate_limit: {{ unit: second, requests_per_unit: {n} }}\n"
//! );
//! std::fs::write(&path, limits(10))?;
//! let limiter = Limiter::from_file(&path)?; // a bad file at start is an error
//! let watcher = RulesWatcher::builder(&path)
//!     .poll_interval(Duration::from_secs(30)) // also poll, for filesystems without events
//!     .watch(limiter.clone())?;
//! let app: axum::Router = axum::Router::new().layer(RateLimitLayer::new(limiter.clone()));
//!
//! // The watcher reads the file after each change; `reload` reads it at once.
//! std::fs::write(&path, limits(20))?;
//! watcher.reload()?; // `Applied`, or `Unchanged` when the watcher was quicker
//! assert_eq!(watcher.reload()?, ReloadOutcome::Unchanged);
//! let per_second = |limiter: &Limiter| limiter.rules().limits()[0].quota().map(|q| q.requests_per_period());
//! assert_eq!(per_second(&limiter), Some(20));
//!
//! std::fs::write(&path, "domain: api\ndescriptors: [")?;
//! let error = watcher.reload().unwrap_err(); // "…/rules.yaml:2:14: …", logged too
//! assert_eq!(per_second(&limiter), Some(20)); // the working rules stay in force
//! assert_eq!(watcher.stats().failed, 1);
//! assert_eq!(watcher.stats().last_error, Some(error));
//! // Keep `watcher` while the server runs: dropping it stops watching.
//! # Ok(())
//! # }
//! ```

mod events;
mod reloader;
mod watcher;

pub use reloader::{ReloadOutcome, ReloadStats};
pub use watcher::{RulesWatcher, RulesWatcherBuilder};
