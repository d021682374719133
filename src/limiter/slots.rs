//! Taking the slots a request holds while it runs, before its rate limits are asked: the
//! server's, when it sheds load, and one of each concurrency limit it meets (see
//! [`crate::concurrency`]).

use super::active::Active;
use super::decide::Each;
use super::Limiter;
use crate::concurrency::{Slot, Slots};
use crate::decision::{slot_decision, LimitDecision, Ruling, SlotRuling};
use crate::observe::DecisionStart;
use crate::rules::tree::{Matches, Values};
use crate::rules::{Bounds, MaxInFlight};
use crate::source::MissingPeerAddr;
use crate::store::Store;
use smallvec::SmallVec;
use std::sync::Arc;

/// What the request's slots made of it.
pub(super) enum Taking {
    /// Each was taken (or none applied): the slots, and what to add to the rate limits'
    /// ruling.
    Taken(Option<Slots>, SlotRuling),
    /// One refused: the ruling, no slot held, no rate limit to ask.
    Refused(Ruling),
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

impl<St: Store> Limiter<St> {
    /// Takes the slots of a request whose `values` met `matches` under `active`, all or
    /// nothing: the server's first, when it sheds load (by the priority `values` give),
    /// then one of each concurrency limit among `matches`. A refusal gives back the slots
    /// taken before it. Each slot's decision is put in `each`.
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
        let mut wanted: SmallVec<[Wanted; 2]> = SmallVec::new();
        if let Some(shedding) = &rules.load_shedding {
            let (max, adaptive) = match shedding.max_in_flight {
                MaxInFlight::Fixed(max) => (max, None),
                MaxInFlight::Adaptive(bounds) => {
                    let limit = table.adaptive().limit(bounds);
                    active.observer.record_adaptive_limit(limit);
                    (limit, Some(bounds))
                }
            };
            wanted.push(Wanted {
                limit: shedding.limit,
                fingerprint: table.server(),
                ceiling: shedding.ceiling(values, max)?,
                shadow: shadow_all,
                adaptive,
            });
        }
        for m in matches {
            let limit = &rules.limits[m.limit_index];
            if let Some(max_in_flight) = limit.max_in_flight() {
                wanted.push(Wanted {
                    limit: m.limit_index,
                    fingerprint: table.fingerprint(&m.key),
                    ceiling: max_in_flight,
                    shadow: shadow_all || limit.is_shadow(),
                    adaptive: None,
                });
            }
        }
        let observer = &active.observer;
        let mut slots: Option<Slots> = None;
        let mut ruling = SlotRuling::NONE;
        for want in wanted {
            let (before, took) = table.take(want.fingerprint, want.ceiling, want.shadow);
            let decision = slot_decision(want.ceiling, before, took);
            observer.slot_decided(rules, want.limit, want.shadow, &decision, took);
            if let Some(each) = each.as_deref_mut() {
                each.push(Some(LimitDecision::new(
                    rules,
                    want.limit,
                    want.shadow,
                    decision,
                )));
            }
            if !took {
                let shadow_denied = ruling.shadow_denied;
                let refused = if rules.limits[want.limit].sheds_load() {
                    Ruling::shed(want.limit, decision, shadow_denied)
                } else {
                    Ruling::refused_by_slot(want.limit, decision, shadow_denied)
                };
                observer.finished(rules, &refused, DecisionStart::now());
                // Dropped, the slots taken before are given back.
                drop(slots);
                return Ok(Taking::Refused(refused));
            }
            let mut slot = Slot::new(want.fingerprint, observer.slot_taken(want.limit));
            if let Some(bounds) = want.adaptive {
                slot = slot.sampled(before.saturating_add(1), bounds);
            }
            slots
                .get_or_insert_with(|| Slots::new(Arc::clone(table)))
                .hold(slot);
            if want.shadow {
                ruling.shadow_denied |= !decision.allowed;
            } else if !rules.limits[want.limit].sheds_load()
                && ruling.reported.is_none_or(|(_, least)| {
                    (decision.remaining, decision.capacity) < (least.remaining, least.capacity)
                })
            {
                // The server's room is no client's to report.
                ruling.reported = Some((want.limit, decision));
            }
        }
        Ok(Taking::Taken(slots, ruling))
    }
}
