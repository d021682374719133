use crate::rules::{RuleError, RuleErrors, Rules};
use serde_saphyr::Location;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Files are read up to this many bytes: past the largest rules [`Rules::from_yaml`] accepts
/// (so that it refuses an oversized file), and little enough that a device such as
/// `/dev/zero` cannot fill memory.
const READ_LIMIT: u64 = 8 * 1024 * 1024;

/// What a reload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReloadOutcome {
    /// The file had changed and its rules are now in force.
    Applied,
    /// The file holds the same bytes as the rules in force: nothing was swapped.
    Unchanged,
}

/// How reloads went since watching started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReloadStats {
    /// Reloads that put new rules in force, including the first reading when watching started.
    pub applied: u64,
    /// Reloads refused because the file could not be read or its rules were invalid. The same
    /// failure seen again (polling a file that is still broken) is counted once.
    pub failed: u64,
    /// Why the file was refused, while its current content is refused; `None` once a reload
    /// succeeds.
    pub last_error: Option<RuleErrors>,
}

/// Reads the rules file, and puts its rules in force when its content changed and compiles.
///
/// The one place where reloads are counted, in [`ReloadStats`] and in metrics, and logged
/// ([`Reloader::record`]).
pub(crate) struct Reloader {
    path: PathBuf,
    apply: Box<dyn Fn(Rules) + Send + Sync>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The content whose rules are in force, once read.
    applied: Option<Vec<u8>>,
    stats: ReloadStats,
}

impl Reloader {
    /// A reloader of `path` that puts new rules in force with `apply`.
    pub(crate) fn new(path: PathBuf, apply: impl Fn(Rules) + Send + Sync + 'static) -> Self {
        Reloader {
            path,
            apply: Box::new(apply),
            state: Mutex::new(State::default()),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn stats(&self) -> ReloadStats {
        self.lock().stats.clone()
    }

    /// Reads the file; when its bytes differ from those in force and compile, puts their
    /// rules in force. Working rules are never replaced by a file that fails.
    pub(crate) fn reload(&self) -> Result<ReloadOutcome, RuleErrors> {
        // Held while reading and compiling, so that the watcher and an explicit call never
        // apply two readings out of order. Never held across an await: this is blocking code.
        let mut state = self.lock();
        let result = self.read().and_then(|bytes| {
            if state.applied.as_ref() == Some(&bytes) {
                return Ok(ReloadOutcome::Unchanged);
            }
            let rules = self.compile(&bytes)?;
            (self.apply)(rules);
            state.applied = Some(bytes);
            Ok(ReloadOutcome::Applied)
        });
        self.record(&mut state.stats, &result);
        result
    }

    /// Counts and logs the outcome of one reload.
    fn record(&self, stats: &mut ReloadStats, result: &Result<ReloadOutcome, RuleErrors>) {
        let path = self.path.display();
        match result {
            Ok(ReloadOutcome::Applied) => {
                stats.applied += 1;
                crate::observe::record_reload(true);
                stats.last_error = None;
                tracing::info!(path = %path, "rate-limit rules loaded");
            }
            Ok(ReloadOutcome::Unchanged) => {
                stats.last_error = None;
                tracing::debug!(path = %path, "rate-limit rules file unchanged");
            }
            Err(errors) if stats.last_error.as_ref() == Some(errors) => {
                tracing::debug!(path = %path, "rate-limit rules file still refused");
            }
            Err(errors) => {
                stats.failed += 1;
                crate::observe::record_reload(false);
                stats.last_error = Some(errors.clone());
                // The errors name the file, and end with a line break that a log line has not.
                let errors = errors.to_string();
                tracing::error!(
                    "rate-limit rules not reloaded, the previous rules stay in force: {}",
                    errors.trim_end()
                );
            }
        }
    }

    fn read(&self) -> Result<Vec<u8>, RuleErrors> {
        let mut bytes = Vec::new();
        File::open(&self.path)
            .and_then(|file| file.take(READ_LIMIT).read_to_end(&mut bytes))
            .map_err(|error| self.error(format!("cannot read the rules file: {error}")))?;
        Ok(bytes)
    }

    fn compile(&self, bytes: &[u8]) -> Result<Rules, RuleErrors> {
        let text = std::str::from_utf8(bytes)
            .map_err(|error| self.error(format!("the rules file is not UTF-8 text: {error}")))?;
        Rules::from_yaml(text).map_err(|errors| errors.in_file(self.path.display().to_string()))
    }

    fn error(&self, message: String) -> RuleErrors {
        RuleErrors::new(vec![RuleError::new(Location::UNKNOWN, "", message)])
            .in_file(self.path.display().to_string())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while reloading leaves the state as consistent as before it: go on with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("path", &self.path)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const ONE_LIMIT: &str = "domain: t\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 1 }\n";

    /// A reloader of a file in a fresh directory, and the rules it applied.
    fn reloader(content: &str) -> (tempfile::TempDir, Reloader, Arc<Mutex<Vec<Rules>>>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("rules.yaml");
        std::fs::write(&path, content).expect("write rules");
        let applied = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&applied);
        let reloader = Reloader::new(path, move |rules| sink.lock().expect("lock").push(rules));
        (dir, reloader, applied)
    }

    #[test]
    fn same_bytes_are_not_applied_twice() {
        let (_dir, reloader, applied) = reloader(ONE_LIMIT);
        assert_eq!(reloader.reload(), Ok(ReloadOutcome::Applied));
        assert_eq!(reloader.reload(), Ok(ReloadOutcome::Unchanged));
        assert_eq!(applied.lock().expect("lock").len(), 1);
        assert_eq!(reloader.stats().applied, 1);
    }

    #[test]
    fn a_failure_repeated_is_counted_once_and_cleared_by_a_good_file() {
        let (_dir, reloader, applied) = reloader("domain: t\ndescriptors: [");
        let first = reloader.reload().expect_err("invalid YAML");
        assert!(first.to_string().contains("rules.yaml:"), "{first}");
        assert_eq!(reloader.reload(), Err(first.clone()));
        assert_eq!(reloader.stats().failed, 1);
        assert_eq!(reloader.stats().last_error, Some(first));

        std::fs::write(reloader.path(), ONE_LIMIT).expect("write rules");
        assert_eq!(reloader.reload(), Ok(ReloadOutcome::Applied));
        assert_eq!(reloader.stats().last_error, None);
        assert_eq!(applied.lock().expect("lock").len(), 1);
    }

    #[test]
    fn a_missing_or_binary_file_is_refused() {
        let (_dir, reloader, applied) = reloader(ONE_LIMIT);
        std::fs::write(reloader.path(), [0xff, 0xfe]).expect("write bytes");
        let binary = reloader.reload().expect_err("not UTF-8");
        assert!(binary.to_string().contains("not UTF-8"), "{binary}");
        std::fs::remove_file(reloader.path()).expect("remove");
        let missing = reloader.reload().expect_err("missing");
        assert!(missing.to_string().contains("cannot read"), "{missing}");
        assert_eq!(reloader.stats().failed, 2);
        assert!(applied.lock().expect("lock").is_empty());
    }
}
