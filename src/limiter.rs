//! The limiter: rules, a store, and the decision for one request, without HTTP.

use crate::algorithm::Decision;
use crate::clock::{Clock, Nanos, SystemClock};
use crate::observe::{self, DecisionStart, Observer};
use crate::rules::tree::{Matches, StateKey, Values};
use crate::rules::{OnStoreError, RuleErrors, Rules};
use crate::source::MissingPeerAddr;
use crate::store::{Acquisition, Decisions, LimitCheck, MemoryStore, Store, StoreError};
use arc_swap::ArcSwap;
use smallvec::SmallVec;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

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

/// The rules in force and what reports the decisions made under them, put in force together
/// so that a decision never sees one without the other.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) rules: Arc<Rules>,
    observer: Observer,
}

impl Active {
    /// `rules` and their observer, made now: off the request path, so that no decision
    /// registers metrics or allocates labels.
    fn new(rules: Rules, clock: &Arc<dyn Clock>) -> Self {
        let observer = Observer::new(&rules, Arc::clone(clock));
        Active {
            rules: Arc::new(rules),
            observer,
        }
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

    /// A limiter keeping its state in memory, reading the time from `clock`: its decisions
    /// and the once-a-second throttle of its log events. [`ManualClock`](crate::clock::ManualClock)
    /// lets tests move time by hand.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::clock::ManualClock;
    /// use tollgate::rules::Rules;
    /// use tollgate::Limiter;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let rules = Rules::from_yaml(r#"
    /// domain: jobs
    /// sources: { tenant: { header: x-tenant } }
    /// descriptors:
    ///   - key: tenant
    ///     rate_limit: { unit: second, requests_per_unit: 1 }
    /// "#)?;
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::with_clock(rules, clock.clone());
    /// assert!(limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
    /// assert!(!limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.check(&[("tenant", "acme")], 1).await.is_allowed());
    /// # Ok::<(), tollgate::rules::RuleErrors>(())
    /// # }).unwrap();
    /// ```
    pub fn with_clock<C: Clock + Clone>(rules: Rules, clock: C) -> Limiter<MemoryStore<C>> {
        Limiter::build(
            rules,
            MemoryStore::with_clock(clock.clone()),
            Arc::new(clock),
        )
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
    pub fn with_store(rules: Rules, store: St) -> Self {
        Limiter::build(rules, store, Arc::new(SystemClock))
    }

    fn build(rules: Rules, store: St, clock: Arc<dyn Clock>) -> Self {
        Limiter {
            shared: Arc::new(Shared {
                active: ArcSwap::from_pointee(Active::new(rules, &clock)),
                store,
                fallback: MemoryStore::new(),
                shadow_mode: AtomicBool::new(false),
                clock,
            }),
        }
    }

    /// The rules in force now.
    pub fn rules(&self) -> Arc<Rules> {
        Arc::clone(&self.shared.active.load().rules)
    }

    /// Puts new rules in force. Requests already being decided finish under the old ones.
    /// A limit keeps its counters when its descriptor entries, algorithm and quota are
    /// unchanged (wherever it moved in the file); a changed limit starts afresh.
    ///
    /// With the `metrics` feature, registers the metric handles of `rules` with the recorder
    /// installed now, so that decisions only increment handles they already hold.
    pub fn set_rules(&self, rules: Rules) {
        let active = Active::new(rules, &self.shared.clock);
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

    /// The rules in force now with their observer, without touching the shared reference
    /// count.
    pub(crate) fn rules_guard(&self) -> arc_swap::Guard<Arc<Active>> {
        self.shared.active.load()
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
        let active = self.shared.active.load_full();
        let mut given = GivenValues {
            rules: &active.rules,
            values,
        };
        match self.start(&active, &mut given, cost) {
            Ok(Started::Ready { verdict, .. }) => verdict,
            Ok(Started::Pending(pending)) => pending.finish(&active, &self.shared.fallback).await.0,
            // Given values never need a peer address.
            Err(MissingPeerAddr) => Verdict::unlimited(),
        }
    }

    /// Starts deciding a request: at once when the store answers at once.
    pub(crate) fn start(
        &self,
        active: &Active,
        values: &mut dyn Values,
        default_cost: u64,
    ) -> Result<Started<St::Pending>, MissingPeerAddr> {
        let rules = &*active.rules;
        let mut matches = Matches::new();
        rules.applicable(values, &mut matches)?;
        let shadow_all = rules.shadow_mode() || self.shadow_mode();
        let mut bookings = Bookings::new();
        // Each key is taken out of its match, not the matches moved into an iterator.
        for m in &mut matches {
            let limit = &rules.limits[m.limit];
            // A shadow `unlimited` entry (the only unlimited one left in the matches) has
            // nothing to check.
            if limit.limited().is_none() {
                continue;
            }
            bookings.push(Booking {
                cost: limit.cost(values, default_cost),
                limit: m.limit,
                key: std::mem::take(&mut m.key),
                shadow: shadow_all || limit.is_shadow(),
                booked_until: None,
            });
        }
        if bookings.is_empty() {
            return Ok(Started::Ready {
                verdict: Verdict::unlimited(),
                queued: None,
            });
        }
        // Requests that no limit applies to pay for neither.
        let start = DecisionStart::now();
        let span = observe::decision_span(rules, &bookings);
        let entered = span.as_ref().map(tracing::Span::enter);
        let acquisition = match &bookings[..] {
            // Most requests meet one limit, and ask about it without collecting checks.
            [booking] => self.shared.store.acquire(&[check(rules, booking)]),
            bookings => self.shared.store.acquire(&checks(rules, bookings)),
        };
        Ok(match acquisition {
            Acquisition::Ready(result) => {
                let (verdict, queued) =
                    Verdict::settle(active, &mut bookings, result, &self.shared.fallback, start);
                Started::Ready { verdict, queued }
            }
            Acquisition::Pending(future) => {
                drop(entered);
                Started::Pending(Box::new(PendingVerdict {
                    future,
                    bookings,
                    start,
                    span: span.unwrap_or_else(tracing::Span::none),
                }))
            }
        })
    }
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
        self.rules_guard().observer.record_tracked_keys(keys);
    }
}

/// A limit that applies to a request: its state key and the request's weight under it.
#[derive(Debug, Clone)]
pub(crate) struct Booking {
    /// The limit's index in [`Rules::limits`].
    pub(crate) limit: usize,
    key: StateKey,
    cost: u64,
    /// Whether the limit only reports: in shadow mode itself, or all limits are.
    pub(crate) shadow: bool,
    /// The end of its place in a queue, once a shaping leaky bucket queued it.
    booked_until: Option<Nanos>,
}

/// How many limits of one request are kept without allocating: most requests meet one or two.
const INLINE_LIMITS: usize = 2;

pub(crate) type Bookings = SmallVec<[Booking; INLINE_LIMITS]>;

/// The bookings that hold queue places, boxed: only requests that a shaping leaky bucket
/// delays have any, and every other request should not carry their size from step to step.
pub(crate) type Queued = Option<Box<Bookings>>;

/// What the store is asked about `bookings`, one check each, in order: callers pair the
/// checks (and the decisions) with the bookings by position.
fn checks<'a>(
    rules: &'a Rules,
    bookings: &'a [Booking],
) -> SmallVec<[LimitCheck<'a>; INLINE_LIMITS]> {
    bookings
        .iter()
        .map(|booking| check(rules, booking))
        .collect()
}

/// What the store is asked about `booking`.
fn check<'a>(rules: &'a Rules, booking: &'a Booking) -> LimitCheck<'a> {
    let (algorithm, quota) = rules.limits[booking.limit]
        .limited()
        .expect("only limited entries are booked (see `Limiter::start`)");
    LimitCheck {
        domain: rules.domain(),
        key: &booking.key,
        algorithm,
        quota,
        cost: booking.cost,
        shadow: booking.shadow,
    }
}

/// The bookings of an admitted request that hold queue places (their enforced shaping leaky
/// buckets booked one), each with the end of its place, taken out of `bookings`.
fn take_queued(bookings: &mut Bookings, decisions: &[Decision]) -> Queued {
    let mut decisions = decisions.iter();
    bookings.retain(|booking| {
        booking.booked_until = decisions.next().and_then(|d| d.booked_until);
        booking.booked_until.is_some() && !booking.shadow
    });
    (!bookings.is_empty()).then(|| Box::new(std::mem::take(bookings)))
}

/// A decision under way.
pub(crate) enum Started<F> {
    /// Decided: the verdict, and the queue places it booked (see [`QueuePlaces`]).
    Ready { verdict: Verdict, queued: Queued },
    /// Boxed: a networked store's future is large, and a request decided at once should not
    /// carry its size from step to step.
    Pending(Box<PendingVerdict<F>>),
}

/// A store's answer still to come, and what is needed to make a verdict of it.
pub(crate) struct PendingVerdict<F> {
    future: F,
    bookings: Bookings,
    start: DecisionStart,
    span: tracing::Span,
}

impl<F> PendingVerdict<F>
where
    F: std::future::Future<Output = Result<Decisions, StoreError>>,
{
    pub(crate) async fn finish(
        self: Box<Self>,
        active: &Active,
        fallback: &MemoryStore,
    ) -> (Verdict, Queued) {
        let PendingVerdict {
            future,
            mut bookings,
            start,
            span,
        } = *self;
        let result = future.instrument(span.clone()).await;
        span.in_scope(|| Verdict::settle(active, &mut bookings, result, fallback, start))
    }
}

/// The queue places an admitted, delayed request holds in shaping leaky buckets. Dropped
/// before [`QueuePlaces::release`] (the client went away while it waited), it gives them
/// back, so that the next request can have them.
pub(crate) struct QueuePlaces<St: Store> {
    limiter: Limiter<St>,
    /// The rules the places were booked under.
    active: Arc<Active>,
    /// `None` once released.
    bookings: Queued,
}

impl<St: Store> QueuePlaces<St> {
    pub(crate) fn new(limiter: Limiter<St>, active: Arc<Active>, bookings: Queued) -> Self {
        QueuePlaces {
            limiter,
            active,
            bookings,
        }
    }

    /// The request's turn has come: the places are used, not given back.
    pub(crate) fn release(mut self) {
        self.bookings = None;
    }
}

impl<St: Store> Drop for QueuePlaces<St> {
    fn drop(&mut self) {
        let Some(bookings) = &self.bookings else {
            return;
        };
        let checks = checks(&self.active.rules, bookings);
        for (check, booking) in checks.iter().zip(bookings.iter()) {
            if let Some(booked_until) = booking.booked_until {
                self.limiter.shared.store.cancel(check, booked_until);
            }
        }
    }
}

/// The outcome for one request: admitted or not, and the decision its headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Why the request is denied; `None` when it is admitted.
    denial: Option<Denial>,
    decision: Option<(usize, Decision)>,
    delay: Duration,
    shadow_denied: bool,
}

/// Why a request was denied ([`Verdict::denial`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Denial {
    /// A limit had no room for it.
    OverLimit,
    /// The store failed to decide, and the limit's `on_store_error` is `deny`.
    StoreError,
}

impl Verdict {
    fn unlimited() -> Self {
        Verdict {
            denial: None,
            decision: None,
            delay: Duration::ZERO,
            shadow_denied: false,
        }
    }

    /// How long an admitted request waits for its turn in a shaping leaky bucket before it
    /// goes ahead; zero for most requests.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Whether the request is admitted.
    pub fn is_allowed(&self) -> bool {
        self.denial.is_none()
    }

    /// Why the request is denied: over a limit, or because the store failed; `None` when it
    /// is admitted.
    pub fn denial(&self) -> Option<Denial> {
        self.denial
    }

    /// The decision to report: when admitted, the enforced limit with the least room left;
    /// when denied, the denying limit that frees up last. `None` when no enforced limit applied.
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_ref().map(|(_, decision)| decision)
    }

    /// The index, in [`Rules::limits`], of the limit [`Verdict::decision`] belongs to.
    pub fn limit_index(&self) -> Option<usize> {
        self.decision.as_ref().map(|(index, _)| *index)
    }

    /// [`Verdict::limit_index`] and [`Verdict::decision`] together.
    pub(crate) fn reported(&self) -> Option<(usize, &Decision)> {
        self.decision
            .as_ref()
            .map(|(index, decision)| (*index, decision))
    }

    /// Whether a shadow-mode limit would have denied the request (over the limit, or because
    /// the store failed and its `on_store_error` is `deny`).
    pub fn is_shadow_denied(&self) -> bool {
        self.shadow_denied
    }

    /// The verdict on `bookings` from the store's `result`, and the bookings that hold queue
    /// places (admitted by an enforced shaping leaky bucket), taken out of `bookings`.
    /// Reports the decision begun at `start`.
    fn settle(
        active: &Active,
        bookings: &mut Bookings,
        result: Result<Decisions, StoreError>,
        fallback: &MemoryStore,
        start: DecisionStart,
    ) -> (Verdict, Queued) {
        let Active { rules, observer } = active;
        // Read where they are: moving the decisions copies them.
        let decisions = match &result {
            Ok(decisions) if decisions.len() == bookings.len() => decisions,
            failed => return Verdict::after_store_error(active, bookings, failed, fallback, start),
        };
        let verdict = Verdict::decide(bookings, decisions);
        observer.decided(rules, bookings, decisions, &verdict);
        // Most requests book no queue place and run none of the code that keeps them.
        let queued = if verdict.is_allowed() && decisions.iter().any(|d| d.booked_until.is_some()) {
            take_queued(bookings, decisions)
        } else {
            None
        };
        observer.finished(rules, &verdict, start);
        (verdict, queued)
    }

    /// [`Verdict::settle`] when the store could not decide (`failed` is its error, or a
    /// wrong number of decisions): the verdict of [`Verdict::on_store_error`], reported, with
    /// no queue places.
    // Cold and out of line, so that `settle`'s stack frame does not hold what only a failed
    // store needs.
    #[cold]
    #[inline(never)]
    fn after_store_error(
        active: &Active,
        bookings: &[Booking],
        failed: &Result<Decisions, StoreError>,
        fallback: &MemoryStore,
        start: DecisionStart,
    ) -> (Verdict, Queued) {
        let miscounted;
        let error = match failed {
            Err(error) => error,
            Ok(decisions) => {
                miscounted = StoreError::new(
                    format!(
                        "the store answered {} decisions for {} limits",
                        decisions.len(),
                        bookings.len()
                    ),
                    "a store must answer one decision per limit",
                );
                &miscounted
            }
        };
        let verdict = Verdict::on_store_error(active, bookings, error, fallback);
        active.observer.finished(&active.rules, &verdict, start);
        (verdict, None)
    }

    /// The verdict on `bookings` given one decision each, in one pass over them.
    fn decide(bookings: &[Booking], decisions: &[Decision]) -> Verdict {
        let mut verdict = Verdict::unlimited();
        // Among the enforced limits: the first of those with the least room left, and, of
        // those that deny, the last of those that free up last.
        let mut least_room: Option<(usize, &Decision)> = None;
        let mut last_freed: Option<(usize, &Decision)> = None;
        for (booking, decision) in bookings.iter().zip(decisions) {
            if booking.shadow {
                verdict.shadow_denied |= !decision.allowed;
            } else if decision.allowed {
                verdict.delay = verdict.delay.max(decision.delay);
                let room = |d: &Decision| (d.remaining, d.limit);
                if least_room.is_none_or(|(_, least)| room(decision) < room(least)) {
                    least_room = Some((booking.limit, decision));
                }
            } else if last_freed.is_none_or(|(_, last)| decision.retry_after >= last.retry_after) {
                last_freed = Some((booking.limit, decision));
            }
        }
        if last_freed.is_some() {
            verdict.denial = Some(Denial::OverLimit);
            verdict.delay = Duration::ZERO;
        }
        verdict.decision = last_freed
            .or(least_room)
            .map(|(limit, decision)| (limit, *decision));
        verdict
    }

    /// The verdict when the store could not decide: a limit whose policy is `deny` denies
    /// (or, in shadow mode, would have); limits whose policy is `local` are decided by
    /// `fallback`, an in-memory store with the same rules; the others (`allow`) admit.
    fn on_store_error(
        active: &Active,
        bookings: &[Booking],
        error: &StoreError,
        fallback: &MemoryStore,
    ) -> Verdict {
        let Active { rules, observer } = active;
        let policy = |booking: &Booking| rules.limits[booking.limit].on_store_error();
        let closed = bookings
            .iter()
            .any(|b| !b.shadow && policy(b) == OnStoreError::Deny);
        let outcomes: SmallVec<[StoreFailure; 2]> = bookings
            .iter()
            .map(|b| StoreFailure::of(policy(b), b.shadow, closed))
            .collect();
        observer.store_failed(rules, bookings, &outcomes, error);
        let with = |wanted: StoreFailure| {
            bookings
                .iter()
                .zip(&outcomes)
                .filter(move |(_, &outcome)| outcome == wanted)
                .map(|(booking, _)| booking)
        };
        let shadow_denied = outcomes.contains(&StoreFailure::ShadowDenied);
        if let Some(limit) = with(StoreFailure::Denied).next().map(|b| b.limit) {
            let quota_limit = rules.limits[limit].quota().map_or(0, |q| q.limit());
            let decision = Decision {
                allowed: false,
                limit: quota_limit,
                remaining: 0,
                reset_after: STORE_ERROR_RETRY,
                retry_after: STORE_ERROR_RETRY,
                delay: Duration::ZERO,
                booked_until: None,
            };
            return Verdict {
                denial: Some(Denial::StoreError),
                decision: Some((limit, decision)),
                delay: Duration::ZERO,
                shadow_denied,
            };
        }
        let local: Bookings = with(StoreFailure::Local).cloned().collect();
        let mut verdict = Verdict::unlimited();
        if !local.is_empty() {
            let acquisition = fallback.acquire(&checks(rules, &local));
            if let Acquisition::Ready(Ok(decisions)) = acquisition {
                if decisions.len() == local.len() {
                    verdict = Verdict::decide(&local, &decisions);
                    observer.decided(rules, &local, &decisions, &verdict);
                }
            }
        }
        verdict.shadow_denied |= shadow_denied;
        verdict
    }
}

/// What a limit's `on_store_error` policy makes of a request the store could not decide:
/// the one reading of the policy, for the verdict and for what is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreFailure {
    /// Admitted, charged nothing: `allow`, or `local` when a `deny` limit refuses the request
    /// anyway.
    Admitted,
    /// Refused (`deny`).
    Denied,
    /// Would have been refused (`deny` in shadow mode).
    ShadowDenied,
    /// Decided by the in-memory fallback store (`local`).
    Local,
}

impl StoreFailure {
    /// The outcome under `policy` of a limit (`shadow` when it only reports), `closed` when an
    /// enforced `deny` limit refuses the request.
    fn of(policy: OnStoreError, shadow: bool, closed: bool) -> StoreFailure {
        match policy {
            OnStoreError::Allow => StoreFailure::Admitted,
            OnStoreError::Deny if shadow => StoreFailure::ShadowDenied,
            OnStoreError::Deny => StoreFailure::Denied,
            OnStoreError::Local if closed => StoreFailure::Admitted,
            OnStoreError::Local => StoreFailure::Local,
        }
    }
}

/// What a client that was denied because the store failed is told to wait.
const STORE_ERROR_RETRY: Duration = Duration::from_secs(1);

/// Values given by the caller of [`Limiter::check`].
struct GivenValues<'a> {
    rules: &'a Rules,
    values: &'a [(&'a str, &'a str)],
}

impl Values for GivenValues<'_> {
    fn get(&mut self, source: usize) -> Result<Option<&str>, MissingPeerAddr> {
        let name = self.rules.sources[source].0.as_str();
        Ok(self
            .values
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| *value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn limiter(yaml: &str) -> (Limiter<MemoryStore<ManualClock>>, ManualClock) {
        let clock = ManualClock::new();
        let rules = Rules::from_yaml(yaml).expect("valid rules");
        (Limiter::with_clock(rules, clock.clone()), clock)
    }

    /// The verdict of a store that answers at once.
    fn check<St: Store>(limiter: &Limiter<St>, values: &[(&str, &str)]) -> Verdict {
        let active = limiter.rules_guard();
        let mut given = GivenValues {
            rules: &active.rules,
            values,
        };
        match limiter.start(&active, &mut given, 1) {
            Ok(Started::Ready { verdict, .. }) => verdict,
            _ => panic!("the store answers at once"),
        }
    }

    /// A booking of limit `limit`, enforced or `shadow`.
    fn booking(limit: usize, shadow: bool) -> Booking {
        Booking {
            limit,
            key: StateKey::new(),
            cost: 1,
            shadow,
            booked_until: None,
        }
    }

    /// A decision with `remaining` left of `limit`, waiting `wait` seconds to admit the next
    /// request (denied when `remaining` is 0 and `wait` is not) after `delay` ms in a queue.
    fn decision(remaining: u64, limit: u64, wait: u64, delay: u64) -> Decision {
        Decision {
            allowed: remaining > 0 || wait == 0,
            limit,
            remaining,
            reset_after: Duration::from_secs(60),
            retry_after: Duration::from_secs(wait),
            delay: Duration::from_millis(delay),
            booked_until: None,
        }
    }

    #[test]
    fn the_verdict_reports_the_least_room_when_admitted_and_the_last_to_free_up_when_denied() {
        let enforced = [booking(0, false), booking(1, false), booking(2, false)];
        // Admitted: the least room left, the smaller limit on a tie, the first on a full tie;
        // the longest queue delay of them all.
        let admitted = Verdict::decide(
            &enforced,
            &[
                decision(3, 10, 0, 5),
                decision(3, 5, 0, 20),
                decision(3, 5, 0, 0),
            ],
        );
        assert!(admitted.is_allowed());
        assert_eq!(admitted.limit_index(), Some(1));
        assert_eq!(admitted.delay(), Duration::from_millis(20));
        // Denied: of the denying limits, the one that frees up last, the last on a tie; no
        // delay, whatever the admitting limits queued.
        let denied = Verdict::decide(
            &enforced,
            &[
                decision(0, 5, 30, 0),
                decision(2, 5, 0, 20),
                decision(0, 5, 30, 0),
            ],
        );
        assert_eq!(denied.denial(), Some(Denial::OverLimit));
        assert_eq!(denied.limit_index(), Some(2));
        assert_eq!(denied.delay(), Duration::ZERO);
        let longest = Verdict::decide(
            &enforced,
            &[
                decision(0, 5, 30, 0),
                decision(0, 5, 40, 0),
                decision(0, 5, 10, 0),
            ],
        );
        assert_eq!(longest.limit_index(), Some(1));
        // A shadow limit neither denies nor is reported, but is seen to have denied.
        let shadowed = Verdict::decide(
            &[booking(0, true), booking(1, false)],
            &[decision(0, 1, 30, 0), decision(4, 5, 0, 0)],
        );
        assert!(shadowed.is_allowed() && shadowed.is_shadow_denied());
        assert_eq!(shadowed.limit_index(), Some(1));
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
            assert_eq!(
                limiter.rules().limits()[denied.limit_index().unwrap()].label(),
                "login"
            );
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
    fn counters_survive_rules_that_move_a_limit_and_reset_when_its_quota_changes() {
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
        let raised = moved.replace("requests_per_unit: 3", "requests_per_unit: 4");
        limiter.set_rules(Rules::from_yaml(&raised).expect("valid rules"));
        assert_eq!(
            check(&limiter, &client).decision().map(|d| d.remaining),
            Some(3),
            "a new quota starts afresh"
        );
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
            .descriptor(DescriptorSpec::key("method").rate_limit(LimitSpec::per(Unit::Second, 1)))
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

    /// A store that answers no decision, whatever it is asked.
    struct MiscountingStore;

    impl Store for MiscountingStore {
        type Pending = std::future::Ready<Result<Decisions, StoreError>>;

        fn acquire(&self, _: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
            Acquisition::Ready(Ok(Decisions::new()))
        }

        fn cancel(&self, _: &LimitCheck<'_>, _: Nanos) {}
    }

    /// A store that is always down.
    struct FailingStore;

    impl Store for FailingStore {
        type Pending = std::future::Ready<Result<Decisions, StoreError>>;

        fn acquire(&self, _: &[LimitCheck<'_>]) -> Acquisition<Self::Pending> {
            Acquisition::Ready(Err(StoreError::new("down", "connection refused")))
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
