//! A request's decision in progress: the one view the layer has of the limiter's work.

use super::active::Active;
use super::decide::Each;
use super::decide::{checks, Stage, Started};
use super::Limiter;
use crate::concurrency::Slots;
use crate::decision::Ruling;
use crate::rules::Rules;
use crate::store::Store;
use arc_swap::Guard;
use std::borrow::Cow;
use std::sync::Arc;

/// A request's decision in progress, under the rules that were in force when it started.
///
/// Its [`ruling`](Deciding::ruling) is known at once when the store answers at once, and
/// after [`settle`](Deciding::settle) otherwise. A request that the ruling delays (a shaping
/// leaky bucket queued it) holds its queue places until [`go_ahead`](Deciding::go_ahead);
/// dropped before that (the client went away while it waited), it gives them back, so that
/// the next request can have them. The slots of its concurrency limits are held until the
/// ruling denies it, or until it goes ahead, which hands them on.
pub(crate) struct Deciding<'l, St: Store> {
    limiter: Cow<'l, Limiter<St>>,
    active: Snapshot,
    stage: Stage<St::Pending>,
    slots: Option<Slots>,
}

/// The rules a decision was started under: loaded for the request path, held for a future
/// that outlives it.
enum Snapshot {
    Loaded(Guard<Arc<Active>>),
    Held(Arc<Active>),
}

impl Snapshot {
    fn active(&self) -> &Arc<Active> {
        match self {
            Snapshot::Loaded(guard) => guard,
            Snapshot::Held(active) => active,
        }
    }
}

impl<'l, St: Store> Deciding<'l, St> {
    /// The decision `started` of `limiter` (its stage and slots), started under the rules
    /// `active` holds.
    pub(super) fn new(
        limiter: &'l Limiter<St>,
        active: Guard<Arc<Active>>,
        (stage, slots): Started<St::Pending>,
    ) -> Self {
        let mut deciding = Deciding {
            limiter: Cow::Borrowed(limiter),
            active: Snapshot::Loaded(active),
            stage,
            slots,
        };
        deciding.release_slots_if_denied();
        deciding
    }

    /// Gives back the slots of a request the ruling denied.
    fn release_slots_if_denied(&mut self) {
        if self.slots.is_some() && self.ruling().is_some_and(|ruling| !ruling.is_allowed()) {
            self.slots = None;
        }
    }

    /// The same decision, owning what it borrowed, for a future that outlives the request
    /// path.
    pub(crate) fn into_owned(mut self) -> Deciding<'static, St> {
        let active = Arc::clone(self.active.active());
        // What is left behind holds no queue place to give back.
        let stage = std::mem::replace(
            &mut self.stage,
            Stage::Settled {
                ruling: Ruling::unlimited(),
                queued: None,
            },
        );
        Deciding {
            limiter: Cow::Owned(Limiter::clone(&self.limiter)),
            active: Snapshot::Held(active),
            stage,
            slots: self.slots.take(),
        }
    }

    /// The rules the decision is made under: the indices of its ruling point into them.
    pub(crate) fn rules(&self) -> &Rules {
        &self.active.active().rules
    }

    /// The rules in force the decision is made under, and what goes with them.
    pub(super) fn active(&self) -> &Active {
        self.active.active()
    }

    /// The ruling, once settled; `None` while the store's answer is awaited.
    pub(crate) fn ruling(&self) -> Option<&Ruling> {
        match &self.stage {
            Stage::Settled { ruling, .. } => Some(ruling),
            Stage::TakingSlots(_) | Stage::Waiting(_) => None,
        }
    }

    /// Waits for the store's answer, if it is still to come, and returns the ruling.
    pub(crate) async fn settle(&mut self) -> Ruling {
        self.settle_each(None).await
    }

    /// [`settle`](Self::settle), each limit's decision put in `each` if the store's answer
    /// was still to come.
    pub(crate) async fn settle_each(&mut self, mut each: Option<&mut Each>) -> Ruling {
        // Dropped while waiting, the decision is left settled as unlimited, holding nothing.
        let placeholder = Stage::Settled {
            ruling: Ruling::unlimited(),
            queued: None,
        };
        let active = self.active.active();
        let mut stage = std::mem::replace(&mut self.stage, placeholder);
        let (ruling, queued) = loop {
            stage = match stage {
                Stage::TakingSlots(taking) => {
                    let (asked, bookings) = *taking;
                    let table = &self.limiter.shared.in_flight;
                    let slots = &mut self.slots;
                    match asked
                        .finish(active, table, slots, each.as_deref_mut())
                        .await
                    {
                        Ok(slot_ruling) => self.limiter.acquire_after_slots(
                            active,
                            bookings,
                            slot_ruling,
                            each.as_deref_mut(),
                        ),
                        Err(ruling) => break (ruling, None),
                    }
                }
                Stage::Waiting(pending) => {
                    let (store, fallback) = (self.limiter.store(), self.limiter.fallback());
                    break pending.finish(store, active, fallback, each).await;
                }
                Stage::Settled { ruling, queued } => break (ruling, queued),
            };
        };
        self.stage = Stage::Settled { ruling, queued };
        self.release_slots_if_denied();
        ruling
    }

    /// The request goes ahead: the queue places it booked are used, not given back, and the
    /// slots it holds are handed on, to be held until its response ends.
    #[must_use = "the slots are given back when dropped: hold them until the response ends"]
    pub(crate) fn go_ahead(mut self) -> Option<Slots> {
        if let Stage::Settled { queued, .. } = &mut self.stage {
            *queued = None;
        }
        self.slots.take().map(Slots::going_ahead)
    }
}

impl<St: Store> Drop for Deciding<'_, St> {
    fn drop(&mut self) {
        let Stage::Settled {
            ruling,
            queued: Some(queued),
        } = &self.stage
        else {
            return;
        };
        // A request admitted without a delay went ahead at once: its places are used.
        if ruling.delay().is_zero() {
            return;
        }
        let active = self.active.active();
        for (check, booking) in checks(active, queued).iter().zip(queued.iter()) {
            if let Some(booked_until) = booking.booked_until {
                self.limiter.store().cancel(check, booked_until);
            }
        }
    }
}
