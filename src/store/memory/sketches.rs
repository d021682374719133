//! The sketches of a memory store's approximate limits: built when the rules are put in
//! force, off the request path, and dropped with the limits that needed them.

use crate::algorithm::Algorithm;
use crate::store::sketch::Sketch;
use crate::store::LimitCheck;
use arc_swap::{ArcSwap, Guard};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One approximate limit's sketch, and the settings it counts under.
struct SketchEntry {
    algorithm: Algorithm,
    period: u64,
    sketch: Sketch,
}

impl SketchEntry {
    /// A sketch for `check`'s limit, if it is approximate and of an algorithm a sketch counts.
    fn for_check(check: &LimitCheck<'_>) -> Option<SketchEntry> {
        let approximate = check.approximate?;
        let counted = matches!(
            check.algorithm,
            Algorithm::FixedWindow | Algorithm::SlidingWindowCounter
        );
        counted.then(|| SketchEntry {
            algorithm: check.algorithm,
            period: check.quota.period_nanos(),
            sketch: Sketch::new(
                approximate.memory(),
                check.algorithm,
                check.domain,
                check.limit,
            ),
        })
    }

    /// Whether the entry counts `check`'s limit, under its settings.
    fn counts(&self, check: &LimitCheck<'_>) -> bool {
        self.sketch.counts(check.domain, check.limit)
            && check
                .approximate
                .is_some_and(|a| a.memory() == self.sketch.requested)
            && self.algorithm == check.algorithm
            && self.period == check.quota.period_nanos()
    }
}

/// The most sketches a store builds on its own, for checks that come without the limits in
/// force having been given (see [`Sketches::in_force`]): the oldest go first.
const MAX_UNANNOUNCED: usize = 64;

/// A store's sketches, one per approximate limit and settings.
#[derive(Default)]
pub(super) struct Sketches {
    entries: ArcSwap<Vec<Arc<SketchEntry>>>,
    /// Whether the limits in force were given: from then on, sketches are built only when
    /// they are, never on a request's thread.
    announced: AtomicBool,
}

/// The sketches as one request reads them.
pub(super) struct Loaded(Guard<Arc<Vec<Arc<SketchEntry>>>>);

impl Loaded {
    /// The sketch that counts `check`'s limit.
    pub(super) fn of(&self, check: &LimitCheck<'_>) -> Option<&Sketch> {
        check.approximate?;
        self.0
            .iter()
            .find(|entry| entry.counts(check))
            .map(|entry| &entry.sketch)
    }
}

impl Sketches {
    /// Keeps the sketches of the approximate limits among `limits` (the limits in force,
    /// one check each), building those missing and dropping the others: a limit whose
    /// settings are unchanged keeps its sketch and what it counted.
    pub(super) fn in_force(&self, limits: &[LimitCheck<'_>]) {
        let current = self.entries.load();
        let mut kept: Vec<Arc<SketchEntry>> = Vec::new();
        for check in limits {
            if kept.iter().any(|entry| entry.counts(check)) {
                continue;
            }
            match current.iter().find(|entry| entry.counts(check)) {
                Some(entry) => kept.push(Arc::clone(entry)),
                None => kept.extend(SketchEntry::for_check(check).map(Arc::new)),
            }
        }
        drop(current);
        self.entries.store(Arc::new(kept));
        self.announced.store(true, Ordering::Release);
    }

    /// The sketches, for `checks`: for a store never given the limits in force, first built
    /// for the approximate limits among `checks` that have none.
    pub(super) fn load(&self, checks: &[LimitCheck<'_>]) -> Loaded {
        let loaded = Loaded(self.entries.load());
        if self.announced.load(Ordering::Acquire) {
            return loaded;
        }
        let missing: Vec<Arc<SketchEntry>> = checks
            .iter()
            .filter(|check| loaded.of(check).is_none())
            .filter_map(SketchEntry::for_check)
            .map(Arc::new)
            .collect();
        if missing.is_empty() {
            return loaded;
        }
        drop(loaded);
        // Built once, above: the closure may run again when another request raced it.
        self.entries.rcu(|entries| {
            let mut entries = Vec::clone(entries);
            for entry in &missing {
                if !entries.iter().any(|e| same_settings(e, entry)) {
                    if entries.len() >= MAX_UNANNOUNCED {
                        entries.remove(0);
                    }
                    entries.push(Arc::clone(entry));
                }
            }
            entries
        });
        Loaded(self.entries.load())
    }
}

#[cfg(test)]
impl Sketches {
    /// How many sketches are kept.
    pub(super) fn len(&self) -> usize {
        self.entries.load().len()
    }
}

/// Whether two entries count one limit under the same settings.
fn same_settings(a: &SketchEntry, b: &SketchEntry) -> bool {
    a.algorithm == b.algorithm
        && a.period == b.period
        && a.sketch.requested == b.sketch.requested
        && a.sketch.same_limit(&b.sketch)
}
