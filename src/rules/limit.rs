//! One rate limit of the rules: what it allows, to whom, and what a request weighs.

use super::stats_key::StatsEntry;
use super::tree::Values;
use super::OnStoreError;
use super::Settlement;
use crate::algorithm::{Algorithm, Quota};
use crate::store::Approximate;
use std::num::IntErrorKind;
use std::sync::Arc;
use std::time::Duration;

/// One rate limit of the rules.
#[derive(Debug, Clone)]
pub struct Limit {
    /// [`Limit::label`], shared: with the verdicts that name the limit, and with the answers
    /// `response` keeps for it, which know it by its address.
    pub(super) label: Arc<str>,
    pub(super) cost: Option<Cost>,
    pub(super) name: Option<String>,
    pub(super) descriptor: String,
    /// The sources of the descriptor entries leading to this limit, in order.
    pub(crate) sources: Box<[usize]>,
    pub(super) rate: Rate,
    pub(super) shadow: bool,
    /// `quota_mode`: refuses a rate limit service's call only when every quota limit the
    /// call reaches is over.
    pub(super) quota: bool,
    /// `metadata`: what a rate limit service returns of the limit.
    pub(super) metadata: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
    /// The descriptor entries on the way to the limit, as its statistics key names them.
    pub(super) stats_path: Arc<[StatsEntry]>,
    pub(super) on_store_error: OnStoreError,
    pub(super) sync_every: Option<Duration>,
    pub(super) approximate: Option<Approximate>,
    pub(super) replaces: Vec<String>,
    /// How long a slot of a `concurrency` limit is held in a store shared by a fleet unless
    /// renewed.
    pub(super) lease: Option<Duration>,
    /// Whether this is the server's `load_shedding` limit: its refusals say the server is
    /// busy (`503`), not that the client asked too much.
    pub(super) sheds: bool,
    /// `block_for`: how long a key this limit refuses stays refused, kept by another limit.
    pub(crate) block: Option<Block>,
    /// `settle` or `count_when`: what the limit learns from the response.
    pub(crate) settlement: Option<Settlement>,
}

/// A limit's penalty (`block_for`). A key the limit refuses is charged once to a limit of
/// one request per `duration` (GCRA, burst 1) that keeps the block: each request checks it
/// with the limit's others, and is refused, its `Retry-After` the time left, until
/// `duration` has passed. Kept as any limit's state, the blocks are shared as the store
/// shares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) duration: Duration,
    /// The index of the limit that keeps the blocks, past [`Rules::limits`](super::Rules::limits).
    pub(crate) limit: usize,
    /// Its identity in stores.
    pub(crate) state_id: u64,
}

/// Where a limit's request weight comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cost {
    /// The same for every request.
    Fixed(u64),
    /// The value of a source (by id), as a whole number.
    Source(usize),
}

/// What a limit allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rate {
    /// A quota decided by an algorithm.
    Limited {
        /// Requests per period, and burst.
        quota: Quota,
        /// The algorithm.
        algorithm: Algorithm,
    },
    /// `unlimited: true`: a request that matches is not limited at all.
    Unlimited,
    /// `concurrency`: at most this many of a key's requests run at once, each holding its
    /// slot until its response ends (see the [rules reference](crate::guide::rules#concurrency)).
    Concurrency {
        /// Requests in flight at once, at most.
        max_in_flight: u32,
    },
}

/// The most requests `algorithm` admits at once under `quota`: its capacity, fewer for a
/// shaping leaky bucket whose `max_delay` cuts the queue short.
fn admitted_at_once(algorithm: Algorithm, quota: &Quota) -> u64 {
    let capacity = algorithm.capacity(quota);
    let max_delay = quota.max_delay().filter(|_| quota.is_shaping());
    match (max_delay, quota.emission_interval()) {
        (Some(max_delay), Some(interval)) if algorithm.queues() => {
            let waits = max_delay.as_nanos() / u128::from(interval.get());
            capacity.min(u64::try_from(waits).unwrap_or(u64::MAX).saturating_add(1))
        }
        _ => capacity,
    }
}

/// A request's weight read from `source`: `default` when the request has no number there.
fn cost_from(values: &mut dyn Values, source: usize, default: u64) -> u64 {
    match values.get(source) {
        Ok(Some(value)) => match value.trim().parse::<u64>() {
            Ok(cost) => cost,
            // Too large to count is too large to admit.
            Err(error) if *error.kind() == IntErrorKind::PosOverflow => u64::MAX,
            Err(_) => default,
        },
        _ => default,
    }
}

impl Limit {
    /// The `name` given in the rules, if any.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The descriptor entries leading to this limit, e.g. `endpoint=login/remote_address`.
    pub fn descriptor(&self) -> &str {
        &self.descriptor
    }

    /// [`Limit::label`], shared.
    pub(crate) fn shared_label(&self) -> &Arc<str> {
        &self.label
    }

    /// The name if there is one, else the descriptor: how logs and headers refer to the limit.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// What the limit allows.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The algorithm of a rate limit (none for `unlimited` and `concurrency` entries).
    pub fn algorithm(&self) -> Option<Algorithm> {
        self.limited().map(|(algorithm, _)| algorithm)
    }

    /// The quota of a rate limit (none for `unlimited` and `concurrency` entries).
    pub fn quota(&self) -> Option<Quota> {
        self.limited().map(|(_, quota)| *quota)
    }

    /// Its identity in stores, the first bytes of its keys: the same for the same descriptor
    /// entries, algorithm and quota. `None` for an `unlimited` entry, which keeps no state,
    /// and a `concurrency` limit, which the store's rate limits never see.
    pub(crate) fn state_id(&self) -> Option<u64> {
        self.limited()?;
        Some(super::state_id::state_id(&self.descriptor, &self.rate))
    }

    pub(crate) fn limited(&self) -> Option<(Algorithm, &Quota)> {
        match &self.rate {
            Rate::Limited { quota, algorithm } => Some((*algorithm, quota)),
            Rate::Unlimited | Rate::Concurrency { .. } => None,
        }
    }

    /// The most requests of a key in flight at once, for a `concurrency` limit.
    pub fn max_in_flight(&self) -> Option<u32> {
        match self.rate {
            Rate::Concurrency { max_in_flight } => Some(max_in_flight),
            Rate::Limited { .. } | Rate::Unlimited => None,
        }
    }

    /// How long a slot of this `concurrency` limit is held in a store shared by a fleet
    /// unless its server renews it (`lease`, 30 s by default): a server that dies frees its
    /// slots after this. `None` for other limits, and for the server's `load_shedding`,
    /// which each server counts alone.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// How long a key this limit refuses stays refused from then on (`block_for`): later
    /// requests of the key are refused, whatever the limit's own count, with a `Retry-After`
    /// that counts down the block. `None` without a penalty.
    pub fn block_for(&self) -> Option<Duration> {
        self.block.map(|block| block.duration)
    }

    /// How this limit settles what it charged once the response is known (`settle`,
    /// `count_when`); `None` when the charge is final.
    pub fn settlement(&self) -> Option<&Settlement> {
        self.settlement.as_ref()
    }

    /// Whether a request this limit matches skips every limit: an `unlimited` entry that is
    /// not in shadow mode.
    pub(crate) fn exempts(&self) -> bool {
        !self.shadow && self.rate == Rate::Unlimited
    }

    /// Whether the limit only reports would-be denials (`shadow_mode: true`).
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The `metadata` of the limit's descriptor entry, as written: a rate limit service
    /// returns it in its answer's dynamic metadata, as envoyproxy/ratelimit does (see the
    /// guide's [rate limit service](crate::guide::service)).
    ///
    /// ```
    /// use tollgate::rules::{KeySources, Rules};
    ///
    /// let rules = Rules::from_yaml_with(r#"
    /// domain: rl
    /// descriptors:
    ///   - key: service
    ///     value: service_1
    ///     rate_limit: { unit: minute, requests_per_unit: 1 }
    ///     metadata: { service_with_quota: { name: service_1 } }
    /// "#, KeySources::Given)?;
    /// let metadata = rules.limits()[0].metadata().expect("written");
    /// assert_eq!(metadata["service_with_quota"]["name"], "service_1");
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn metadata(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.metadata.as_deref()
    }

    /// The key envoyproxy/ratelimit's statistics count this limit's hits under, for a
    /// rate limit service's descriptor of `entries` in `domain`
    /// (`ratelimit.service.rate_limit.<key>.total_hits`, ...): the domain, then each entry
    /// on the way as the file names it (`key_value` for an exact value, `key` for a
    /// key-only entry, `key_prefix*` for a wildcard), as the call names it with
    /// `detailed_metric` on the limit's entry, or with `value_to_metric` on a key-only or
    /// wildcard entry; a `share_threshold` wildcard always by itself.
    ///
    /// ```
    /// use tollgate::rules::{KeySources, Rules};
    ///
    /// let rules = Rules::from_yaml_with(r#"
    /// domain: rl
    /// descriptors:
    ///   - key: foo
    ///     descriptors:
    ///       - key: bar
    ///         value: bkthomps
    ///         rate_limit: { unit: minute, requests_per_unit: 1 }
    ///   - key: unspec
    ///     detailed_metric: true
    ///     rate_limit: { unit: minute, requests_per_unit: 2 }
    /// "#, KeySources::Given)?;
    /// let call = [("foo", "pelle"), ("bar", "bkthomps")];
    /// assert_eq!(rules.limits()[0].stats_key("rl", &call), "rl.foo.bar_bkthomps");
    /// let call = [("unspec", "unspecified_value")];
    /// assert_eq!(rules.limits()[1].stats_key("rl", &call), "rl.unspec_unspecified_value");
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub fn stats_key(&self, domain: &str, entries: &[(&str, &str)]) -> String {
        super::stats_key::stats_key(domain, &self.stats_path, entries)
    }

    /// Whether the limit is a quota (`quota_mode: true`, envoyproxy/ratelimit's): a rate
    /// limit service's call over it is refused only when every quota the call reaches is
    /// over (see the guide's [rate limit service](crate::guide::service)).
    pub fn is_quota(&self) -> bool {
        self.quota
    }

    /// What happens when the store cannot decide.
    pub fn on_store_error(&self) -> OnStoreError {
        self.on_store_error
    }

    /// `sync_every`, from the limit or else from `defaults`: a store shared by a fleet (Redis)
    /// may decide this limit from local counts, agreeing with the fleet at this interval
    /// (see the [rules reference](crate::guide::rules#rate_limit)). `None` when the limit is
    /// decided exactly: no `sync_every`, `sync_every: none`, or an `unlimited` entry.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::rules::Rules;
    ///
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// defaults: { sync_every: 100ms }
    /// descriptors:
    ///   - key: remote_address
    ///     rate_limit: { unit: second, requests_per_unit: 20 }
    ///   - key: method
    ///     rate_limit: { unit: second, requests_per_unit: 5, sync_every: none }
    /// "#)?;
    /// assert_eq!(rules.limits()[0].sync_every(), Some(Duration::from_millis(100)));
    /// assert_eq!(rules.limits()[1].sync_every(), None);
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn sync_every(&self) -> Option<Duration> {
        self.sync_every
    }

    /// `approximate`, from the limit or else from `defaults`: the memory store may count this
    /// limit's keys in a count-min sketch of this fixed size (see the
    /// [rules reference](crate::guide::rules#rate_limit)). `None` when the limit is counted
    /// exactly: no `approximate`, `approximate: none`, or an `unlimited` entry.
    ///
    /// ```
    /// use tollgate::rules::Rules;
    ///
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// defaults: { approximate: { memory: 4MiB } }
    /// descriptors:
    ///   - key: remote_address
    ///     rate_limit: { unit: second, requests_per_unit: 20 }
    ///   - key: method
    ///     rate_limit: { unit: second, requests_per_unit: 5, approximate: none }
    /// "#)?;
    /// let sketch = rules.limits()[0].approximate().map(|sketch| sketch.memory());
    /// assert_eq!(sketch, Some(4 * 1024 * 1024));
    /// assert_eq!(rules.limits()[1].approximate(), None);
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// ```
    pub fn approximate(&self) -> Option<Approximate> {
        self.approximate
    }

    /// The weight of a request under this limit, given the request's values; `default`
    /// when the limit sets none, or its source has no number for this request. At least 1.
    // Inline for the limits that set no cost, as most do; reading a source is out of line.
    #[inline]
    pub(crate) fn cost(&self, values: &mut dyn Values, default: u64) -> u64 {
        let cost = match self.cost {
            None => default,
            Some(Cost::Fixed(cost)) => cost,
            Some(Cost::Source(source)) => cost_from(values, source, default),
        };
        cost.max(1)
    }

    /// This limit decided by `algorithm` instead, with its quota kept (see
    /// `Rules::with_algorithm`); an error saying why if the rules would refuse it.
    pub(super) fn with_algorithm(&self, algorithm: Algorithm) -> Result<Limit, String> {
        let mut limit = self.clone();
        let Rate::Limited {
            quota,
            algorithm: was,
        } = self.rate
        else {
            return Ok(limit);
        };
        // The capacity carried over: the token bucket's and GCRA's burst, the leaky bucket's
        // queue and the request being served (the windows take neither).
        let capacity = admitted_at_once(was, &quota);
        // As the rules would compile it: only the setting `algorithm` takes, the others at
        // their defaults (they are part of the limit's identity in stores).
        let plain = Quota::new(quota.requests_per_period(), quota.period())
            .map_err(|error| error.to_string())?;
        let quota = match algorithm {
            _ if algorithm == was => quota,
            Algorithm::TokenBucket | Algorithm::Gcra => plain.with_burst(capacity),
            Algorithm::LeakyBucket => plain.with_queue(capacity.saturating_sub(1)),
            Algorithm::FixedWindow
            | Algorithm::SlidingWindowLog
            | Algorithm::SlidingWindowCounter => plain,
        };
        if !super::compile::books_within_horizon(algorithm, &quota) {
            return Err(format!(
                "as {}, it would book more than 100 years ahead",
                algorithm.name()
            ));
        }
        limit.rate = Rate::Limited { quota, algorithm };
        if !algorithm.syncs_local_first() {
            limit.sync_every = None;
        }
        if !algorithm.can_be_approximated() {
            limit.approximate = None;
        }
        Ok(limit)
    }

    /// Whether this is the server's [`load_shedding`](crate::guide::rules#load_shedding) limit,
    /// whose refusals answer `503` (gRPC `UNAVAILABLE`).
    pub fn sheds_load(&self) -> bool {
        self.sheds
    }

    /// The names of the limits this one replaces when both apply.
    pub fn replaces(&self) -> &[String] {
        &self.replaces
    }
}

#[cfg(test)]
mod tests {
    use crate::algorithm::Algorithm;
    use crate::rules::Rules;

    /// The rate-limit settings under which `algorithm` admits `capacity` at once, at 20 a
    /// second.
    fn settings(algorithm: Algorithm, capacity: u64) -> String {
        let extra = match algorithm {
            Algorithm::TokenBucket | Algorithm::Gcra => format!(", burst: {capacity}"),
            Algorithm::LeakyBucket => format!(", queue: {}", capacity - 1),
            _ => String::new(),
        };
        format!(
            "{{ unit: second, requests_per_unit: 20, algorithm: {}{extra} }}",
            algorithm.name()
        )
    }

    fn rules(rate_limit: &str) -> Rules {
        Rules::from_yaml(&format!(
            "domain: d\ndescriptors:\n  - key: remote_address\n    rate_limit: {rate_limit}\n"
        ))
        .unwrap()
    }

    /// Every limit's state id, from the descriptor tree.
    fn state_ids(rules: &Rules) -> Vec<u64> {
        let mut root = rules.root.clone();
        let mut ids = Vec::new();
        root.for_each_limit_mut(&mut |node| ids.push(node.state_id));
        ids
    }

    #[test]
    fn with_algorithm_gives_what_the_rules_would_compile_to() {
        for from in Algorithm::ALL {
            let windowed = !matches!(
                from,
                Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket
            );
            // A window admits its limit at once; the buckets here 40.
            let capacity = if windowed { 20 } else { 40 };
            let original = rules(&settings(from, capacity));
            for to in Algorithm::ALL {
                let changed = original.with_algorithm(to).unwrap();
                let carried = if to == from {
                    capacity
                } else {
                    capacity.max(20)
                };
                let expected = rules(&settings(to, carried));
                let pair = format!("{} to {}", from.name(), to.name());
                assert_eq!(
                    changed.limits[0].rate(),
                    expected.limits[0].rate(),
                    "{pair}"
                );
                assert_eq!(state_ids(&changed), state_ids(&expected), "{pair}");
            }
        }
    }

    #[test]
    fn a_leaky_bucket_s_max_delay_cuts_what_it_carries_over() {
        // 5 a second, a queue of 10, but no wait over 400 ms: 3 at once (0, 200, 400 ms).
        let leaky = rules(
            "{ unit: second, requests_per_unit: 5, algorithm: leaky_bucket, queue: 10, max_delay: 400ms }",
        );
        let bucket = leaky.with_algorithm(Algorithm::TokenBucket).unwrap();
        let quota = bucket.limits[0].quota().unwrap();
        assert_eq!(quota.burst(), 3);
    }

    #[test]
    fn with_algorithm_refuses_what_would_book_a_century_ahead() {
        let yearly =
            rules("{ unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 200 }");
        let errors = yearly.with_algorithm(Algorithm::Gcra).unwrap_err();
        assert!(
            errors.to_string().contains("more than 100 years ahead"),
            "{errors}"
        );
        assert!(yearly.with_algorithm(Algorithm::FixedWindow).is_ok());
    }
}
