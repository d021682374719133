//! The limiter: rules, a store, and the decision for one request, without HTTP.

mod active;
mod block;
mod decide;
mod deciding;
mod descriptors;
mod given_values;
mod inspect;
mod owed;
mod quota;
mod slots;
mod stream_done;

pub(crate) use deciding::Deciding;
pub use descriptors::{CallVerdict, Descriptor};

use crate::clock::Clock;
use crate::concurrency::{InFlight, Slots};
use crate::decision::{LimitDecision, Ruling, Verdict};
use crate::rules::request_values::RequestValues;
use crate::rules::{Limit, OnStoreError, RuleErrors, Rules};
use crate::source::{MissingPeerAddr, RequestView};
use crate::store::{MemoryStore, Store};
use active::Active;
use arc_swap::ArcSwap;
use given_values::GivenValues;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Rules plus the store that keeps their state: decides whether a request fits.
///
/// Clones share the rules and the store. The [`RateLimitLayer`](crate::RateLimitLayer) uses a
/// limiter for HTTP; [`Limiter::check`] serves everything else (WebSocket messages, jobs).
///
/// ```
/// use tollgate::Limiter;
/// use tollgate::rules::Rules;
///
/// # tokio_test_block_on(async {
/// let rules = Rules::from_yaml(r#"
/// domain: jobs
/// descriptors:
///   - key: tenant
///     rate_limit: { unit: minute, requests_per_unit: 2 }
/// sources:
///   tenant: { header: x-tenant }
/// "#)?;
/// let limiter = Limiter::new(rules);
/// assert!(limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
/// assert!(limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
/// assert!(!limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
/// assert!(limiter.check(&[("tenant", "other")], 1).await.is_allowed());
/// # Ok::<(), tollgate::rules::RuleErrors>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug)]
pub struct Limiter<St = MemoryStore> {
    // One shared allocation: services are cloned for every request (axum does), and each
    // clone of a limiter is then one reference count, not three.
    shared: Arc<Shared<St>>,
}

struct Shared<St> {
    active: ArcSwap<Active>,
    store: St,
    /// Decides the limits whose `on_store_error` is `local` while the store fails.
    fallback: MemoryStore,
    /// [`Limiter::set_shadow_mode`].
    shadow_mode: AtomicBool,
    /// The time of the log throttles of every [`Observer`].
    clock: Arc<dyn Clock>,
    /// The requests in flight of the concurrency limits, kept across reloads.
    in_flight: Arc<InFlight>,
}

impl<St: fmt::Debug> fmt::Debug for Shared<St> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("active", &self.active)
            .field("store", &self.store)
            .field("fallback", &self.fallback)
            .field("shadow_mode", &self.shadow_mode)
            .finish_non_exhaustive()
    }
}

impl<St> Clone for Limiter<St> {
    fn clone(&self) -> Self {
        Limiter {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Limiter {
    /// A limiter keeping its state in memory.
    pub fn new(rules: Rules) -> Self {
        Limiter::with_store(rules, MemoryStore::new())
    }

    /// A limiter for the rules in `path`, keeping its state in memory.
    ///
    /// # Errors
    ///
    /// Every mistake in the file (see [`Rules::from_file`]).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, RuleErrors> {
        Rules::from_file(path).map(Limiter::new)
    }
}

impl<St: Store> Limiter<St> {
    /// A limiter keeping its state in `store`.
    ///
    /// With the `metrics` feature, the metric handles of the rules are registered here (and
    /// by [`Limiter::set_rules`]) with the recorder installed at that moment: install the
    /// recorder first.
    ///
    /// The limiter reads the time from the store's clock: to move time by hand in a test,
    /// give the store a [`ManualClock`](crate::clock::ManualClock).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::clock::ManualClock;
    /// use tollgate::rules::Rules;
    /// use tollgate::store::MemoryStore;
    /// use tollgate::Limiter;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// sources: { tenant: { header: x-tenant } }
    /// descriptors:
    ///   - key: tenant
    ///     rate_limit: { unit: second, requests_per_unit: 1 }
    /// "#)?;
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_store(rules, MemoryStore::with_clock(clock.clone()));
    /// assert!(limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
    /// assert!(!limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// # }).unwrap();
    /// ```
    pub fn with_store(rules: Rules, store: St) -> Self {
        let clock = store.clock();
        warn_of_unbound_extensions(&rules);
        let fallback = MemoryStore::new();
        tell_limits_in_force(&rules, &store, &fallback);
        Limiter {
            shared: Arc::new(Shared {
                active: ArcSwap::from_pointee(Active::new(rules, &clock)),
                store,
                fallback,
                shadow_mode: AtomicBool::new(false),
                clock,
                in_flight: Arc::default(),
            }),
        }
    }

    /// The rules in force now.
    pub fn rules(&self) -> Arc<Rules> {
        Arc::clone(&self.shared.active.load().rules)
    }

    /// Puts new rules in force. Requests already being decided finish under the old ones.
    /// A limit keeps its counters when its descriptor entries, algorithm and quota are
    /// unchanged (wherever it moved in the file). A limit whose quota, period or algorithm
    /// changed keeps what each client used: a key starts the new limit from its state under
    /// the old one, in every store (see the guide's
    /// [hot reload](crate::guide::operations#hot-reload) section).
    ///
    /// With the `metrics` feature, registers the metric handles of `rules` with the recorder
    /// installed now, so that decisions only increment handles they already hold. The store
    /// is told of the limits now in force first: in memory, the sketches of approximate
    /// limits are built here, and those of limits gone are freed.
    ///
    /// The types bound to the extension sources of the rules in force stay bound to those of
    /// the same names in `rules` ([`Rules::with_extension`]).
    pub fn set_rules(&self, mut rules: Rules) {
        let before = self.shared.active.load();
        rules.keep_extensions_of(&before.rules);
        warn_of_unbound_extensions(&rules);
        tell_limits_in_force(&rules, &self.shared.store, &self.shared.fallback);
        let active = Active::after(&before, rules, &self.shared.clock);
        self.shared.active.store(Arc::new(active));
    }

    /// Turns shadow mode on or off for every limit: while on, limits count and report (logs,
    /// metrics, the [`ShadowDenied`](crate::layer::ShadowDenied) mark) but deny and delay
    /// nothing. A safe way to roll out new rules: watch what they would do, then turn it off.
    /// Applies from the next decision. Rules with a top-level `shadow_mode: true`
    /// ([`Rules::shadow_mode`]) stay in shadow mode whatever this says.
    ///
    /// ```
    /// use tollgate::Limiter;
    /// use tollgate::rules::Rules;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let rules = Rules::from_yaml(r#"
    /// domain: jobs
    /// sources: { tenant: { header: x-tenant } }
    /// descriptors:
    ///   - key: tenant
    ///     rate_limit: { unit: minute, requests_per_unit: 1 }
    /// "#)?;
    /// let limiter = Limiter::new(rules);
    /// limiter.set_shadow_mode(true);
    /// assert!(limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
    /// let second = limiter.check(&[("tenant", "acme")], 1).await;
    /// assert!(second.is_allowed() && second.is_shadow_denied());
    /// limiter.set_shadow_mode(false);
    /// assert!(!limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// # }).unwrap();
    /// ```
    pub fn set_shadow_mode(&self, shadow: bool) {
        self.shared.shadow_mode.store(shadow, Ordering::Relaxed);
    }

    /// Whether [`Limiter::set_shadow_mode`] turned shadow mode on.
    pub fn shadow_mode(&self) -> bool {
        self.shared.shadow_mode.load(Ordering::Relaxed)
    }

    /// The in-memory store that decides `on_store_error: local` limits while the store fails.
    pub(crate) fn fallback(&self) -> &MemoryStore {
        &self.shared.fallback
    }

    /// The store.
    pub fn store(&self) -> &St {
        &self.shared.store
    }

    /// Decides a request described by `(key, value)` pairs, e.g.
    /// `[("remote_address", "203.0.113.9"), ("endpoint", "login")]`, of weight `cost` (for
    /// limits that set no `cost` of their own).
    ///
    /// Keys the rules do not use are ignored; keys the rules use but `values` lacks do not
    /// match. A store failure is decided by the limits' `on_store_error` policy. When the
    /// verdict has a [`delay`](Verdict::delay) (a shaping leaky bucket), wait that long
    /// before going ahead: the place in the queue is booked.
    pub async fn check(&self, values: &[(&str, &str)], cost: u64) -> Verdict {
        let active = self.shared.active.load();
        let stage = {
            let mut given = GivenValues {
                rules: &active.rules,
                values,
            };
            self.start(&active, &mut given, cost, None)
        };
        match stage {
            Ok(stage) => {
                let mut deciding = Deciding::new(self, active, stage);
                let ruling = deciding.settle().await;
                let verdict = Verdict::new(ruling, deciding.rules());
                // The caller waits out the delay itself: the queue places are its own. No
                // response holds the slots: they are given back at once.
                drop(deciding.go_ahead());
                verdict
            }
            // Given values never need a peer address.
            Err(MissingPeerAddr) => Verdict::new(Ruling::unlimited(), &active.rules),
        }
    }

    /// Decides an HTTP request as [`RateLimitLayer`](crate::RateLimitLayer) decides it: the
    /// same sources, client address, matching and algorithms, and the same weight (1, for
    /// limits that set no `cost` of their own). Nothing is sent and nothing waits: a
    /// [`delay`](Verdict::delay) is the wait the layer would have made, its queue place
    /// booked. For tools that replay traffic (`tollgate simulate`) and for tests.
    ///
    /// ```
    /// use tollgate::{rules::Rules, source::PeerAddr, Limiter};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// descriptors:
    ///   - key: remote_address
    ///     rate_limit: { unit: minute, requests_per_unit: 1 }
    /// "#)?;
    /// let limiter = Limiter::new(rules);
    /// let mut request = http::Request::get("/").body(())?;
    /// request.extensions_mut().insert(PeerAddr("203.0.113.9:4000".parse()?));
    /// assert!(limiter.check_request(&request).await?.is_allowed());
    /// assert!(!limiter.check_request(&request).await?.is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`MissingPeerAddr`] when a limit needs the client address and the request carries no
    /// socket peer (the layer answers `500` then).
    pub async fn check_request<B>(
        &self,
        request: &http::Request<B>,
    ) -> Result<Verdict, MissingPeerAddr> {
        let mut deciding = self.deciding(RequestView::of(request), 1)?;
        let ruling = deciding.settle().await;
        let verdict = Verdict::new(ruling, deciding.rules());
        // No response holds the slots: they are given back at once.
        drop(deciding.go_ahead());
        Ok(verdict)
    }

    /// [`check_request`](Self::check_request), with each limit's own decision, in the order
    /// the request met them (the server's load shedding and the concurrency limits first,
    /// whose slots are taken first, then the rate limits in the order of the rules' walk): which one refused, which would have (shadow mode), which
    /// one delayed the request and by how much. None when no limit applied; when the store
    /// failed, the decisions the limits' `on_store_error` policies made (a `deny` limit's
    /// refusal, the `local` limits' decisions in memory).
    ///
    /// ```
    /// use tollgate::{rules::Rules, source::PeerAddr, Limiter};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let rules = Rules::from_yaml(r#"
    /// domain: api
    /// descriptors:
    ///   - key: remote_address
    ///     rate_limit: { unit: minute, requests_per_unit: 1, name: per-client }
    ///   - key: method
    ///     rate_limit: { unit: minute, requests_per_unit: 100, name: per-method }
    /// "#)?;
    /// let limiter = Limiter::new(rules);
    /// let mut request = http::Request::get("/").body(())?;
    /// request.extensions_mut().insert(PeerAddr("203.0.113.9:4000".parse()?));
    /// limiter.check_request(&request).await?;
    /// let (verdict, each) = limiter.check_request_each(&request).await?;
    /// assert!(!verdict.is_allowed());
    /// let refused: Vec<&str> = each
    ///     .iter()
    ///     .filter(|limit| !limit.decision().allowed)
    ///     .map(|limit| limit.limit())
    ///     .collect();
    /// assert_eq!(refused, ["per-client"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`check_request`](Self::check_request).
    ///
    /// For the `tollgate` command, outside the API's semver promise.
    #[doc(hidden)]
    pub async fn check_request_each<B>(
        &self,
        request: &http::Request<B>,
    ) -> Result<(Verdict, Vec<LimitDecision>), MissingPeerAddr> {
        let (verdict, each, _slots) = self.check_request_held(request).await?;
        Ok((verdict, each))
    }

    /// [`check_request_each`](Self::check_request_each), the request's slots (of its
    /// `concurrency` limits, and the server's under `load_shedding`) held by the returned
    /// guard until it is dropped, as the layer holds them until the response ends. For
    /// `tollgate simulate`, which replays each request's duration.
    ///
    /// # Errors
    ///
    /// As [`check_request`](Self::check_request).
    #[doc(hidden)]
    pub async fn check_request_held<B>(
        &self,
        request: &http::Request<B>,
    ) -> Result<(Verdict, Vec<LimitDecision>, HeldSlots), MissingPeerAddr> {
        let active = self.shared.active.load();
        let mut each = Vec::new();
        let stage = {
            let mut values = RequestValues::new(RequestView::of(request), &active.rules);
            self.start(&active, &mut values, 1, Some(&mut each))?
        };
        let mut deciding = Deciding::new(self, active, stage);
        let ruling = deciding.settle_each(Some(&mut each)).await;
        let verdict = Verdict::new(ruling, deciding.rules());
        let slots = HeldSlots {
            slots: deciding.go_ahead(),
        };
        Ok((verdict, each.into_iter().flatten().collect(), slots))
    }

    /// Starts deciding the request `view` shows, of weight `cost`, under the rules in force
    /// now: the layer's way in.
    pub(crate) fn deciding(
        &self,
        view: RequestView<'_>,
        cost: u64,
    ) -> Result<Deciding<'_, St>, MissingPeerAddr> {
        let active = self.shared.active.load();
        let stage = {
            let mut values = RequestValues::new(view, &active.rules);
            self.start(&active, &mut values, cost, None)?
        };
        Ok(Deciding::new(self, active, stage))
    }
}

/// The slots an admitted request holds (see [`Limiter::check_request_held`]), given back
/// when dropped.
#[doc(hidden)]
#[derive(Debug)]
pub struct HeldSlots {
    /// Held for its drop, which gives the slots back.
    slots: Option<Slots>,
}

impl HeldSlots {
    /// Settles what the request owes (`settle`, `count_when`) as a response of `status`
    /// with `headers` would.
    pub fn settle(&mut self, status: http::StatusCode, headers: &http::HeaderMap) {
        if let Some(slots) = &mut self.slots {
            slots.settle(status, headers, &http::Extensions::new());
        }
    }
}

/// Logs each extension source of `rules` that no type is bound to: no request has a value
/// for it, so the entries on its key never apply.
fn warn_of_unbound_extensions(rules: &Rules) {
    for name in rules.unbound_extensions() {
        tracing::warn!(
            extension = name,
            "no type is bound to the extension `{name}` (Rules::with_extension): the rules on its key apply to no request"
        );
    }
}

/// Tells `store` of the limits of `rules`, and `fallback` of those it decides while the
/// store fails (`on_store_error: local`).
fn tell_limits_in_force<St: Store>(rules: &Rules, store: &St, fallback: &MemoryStore) {
    store.limits_in_force(&decide::limits_in_force(rules, |_| true));
    let local = |limit: &Limit| limit.on_store_error() == OnStoreError::Local;
    fallback.limits_in_force(&decide::limits_in_force(rules, local));
}

#[cfg(feature = "metrics")]
impl<C: Clock> Limiter<MemoryStore<C>> {
    /// Sets the gauge `tollgate_tracked_keys{domain}` to the number of keys the store tracks
    /// (feature `metrics`).
    ///
    /// Counting locks each shard of the store in turn: call this every few seconds, e.g. from
    /// the task that sweeps the store, never per request.
    ///
    /// ```no_run
    /// # async fn run(limiter: tollgate::Limiter) {
    /// let mut every = tokio::time::interval(std::time::Duration::from_secs(10));
    /// loop {
    ///     every.tick().await;
    ///     limiter.store().sweep();
    ///     limiter.record_tracked_keys();
    /// }
    /// # }
    /// ```
    pub fn record_tracked_keys(&self) {
        let keys = self.store().len();
        self.shared.active.load().observer.record_tracked_keys(keys);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, Nanos};
    use crate::decision::Denial;
    use crate::store::{
        Acquisition, Approximate, Decisions, LimitCheck, StoreError, StoreErrorKind,
    };
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    fn limiter(yaml: &str) -> (Limiter<MemoryStore<ManualClock>>, ManualClock) {
        let clock = ManualClock::new();
        let rules = Rules::from_yaml(yaml).expect("valid rules");
        (
            Limiter::with_store(rules, MemoryStore::with_clock(clock.clone())),
            clock,
        )
    }

    /// The verdict of a store that answers at once.
    fn check<St: Store>(limiter: &Limiter<St>, values: &[(&str, &str)]) -> Verdict {
        let mut check = std::pin::pin!(limiter.check(values, 1));
        match check.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(verdict) => verdict,
            Poll::Pending => panic!("the store answers at once"),
        }
    }

    /// How many of `attempts` requests with `values` are admitted.
    fn admitted<St: Store>(
        limiter: &Limiter<St>,
        values: &[(&str, &str)],
        attempts: usize,
    ) -> usize {
        (0..attempts)
            .filter(|_| check(limiter, values).is_allowed())
            .count()
    }

    const RULES: &str = r#"
domain: test
sources:
  api_key: { header: x-api-key }
  endpoint: { header: x-endpoint }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: endpoint
    value: login
    descriptors:
      - key: remote_address
        rate_limit: { unit: minute, requests_per_unit: 1, name: login }
  - key: api_key
    value: "internal-*"
    rate_limit: { unlimited: true }
"#;

    #[test]
    fn exactly_the_limit_is_admitted_per_value() {
        let (limiter, clock) = limiter(RULES);
        assert_eq!(admitted(&limiter, &[("remote_address", "1.1.1.1")], 10), 3);
        assert!(check(&limiter, &[("remote_address", "2.2.2.2")]).is_allowed());
        clock.advance(Duration::from_secs(60));
        assert!(check(&limiter, &[("remote_address", "1.1.1.1")]).is_allowed());
    }

    #[test]
    fn every_entry_on_the_walk_applies_all_or_nothing() {
        let (limiter, _) = limiter(RULES);
        let login = [("remote_address", "1.1.1.1"), ("endpoint", "login")];
        let first = check(&limiter, &login);
        assert!(first.is_allowed());
        assert_eq!(
            first.decision().map(|d| d.remaining),
            Some(0),
            "the login limit is the most restrictive"
        );
        for _ in 0..5 {
            let denied = check(&limiter, &login);
            assert!(!denied.is_allowed());
            assert_eq!(denied.limit(), Some("login"));
        }
        // Denied logins consumed nothing of the per-address limit: 2 of 3 remain.
        let plain = check(&limiter, &[("remote_address", "1.1.1.1")]);
        assert_eq!(plain.decision().map(|d| d.remaining), Some(1));
    }

    #[test]
    fn unlimited_match_exempts_the_request() {
        let (limiter, _) = limiter(RULES);
        let internal = [("remote_address", "1.1.1.1"), ("api_key", "internal-batch")];
        for _ in 0..10 {
            let verdict = check(&limiter, &internal);
            assert!(verdict.is_allowed());
            assert!(verdict.decision().is_none());
        }
        assert!(check(
            &limiter,
            &[("remote_address", "1.1.1.1"), ("api_key", "external")]
        )
        .is_allowed());
    }

    #[test]
    fn replaced_limits_do_not_apply() {
        let (limiter, _) = limiter(
            r#"
domain: test
sources: { plan: { header: x-plan } }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1, name: per_ip }
  - key: plan
    value: premium
    rate_limit: { unit: minute, requests_per_unit: 5, replaces: [{ name: per_ip }] }
"#,
        );
        let premium = [("remote_address", "1.1.1.1"), ("plan", "premium")];
        assert_eq!(admitted(&limiter, &premium, 10), 5);
    }

    #[test]
    fn zero_requests_per_unit_always_denies() {
        let (limiter, _) = limiter("domain: t\ndescriptors:\n  - key: method\n    value: DELETE\n    rate_limit: { unit: second, requests_per_unit: 0 }\n");
        let verdict = check(&limiter, &[("method", "DELETE")]);
        assert!(!verdict.is_allowed());
        assert!(check(&limiter, &[("method", "GET")]).is_allowed());
    }

    #[test]
    fn shadow_mode_reports_but_admits() {
        let (limiter, _) = limiter("domain: t\ndescriptors:\n  - key: method\n    shadow_mode: true\n    rate_limit: { unit: second, requests_per_unit: 1 }\n");
        assert!(!check(&limiter, &[("method", "GET")]).is_shadow_denied());
        let second = check(&limiter, &[("method", "GET")]);
        assert!(second.is_allowed());
        assert!(second.is_shadow_denied());
        assert!(
            second.decision().is_none(),
            "shadow limits do not show in headers"
        );
    }

    #[test]
    fn prefix_wildcard_beats_key_only_and_exact_beats_both() {
        let (limiter, _) = limiter(
            r#"
domain: t
sources: { user: { header: x-user } }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: user
    value: "bot-*"
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: user
    value: bot-special
    rate_limit: { unit: minute, requests_per_unit: 3 }
"#,
        );
        let count = |user: &str| admitted(&limiter, &[("user", user)], 10);
        assert_eq!(count("alice"), 1);
        assert_eq!(count("bot-1"), 2);
        assert_eq!(count("bot-special"), 3);
    }

    #[test]
    fn counters_survive_rules_that_move_a_limit_or_change_its_quota() {
        let (limiter, _) = limiter(RULES);
        let client = [("remote_address", "1.1.1.1")];
        assert!(check(&limiter, &client).is_allowed());
        assert!(check(&limiter, &client).is_allowed());
        let moved = RULES.replacen(
            "\ndescriptors:\n",
            "\ndescriptors:\n  - key: method\n    value: DELETE\n    rate_limit: { unit: second, requests_per_unit: 0 }\n",
            1,
        );
        limiter.set_rules(Rules::from_yaml(&moved).expect("valid rules"));
        let after_move = check(&limiter, &client);
        assert_eq!(
            after_move.decision().map(|d| d.remaining),
            Some(0),
            "the third of 3 is counted on the old state"
        );
        assert!(!check(&limiter, &client).is_allowed());
        let raised = moved.replace("requests_per_unit: 3", "requests_per_unit: 5");
        limiter.set_rules(Rules::from_yaml(&raised).expect("valid rules"));
        assert_eq!(
            admitted(&limiter, &client, 10),
            2,
            "3 of 3 used, raised to 5: 2 more"
        );
    }

    /// The rules of one limit per client, `rate_limit` as given.
    fn one_limit(rate_limit: &str) -> Rules {
        Rules::from_yaml(&format!(
            "domain: t\ndescriptors:\n  - key: remote_address\n    rate_limit: {rate_limit}\n"
        ))
        .expect("valid rules")
    }

    #[test]
    fn a_reload_keeps_what_each_client_used() {
        let client = [("remote_address", "1.1.1.1")];
        for algorithm in crate::algorithm::Algorithm::ALL {
            // A leaky bucket with room for them all at once, as the others.
            let queue = |limit: u64| {
                if algorithm.queues() {
                    format!(", queue: {}", limit - 1)
                } else {
                    String::new()
                }
            };
            let rules = |limit: u64| {
                one_limit(&format!(
                    "{{ unit: minute, requests_per_unit: {limit}, algorithm: {algorithm}{} }}",
                    queue(limit)
                ))
            };
            if algorithm == crate::algorithm::Algorithm::TokenBucket {
                continue; // keeps its tokens: see below
            }
            let (limiter, clock) = limiter("domain: t\ndescriptors: []\n");
            limiter.set_rules(rules(5));
            assert_eq!(admitted(&limiter, &client, 10), 5, "{algorithm}");
            limiter.set_rules(rules(8));
            assert_eq!(
                admitted(&limiter, &client, 10),
                3,
                "{algorithm}: raised to 8"
            );
            limiter.set_rules(rules(3));
            assert_eq!(
                admitted(&limiter, &client, 10),
                0,
                "{algorithm}: lowered to 3"
            );
            // Two minutes: the sliding window counter still counts the minute before.
            clock.advance(Duration::from_secs(120));
            assert_eq!(admitted(&limiter, &client, 10), 3, "{algorithm}: later");
            assert_eq!(
                admitted(&limiter, &[("remote_address", "2.2.2.2")], 10),
                3,
                "{algorithm}: another client"
            );
        }
    }

    #[test]
    fn a_reloaded_token_bucket_keeps_its_level_capped_at_the_new_burst() {
        let client = [("remote_address", "1.1.1.1")];
        let bucket = |burst: u64| {
            one_limit(&format!(
                "{{ unit: minute, requests_per_unit: 10, algorithm: token_bucket, burst: {burst} }}"
            ))
        };
        let (limiter, _) = limiter("domain: t\ndescriptors: []\n");
        limiter.set_rules(bucket(10));
        assert_eq!(admitted(&limiter, &client, 4), 4);
        limiter.set_rules(bucket(20));
        assert_eq!(admitted(&limiter, &client, 30), 6, "6 tokens left of 10");
        limiter.set_rules(bucket(10));
        assert_eq!(admitted(&limiter, &client, 30), 0, "none left");
    }

    #[test]
    fn two_reloads_in_a_row_carry_from_the_first_limit_too() {
        let client = [("remote_address", "1.1.1.1")];
        let (limiter, _) = limiter("domain: t\ndescriptors: []\n");
        let per_minute =
            |limit: u64| one_limit(&format!("{{ unit: minute, requests_per_unit: {limit} }}"));
        limiter.set_rules(per_minute(5));
        assert_eq!(admitted(&limiter, &client, 4), 4);
        // Nobody is decided under 6 a minute: the key still holds its state under 5.
        limiter.set_rules(per_minute(6));
        limiter.set_rules(per_minute(7));
        assert_eq!(admitted(&limiter, &client, 10), 3);
    }

    #[test]
    fn shadow_entries_neither_exempt_nor_replace() {
        let (limiter, _) = limiter(
            r#"
domain: t
sources: { plan: { header: x-plan } }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1, name: per_ip }
  - key: plan
    value: free
    shadow_mode: true
    rate_limit: { unlimited: true }
  - key: plan
    value: premium
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 5, replaces: [{ name: per_ip }] }
"#,
        );
        for plan in ["free", "premium"] {
            let request = [("remote_address", plan), ("plan", plan)];
            assert!(check(&limiter, &request).is_allowed());
            assert!(
                !check(&limiter, &request).is_allowed(),
                "{plan}: the enforced limit still applies"
            );
        }
    }

    const EVERYTHING_LIMITED: &str = r#"
domain: t
sources: { endpoint: { header: x-endpoint } }
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: method
    value: DELETE
    rate_limit: { unit: second, requests_per_unit: 0 }
  - key: endpoint
    value: reports
    rate_limit: { unit: second, requests_per_unit: 1, algorithm: leaky_bucket, queue: 5 }
"#;

    /// Whether every request of a burst under `EVERYTHING_LIMITED` goes ahead at once.
    fn burst_goes_ahead(limiter: &Limiter<MemoryStore<ManualClock>>) -> bool {
        let requests = [
            [("remote_address", "1.1.1.1"), ("method", "GET")],
            [("remote_address", "2.2.2.2"), ("method", "DELETE")],
            [("remote_address", "3.3.3.3"), ("endpoint", "reports")],
        ];
        requests.iter().all(|request| {
            (0..4).all(|_| {
                let verdict = check(limiter, request);
                verdict.is_allowed() && verdict.delay().is_zero()
            })
        })
    }

    #[test]
    fn top_level_shadow_mode_denies_and_delays_nothing_but_reports() {
        let (limiter, _) = limiter(&format!("shadow_mode: true\n{EVERYTHING_LIMITED}"));
        assert!(limiter.rules().shadow_mode());
        assert!(burst_goes_ahead(&limiter));
        let verdict = check(&limiter, &[("remote_address", "1.1.1.1")]);
        assert!(verdict.is_shadow_denied());
        assert!(verdict.decision().is_none(), "nothing enforced to report");
    }

    #[test]
    fn shadow_mode_switch_applies_from_the_next_decision() {
        let (limiter, _) = limiter(EVERYTHING_LIMITED);
        assert!(!limiter.rules().shadow_mode());
        limiter.set_shadow_mode(true);
        assert!(limiter.shadow_mode());
        assert!(burst_goes_ahead(&limiter));
        limiter.set_shadow_mode(false);
        assert!(!check(&limiter, &[("remote_address", "1.1.1.1")]).is_allowed());
        assert!(!check(&limiter, &[("method", "DELETE")]).is_allowed());
        let queued = check(&limiter, &[("endpoint", "reports")]);
        assert!(queued.is_allowed() && !queued.delay().is_zero());
    }

    /// A limiter on `store` whose one limit (by `method`) denies when the store fails.
    fn closed_on_store_error<St: Store>(store: St) -> Limiter<St> {
        let rules = Rules::from_yaml(
            "domain: t\ndefaults: { on_store_error: deny }\ndescriptors:\n  - key: method\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
        )
        .expect("valid rules");
        Limiter::with_store(rules, store)
    }

    #[test]
    fn shadow_mode_switch_admits_what_a_failing_store_would_deny() {
        let limiter = closed_on_store_error(FailingStore);
        let get = [("method", "GET")];
        let denied = check(&limiter, &get);
        assert_eq!(denied.denial(), Some(Denial::StoreError));
        assert!(!denied.is_shadow_denied());
        limiter.set_shadow_mode(true);
        let admitted = check(&limiter, &get);
        assert!(admitted.is_allowed());
        assert!(
            admitted.is_shadow_denied(),
            "the shadow `deny` limit would have denied it"
        );
    }

    #[test]
    fn a_full_limit_denies_over_the_limit() {
        let (limiter, _) = limiter(EVERYTHING_LIMITED);
        let verdict = check(&limiter, &[("method", "DELETE")]);
        assert_eq!(verdict.denial(), Some(Denial::OverLimit));
        assert!(check(&limiter, &[("method", "GET")]).denial().is_none());
    }

    #[test]
    fn builder_sets_top_level_shadow_mode() {
        use crate::rules::{DescriptorSpec, LimitSpec, Unit};
        let rules = Rules::builder("t")
            .shadow_mode(true)
            .descriptor(DescriptorSpec::key("method").rate_limit(LimitSpec::per(1, Unit::Second)))
            .build()
            .expect("valid rules");
        assert!(rules.shadow_mode());
    }

    #[test]
    fn a_store_that_miscounts_its_decisions_is_treated_as_failed() {
        let limiter = closed_on_store_error(MiscountingStore);
        let verdict = check(&limiter, &[("method", "GET")]);
        assert_eq!(verdict.denial(), Some(Denial::StoreError));
    }

    #[test]
    fn the_store_sees_each_limits_sync_every_and_approximate() {
        let rules = Rules::from_yaml(
            r#"
domain: t
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 20, sync_every: 100ms }
  - key: method
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: path
    rate_limit: { unit: second, requests_per_unit: 5, approximate: { memory: 64KiB } }
"#,
        )
        .expect("valid rules");
        let store = RecordingStore::default();
        let limiter = Limiter::with_store(rules, store.clone());
        let verdict = check(
            &limiter,
            &[
                ("remote_address", "1.1.1.1"),
                ("method", "GET"),
                ("path", "/"),
            ],
        );
        assert!(verdict.is_allowed());
        assert_eq!(
            *store.seen.lock(),
            [
                (Some(Duration::from_millis(100)), None),
                (None, None),
                (None, Some(Approximate::new(64 * 1024))),
            ],
            "one check per limit, in walk order"
        );
    }

    /// How a check asks the store to count it: its `sync_every` and its `approximate`.
    type HowCounted = (Option<Duration>, Option<Approximate>);

    /// The memory store, recording how each check it is asked is to be counted.
    #[derive(Clone, Default)]
    struct RecordingStore {
        store: Arc<MemoryStore>,
        seen: Arc<parking_lot::Mutex<Vec<HowCounted>>>,
    }

    impl crate::store::sealed::Sealed for RecordingStore {}

    impl Store for RecordingStore {
        type Pending = std::future::Ready<Result<Decisions, StoreError>>;

        fn acquire(&self, checks: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
            self.seen.lock().extend(
                checks
                    .iter()
                    .map(|check| (check.sync_every, check.approximate)),
            );
            self.store.acquire(checks)
        }

        fn cancel(&self, check: &LimitCheck<'_>, booked_until: Nanos) {
            self.store.cancel(check, booked_until);
        }
    }

    /// A store that answers no decision, whatever it is asked.
    struct MiscountingStore;

    impl crate::store::sealed::Sealed for MiscountingStore {}

    impl Store for MiscountingStore {
        type Pending = std::future::Ready<Result<Decisions, StoreError>>;

        fn acquire(&self, _: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
            Acquisition::Ready(Ok(Decisions::new()))
        }

        fn cancel(&self, _: &LimitCheck<'_>, _: Nanos) {}
    }

    /// A store that is always down.
    struct FailingStore;

    impl crate::store::sealed::Sealed for FailingStore {}

    impl Store for FailingStore {
        type Pending = std::future::Ready<Result<Decisions, StoreError>>;

        fn acquire(&self, _: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
            let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
            let error = StoreError::new(StoreErrorKind::Connection, "down").with_source(refused);
            Acquisition::Ready(Err(error))
        }

        fn cancel(&self, _: &LimitCheck<'_>, _: Nanos) {}
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn each_limit_counts_its_own_outcome() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let yaml = format!(
            "{EVERYTHING_LIMITED}  - key: path\n    shadow_mode: true\n    rate_limit: {{ unit: minute, requests_per_unit: 1, name: shadow_path }}\n"
        );
        metrics::with_local_recorder(&recorder, || {
            let (limiter, _) = limiter(&yaml);
            for _ in 0..3 {
                check(&limiter, &[("remote_address", "1.1.1.1"), ("path", "/")]);
                check(&limiter, &[("endpoint", "reports")]);
            }
            let failing = Limiter::with_store(limiter.rules().as_ref().clone(), FailingStore);
            check(&failing, &[("remote_address", "1.1.1.1")]);
        });
        let text = handle.render();
        let count = |limit: &str, outcome: &str| {
            let series = format!(
                "tollgate_requests_total{{domain=\"t\",limit=\"{limit}\",outcome=\"{outcome}\"}} "
            );
            text.lines()
                .find_map(|line| line.strip_prefix(&series))
                .map(|n| n.parse::<u64>().expect("a count"))
        };
        // The failing store's `allow` policy admitted one more.
        assert_eq!(count("remote_address", "allowed"), Some(2), "{text}");
        assert_eq!(count("remote_address", "denied"), Some(2), "{text}");
        assert_eq!(count("shadow_path", "allowed"), Some(1), "{text}");
        assert_eq!(count("shadow_path", "shadow_denied"), Some(2), "{text}");
        assert_eq!(count("endpoint=reports", "allowed"), Some(1), "{text}");
        assert_eq!(count("endpoint=reports", "delayed"), Some(2), "{text}");
        assert_eq!(count("method=DELETE", "allowed"), Some(0), "{text}");
        assert!(
            text.contains("tollgate_store_errors_total{domain=\"t\",limit=\"remote_address\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tollgate_decision_seconds_count{domain=\"t\"} 7"),
            "{text}"
        );
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn metric_handles_are_registered_when_the_rules_are_put_in_force() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let (limiter, _) = limiter(EVERYTHING_LIMITED);
        metrics::with_local_recorder(&recorder, || {
            // Built before the recorder: its handles went to no recorder, and no decision
            // registers any.
            check(&limiter, &[("method", "DELETE")]);
            assert!(!handle.render().contains("tollgate_requests_total"));
            limiter.set_rules(limiter.rules().as_ref().clone());
        });
        let series =
            "tollgate_requests_total{domain=\"t\",limit=\"method=DELETE\",outcome=\"denied\"} 0";
        assert!(handle.render().contains(series), "{}", handle.render());
    }
}
