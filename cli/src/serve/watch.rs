//! Keeps the service's domains in step with its rules files: every second, the files are
//! read, and a change (a file added, edited or removed) is put in force. Reading beats
//! waiting for events here: a directory of a few small files costs microseconds to read,
//! and nothing is missed whatever the filesystem does (a volume's files swapped through a
//! symlink, as Kubernetes does, among others).

use super::domains::Domains;
use super::rules_source::RulesSource;
use super::stats::Statsd;
use super::store::Backing;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How often the files are read.
const EVERY: Duration = Duration::from_secs(1);

/// What makes the store of a new domain.
pub(crate) type StoreMaker<St> = Arc<dyn Fn() -> St + Send + Sync>;

/// Reads `source` every second and puts a change in force on `domains`, a new domain on a
/// store `store` makes; logs what changed and each file that failed (its domain keeps its
/// rules), and counts each load to `statsd` if given. The task ends with the process.
pub(crate) fn watch<St: Backing + 'static>(
    source: RulesSource,
    domains: Domains<St>,
    store: StoreMaker<St>,
    statsd: Option<Arc<Statsd>>,
) {
    let mut seen = fingerprint(source.path());
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        loop {
            every.tick().await;
            let now = fingerprint(source.path());
            if now == seen {
                continue;
            }
            seen = now;
            let loaded = source.load();
            if let Some(statsd) = &statsd {
                statsd.config_loaded(loaded.failed.is_empty());
            }
            for (file, errors) in &loaded.failed {
                eprintln!(
                    "tollgate serve: {}: not reloaded, its domain keeps its rules: {errors}",
                    file.display()
                );
            }
            let changes = domains.update(loaded, || store());
            println!(
                "tollgate serve: rules reloaded: {} in force{}",
                changes.loaded.join(", "),
                if changes.dropped.is_empty() {
                    String::new()
                } else {
                    format!(", {} dropped", changes.dropped.join(", "))
                }
            );
        }
    });
}

/// A hash of what the files at `path` hold (a file, or a directory's files by name): it
/// changes when a file is added, removed or edited.
fn fingerprint(path: &Path) -> u64 {
    let mut hasher = DefaultHasher::new();
    let files = match std::fs::read_dir(path) {
        Ok(entries) => {
            let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
            files.sort();
            files
        }
        Err(_) => vec![path.to_owned()],
    };
    for file in files {
        file.hash(&mut hasher);
        std::fs::read(&file).ok().hash(&mut hasher);
    }
    hasher.finish()
}
