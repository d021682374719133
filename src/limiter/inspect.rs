//! Looking at one client's state and forgetting it: support's "why is this customer
//! limited?" and "reset them".

use super::active::Active;
use super::decide::checks;
use super::descriptors::CallVerdict;
use super::descriptors::{bring_own_quotas, reached_by, Reached};
use super::given_values::GivenValues;
use super::Descriptor;
use super::Limiter;
use crate::decision::{Bookings, LimitDecision, Ruling, Verdict, Weight};
use crate::rules::tree::Matches;
use crate::rules::Rules;
use crate::store::{Acquisition, Decisions, Store, StoreError};
use std::sync::Arc;

impl<St: Store> Limiter<St> {
    /// What a request with `values` (as [`Limiter::check`] takes them) would get from each
    /// limit they reach, in the order the rules' walk meets them, without charging anything:
    /// whether it would be admitted, what remains, when the limit is full again, and when a
    /// refused request would be admitted. Nothing is counted in metrics or logged. A
    /// request exempt by an `unlimited` entry reaches no limit.
    ///
    /// ```
    /// use tollgate::{rules::Rules, Limiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// sources: { user: { header: x-user } }
    /// descriptors:
    ///   - key: user
    ///     rate_limit: { unit: minute, requests_per_unit: 3, name: per-user }
    /// "#)?;
    /// let limiter = Limiter::new(rules);
    /// limiter.check(&[("user", "42")], 1).await;
    /// let limits = limiter.peek(&[("user", "42")]).await?;
    /// assert_eq!(limits[0].limit(), "per-user");
    /// assert_eq!(limits[0].decision().remaining, 2);
    /// assert_eq!(limiter.peek(&[("user", "42")]).await?[0].decision().remaining, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// When the store could not answer.
    pub async fn peek(&self, values: &[(&str, &str)]) -> Result<Vec<LimitDecision>, StoreError> {
        let active = self.shared.active.load_full();
        let mut matches = Matches::new();
        let mut given = GivenValues {
            rules: &active.rules,
            values,
        };
        // Given values never need a peer address.
        if active.rules.applicable(&mut given, &mut matches).is_err() {
            return Ok(Vec::new());
        }
        let bookings = self.book(&active, &mut matches, |_, limit| {
            Weight::Checked(limit.cost(&mut given, 1))
        });
        let decisions = self.peeked(&active, &bookings).await?;
        Ok(each_limit(&active.rules, &bookings, decisions))
    }

    /// Forgets what a client, the one `values` describe, has used under every limit its
    /// values reach (those a request with them would meet, and those an `unlimited` entry
    /// or a `replaces` set aside for it), in the store and in the memory that decides while
    /// the store fails, as if it had never been seen; on Redis, the fleet's totals of a
    /// local-first limit too. Answers how many keys held state.
    ///
    /// ```
    /// use tollgate::{rules::Rules, Limiter};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// sources: { user: { header: x-user } }
    /// descriptors:
    ///   - key: user
    ///     rate_limit: { unit: hour, requests_per_unit: 1 }
    /// "#)?;
    /// let limiter = Limiter::new(rules);
    /// assert!(limiter.check(&[("user", "42")], 1).await.is_allowed());
    /// assert!(!limiter.check(&[("user", "42")], 1).await.is_allowed());
    /// assert_eq!(limiter.reset(&[("user", "42")]).await?, 1);
    /// assert!(limiter.check(&[("user", "42")], 1).await.is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// When the store could not forget: some keys may have been reset, others not.
    pub async fn reset(&self, values: &[(&str, &str)]) -> Result<u64, StoreError> {
        let active = self.shared.active.load_full();
        let mut matches = Matches::new();
        let mut given = GivenValues {
            rules: &active.rules,
            values,
        };
        // Every entry on the walk, whatever exempts or replaces: each holds the client's state.
        if active.rules.matched(&mut given, &mut matches).is_err() {
            return Ok(0);
        }
        let bookings = self.book(&active, &mut matches, |_, _| Weight::Checked(1));
        self.forget(&active, &bookings).await
    }

    /// [`Limiter::peek`] for the descriptors of a rate limit service's call, matched as
    /// [`Limiter::check_descriptors`] matches them: what a call of weight 1 on each would get
    /// now, charging nothing and reporting nothing. The answer has the shape of
    /// `check_descriptors`': whether the call would be admitted, for each descriptor, in
    /// order, what its limit would answer (`None` when it reaches no limit, an `unlimited`
    /// entry, or a limit another descriptor's replaces), and the rules they were decided
    /// under. The descriptors' `cost` is not used.
    ///
    /// ```
    /// use tollgate::rules::{KeySources, Rules};
    /// use tollgate::envoy::Descriptor;
    /// use tollgate::Limiter;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let rules = Rules::from_yaml_with(r#"
    /// domain: edge
    /// descriptors:
    ///   - key: user
    ///     rate_limit: { unit: minute, requests_per_unit: 1 }
    /// "#, KeySources::Given)?;
    /// let limiter = Limiter::new(rules);
    /// let call = [Descriptor { entries: &[("user", "42")], cost: 1, limit: None }];
    /// limiter.check_descriptors(&call).await;
    /// let peeked = limiter.peek_descriptors(&call).await?;
    /// assert!(!peeked.verdict().is_allowed(), "the next call would be refused");
    /// let limit = peeked.descriptors()[0].as_ref().expect("a limit");
    /// assert_eq!(limit.decision().remaining, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// When the store could not answer.
    pub async fn peek_descriptors(
        &self,
        descriptors: &[Descriptor<'_>],
    ) -> Result<CallVerdict, StoreError> {
        let active = self.shared.active.load_full();
        let Reached {
            mut matches,
            owners,
            unlimited,
        } = reached_by(&active.rules, descriptors);
        let mut bookings = self.book(&active, &mut matches, |_, _| Weight::Checked(1));
        bring_own_quotas(&active.rules, &mut bookings, &owners, descriptors);
        let decisions = self.peeked(&active, &bookings).await?;
        let verdict = Verdict::new(Ruling::of(&bookings, &decisions), &active.rules);
        let mut per_descriptor = vec![None; descriptors.len()];
        let limits = each_limit(&active.rules, &bookings, decisions);
        for (limit, owners) in limits.into_iter().zip(owners) {
            for owner in owners {
                per_descriptor[owner] = Some(limit.clone());
            }
        }
        Ok(CallVerdict::new(
            verdict,
            per_descriptor,
            unlimited,
            Arc::clone(&active.rules),
        ))
    }

    /// [`Limiter::reset`] for the descriptors of a rate limit service's call, matched as
    /// [`Limiter::check_descriptors`] matches them: forgets the state of the limit each
    /// reaches (and of a descriptor's own quota). Answers how many keys held state.
    ///
    /// # Errors
    ///
    /// When the store could not forget: some keys may have been reset, others not.
    pub async fn reset_descriptors(
        &self,
        descriptors: &[Descriptor<'_>],
    ) -> Result<u64, StoreError> {
        let active = self.shared.active.load_full();
        let Reached {
            mut matches,
            owners,
            ..
        } = reached_by(&active.rules, descriptors);
        let mut bookings = self.book(&active, &mut matches, |_, _| Weight::Checked(1));
        bring_own_quotas(&active.rules, &mut bookings, &owners, descriptors);
        self.forget(&active, &bookings).await
    }

    /// The store's decisions on `bookings`, none charged, none reported.
    async fn peeked(&self, active: &Active, bookings: &Bookings) -> Result<Decisions, StoreError> {
        if bookings.is_empty() {
            return Ok(Decisions::new());
        }
        let decisions = match self.store().acquire(&checks(active, bookings)) {
            Acquisition::Ready(result) => result?,
            Acquisition::Pending(pending) => pending.await?,
        };
        if decisions.len() != bookings.len() {
            return Err(StoreError::miscounted(decisions.len(), bookings.len()));
        }
        Ok(decisions)
    }

    /// Forgets the state of `bookings`' keys in the store and in the fallback memory.
    async fn forget(&self, active: &Active, bookings: &Bookings) -> Result<u64, StoreError> {
        if bookings.is_empty() {
            return Ok(0);
        }
        let checks = checks(active, bookings);
        // The fallback only holds what it decided while the store failed: its count is not
        // the store's.
        let forgotten = self.fallback().reset(&checks);
        let reset = self.store().reset(&checks);
        drop(checks);
        forgotten.await?;
        reset.await
    }
}

/// Each booking's limit's decision, from `decisions`, in order.
fn each_limit(rules: &Rules, bookings: &Bookings, decisions: Decisions) -> Vec<LimitDecision> {
    bookings
        .iter()
        .zip(decisions)
        .map(|(booking, decision)| {
            LimitDecision::new(rules, booking.limit_index, booking.shadow, decision)
        })
        .collect()
}
