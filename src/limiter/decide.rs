//! Deciding one request: book the limits that apply, ask the store, settle its answer into a
//! [`Ruling`], and report it.

use super::active::Active;
use super::block::{kept, start_blocks, Blocking};
use super::slots::{AskedSlots, Taking};
use super::Limiter;
use crate::concurrency::Slots;
use crate::decision::{
    Booking, Bookings, LimitDecision, Queued, Ruling, SlotRuling, StoreFailures, Weight,
    INLINE_LIMITS,
};
use crate::observe::{self, DecisionStart};
use crate::rules::tree::{rekeyed, Matches, Values};
use crate::rules::{Limit, Rules};
use crate::source::MissingPeerAddr;
use crate::store::{Acquisition, Decisions, LimitCheck, MemoryStore, Store, StoreError};
use smallvec::SmallVec;
use std::future::Future;
use std::sync::Arc;
use tracing::Instrument;

/// A decision begun: its stage, and the slots its concurrency limits took.
pub(super) type Started<F> = (Stage<F>, Option<Slots>);

/// A decision under way: settled, waiting for the slots a store keeps, or waiting for a
/// networked store's answer.
pub(super) enum Stage<F> {
    /// Settled: the ruling, and the queue places it booked.
    Settled { ruling: Ruling, queued: Queued },
    /// The store is taking the slots of the request's concurrency limits: then its rate
    /// limits, `bookings`, are asked. Boxed, as `Waiting`.
    TakingSlots(Box<(AskedSlots, Bookings)>),
    /// Boxed: a networked store's future is large, and a request decided at once should not
    /// carry its size from step to step.
    Waiting(Box<PendingRuling<F>>),
}

impl<St: Store> Limiter<St> {
    /// Starts deciding a request whose descriptor values are `values`, under `active`: at
    /// once when the store answers at once, each limit's decision then put in `each`. The
    /// slots of its concurrency limits, taken first: a request they refuse asks no rate
    /// limit.
    pub(super) fn start(
        &self,
        active: &Active,
        values: &mut dyn Values,
        default_cost: u64,
        mut each: Option<&mut Each>,
    ) -> Result<Started<St::Pending>, MissingPeerAddr> {
        let rules = &*active.rules;
        let mut matches = Matches::new();
        rules.applicable(values, &mut matches)?;
        if !rules.has_concurrency {
            let bookings = self.book(active, &mut matches, |_, limit| {
                Weight::Charged(limit.cost(values, default_cost))
            });
            let owing = self.owing(rules, &bookings, None);
            return Ok((self.acquire(active, bookings, each), owing));
        }
        let taking = self.take_slots(active, values, &matches, each.as_deref_mut())?;
        let bookings = self.book(active, &mut matches, |_, limit| {
            Weight::Charged(limit.cost(values, default_cost))
        });
        Ok(match taking {
            Taking::Taken(slots, slot_ruling) => {
                let slots = self.owing(rules, &bookings, slots);
                let stage = self.acquire_after_slots(active, bookings, slot_ruling, each);
                (stage, slots)
            }
            Taking::Refused(ruling) => {
                let stage = Stage::Settled {
                    ruling,
                    queued: None,
                };
                (stage, None)
            }
            Taking::Asked(slots, asked) => {
                let slots = self.owing(rules, &bookings, slots);
                (Stage::TakingSlots(Box::new((asked, bookings))), slots)
            }
        })
    }

    /// `slots`, also carrying what the request will owe when admitted under `rules`, which
    /// `bookings` charge (see [`crate::owed`]).
    fn owing(&self, rules: &Rules, bookings: &[Booking], slots: Option<Slots>) -> Option<Slots> {
        if !rules.has_settlements {
            return slots;
        }
        let Some(owed) = self.owed(rules, bookings) else {
            return slots;
        };
        let mut slots = slots.unwrap_or_else(|| Slots::new(Arc::clone(&self.shared.in_flight)));
        slots.owe(owed);
        Some(slots)
    }

    /// Asks the store about `bookings` under `active`, as [`acquire`](Self::acquire), for a
    /// request whose slots made `slot_ruling` of it.
    pub(super) fn acquire_after_slots(
        &self,
        active: &Active,
        bookings: Bookings,
        slot_ruling: SlotRuling,
        each: Option<&mut Each>,
    ) -> Stage<St::Pending> {
        let mut stage = self.acquire(active, bookings, each);
        match &mut stage {
            Stage::Settled { ruling, .. } => *ruling = ruling.with_slots(&slot_ruling),
            Stage::Waiting(pending) => pending.slots = slot_ruling,
            // Rate limits take no slot.
            Stage::TakingSlots(_) => {}
        }
        stage
    }

    /// The bookings of `matches` under `active` (their keys taken out), each limit's weight
    /// given by `weight` (the match's position, the limit). A shadow `unlimited` entry, the
    /// only unlimited one left in matches, has nothing to book.
    pub(super) fn book(
        &self,
        active: &Active,
        matches: &mut Matches,
        mut weight: impl FnMut(usize, &Limit) -> Weight,
    ) -> Bookings {
        let rules = &*active.rules;
        let shadow_all = rules.shadow_mode() || self.shadow_mode();
        let mut bookings = Bookings::new();
        // Each key is taken out of its match, not the matches moved into an iterator.
        for (position, m) in matches.iter_mut().enumerate() {
            let limit = &rules.limits[m.limit_index];
            if limit.limited().is_none() {
                continue;
            }
            let (cost, check_only) = match weight(position, limit) {
                Weight::Charged(cost) => (cost, false),
                Weight::Checked(cost) => (cost, true),
            };
            let carries = active.carries(m.limit_index, || self.shared.clock.now());
            // A quota refuses no call by itself: see `Limiter::check_descriptors`.
            let shadow = shadow_all || limit.is_shadow() || limit.is_quota();
            let block = limit
                .block
                .map(|block| (block, rekeyed(&m.key, block.state_id)));
            bookings.push(Booking {
                cost,
                check_only,
                quota: None,
                limit_index: m.limit_index,
                key: std::mem::take(&mut m.key),
                tag: m.tag.clone(),
                shadow,
                booked_until: None,
                carries,
                penalty: false,
            });
            if let Some((block, key)) = block {
                // Right after its limit, checked with it, never charged here (see
                // `block::start_blocks`).
                bookings.push(Booking {
                    cost: 1,
                    check_only: true,
                    quota: None,
                    limit_index: block.limit,
                    key,
                    tag: m.tag.clone(),
                    shadow,
                    booked_until: None,
                    carries: active.carries(block.limit, || self.shared.clock.now()),
                    penalty: true,
                });
            }
        }
        bookings
    }

    /// Asks the store about `bookings` under `active`: settled at once when the store
    /// answers at once, each limit's decision then put in `each`.
    pub(super) fn acquire(
        &self,
        active: &Active,
        mut bookings: Bookings,
        each: Option<&mut Each>,
    ) -> Stage<St::Pending> {
        let rules = &*active.rules;
        if bookings.is_empty() {
            return Stage::Settled {
                ruling: Ruling::unlimited(),
                queued: None,
            };
        }
        // Requests that no limit applies to pay for neither.
        let start = DecisionStart::now();
        let span = observe::decision_span(rules, &bookings);
        let entered = span.as_ref().map(tracing::Span::enter);
        let acquisition = match &bookings[..] {
            // Most requests meet one limit, and ask about it without collecting checks.
            [booking] => self.store().acquire(&[check(active, booking)]),
            bookings => self.store().acquire(&checks(active, bookings)),
        };
        match acquisition {
            Acquisition::Ready(result) => {
                let (ruling, queued, blocked) = settle(
                    self.store(),
                    active,
                    &mut bookings,
                    result,
                    self.fallback(),
                    start,
                    each,
                );
                if let Some(blocked) = blocked {
                    // Answered at once (the over-limit cache): the block is kept meanwhile, in
                    // a task that ends with the store's answer (outside a runtime, it is not
                    // kept).
                    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                        runtime.spawn(kept(blocked));
                    }
                }
                Stage::Settled { ruling, queued }
            }
            Acquisition::Pending(future) => {
                drop(entered);
                Stage::Waiting(Box::new(PendingRuling {
                    future,
                    bookings,
                    slots: SlotRuling::NONE,
                    start,
                    span: span.unwrap_or_else(tracing::Span::none),
                }))
            }
        }
    }
}

/// Each booking's limit's own decision, in the bookings' order; `None` for one that decided
/// nothing (the store failed, and another limit's policy decided).
pub(crate) type Each = Vec<Option<LimitDecision>>;

/// What the store is asked about `bookings`, one check each, in order: callers pair the
/// checks (and the decisions) with the bookings by position.
pub(super) fn checks<'a>(
    active: &'a Active,
    bookings: &'a [Booking],
) -> SmallVec<[LimitCheck<'a>; INLINE_LIMITS]> {
    bookings
        .iter()
        .map(|booking| check(active, booking))
        .collect()
}

/// The limits of `rules` as stores are told of them when they are put in force (see
/// [`Store::limits_in_force`]): one check for each limit that keeps state and that `told`
/// accepts, keys empty.
pub(super) fn limits_in_force(rules: &Rules, told: impl Fn(&Limit) -> bool) -> Vec<LimitCheck<'_>> {
    rules
        .limits()
        .iter()
        .filter(|limit| told(limit))
        .filter_map(|limit| {
            let (algorithm, quota) = limit.limited()?;
            Some(LimitCheck {
                domain: rules.domain(),
                key: &[],
                tag: &[],
                algorithm,
                quota,
                cost: 1,
                shadow: limit.is_shadow(),
                check_only: false,
                sync_every: limit.sync_every(),
                limit: limit.label(),
                approximate: limit.approximate(),
                carried_from: &[],
            })
        })
        .collect()
}

/// What the store is asked about `booking`.
fn check<'a>(active: &'a Active, booking: &'a Booking) -> LimitCheck<'a> {
    let rules = &*active.rules;
    let limit = &rules.limits[booking.limit_index];
    let (algorithm, quota) = limit
        .limited()
        .expect("only limited entries are booked (see `Limiter::start`)");
    let quota = booking.quota.as_deref().unwrap_or(quota);
    LimitCheck {
        domain: rules.domain(),
        key: &booking.key,
        tag: &booking.key[booking.tag.clone()],
        algorithm,
        quota,
        cost: booking.cost,
        shadow: booking.shadow,
        check_only: booking.check_only,
        sync_every: limit.sync_every(),
        limit: limit.label(),
        approximate: limit.approximate(),
        carried_from: if booking.carries {
            active.carried_from(booking.limit_index)
        } else {
            &[]
        },
    }
}

/// A store's answer still to come, and what is needed to make a ruling of it.
pub(super) struct PendingRuling<F> {
    future: F,
    bookings: Bookings,
    /// What the request's concurrency limits made of it (set by `start`).
    slots: SlotRuling,
    start: DecisionStart,
    span: tracing::Span,
}

impl<F> PendingRuling<F>
where
    F: Future<Output = Result<Decisions, StoreError>>,
{
    /// Waits for the answer of `store` and settles it, each limit's decision put in `each`.
    pub(super) async fn finish<St: Store>(
        self: Box<Self>,
        store: &St,
        active: &Active,
        fallback: &MemoryStore,
        each: Option<&mut Each>,
    ) -> (Ruling, Queued) {
        let PendingRuling {
            future,
            mut bookings,
            slots,
            start,
            span,
        } = *self;
        let result = future.instrument(span.clone()).await;
        let (ruling, queued, blocked) =
            span.in_scope(|| settle(store, active, &mut bookings, result, fallback, start, each));
        if let Some(blocked) = blocked {
            kept(blocked).instrument(span).await;
        }
        (ruling.with_slots(&slots), queued)
    }
}

/// The ruling on `bookings` from the `store`'s `result`, and the bookings that hold queue
/// places (admitted by an enforced shaping leaky bucket), taken out of `bookings`. Reports
/// the decision begun at `start`, puts each limit's decision in `each` (none when the
/// store failed), and starts the blocks of the limits with `block_for` that refused: the
/// store's answer to them, when it is still to come.
fn settle<St: Store>(
    store: &St,
    active: &Active,
    bookings: &mut Bookings,
    result: Result<Decisions, StoreError>,
    fallback: &MemoryStore,
    start: DecisionStart,
    each: Option<&mut Each>,
) -> (Ruling, Queued, Option<Blocking<St>>) {
    let Active {
        rules, observer, ..
    } = active;
    // Read where they are: moving the decisions copies them.
    let decisions = match &result {
        Ok(decisions) if decisions.len() == bookings.len() => decisions,
        failed => {
            let (ruling, queued) =
                after_store_error(active, bookings, failed, fallback, start, each);
            return (ruling, queued, None);
        }
    };
    let mut ruling = Ruling::of(bookings, decisions);
    let mut blocked = None;
    if rules.has_blocks && (!ruling.is_allowed() || ruling.is_shadow_denied()) {
        (ruling, blocked) = start_blocks(store, active, bookings, decisions, ruling);
    }
    observer.decided(rules, bookings, decisions, &ruling);
    if let Some(each) = each {
        let refused = !ruling.is_allowed();
        for (booking, decision) in bookings.iter().zip(decisions.iter()) {
            // Refused, the request charged none of its limits: each says what remains.
            let decision = &if refused && !booking.check_only && !booking.penalty {
                decision.uncharged(booking.cost)
            } else {
                *decision
            };
            if booking.penalty {
                // A block in force is its limit's decision: the limit's, just put in.
                if let (false, Some(Some(limit))) = (decision.allowed, each.last_mut()) {
                    *limit = limit.blocked(decision);
                }
                continue;
            }
            each.push(Some(LimitDecision::new(
                rules,
                booking.limit_index,
                booking.shadow,
                *decision,
            )));
        }
    }
    let queued = if ruling.is_allowed() {
        Booking::take_queued(bookings, decisions)
    } else {
        None
    };
    observer.finished(rules, &ruling, start);
    (ruling, queued, blocked)
}

/// [`settle`] when the store could not decide (`failed` is its error, or a wrong number of
/// decisions): the ruling of [`on_store_error`], reported, with no queue places.
fn after_store_error(
    active: &Active,
    bookings: &[Booking],
    failed: &Result<Decisions, StoreError>,
    fallback: &MemoryStore,
    start: DecisionStart,
    each: Option<&mut Each>,
) -> (Ruling, Queued) {
    let miscounted;
    let error = match failed {
        Err(error) => error,
        Ok(decisions) => {
            miscounted = StoreError::miscounted(decisions.len(), bookings.len());
            &miscounted
        }
    };
    let ruling = on_store_error(active, bookings, error, fallback, each);
    active.observer.finished(&active.rules, &ruling, start);
    (ruling, None)
}

/// The ruling when the store could not decide: a limit whose policy is `deny` denies (or,
/// in shadow mode, would have); limits whose policy is `local` are decided by `fallback`, an
/// in-memory store with the same rules; the others (`allow`) admit. The decisions made (the
/// denying limit's, the fallback's) are put in `each`.
fn on_store_error(
    active: &Active,
    bookings: &[Booking],
    error: &StoreError,
    fallback: &MemoryStore,
    each: Option<&mut Each>,
) -> Ruling {
    let Active {
        rules, observer, ..
    } = active;
    let failures = StoreFailures::of(rules, bookings);
    observer.store_failed(rules, bookings, failures.outcomes(), error);
    if let Some(denied) = failures.denial(rules, bookings) {
        if let (Some(each), Some((limit, decision))) = (each, denied.reported()) {
            // The denying limit's decision; the others decided nothing.
            let mut reported = false;
            let limits = bookings.iter().filter(|booking| !booking.penalty);
            each.extend(limits.map(|booking| {
                let this = !reported && booking.limit_index == limit;
                reported |= this;
                this.then(|| LimitDecision::new(rules, limit, booking.shadow, *decision))
            }));
        }
        return denied;
    }
    let local = failures.local(bookings);
    let mut ruling = Ruling::unlimited();
    if !local.is_empty() {
        if let Acquisition::Ready(Ok(decisions)) = fallback.acquire(&checks(active, &local)) {
            if decisions.len() == local.len() {
                ruling = Ruling::of(&local, &decisions);
                observer.decided(rules, &local, &decisions, &ruling);
                if let Some(each) = each {
                    // The fallback's decisions, in the bookings' places; the others decided
                    // nothing.
                    let limits = bookings.iter().filter(|booking| !booking.penalty);
                    each.extend(limits.map(|booking| {
                        let at = local.iter().position(|l| {
                            l.limit_index == booking.limit_index && l.key == booking.key
                        })?;
                        let decision = decisions[at];
                        Some(LimitDecision::new(
                            rules,
                            booking.limit_index,
                            booking.shadow,
                            decision,
                        ))
                    }));
                }
            }
        }
    }
    ruling.with_shadow_denied(failures.shadow_denied())
}
