use crate::rules::KeySources;
use crate::rules::{RuleErrors, Rules};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};

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
    /// failure seen again (polling a file that is still broken) is counted once, here and in
    /// the `tollgate_reloads_total{result="failure"}` metric.
    pub failed: u64,
    /// Why the file was refused, while its current content is refused; `None` once a reload
    /// succeeds.
    pub last_error: Option<RuleErrors>,
}

/// One reading of the rules file: its bytes, or why it could not be read.
pub(crate) type Reading = Result<Vec<u8>, RuleErrors>;

/// What one reload did, or why the file was refused.
pub(crate) type Outcome = Result<ReloadOutcome, RuleErrors>;

/// Reads the rules file, and puts its rules in force when its content changed and compiles.
///
/// The one place where reloads are counted, in [`ReloadStats`] and in metrics, and logged
/// ([`Reloader::record`]).
pub(crate) struct Reloader {
    path: PathBuf,
    /// Where the rules' keys take their values.
    keys: KeySources,
    apply: Box<dyn Fn(Rules) + Send + Sync>,
    /// The bytes whose rules are in force, once read. Held for a whole reload (reading,
    /// compiling, swapping), so that the watcher and an explicit call never apply two
    /// readings out of order. Never held across an await: this is blocking code.
    in_force: Mutex<Option<Vec<u8>>>,
    /// Held only to count, never while reading, so that [`Reloader::stats`] answers at once.
    stats: Mutex<ReloadStats>,
}

impl Reloader {
    /// A reloader of `path`, compiled for `keys`, that puts new rules in force with `apply`.
    pub(crate) fn new(
        path: PathBuf,
        keys: KeySources,
        apply: impl Fn(Rules) + Send + Sync + 'static,
    ) -> Self {
        Reloader {
            path,
            keys,
            apply: Box::new(apply),
            in_force: Mutex::new(None),
            stats: Mutex::new(ReloadStats::default()),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn stats(&self) -> ReloadStats {
        self.stats.lock().clone()
    }

    /// Reads the file; when its bytes differ from those in force and compile, puts their
    /// rules in force. Working rules are never replaced by a file that fails.
    pub(crate) fn reload(&self) -> Outcome {
        self.reload_if(|_| true)
            .unwrap_or_else(|_| unreachable!("every reading is confirmed"))
    }

    /// As [`Reloader::reload`], but a reading whose bytes differ from those in force is used
    /// only when `confirmed` accepts it; otherwise it is handed back, neither applied nor
    /// counted, for the watcher to compare with a later reading.
    ///
    /// Then counts and logs the outcome, with the bytes in force unlocked first, so that
    /// compiling never delays `stats()` and counting never waits on a reading.
    pub(crate) fn reload_if(
        &self,
        confirmed: impl FnOnce(&Reading) -> bool,
    ) -> Result<Outcome, Reading> {
        let mut in_force = self.in_force.lock();
        let reading = Rules::read_file(&self.path);
        let unchanged = matches!((&reading, &*in_force), (Ok(bytes), Some(old)) if bytes == old);
        if !unchanged && !confirmed(&reading) {
            return Err(reading);
        }
        let result = match reading {
            Ok(_) if unchanged => Ok(ReloadOutcome::Unchanged),
            Ok(bytes) => Rules::from_file_bytes(&self.path, &bytes, self.keys).map(|rules| {
                (self.apply)(rules);
                *in_force = Some(bytes);
                ReloadOutcome::Applied
            }),
            Err(errors) => Err(errors),
        };
        drop(in_force);
        self.record(&result);
        Ok(result)
    }

    /// Counts and logs the outcome of one reload.
    fn record(&self, result: &Outcome) {
        let path = self.path.display();
        let mut stats = self.stats.lock();
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
        let reloader = Reloader::new(path, KeySources::Request, move |rules| {
            sink.lock().push(rules)
        });
        (dir, reloader, applied)
    }

    #[test]
    fn same_bytes_are_not_applied_twice() {
        let (_dir, reloader, applied) = reloader(ONE_LIMIT);
        assert_eq!(reloader.reload(), Ok(ReloadOutcome::Applied));
        assert_eq!(reloader.reload(), Ok(ReloadOutcome::Unchanged));
        assert_eq!(applied.lock().len(), 1);
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
        assert_eq!(applied.lock().len(), 1);
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
        assert!(applied.lock().is_empty());
    }

    #[test]
    fn an_unconfirmed_change_is_handed_back_and_unchanged_bytes_need_no_confirmation() {
        let (_dir, reloader, applied) = reloader(ONE_LIMIT);
        let refused = reloader.reload_if(|_| false).expect_err("not confirmed");
        assert_eq!(refused, Ok(ONE_LIMIT.as_bytes().to_vec()));
        assert_eq!(reloader.stats(), ReloadStats::default());
        assert_eq!(reloader.reload_if(|_| true), Ok(Ok(ReloadOutcome::Applied)));
        let unchanged = reloader.reload_if(|_| panic!("unchanged bytes are not confirmed"));
        assert_eq!(unchanged, Ok(Ok(ReloadOutcome::Unchanged)));
        assert_eq!(applied.lock().len(), 1);
    }
}
