//! Taking the slots a request holds while it runs, before its rate limits are asked: the
//! server's, when it sheds load, and one of each concurrency limit it meets (see
//! [`crate::concurrency`]). The server's is counted in this process; the concurrency
//! limits' in the store when it keeps slots for a fleet ([`Store::take_slots`]), else here.

use super::active::Active;
use super::decide::Each;
use super::Limiter;
use crate::concurrency::{InFlight, Slot, Slots};
use crate::decision::{slot_decision, LimitDecision, Ruling, SlotRuling, STORE_ERROR_RETRY};
use crate::observe::DecisionStart;
use crate::rules::tree::{Matches, Values};
use crate::rules::{Bounds, MaxInFlight, OnStoreError};
use crate::source::MissingPeerAddr;
use crate::store::{SlotCheck, SlotCount, Store, StoreError, TakenSlots, TakingSlots};
use smallvec::SmallVec;
use std::sync::Arc;

/// What the request's slots made of it.
pub(super) enum Taking {
    /// Each was taken (or none applied): the slots, and what to add to the rate limits'
    /// ruling.
    Taken(Option<Slots>, SlotRuling),
    /// One refused: the ruling, no slot held, no rate limit to ask.
    Refused(Ruling),
    /// The server's taken (or none applied), the concurrency limits' asked of the store:
    /// [`AskedSlots::finish`] goes on when it answers.
    Asked(Option<Slots>, AskedSlots),
}

/// A slot a request asks for: of the limit at `limit`, of the key `fingerprint`, admitted
/// under `ceiling` requests in flight.
struct Wanted {
    limit: usize,
    fingerprint: u64,
    ceiling: u32,
    shadow: bool,
    /// The bounds of the adaptive limit that learns from the request, if any.
    adaptive: Option<Bounds>,
}

/// The slots of a request's concurrency limits, asked of the store, and what the slots
/// taken before them made of the request.
pub(super) struct AskedSlots {
    future: TakingSlots,
    wanted: SmallVec<[Wanted; 2]>,
    taking: SlotTaking,
}

/// The slots of a request taken so far, and what they made of it.
struct SlotTaking {
    slots: Option<Slots>,
    ruling: SlotRuling,
}

impl<St: Store> Limiter<St> {
    /// Takes the slots of a request whose `values` met `matches` under `active`, all or
    /// nothing: the server's first, when it sheds load (by the priority `values` give),
    /// then one of each concurrency limit among `matches`, in this process or, when the
    /// store keeps slots, in the store. A refusal gives back the slots taken before it.
    /// Each slot's decision is put in `each` (when the store is asked, when it answers).
    pub(super) fn take_slots(
        &self,
        active: &Active,
        values: &mut dyn Values,
        matches: &Matches,
        mut each: Option<&mut Each>,
    ) -> Result<Taking, MissingPeerAddr> {
        let rules = &*active.rules;
        let shadow_all = rules.shadow_mode() || self.shadow_mode();
        let table = &self.shared.in_flight;
        let mut taking = SlotTaking {
            slots: None,
            ruling: SlotRuling::NONE,
        };
        if let Some(shedding) = &rules.load_shedding {
            let (max, adaptive) = match shedding.max_in_flight {
                MaxInFlight::Fixed(max) => (max, None),
                MaxInFlight::Adaptive(bounds) => {
                    let limit = table.adaptive().limit(bounds);
                    active.observer.record_adaptive_limit(limit);
                    (limit, Some(bounds))
                }
            };
            let server = Wanted {
                limit: shedding.limit,
                fingerprint: table.server(),
                ceiling: shedding.ceiling(values, max)?,
                shadow: shadow_all,
                adaptive,
            };
            if let Some(refused) = taking.take_here(active, table, &server, each.as_deref_mut()) {
                return Ok(Taking::Refused(refused));
            }
        }
        let mut wanted: SmallVec<[Wanted; 2]> = SmallVec::new();
        let mut checks: SmallVec<[SlotCheck<'_>; 2]> = SmallVec::new();
        for m in matches {
            let limit = &rules.limits[m.limit_index];
            let (Some(max_in_flight), Some(lease)) = (limit.max_in_flight(), limit.lease()) else {
                continue;
            };
            let shadow = shadow_all || limit.is_shadow();
            wanted.push(Wanted {
                limit: m.limit_index,
                fingerprint: table.fingerprint(&m.key),
                ceiling: max_in_flight,
                shadow,
                adaptive: None,
            });
            let tag = &m.key[m.tag.clone()];
            checks.push(
                SlotCheck::new(rules.domain(), &m.key, tag, max_in_flight, lease).shadow(shadow),
            );
        }
        if let Some(future) = (!checks.is_empty())
            .then(|| self.store().take_slots(&checks))
            .flatten()
        {
            let slots = taking.slots.take();
            return Ok(Taking::Asked(
                slots,
                AskedSlots {
                    future,
                    wanted,
                    taking,
                },
            ));
        }
        for want in &wanted {
            if let Some(refused) = taking.take_here(active, table, want, each.as_deref_mut()) {
                return Ok(Taking::Refused(refused));
            }
        }
        Ok(Taking::Taken(taking.slots, taking.ruling))
    }
}

impl AskedSlots {
    /// Waits for the store's answer and rules on it: the slots held (added to `slots`, the
    /// server's) and what they made of the request, or a refusal (the server's slot then
    /// given back). A store that failed is ruled on by each limit's `on_store_error`: `deny`
    /// refuses, `local` takes the slot in this process, `allow` admits without one.
    pub(super) async fn finish(
        self,
        active: &Active,
        table: &Arc<InFlight>,
        slots: &mut Option<Slots>,
        mut each: Option<&mut Each>,
    ) -> Result<SlotRuling, Ruling> {
        let AskedSlots {
            future,
            wanted,
            mut taking,
        } = self;
        taking.slots = slots.take();
        let answered = future.await;
        let outcome = match answered {
            Ok(taken) => taking.took_in_store(active, table, &wanted, taken, &mut each),
            Err(error) => taking.after_store_error(active, table, &wanted, &error, &mut each),
        };
        match outcome {
            Some(refused) => Err(refused),
            None => {
                *slots = taking.slots;
                Ok(taking.ruling)
            }
        }
    }
}

impl SlotTaking {
    /// Takes the slot `want` in this process's `table`; the refusal when it is full.
    fn take_here(
        &mut self,
        active: &Active,
        table: &Arc<InFlight>,
        want: &Wanted,
        each: Option<&mut Each>,
    ) -> Option<Ruling> {
        let (before, took) = table.take(want.fingerprint, want.ceiling, want.shadow);
        let refused = self.record(active, want, before, took, each);
        if refused.is_none() {
            let gauge = active.observer.slot_taken(want.limit);
            let mut slot = Slot::here(want.fingerprint, gauge);
            if let Some(bounds) = want.adaptive {
                slot = slot.sampled(before.saturating_add(1), bounds);
            }
            self.slots
                .get_or_insert_with(|| Slots::new(Arc::clone(table)))
                .hold(slot);
        }
        refused
    }

    /// Rules on the slots of `wanted` the store answered: held all, or, refused by the
    /// first without room, none.
    fn took_in_store(
        &mut self,
        active: &Active,
        table: &Arc<InFlight>,
        wanted: &[Wanted],
        taken: TakenSlots,
        each: &mut Option<&mut Each>,
    ) -> Option<Ruling> {
        let (counts, leases) = taken.into_parts();
        for (want, count) in wanted.iter().zip(&counts) {
            let SlotCount { in_flight, taken } = *count;
            let had_room = taken || want.shadow || in_flight < want.ceiling;
            if let Some(refused) =
                self.record(active, want, in_flight, had_room, each.as_deref_mut())
            {
                return Some(refused);
            }
        }
        if counts.len() != wanted.len() || leases.is_empty() {
            // A store that took none without saying which was full: nothing held, nothing
            // refused for it.
            return None;
        }
        let slots = self
            .slots
            .get_or_insert_with(|| Slots::new(Arc::clone(table)));
        for want in wanted {
            slots.hold(Slot::in_store(active.observer.slot_taken(want.limit)));
        }
        slots.hold_leases(leases);
        None
    }

    /// Rules on `wanted` when the store failed to take them, each by its limit's policy.
    fn after_store_error(
        &mut self,
        active: &Active,
        table: &Arc<InFlight>,
        wanted: &[Wanted],
        error: &StoreError,
        each: &mut Option<&mut Each>,
    ) -> Option<Ruling> {
        let rules = &*active.rules;
        for want in wanted {
            active.observer.slot_store_failed(rules, want.limit, error);
            match rules.limits[want.limit].on_store_error() {
                OnStoreError::Local => {
                    if let Some(refused) = self.take_here(active, table, want, each.as_deref_mut())
                    {
                        return Some(refused);
                    }
                }
                OnStoreError::Deny if want.shadow => self.ruling.shadow_denied = true,
                OnStoreError::Deny => {
                    let mut decision = slot_decision(want.ceiling, want.ceiling, false);
                    decision.reset_after = STORE_ERROR_RETRY;
                    decision.retry_after = STORE_ERROR_RETRY;
                    let refused = Ruling::store_denied(want.limit, decision)
                        .with_shadow_denied(self.ruling.shadow_denied);
                    active
                        .observer
                        .finished(rules, &refused, DecisionStart::now());
                    return Some(refused);
                }
                OnStoreError::Allow => {}
            }
        }
        None
    }

    /// Records what the slot `want` made of the request, which found `before` requests of
    /// its key in flight and `took` a slot (or had room for one): reported, put in `each`,
    /// and added to the ruling; the refusal, reported, when it had no room.
    fn record(
        &mut self,
        active: &Active,
        want: &Wanted,
        before: u32,
        took: bool,
        each: Option<&mut Each>,
    ) -> Option<Ruling> {
        let rules = &*active.rules;
        let observer = &active.observer;
        let decision = slot_decision(want.ceiling, before, took);
        observer.slot_decided(rules, want.limit, want.shadow, &decision, took);
        if let Some(each) = each {
            each.push(Some(LimitDecision::new(
                rules,
                want.limit,
                want.shadow,
                decision,
            )));
        }
        if !took {
            let shadow_denied = self.ruling.shadow_denied;
            let refused = if rules.limits[want.limit].sheds_load() {
                Ruling::shed(want.limit, decision, shadow_denied)
            } else {
                Ruling::refused_by_slot(want.limit, decision, shadow_denied)
            };
            observer.finished(rules, &refused, DecisionStart::now());
            // Dropped, the slots taken before are given back.
            self.slots = None;
            return Some(refused);
        }
        if want.shadow {
            self.ruling.shadow_denied |= !decision.allowed;
        } else if !rules.limits[want.limit].sheds_load()
            && self.ruling.reported.is_none_or(|(_, least)| {
                (decision.remaining, decision.capacity) < (least.remaining, least.capacity)
            })
        {
            // The server's room is no client's to report.
            self.ruling.reported = Some((want.limit, decision));
        }
        None
    }
}
