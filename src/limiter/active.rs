//! The rules in force, with what reports the decisions made under them, and what their
//! limits replaced at the last reloads.

use crate::clock::{Clock, Nanos};
use crate::observe::Observer;
use crate::rules::Rules;
use crate::store::CarriedFrom;
use std::sync::Arc;

/// The rules in force and what reports the decisions made under them, put in force together
/// so that a decision never sees one without the other.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) rules: Arc<Rules>,
    pub(crate) observer: Observer,
    /// For each of the rules' limits (by index), the limits it replaced whose keys may still
    /// hold state; empty for most.
    predecessors: Box<[Predecessors]>,
}

/// The limits one limit replaced at the last reloads (its quota, period or algorithm
/// changed): its keys start from their keys' state.
#[derive(Debug, Clone, Default)]
struct Predecessors {
    /// Newest first.
    limits: Vec<CarriedFrom>,
    /// Until when (the limiter's clock) the keys of each may still hold state: when it was
    /// replaced, plus the longest its state outlives a request. In `limits`' order.
    until: Vec<Nanos>,
}

/// The most limits a limit carries keys' state from: one per reload within the longest of
/// their horizons, the newest kept.
const MAX_PREDECESSORS: usize = 4;

impl Active {
    /// `rules` and their observer, made now: off the request path, so that no decision
    /// registers metrics or allocates labels.
    pub(crate) fn new(rules: Rules, clock: &Arc<dyn Clock>) -> Self {
        let observer = Observer::new(&rules, Arc::clone(clock));
        let predecessors = vec![Predecessors::default(); rules.limits().len()];
        Active {
            rules: Arc::new(rules),
            observer,
            predecessors: predecessors.into_boxed_slice(),
        }
    }

    /// `rules` put in force after `previous`: each limit whose descriptor entries are the
    /// same as one of `previous`'s but whose quota, period or algorithm changed carries its
    /// keys' state from it (and from what that one carried from, still alive).
    pub(crate) fn after(previous: &Active, rules: Rules, clock: &Arc<dyn Clock>) -> Self {
        let mut active = Active::new(rules, clock);
        let now = clock.now();
        let old_limits = previous.rules.limits();
        for (new, predecessors) in active.rules.limits().iter().zip(&mut active.predecessors) {
            let Some(id) = new.state_id() else {
                continue;
            };
            let Some((index, old)) = old_limits
                .iter()
                .enumerate()
                .find(|(_, old)| old.descriptor() == new.descriptor())
            else {
                continue;
            };
            let replaced = old
                .limited()
                .zip(old.state_id())
                .map(|((algorithm, quota), old_id)| {
                    let limit = CarriedFrom::new(old_id.to_le_bytes(), algorithm, *quota);
                    (limit, now.plus(algorithm.horizon(quota)))
                });
            let inherited = &previous.predecessors[index];
            let inherited = inherited
                .limits
                .iter()
                .cloned()
                .zip(inherited.until.iter().copied());
            for (limit, until) in replaced.into_iter().chain(inherited) {
                let known = predecessors
                    .limits
                    .iter()
                    .any(|l| l.prefix() == limit.prefix());
                if limit.prefix() != id.to_le_bytes()
                    && until > now
                    && !known
                    && predecessors.limits.len() < MAX_PREDECESSORS
                {
                    predecessors.limits.push(limit);
                    predecessors.until.push(until);
                }
            }
        }
        active
    }

    /// Whether the keys of the limit at `limit_index` start from the state of limits it
    /// replaced, at `now` (read only when it replaced any): while the state of any of them
    /// may still matter.
    pub(crate) fn carries(&self, limit_index: usize, now: impl FnOnce() -> Nanos) -> bool {
        let Some(predecessors) = self.predecessors.get(limit_index) else {
            return false;
        };
        let Some(&last) = predecessors.until.iter().max() else {
            return false;
        };
        last > now()
    }

    /// The limits the keys of the limit at `limit_index` start from (see [`Active::carries`]).
    pub(crate) fn carried_from(&self, limit_index: usize) -> &[CarriedFrom] {
        self.predecessors
            .get(limit_index)
            .map_or(&[], |predecessors| &predecessors.limits)
    }
}
