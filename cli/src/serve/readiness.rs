//! Whether `tollgate serve` can decide yet, shared by its gRPC and HTTP servers, which
//! listen from the start.
//!
//! The service goes through three phases, only forward: *starting*, with the reason it
//! cannot decide yet (the rules are loading, Redis is not reachable), *ready*, and
//! *stopping*. Its [`Domains`] are put in once built, when the service becomes ready.

use super::domains::Domains;
use super::store::Backing;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// Where the service is in its life.
#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// Not deciding yet, for this reason (e.g. `loading the rules`).
    Starting(String),
    /// Deciding.
    Ready,
    /// Finishing the calls in flight before the process exits.
    Stopping,
}

impl Phase {
    /// The phase after asking for `next`: phases only move forward, so a late reason to
    /// wait neither unreadies a ready service nor wakes a stopping one.
    fn then(&self, next: Phase) -> Phase {
        match (self, next) {
            (Phase::Stopping, _) | (_, Phase::Stopping) => Phase::Stopping,
            (Phase::Ready, _) => Phase::Ready,
            (Phase::Starting(_), next) => next,
        }
    }
}

impl fmt::Display for Phase {
    /// What `GET /healthcheck` answers, and the reason a call is refused before the
    /// service is ready.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Starting(reason) => write!(f, "starting: {reason}"),
            Phase::Ready => f.write_str("ready"),
            Phase::Stopping => f.write_str("shutting down"),
        }
    }
}

/// The service's phase and, once built, its domains. Clones share them.
pub(crate) struct Readiness<St> {
    shared: Arc<Shared<St>>,
}

/// What the clones of a [`Readiness`] share.
struct Shared<St> {
    /// Held only to read or replace the phase, never across an `.await`.
    phase: Mutex<Phase>,
    /// Set once, when the service becomes ready.
    domains: OnceLock<Domains<St>>,
}

impl<St> Clone for Readiness<St> {
    fn clone(&self) -> Self {
        Readiness {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<St: Backing> Readiness<St> {
    /// A service starting, not deciding yet for `reason`.
    pub(crate) fn starting(reason: impl Into<String>) -> Self {
        Readiness {
            shared: Arc::new(Shared {
                phase: Mutex::new(Phase::Starting(reason.into())),
                domains: OnceLock::new(),
            }),
        }
    }

    /// Tells why the service is not deciding yet, while it is starting.
    pub(crate) fn waiting_for(&self, reason: impl Into<String>) {
        self.advance(Phase::Starting(reason.into()));
    }

    /// Puts `domains` in, and marks the service ready (unless it is stopping already).
    pub(crate) fn set_ready(&self, domains: Domains<St>) {
        // Built once: `serve` builds them, then reloads them in place.
        let _ = self.shared.domains.set(domains);
        self.advance(Phase::Ready);
    }

    /// Marks the service stopping: `GET /healthcheck` answers `503`, so that a load
    /// balancer sends it nothing more.
    pub(crate) fn set_stopping(&self) {
        self.advance(Phase::Stopping);
    }

    /// `Ok` when the service is ready, else why not (`starting: ...`, `shutting down`).
    pub(crate) fn health(&self) -> Result<(), String> {
        match &*self.phase() {
            Phase::Ready => Ok(()),
            other => Err(other.to_string()),
        }
    }

    /// The domains to decide a call with, or why there are none yet. While stopping, the
    /// calls still coming on open connections are decided.
    pub(crate) fn domains(&self) -> Result<&Domains<St>, String> {
        match self.shared.domains.get() {
            Some(domains) => Ok(domains),
            None => Err(self.phase().to_string()),
        }
    }

    /// The phase, locked for as long as the guard lives: a moment.
    fn phase(&self) -> MutexGuard<'_, Phase> {
        // The phase is replaced whole: a panic elsewhere cannot leave it half-written.
        self.shared
            .phase
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves to `next`, if the phases go that way (see [`Phase::then`]).
    fn advance(&self, next: Phase) {
        let mut phase = self.phase();
        *phase = phase.then(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::rules_source::Loaded;
    use tollgate::rules::{KeySources, Rules};
    use tollgate::store::MemoryStore;

    fn domains() -> Domains<MemoryStore> {
        let yaml = "
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1 }
";
        let rules = Rules::from_yaml_with(yaml, KeySources::Given).unwrap();
        let loaded = Loaded {
            compiled: vec![("edge.yaml".into(), rules)],
            failed: Vec::new(),
        };
        Domains::new(loaded, MemoryStore::new, false)
    }

    #[test]
    fn phases_only_move_forward() {
        let starting = || Phase::Starting("loading the rules".to_owned());
        let waiting = || Phase::Starting("connecting to Redis".to_owned());
        assert_eq!(starting().then(waiting()), waiting());
        assert_eq!(starting().then(Phase::Ready), Phase::Ready);
        assert_eq!(starting().then(Phase::Stopping), Phase::Stopping);
        assert_eq!(Phase::Ready.then(waiting()), Phase::Ready);
        assert_eq!(Phase::Ready.then(Phase::Stopping), Phase::Stopping);
        assert_eq!(Phase::Stopping.then(waiting()), Phase::Stopping);
        assert_eq!(Phase::Stopping.then(Phase::Ready), Phase::Stopping);
    }

    #[test]
    fn a_starting_service_tells_why_it_cannot_decide_yet() {
        let readiness = Readiness::<MemoryStore>::starting("loading the rules");
        assert_eq!(
            readiness.health(),
            Err("starting: loading the rules".to_owned())
        );
        readiness.waiting_for("cannot connect to Redis at `redis://127.0.0.1:1`");
        let why = "starting: cannot connect to Redis at `redis://127.0.0.1:1`";
        assert_eq!(readiness.health(), Err(why.to_owned()));
        assert_eq!(readiness.domains().err().as_deref(), Some(why));
    }

    #[test]
    fn a_ready_service_decides_and_still_does_while_stopping() {
        let readiness = Readiness::starting("loading the rules");
        let shared = readiness.clone();
        readiness.set_ready(domains());
        assert_eq!(shared.health(), Ok(()));
        assert!(shared.domains().is_ok());
        shared.waiting_for("a late reason");
        assert_eq!(shared.health(), Ok(()), "ready stays ready");
        shared.set_stopping();
        assert_eq!(shared.health(), Err("shutting down".to_owned()));
        assert!(shared.domains().is_ok(), "calls in flight are decided");
    }

    #[test]
    fn a_service_stopped_while_starting_never_becomes_ready() {
        let readiness = Readiness::starting("connecting to Redis");
        readiness.set_stopping();
        assert_eq!(readiness.domains().err().as_deref(), Some("shutting down"));
        readiness.set_ready(domains());
        assert_eq!(readiness.health(), Err("shutting down".to_owned()));
    }
}
