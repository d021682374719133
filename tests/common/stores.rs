//! Stores that behave as a networked store can: answering later, or not at all.

use tollgate::clock::{ManualClock, Nanos};
use tollgate::store::{
    Acquisition, Decisions, LimitCheck, MemoryStore, Store, StoreError, StoreErrorKind,
};

/// A store that answers later, as a networked store does: the memory store's decisions,
/// delivered after a yield to the runtime.
pub struct LaterStore(pub MemoryStore<ManualClock>);

// Outside the semver promise: the crate's own test stores opt out of the seal.
impl tollgate::store::sealed::Sealed for LaterStore {}

impl Store for LaterStore {
    type Pending =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Decisions, StoreError>> + Send>>;

    fn acquire(&self, checks: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
        let Acquisition::Ready(result) = self.0.acquire(checks) else {
            unreachable!("the memory store answers at once")
        };
        Acquisition::Pending(Box::pin(async move {
            tokio::task::yield_now().await;
            result
        }))
    }

    fn cancel(&self, check: &LimitCheck<'_>, booked_until: Nanos) {
        self.0.cancel(check, booked_until);
    }

    fn clock(&self) -> std::sync::Arc<dyn tollgate::clock::Clock> {
        self.0.clock()
    }
}

/// A store that is always down.
pub struct DownStore;

impl tollgate::store::sealed::Sealed for DownStore {}

impl Store for DownStore {
    type Pending = std::future::Ready<Result<Decisions, StoreError>>;

    fn acquire(&self, _: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
        let error = StoreError::new(StoreErrorKind::Connection, "store unreachable");
        Acquisition::Ready(Err(error))
    }

    fn cancel(&self, _: &LimitCheck<'_>, _: Nanos) {}
}

/// `store`'s decisions on `checks`, whether it answers at once or later.
pub async fn decide<S: Store>(
    store: &S,
    checks: &[LimitCheck<'_>],
) -> Result<Decisions, StoreError> {
    match store.acquire(checks) {
        Acquisition::Ready(result) => result,
        Acquisition::Pending(pending) => pending.await,
    }
}
