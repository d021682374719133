//! The rules in force, with what reports the decisions made under them, and what their
//! limits replaced at the last reloads.

use crate::algorithm::{Algorithm, Quota};
use crate::clock::{Clock, Nanos};
use crate::observe::Observer;
use crate::rules::tree::StateKey;
use crate::rules::Rules;
use crate::store::CarriedFrom;
use std::ops::Range;
use std::sync::Arc;

/// The rules in force and what reports the decisions made under them, put in force together
/// so that a decision never sees one without the other.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) rules: Arc<Rules>,
    pub(crate) observer: Observer,
    /// For each of the rules' limits (by index), the limits it replaced whose keys may still
    /// hold state, newest first; empty for most.
    predecessors: Box<[Vec<Predecessor>]>,
}

/// A limit that a reload replaced (its quota, period or algorithm changed): the keys of the
/// limit that took its place start from its keys' state.
#[derive(Debug, Clone)]
struct Predecessor {
    /// Its identity in stores, the first bytes of its keys.
    state_id: u64,
    algorithm: Algorithm,
    quota: Quota,
    /// Until when (the limiter's clock) its keys may still hold state: when it was replaced,
    /// plus the longest its state outlives a request.
    until: Nanos,
}

/// The most limits a limit carries keys' state from: one per reload within the longest of
/// their horizons, the newest kept.
const MAX_PREDECESSORS: usize = 4;

impl Active {
    /// `rules` and their observer, made now: off the request path, so that no decision
    /// registers metrics or allocates labels.
    pub(crate) fn new(rules: Rules, clock: &Arc<dyn Clock>) -> Self {
        let observer = Observer::new(&rules, Arc::clone(clock));
        let predecessors = vec![Vec::new(); rules.limits().len()].into_boxed_slice();
        Active {
            rules: Arc::new(rules),
            observer,
            predecessors,
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
            let replaced =
                old.limited()
                    .zip(old.state_id())
                    .map(|((algorithm, quota), state_id)| Predecessor {
                        state_id,
                        algorithm,
                        quota: *quota,
                        until: now.plus(algorithm.horizon(quota)),
                    });
            let inherited = previous.predecessors[index].iter().cloned();
            for predecessor in replaced.into_iter().chain(inherited) {
                let known = predecessors
                    .iter()
                    .any(|p: &Predecessor| p.state_id == predecessor.state_id);
                if predecessor.state_id != id
                    && predecessor.until > now
                    && !known
                    && predecessors.len() < MAX_PREDECESSORS
                {
                    predecessors.push(predecessor);
                }
            }
        }
        active
    }

    /// Where the key `key` (its tag the bytes `tag`) of the limit at `limit_index` starts
    /// from when it has no state: the same key under each limit it replaced whose keys may
    /// still hold state at `now` (read only when it replaced any).
    pub(crate) fn carried_from(
        &self,
        limit_index: usize,
        key: &StateKey,
        tag: &Range<usize>,
        now: impl FnOnce() -> Nanos,
    ) -> Vec<CarriedFrom> {
        let Some(predecessors) = self.predecessors.get(limit_index).filter(|p| !p.is_empty())
        else {
            return Vec::new();
        };
        let now = now();
        predecessors
            .iter()
            .filter(|predecessor| predecessor.until > now)
            .map(|predecessor| {
                CarriedFrom::renamed(
                    key,
                    &predecessor.state_id.to_le_bytes(),
                    tag.clone(),
                    predecessor.algorithm,
                    predecessor.quota,
                )
            })
            .collect()
    }
}
