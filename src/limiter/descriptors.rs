//! Deciding the descriptors of a rate limit service's call (Envoy's RLS), all or nothing.

use super::{Deciding, Limiter};
use crate::decision::{LimitDecision, Verdict};
use crate::rules::tree::{Matches, Values};
use crate::source::MissingPeerAddr;
use crate::store::Store;

/// One descriptor of a rate limit service's call: its entries, `(key, value)` in order (as
/// Envoy's rate limit actions produce them), and the weight of the request under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor<'a> {
    /// The entries, e.g. `[("remote_address", "203.0.113.9"), ("path", "/login")]`.
    pub entries: &'a [(&'a str, &'a str)],
    /// The request's weight under the descriptor's limit (Envoy's `hits_addend`), for a
    /// limit that sets no `cost` of its own.
    pub cost: u64,
}

/// The values of a descriptor's limit: none (a limit's `cost` source has nothing to read).
struct NoValues;

impl Values for NoValues {
    fn get(&mut self, _source: usize) -> Result<Option<&str>, MissingPeerAddr> {
        Ok(None)
    }
}

impl<St: Store> Limiter<St> {
    /// Decides the descriptors of a rate limit service's call, as envoyproxy/ratelimit
    /// matches them, all or nothing: the verdict on the call, and for each descriptor, in
    /// order, the decision of the limit it reached (`None` when it reached none, reached an
    /// `unlimited` entry, or its limit is replaced by another descriptor's).
    ///
    /// Each descriptor walks the rules from the top: each entry selects an entry of the next
    /// level (an exact value, else the longest `prefix*`, else the key-only entry, which
    /// limits each value apart), and the limit of the entry the last one selects applies;
    /// the limits on the way do not (Envoy sends a descriptor for each). Rules meant for a
    /// service are compiled with [`KeySources::Given`](crate::rules::KeySources::Given), so
    /// that any key is accepted. Unlike envoyproxy/ratelimit, a call over one limit charges
    /// none of the others.
    ///
    /// ```
    /// use tollgate::Descriptor;
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
    ///     Descriptor { entries: &client, cost: 1 },
    ///     Descriptor { entries: &unknown, cost: 1 },
    /// ];
    /// let (verdict, limits) = limiter.check_descriptors(&call).await;
    /// assert!(verdict.is_allowed());
    /// assert!(limits[0].is_some() && limits[1].is_none());
    /// let (verdict, _) = limiter.check_descriptors(&call).await;
    /// assert!(!verdict.is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn check_descriptors(
        &self,
        descriptors: &[Descriptor<'_>],
    ) -> (Verdict, Vec<Option<LimitDecision>>) {
        let active = self.shared.active.load();
        let mut matches = Matches::new();
        // For each match, the descriptor that reached it.
        let mut owners = Vec::new();
        {
            let rules = &*active.rules;
            for (owner, descriptor) in descriptors.iter().enumerate() {
                let Some(matched) = rules.descriptor_limit(descriptor.entries) else {
                    continue;
                };
                // An `unlimited` entry: the descriptor is not limited (a shadow-mode one
                // only reports, and has nothing to report).
                if rules.limits()[matched.limit_index].limited().is_none() {
                    continue;
                }
                matches.push(matched);
                owners.push(owner);
            }
            let replaced = rules.replaced(&matches);
            let mut kept = replaced.iter().map(|replaced| !replaced);
            let mut kept_owners = replaced.iter().map(|replaced| !replaced);
            matches.retain(|_| kept.next().unwrap_or(true));
            owners.retain(|_| kept_owners.next().unwrap_or(true));
        }
        let mut each = Vec::new();
        let bookings = self.book(&active.rules, &mut matches, |position, limit| {
            limit.cost(&mut NoValues, descriptors[owners[position]].cost)
        });
        let stage = self.acquire(&active, bookings, Some(&mut each));
        let mut deciding = Deciding::new(self, active, stage);
        let ruling = deciding.settle_each(Some(&mut each)).await;
        let verdict = Verdict::new(ruling, deciding.rules());
        deciding.go_ahead();
        let mut per_descriptor = vec![None; descriptors.len()];
        for (decision, owner) in each.into_iter().zip(owners) {
            per_descriptor[owner] = Some(decision);
        }
        (verdict, per_descriptor)
    }
}
