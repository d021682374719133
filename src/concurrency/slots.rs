//! The slots a request holds, given back when it ends.

use super::InFlight;
use crate::observe::InFlightGauge;
use crate::owed::Owed;
use crate::rules::Bounds;
use crate::store::Leases;
use http::{Extensions, HeaderMap, StatusCode};
use smallvec::SmallVec;
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// One slot taken: the key it was taken of in this process's table (`None` when the store
/// holds it), its `tollgate_in_flight` series, and, for the server's slot under an adaptive
/// limit, what the limit learns from it.
pub(crate) struct Slot {
    fingerprint: Option<u64>,
    gauge: InFlightGauge,
    sample: Option<Sample>,
}

/// A request's latency to be, for the adaptive limit: from when it went ahead (`None`
/// before) until its response ended.
struct Sample {
    started: Option<Instant>,
    in_flight: u32,
    bounds: Bounds,
}

impl Slot {
    /// A slot of the key `fingerprint` in this process's table, counted on `gauge`.
    pub(crate) fn here(fingerprint: u64, gauge: InFlightGauge) -> Self {
        Slot {
            fingerprint: Some(fingerprint),
            gauge,
            sample: None,
        }
    }

    /// A slot the store holds (in the [`Leases`] of the same [`Slots`]), counted on `gauge`.
    pub(crate) fn in_store(gauge: InFlightGauge) -> Self {
        Slot {
            fingerprint: None,
            gauge,
            sample: None,
        }
    }

    /// This slot, its request's latency (from when it goes ahead until its response ends)
    /// to be learnt by the adaptive limit within `bounds`, `in_flight` requests running
    /// with it.
    pub(crate) fn sampled(mut self, in_flight: u32, bounds: Bounds) -> Self {
        self.sample = Some(Sample {
            started: None,
            in_flight,
            bounds,
        });
        self
    }
}

/// What a request holds until its response ends: the slots of the concurrency limits it
/// took, given back when dropped (the one place a slot is given back, whichever way the
/// request ends), and the charges its response settles. Boxed: a response future and
/// body carry an `Option<Slots>`, a pointer's size for every request.
pub(crate) struct Slots(Box<Held>);

struct Held {
    table: Arc<InFlight>,
    slots: SmallVec<[Slot; 2]>,
    /// What the store holds of them, given back when dropped.
    leases: Leases,
    /// The charges the response settles, when it comes.
    owed: Option<Owed>,
}

impl Slots {
    /// No slot yet, of `table`.
    pub(crate) fn new(table: Arc<InFlight>) -> Self {
        Slots(Box::new(Held {
            table,
            slots: SmallVec::new(),
            leases: Leases::none(),
            owed: None,
        }))
    }

    /// Also carries `owed`, settled by [`Slots::settle`] when the response comes.
    pub(crate) fn owe(&mut self, owed: Owed) {
        self.0.owed = Some(owed);
    }

    /// Settles what the request owes as its response's head (`status`, `headers`,
    /// `extensions`) says; what its trailers say waits for them.
    pub(crate) fn settle(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        extensions: &Extensions,
    ) {
        if let Some(owed) = &mut self.0.owed {
            if !owed.settle_head(status, headers, extensions) {
                self.0.owed = None;
            }
        }
    }

    /// Settles what the request owes as its response's `trailers` say.
    pub(crate) fn settle_trailers(&mut self, trailers: &HeaderMap) {
        if let Some(owed) = self.0.owed.take() {
            owed.settle_trailers(trailers);
        }
    }

    /// Holds `slot` until these slots are dropped.
    pub(crate) fn hold(&mut self, slot: Slot) {
        self.0.slots.push(slot);
    }

    /// Holds the store's `leases` (of slots held [in the store](Slot::in_store)) until these
    /// slots are dropped.
    pub(crate) fn hold_leases(&mut self, leases: Leases) {
        self.0.leases = leases;
    }

    /// The request goes ahead now: the adaptive limit times it from here, leaving out its
    /// wait in a queue or for the store.
    pub(crate) fn going_ahead(mut self) -> Self {
        for slot in &mut self.0.slots {
            if let Some(sample) = &mut slot.sample {
                sample.started = Some(Instant::now());
            }
        }
        self
    }

    /// The request's response ended as it should: the adaptive limit learns its latency,
    /// and the slots are given back. (Dropped otherwise, the slots are given back and the
    /// adaptive limit learns nothing from a request refused, abandoned or failed.)
    pub(crate) fn finish(self) {
        for slot in &self.0.slots {
            let Some(Sample {
                started: Some(started),
                in_flight,
                bounds,
            }) = slot.sample
            else {
                continue;
            };
            let latency = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.0.table.adaptive().sample(latency, in_flight, bounds);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for slot in &self.slots {
            if let Some(fingerprint) = slot.fingerprint {
                self.table.give_back(fingerprint);
            }
            slot.gauge.given_back();
        }
    }
}

// What the slots share (the table's locks, a metric handle) is only touched to give them
// back, which a panic elsewhere cannot leave half done: a response body holding slots stays
// as unwind safe as the body it wraps.
impl UnwindSafe for Slots {}
impl RefUnwindSafe for Slots {}

impl fmt::Debug for Slots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slots")
            .field("held", &self.0.slots.len())
            .finish_non_exhaustive()
    }
}
