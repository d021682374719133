//! Deciding the descriptors of a rate limit service's call (Envoy's RLS), all or nothing.

use super::{Deciding, Limiter};
use crate::decision::{Bookings, LimitDecision, Verdict, Weight};
use crate::rules::tree::{Matched, Matches, Values};
use crate::rules::{Limit, LimitOverride, Rules};
use crate::source::MissingPeerAddr;
use crate::store::Store;
use smallvec::SmallVec;
use std::sync::Arc;

/// One descriptor of a rate limit service's call: its entries, `(key, value)` in order (as
/// Envoy's rate limit actions produce them), and the weight of the request under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor<'a> {
    /// The entries, e.g. `[("remote_address", "203.0.113.9"), ("path", "/login")]`.
    pub entries: &'a [(&'a str, &'a str)],
    /// The request's weight under the descriptor's limit (Envoy's `hits_addend`), for a
    /// limit that sets no `cost` of its own. 0 only checks the limit, as
    /// envoyproxy/ratelimit does: it is charged nothing, and refuses the call only once
    /// the limit's count is past it (a charge kept past the limit, `stream_done`), not
    /// when it is just full.
    pub cost: u64,
    /// A quota of the descriptor's own (Envoy's `limit` override), instead of what the
    /// rules say of it; see [`LimitOverride`].
    pub limit: Option<LimitOverride>,
}

/// The weight of a booking under `limit` for descriptors of `costs`: what those charged
/// add up to, or, when each is only checked (cost 0), a check of weight 0.
fn weight(limit: &Limit, costs: impl Iterator<Item = u64>) -> Weight {
    let charged = costs
        .filter(|&cost| cost > 0)
        .map(|cost| limit.cost(&mut NoValues, cost))
        .reduce(u64::saturating_add);
    charged.map_or(Weight::Checked(0), Weight::Charged)
}

/// The limit `descriptor` reaches under `rules`: the override limit of its own quota's
/// unit, or the entry of the rules its entries reach.
fn reached(rules: &Rules, descriptor: &Descriptor<'_>) -> Option<Matched> {
    let own = descriptor.limit;
    own.and_then(|own| rules.override_match(own.unit, descriptor.entries))
        .or_else(|| rules.descriptor_limit(descriptor.entries))
}

/// Gives each booking of an override limit the quota that its descriptors (`owners`, by
/// position in `descriptors`) brought: they differ at most in their requests per unit, and
/// the strictest counts.
pub(super) fn bring_own_quotas(
    rules: &Rules,
    bookings: &mut Bookings,
    owners: &[Owners],
    descriptors: &[Descriptor<'_>],
) {
    let declared = rules.limits().len();
    for (booking, owners) in bookings.iter_mut().zip(owners) {
        if booking.limit_index < declared {
            continue;
        }
        let own = owners.iter().filter_map(|&owner| descriptors[owner].limit);
        let strictest = own.min_by_key(|own| own.requests_per_unit);
        booking.quota = strictest.map(|own| Box::new(own.quota()));
    }
}

/// What the descriptors of a call reach under the rules (see [`reached_by`]).
pub(super) struct Reached {
    /// The limits they reach that charge.
    pub(super) matches: Matches,
    /// For each match, the descriptors that reached it (by position).
    pub(super) owners: Vec<Owners>,
    /// For each descriptor, whether it reached an `unlimited` entry.
    pub(super) unlimited: Vec<bool>,
}

/// The limits `descriptors` reach under `rules`, and for each the descriptors that reached
/// it (by position): two descriptors that reach the same limit with the same values are one
/// match, so that a call stays all or nothing. Kept are the limits that no other
/// descriptor's limit replaces, but not `unlimited` entries, which leave their descriptor
/// unlimited (a shadow-mode one only reports, and has nothing to report).
pub(super) fn reached_by(rules: &Rules, descriptors: &[Descriptor<'_>]) -> Reached {
    let mut matches = Matches::new();
    let mut owners: Vec<Owners> = Vec::new();
    let mut unlimited = vec![false; descriptors.len()];
    for (owner, descriptor) in descriptors.iter().enumerate() {
        let Some(matched) = reached(rules, descriptor) else {
            continue;
        };
        unlimited[owner] = rules.limits[matched.limit_index].limited().is_none();
        // An `unlimited` entry is kept until `replaces` are known (its own replace too).
        match matches.iter().position(|m| m.key == matched.key) {
            Some(same) => owners[same].push(owner),
            None => {
                matches.push(matched);
                owners.push(smallvec::smallvec![owner]);
            }
        }
    }
    let replaced = rules.replaced(&matches);
    let (matches, owners) = matches
        .into_iter()
        .zip(owners)
        .zip(replaced)
        .filter(|((m, _), replaced)| !replaced && rules.limits[m.limit_index].limited().is_some())
        .map(|(kept, _)| kept)
        .unzip();
    Reached {
        matches,
        owners,
        unlimited,
    }
}

/// The descriptors (by position in a call) that reached one match.
pub(super) type Owners = SmallVec<[usize; 1]>;

/// The values of a descriptor's limit: none (a limit's `cost` source has nothing to read).
struct NoValues;

impl Values for NoValues {
    fn get(&mut self, _source: usize) -> Result<Option<&str>, MissingPeerAddr> {
        Ok(None)
    }
}

/// What a rate limit service's call came to ([`Limiter::check_descriptors`]): the verdict
/// on the call, each descriptor's limit's decision, and the rules they were made under.
#[derive(Debug, Clone)]
pub struct CallVerdict {
    verdict: Verdict,
    descriptors: Vec<Option<LimitDecision>>,
    unlimited: Vec<bool>,
    rules: Arc<Rules>,
}

impl CallVerdict {
    /// The call's `verdict`, each descriptor's limit's decision, which descriptors are
    /// `unlimited`, and the `rules` they were made under.
    pub(super) fn new(
        verdict: Verdict,
        descriptors: Vec<Option<LimitDecision>>,
        unlimited: Vec<bool>,
        rules: Arc<Rules>,
    ) -> Self {
        CallVerdict {
            verdict,
            descriptors,
            unlimited,
            rules,
        }
    }

    /// The verdict on the whole call: admitted only if every descriptor's limit had room.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// For each descriptor, in order, the decision of the limit it reached: `None` when it
    /// reached none, reached an `unlimited` entry, or its limit is replaced by another
    /// descriptor's, or, when the store failed, decided nothing: another limit's
    /// `on_store_error` policy decided, or its own is `allow`).
    pub fn descriptors(&self) -> &[Option<LimitDecision>] {
        &self.descriptors
    }

    /// Whether the descriptor at `position` in the call reached an `unlimited` entry (its
    /// [decision](Self::descriptors) is `None`): envoyproxy/ratelimit answers it with the
    /// most remaining it can say, where a descriptor that reached no limit says 0.
    pub fn is_unlimited(&self, position: usize) -> bool {
        self.unlimited.get(position).copied().unwrap_or(false)
    }

    /// The rules the call was decided under (a reload may have put others in force since).
    pub fn rules(&self) -> &Arc<Rules> {
        &self.rules
    }

    /// The limit of [the rules](Self::rules) that made `decision`, one of this call's
    /// [decisions](Self::descriptors): `None` for a descriptor's own quota
    /// ([`LimitOverride`](crate::envoy::LimitOverride)), which no limit of the rules made.
    pub fn limit_of(&self, decision: &LimitDecision) -> Option<&Limit> {
        self.rules.limits.get(decision.limit_index())
    }
}

impl<St: Store> Limiter<St> {
    /// Decides the descriptors of a rate limit service's call, as envoyproxy/ratelimit
    /// matches them, all or nothing: the verdict on the call, and for each descriptor, in
    /// order, the decision of the limit it reached (`None` when it reached none, reached an
    /// `unlimited` entry, or its limit is replaced by another descriptor's, `unlimited`
    /// entries' `replaces` included).
    ///
    /// Each descriptor walks the rules from the top: each entry selects an entry of the next
    /// level (an exact value, else the file's first matching `prefix*`, else the key-only
    /// entry, which limits each value apart), and the limit of the entry the last one
    /// selects applies;
    /// the limits on the way do not (Envoy sends a descriptor for each). Rules meant for a
    /// service are compiled with [`KeySources::Given`](crate::rules::KeySources::Given), so
    /// that any key is accepted. Unlike envoyproxy/ratelimit, a call over one limit charges
    /// none of the others.
    ///
    /// ```
    /// use tollgate::envoy::Descriptor;
    /// use tollgate::rules::{KeySources, Rules};
    /// use tollgate::Limiter;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let rules = Rules::from_yaml_with(r#"
    /// domain: edge
    /// descriptors:
    ///   - key: remote_address
    ///     rate_limit: { unit: minute, requests_per_unit: 1 }
    /// "#, KeySources::Given)?;
    /// let limiter = Limiter::new(rules);
    /// let client = [("remote_address", "203.0.113.9")];
    /// let unknown = [("tenant", "acme")];
    /// let call = [
    ///     Descriptor { entries: &client, cost: 1, limit: None },
    ///     Descriptor { entries: &unknown, cost: 1, limit: None },
    /// ];
    /// let first = limiter.check_descriptors(&call).await;
    /// assert!(first.verdict().is_allowed());
    /// let limits = first.descriptors();
    /// assert!(limits[0].is_some() && limits[1].is_none());
    /// let second = limiter.check_descriptors(&call).await;
    /// assert!(!second.verdict().is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn check_descriptors(&self, descriptors: &[Descriptor<'_>]) -> CallVerdict {
        let active = self.shared.active.load();
        let rules = Arc::clone(&active.rules);
        let Reached {
            mut matches,
            owners,
            unlimited,
        } = reached_by(&rules, descriptors);
        let mut each = Vec::new();
        let mut bookings = self.book(&active, &mut matches, |position, limit| {
            let costs = owners[position]
                .iter()
                .map(|&owner| descriptors[owner].cost);
            weight(limit, costs)
        });
        bring_own_quotas(&rules, &mut bookings, &owners, descriptors);
        // Quotas and charges kept whatever the answer are ruled on after the store.
        let booked = (rules.has_quotas || rules.has_settlements).then(|| bookings.clone());
        let stage = self.acquire(&active, bookings, Some(&mut each));
        let mut deciding = Deciding::new(self, active, (stage, None));
        let mut ruling = deciding.settle_each(Some(&mut each)).await;
        if let Some(booked) = &booked {
            let (active, admitted) = (deciding.active(), ruling.is_allowed());
            if admitted && rules.has_quotas {
                if let Some(refusal) = self.over_every_quota(active, booked, &mut each).await {
                    ruling = refusal;
                }
            }
            if rules.has_settlements {
                self.keep_stream_done_charges(active, booked, &each, admitted)
                    .await;
            }
        }
        let verdict = Verdict::new(ruling, &rules);
        // A rate limit service's rules hold no slots (see `concurrency`).
        drop(deciding.go_ahead());
        let mut per_descriptor = vec![None; descriptors.len()];
        for (decision, owners) in each.into_iter().zip(owners) {
            for owner in owners {
                per_descriptor[owner].clone_from(&decision);
            }
        }
        CallVerdict::new(verdict, per_descriptor, unlimited, rules)
    }
}
