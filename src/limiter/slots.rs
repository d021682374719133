//! Taking the slots of the concurrency limits a request meets, before its rate limits are
//! asked (see [`crate::concurrency`]).

use super::active::Active;
use super::Limiter;
use crate::concurrency::{Slot, Slots};
use crate::decision::{slot_decision, Ruling, SlotRuling};
use crate::observe::DecisionStart;
use crate::rules::tree::Matches;
use crate::store::Store;
use std::sync::Arc;

/// What the concurrency limits of a request made of it.
pub(super) enum Taking {
    /// Each took a slot (or none applied): the slots, and what to add to the rate limits'
    /// ruling.
    Taken(Option<Slots>, SlotRuling),
    /// One refused: the ruling, no slot held, no rate limit to ask.
    Refused(Ruling),
}

impl<St: Store> Limiter<St> {
    /// Takes a slot of each concurrency limit among `matches` under `active`, all or
    /// nothing: a refusal gives back the slots taken before it.
    pub(super) fn take_slots(&self, active: &Active, matches: &Matches) -> Taking {
        let rules = &*active.rules;
        let shadow_all = rules.shadow_mode() || self.shadow_mode();
        let table = &self.shared.in_flight;
        let mut slots: Option<Slots> = None;
        let mut ruling = SlotRuling::default();
        for m in matches {
            let limit = &rules.limits[m.limit_index];
            let Some(max_in_flight) = limit.max_in_flight() else {
                continue;
            };
            let shadow = shadow_all || limit.is_shadow();
            let fingerprint = table.fingerprint(&m.key);
            let (before, took) = table.take(fingerprint, max_in_flight, shadow);
            let decision = slot_decision(max_in_flight, before, took);
            if took {
                let gauge = active.observer.slot_taken(m.limit_index);
                slots
                    .get_or_insert_with(|| Slots::new(Arc::clone(table)))
                    .hold(Slot::new(fingerprint, gauge));
            }
            let observer = &active.observer;
            if !took {
                observer.slot_decided(rules, m.limit_index, shadow, &decision, false);
                let refused =
                    Ruling::refused_by_slot(m.limit_index, decision, ruling.shadow_denied);
                observer.finished(rules, &refused, DecisionStart::now());
                // Dropped, the slots taken before are given back.
                drop(slots);
                return Taking::Refused(refused);
            }
            observer.slot_decided(rules, m.limit_index, shadow, &decision, true);
            if shadow {
                ruling.shadow_denied |= !decision.allowed;
            } else if ruling.reported.is_none_or(|(_, least)| {
                (decision.remaining, decision.capacity) < (least.remaining, least.capacity)
            }) {
                ruling.reported = Some((m.limit_index, decision));
            }
        }
        Taking::Taken(slots, ruling)
    }
}
