//! The domains `tollgate serve` limits: each from its rules file, decided by a limiter of
//! its own on the service's store. A call names its domain; a domain with no rules limits
//! nothing.

use super::rules_source::Loaded;
use super::store::Backing;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use tollgate::Limiter;

/// The domains served, by name.
type ByName<St> = Arc<BTreeMap<String, Served<St>>>;

/// The limiter of each domain, and the file each came from. Clones share them.
pub(crate) struct Domains<St> {
    /// Replaced whole at a reload; read for a moment, never across an `.await`.
    by_name: Arc<RwLock<ByName<St>>>,
    /// Whether every limit only reports (`SHADOW_MODE`).
    shadow: bool,
}

/// A domain served: its limiter, and the file of its rules.
struct Served<St> {
    limiter: Limiter<St>,
    file: PathBuf,
}

impl<St> Clone for Served<St> {
    fn clone(&self) -> Self {
        Served {
            limiter: self.limiter.clone(),
            file: self.file.clone(),
        }
    }
}

impl<St> Clone for Domains<St> {
    fn clone(&self) -> Self {
        Domains {
            by_name: Arc::clone(&self.by_name),
            shadow: self.shadow,
        }
    }
}

/// What a reload changed: the domains put in force, and those dropped.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    pub(crate) loaded: Vec<String>,
    pub(crate) dropped: Vec<String>,
}

impl<St: Backing> Domains<St> {
    /// The domains of `loaded`, each with a limiter on a store `store` makes, every limit
    /// only reporting when `shadow`.
    pub(crate) fn new(loaded: Loaded, store: impl Fn() -> St, shadow: bool) -> Self {
        let domains = Domains {
            by_name: Arc::new(RwLock::new(Arc::new(BTreeMap::new()))),
            shadow,
        };
        domains.update(loaded, store);
        domains
    }

    /// The limiter of `domain`, if the service limits it.
    pub(crate) fn get(&self, domain: &str) -> Option<Limiter<St>> {
        let by_name = self.snapshot();
        by_name.get(domain).map(|served| served.limiter.clone())
    }

    /// Every domain's limiter, by domain.
    pub(crate) fn limiters(&self) -> Vec<(String, Limiter<St>)> {
        let by_name = self.snapshot();
        by_name
            .iter()
            .map(|(name, served)| (name.clone(), served.limiter.clone()))
            .collect()
    }

    /// Puts `loaded` in force: a domain whose file compiled gets its new rules (its
    /// limiter keeps what each client used, as a reload does), a new one a limiter on a
    /// store `store` makes; a domain whose file failed keeps the rules it had; a domain
    /// whose file is gone is dropped.
    pub(crate) fn update(&self, loaded: Loaded, store: impl Fn() -> St) -> Changes {
        let old = self.snapshot();
        let mut by_name = BTreeMap::new();
        let mut changes = Changes::default();
        for (file, rules) in loaded.compiled {
            let domain = rules.domain().to_owned();
            let limiter = match old.get(&domain) {
                Some(served) => {
                    served.limiter.set_rules(rules);
                    served.limiter.clone()
                }
                None => {
                    let limiter = Limiter::with_store(rules, store());
                    limiter.set_shadow_mode(self.shadow);
                    limiter
                }
            };
            changes.loaded.push(domain.clone());
            by_name.insert(domain, Served { limiter, file });
        }
        // A file that failed keeps the domain it served, with the rules it had.
        for (name, served) in old.iter() {
            let failed = loaded.failed.iter().any(|(file, _)| *file == served.file);
            if failed && !by_name.contains_key(name) {
                by_name.insert(name.clone(), served.clone());
            } else if !by_name.contains_key(name) {
                changes.dropped.push(name.clone());
            }
        }
        *self.by_name.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(by_name);
        changes
    }

    /// The domains as they stand.
    fn snapshot(&self) -> ByName<St> {
        let by_name = self.by_name.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&by_name)
    }
}
