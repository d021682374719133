//! The algorithms against their definitions.
//!
//! - The reference table (`common/reference.rs`) on the memory store and on the pure
//!   transitions.
//! - Property tests: each algorithm against a naive model written from its definition, over
//!   random traces with small limits and periods (so windows roll and intervals round often).
//! - The memory store against the states: however the store keeps a state (packed into two
//!   words, or a token bucket as GCRA's one timestamp), it decides every trace as the
//!   algorithm's own state does.
//! - Concurrency: threads racing on one key of a memory store whose clock stands still admit
//!   exactly the capacity, and two limits on one request stay all or nothing.

mod common;

use common::reference;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Barrier;
use std::time::Duration;
use tollgate::algorithm::{Algorithm, Decision, Quota};
use tollgate::clock::{Clock, ManualClock, Nanos};
use tollgate::store::{Acquisition, Decisions, LimitCheck, MemoryStore, Store};

// ------------------------------------------------------------------------ reference table

#[test]
fn reference_suite_passes_in_memory() {
    reference::run_reference_suite(MemoryStore::with_clock);
}

#[test]
fn reference_suite_passes_on_the_pure_algorithms() {
    reference::run_cases("pure algorithms", |case, clock| {
        let algorithm = case.algorithm;
        let quota = case.quota;
        let mut state = algorithm.fresh(clock.now(), &quota);
        move |cost| Ok(algorithm.acquire(&mut state, clock.now(), &quota, cost))
    });
}

// ------------------------------------------------------------------------ naive models

/// An algorithm written as plainly as its definition allows. Times never go back.
trait Model: Clone + fmt::Debug {
    /// Decides a request of `cost` at `t`, recording it when admitted: `Some(delay)` then.
    fn admit(&mut self, t: u64, cost: u64) -> Option<u64>;
}

/// Token bucket: a real-valued token count, kept exactly as `tokens × period` in integers.
/// It grows by `limit` per nanosecond (that is, `limit` tokens per period), up to `burst`.
#[derive(Debug, Clone)]
struct FractionalTokens {
    limit: u128,
    period: u128,
    burst: u128,
    scaled_tokens: u128,
    last: u64,
}

impl FractionalTokens {
    fn new(quota: &Quota, start: u64) -> Self {
        let period = u128::from(quota.period_nanos());
        FractionalTokens {
            limit: u128::from(quota.requests_per_period()),
            period,
            burst: u128::from(quota.burst()),
            scaled_tokens: u128::from(quota.burst()) * period,
            last: start,
        }
    }
}

impl Model for FractionalTokens {
    fn admit(&mut self, t: u64, cost: u64) -> Option<u64> {
        let refill = u128::from(t - self.last) * self.limit;
        self.scaled_tokens = (self.scaled_tokens + refill).min(self.burst * self.period);
        self.last = t;
        let needed = u128::from(cost) * self.period;
        if needed <= self.scaled_tokens {
            self.scaled_tokens -= needed;
            Some(0)
        } else {
            None
        }
    }
}

/// Fixed window: the cost admitted in each window `floor(t / period)`.
#[derive(Debug, Clone)]
struct WindowCounts {
    limit: u64,
    period: u64,
    admitted: BTreeMap<u64, u64>,
}

impl WindowCounts {
    fn new(quota: &Quota) -> Self {
        WindowCounts {
            limit: quota.requests_per_period(),
            period: quota.period_nanos(),
            admitted: BTreeMap::new(),
        }
    }

    fn count(&self, window: Option<u64>) -> u64 {
        window.map_or(0, |w| self.admitted.get(&w).copied().unwrap_or(0))
    }
}

impl Model for WindowCounts {
    fn admit(&mut self, t: u64, cost: u64) -> Option<u64> {
        let window = t / self.period;
        if self.count(Some(window)) + cost <= self.limit {
            *self.admitted.entry(window).or_default() += cost;
            Some(0)
        } else {
            None
        }
    }
}

/// Sliding window log: every admitted request; those at `a > t - period` count at `t`.
#[derive(Debug, Clone)]
struct AllAdmitted {
    limit: u64,
    period: u64,
    admitted: Vec<(u64, u64)>,
}

impl Model for AllAdmitted {
    fn admit(&mut self, t: u64, cost: u64) -> Option<u64> {
        let used: u64 = self
            .admitted
            .iter()
            .filter(|&&(at, _)| at + self.period > t)
            .map(|&(_, c)| c)
            .sum();
        if used + cost <= self.limit {
            self.admitted.push((t, cost));
            Some(0)
        } else {
            None
        }
    }
}

/// Sliding window counter: per-window counts, and the weighted formula
/// `previous × (period - elapsed) + (current + cost) × period <= limit × period`.
#[derive(Debug, Clone)]
struct WeightedWindows(WindowCounts);

impl Model for WeightedWindows {
    fn admit(&mut self, t: u64, cost: u64) -> Option<u64> {
        let WindowCounts { limit, period, .. } = self.0;
        let window = t / period;
        let elapsed = t % period;
        let previous = u128::from(self.0.count(window.checked_sub(1)));
        let current = u128::from(self.0.count(Some(window)));
        let (limit, period) = (u128::from(limit), u128::from(period));
        let weighted = previous * (period - u128::from(elapsed));
        if weighted + (current + u128::from(cost)) * period <= limit * period {
            *self.0.admitted.entry(window).or_default() += cost;
            Some(0)
        } else {
            None
        }
    }
}

/// The emission interval of GCRA and the leaky bucket: `ceil(period / limit)`.
fn interval(quota: &Quota) -> u64 {
    quota.period_nanos().div_ceil(quota.requests_per_period())
}

/// GCRA in its continuous-state leaky bucket form (ITU-T I.371): a bucket content `x` that
/// drains one unit per nanosecond since the last conforming request, each request adding
/// `cost × interval`, conforming while the content stays within `burst × interval`.
#[derive(Debug, Clone)]
struct ContinuousBucket {
    interval: u64,
    bound: u64,
    content: u64,
    last_conforming: u64,
}

impl ContinuousBucket {
    fn new(quota: &Quota, start: u64) -> Self {
        let interval = interval(quota);
        ContinuousBucket {
            interval,
            bound: quota.burst() * interval,
            content: 0,
            last_conforming: start,
        }
    }
}

impl Model for ContinuousBucket {
    fn admit(&mut self, t: u64, cost: u64) -> Option<u64> {
        let drained = self.content.saturating_sub(t - self.last_conforming);
        let content = drained + cost * self.interval;
        if content <= self.bound {
            self.content = content;
            self.last_conforming = t;
            Some(0)
        } else {
            None
        }
    }
}

/// Leaky bucket: a FIFO queue served one unit per interval. A request of cost `c` is
/// forwarded when everything ahead of it is served (its release time), and its `c` units
/// leave at the end of each of the `c` following intervals. At `t` the bucket holds the
/// units that have not left; a request fits when its units fit in `queue + 1` places (and
/// it would not wait beyond `max_delay`).
#[derive(Debug, Clone)]
struct ReleaseQueue {
    interval: u64,
    places: u64,
    max_delay: Option<u64>,
    shaping: bool,
    units_leave_at: Vec<u64>,
}

impl ReleaseQueue {
    fn new(quota: &Quota) -> Self {
        ReleaseQueue {
            interval: interval(quota),
            places: quota.queue() + 1,
            max_delay: quota
                .max_delay()
                .map(|d| u64::try_from(d.as_nanos()).unwrap()),
            shaping: quota.is_shaping(),
            units_leave_at: Vec::new(),
        }
    }
}

impl Model for ReleaseQueue {
    fn admit(&mut self, t: u64, cost: u64) -> Option<u64> {
        let in_bucket = self.units_leave_at.iter().filter(|&&at| at > t).count() as u64;
        let release = self.units_leave_at.iter().copied().fold(t, u64::max);
        let wait = release - t;
        if in_bucket + cost > self.places || self.max_delay.is_some_and(|max| wait > max) {
            return None;
        }
        self.units_leave_at
            .extend((1..=cost).map(|unit| release + unit * self.interval));
        Some(if self.shaping { wait } else { 0 })
    }
}

// ------------------------------------------------------------------------ the property

/// Runs `trace` (time steps and costs from `start`) through `algorithm` and `model` side by
/// side. At every step: `peek` agrees with `acquire` and leaves the state alone; the same
/// admission and delay as the model; `remaining` exact (that many cost-1 requests at the same
/// instant fit in the model, one more does not); a denial's `retry_after` exact (the same
/// request fits at `now + retry_after` and not 1 ns earlier, in the model and in the
/// algorithm), or one period when the cost exceeds `capacity`.
fn check_against_model(
    algorithm: Algorithm,
    quota: &Quota,
    capacity: u64,
    start: u64,
    trace: &[(u64, u64)],
    mut model: impl Model,
) -> Result<(), TestCaseError> {
    let mut state = algorithm.fresh(Nanos::new(start), quota);
    let mut t = start;
    for (step, &(advance, cost)) in trace.iter().enumerate() {
        t += advance;
        let now = Nanos::new(t);
        let at = format!("step {step} (t = {t}, cost {cost}), model {model:?}");

        let before = state.clone();
        let peeked = algorithm.peek(&state, now, quota, cost);
        prop_assert_eq!(&state, &before, "peek changed the state at {}", at);
        let decision = algorithm.acquire(&mut state, now, quota, cost);
        prop_assert_eq!(peeked, decision, "peek disagrees with acquire at {}", at);

        let expected = model.admit(t, cost);
        prop_assert_eq!(
            decision.allowed,
            expected.is_some(),
            "admission differs at {}: {:?}",
            at,
            decision
        );
        let delay = Duration::from_nanos(expected.unwrap_or(0));
        prop_assert_eq!(decision.delay, delay, "delay at {}: {:?}", at, decision);

        // `remaining`: exactly that many more cost-1 requests fit right now.
        let mut burst = model.clone();
        for k in 0..decision.remaining.min(capacity + 1) {
            prop_assert!(
                burst.admit(t, 1).is_some(),
                "remaining {} overstated at {}: request {} of the burst denied ({:?})",
                decision.remaining,
                at,
                k + 1,
                decision
            );
        }
        prop_assert!(
            burst.admit(t, 1).is_none(),
            "remaining {} understated at {}: one more fits ({:?})",
            decision.remaining,
            at,
            decision
        );

        if decision.allowed {
            prop_assert_eq!(decision.retry_after, Duration::ZERO, "at {}", at);
        } else if cost > capacity {
            prop_assert_eq!(decision.retry_after, quota.period(), "at {}", at);
            let much_later = t + 1000 * quota.period_nanos();
            prop_assert!(model.clone().admit(much_later, cost).is_none());
        } else {
            let wait = u64::try_from(decision.retry_after.as_nanos()).unwrap();
            prop_assert!(wait > 0, "denied with no wait at {}: {:?}", at, decision);
            let on_time = t + wait;
            prop_assert!(
                model.clone().admit(on_time, cost).is_some(),
                "retry_after {} too short at {}: the model denies at {}",
                wait,
                at,
                on_time
            );
            prop_assert!(
                model.clone().admit(on_time - 1, cost).is_none(),
                "retry_after {} too long at {}: the model admits at {}",
                wait,
                at,
                on_time - 1
            );
            let on_time_decision =
                algorithm.acquire(&mut state.clone(), Nanos::new(on_time), quota, cost);
            prop_assert!(on_time_decision.allowed, "on time at {}", at);
            let early = algorithm.acquire(&mut state.clone(), Nanos::new(on_time - 1), quota, cost);
            prop_assert!(!early.allowed, "1 ns early at {}", at);
        }
    }
    Ok(())
}

/// Periods of 1 to 20 ns (fractions of a token or interval everywhere) or 1 to 20 ms.
fn period() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..=20, (1u64..=20).prop_map(|p| p * 1_000_000)]
}

/// A start time and a trace: time steps (often 0, up to 3 periods) and costs 1 to 3.
fn start_and_trace(period: u64) -> impl Strategy<Value = (u64, Vec<(u64, u64)>)> {
    let advance = prop_oneof![
        3 => Just(0u64),
        5 => 0..=period,
        2 => 0..=3 * period,
    ];
    (
        0..=3 * period,
        prop::collection::vec((advance, 1u64..=3), 1..40),
    )
}

/// A quota built from `(limit, extra, period)`, and a start and trace for it.
fn quota_and_trace(
    extra: impl Strategy<Value = u64>,
    build: impl Fn(u64, u64, u64) -> Quota,
) -> impl Strategy<Value = (Quota, u64, Vec<(u64, u64)>)> {
    (1u64..=5, extra, period()).prop_flat_map(move |(limit, extra, period)| {
        let quota = build(limit, extra, period);
        start_and_trace(period).prop_map(move |(start, trace)| (quota, start, trace))
    })
}

proptest! {
    // No regression files: a failure prints its minimal trace.
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(256)
    })]

    #[test]
    fn token_bucket_matches_fractional_tokens(
        (quota, start, trace) in quota_and_trace(1u64..=5, |limit, burst, period| {
            Quota::new(limit, Duration::from_nanos(period)).unwrap().with_burst(burst)
        })
    ) {
        let model = FractionalTokens::new(&quota, start);
        check_against_model(Algorithm::TokenBucket, &quota, quota.burst(), start, &trace, model)?;
    }

    #[test]
    fn fixed_window_matches_counts_per_window(
        (quota, start, trace) in quota_and_trace(Just(0), |limit, _, period| {
            Quota::new(limit, Duration::from_nanos(period)).unwrap()
        })
    ) {
        let model = WindowCounts::new(&quota);
        check_against_model(Algorithm::FixedWindow, &quota, quota.requests_per_period(), start, &trace, model)?;
    }

    #[test]
    fn sliding_window_log_matches_all_admitted_requests(
        (quota, start, trace) in quota_and_trace(Just(0), |limit, _, period| {
            Quota::new(limit, Duration::from_nanos(period)).unwrap()
        })
    ) {
        let model = AllAdmitted {
            limit: quota.requests_per_period(),
            period: quota.period_nanos(),
            admitted: Vec::new(),
        };
        check_against_model(
            Algorithm::SlidingWindowLog, &quota, quota.requests_per_period(), start, &trace, model,
        )?;
    }

    #[test]
    fn sliding_window_counter_matches_the_weighted_formula(
        (quota, start, trace) in quota_and_trace(Just(0), |limit, _, period| {
            Quota::new(limit, Duration::from_nanos(period)).unwrap()
        })
    ) {
        let model = WeightedWindows(WindowCounts::new(&quota));
        check_against_model(
            Algorithm::SlidingWindowCounter, &quota, quota.requests_per_period(), start, &trace, model,
        )?;
    }

    #[test]
    fn gcra_matches_the_continuous_state_bucket(
        (quota, start, trace) in quota_and_trace(1u64..=5, |limit, burst, period| {
            Quota::new(limit, Duration::from_nanos(period)).unwrap().with_burst(burst)
        })
    ) {
        let model = ContinuousBucket::new(&quota, start);
        check_against_model(Algorithm::Gcra, &quota, quota.burst(), start, &trace, model)?;
    }

    #[test]
    fn leaky_bucket_shaping_matches_the_release_queue(
        (quota, start, trace) in quota_and_trace(0u64..=4, |limit, queue, period| {
            Quota::new(limit, Duration::from_nanos(period)).unwrap().with_queue(queue)
        })
    ) {
        let model = ReleaseQueue::new(&quota);
        check_against_model(
            Algorithm::LeakyBucket, &quota, quota.queue() + 1, start, &trace, model,
        )?;
    }

    #[test]
    fn leaky_bucket_policing_matches_the_release_queue(
        (quota, start, trace) in quota_and_trace(0u64..=4, |limit, queue, period| {
            Quota::new(limit, Duration::from_nanos(period)).unwrap().with_queue(queue).with_policing()
        })
    ) {
        let model = ReleaseQueue::new(&quota);
        check_against_model(
            Algorithm::LeakyBucket, &quota, quota.queue() + 1, start, &trace, model,
        )?;
    }

    // `remaining` must count max_delay as well as free queue places (reference case
    // leaky_bucket/remaining_counts_max_delay).
    #[test]
    fn leaky_bucket_max_delay_matches_the_release_queue(
        (quota, start, trace, max_delay) in quota_and_trace(0u64..=4, |limit, queue, period| {
            Quota::new(limit, Duration::from_nanos(period)).unwrap().with_queue(queue)
        }).prop_flat_map(|(quota, start, trace)| {
            let period = quota.period_nanos();
            (Just(quota), Just(start), Just(trace), 0..=3 * period)
        })
    ) {
        let quota = quota.with_max_delay(Duration::from_nanos(max_delay));
        let model = ReleaseQueue::new(&quota);
        check_against_model(
            Algorithm::LeakyBucket, &quota, quota.queue() + 1, start, &trace, model,
        )?;
    }
}

// ------------------------------------------------------------------------ the store against the states

/// The memory store keeps the states of most algorithms packed into two words, and decides a
/// token bucket whose quota has a whole emission interval as GCRA, in one timestamp. Either
/// way it must decide every request of a trace exactly as the algorithm's own state does.
fn check_store_against_state(
    algorithm: Algorithm,
    quota: &Quota,
    start: u64,
    trace: &[(u64, u64)],
) -> Result<(), TestCaseError> {
    let clock = ManualClock::starting_at(Nanos::new(start));
    let store = MemoryStore::with_clock(clock.clone());
    let mut state = None;
    let mut t = start;
    for (step, &(advance, cost)) in trace.iter().enumerate() {
        t += advance;
        let now = Nanos::new(t);
        clock.set(now);
        let state = state.get_or_insert_with(|| algorithm.fresh(now, quota));
        let expected = algorithm.acquire(state, now, quota, cost);
        let check = LimitCheck {
            domain: "test",
            key: b"one key",
            tag: b"one key",
            algorithm,
            quota,
            cost,
            shadow: false,
            check_only: false,
            sync_every: None,
            limit: "test",
            approximate: None,
            carried_from: &[],
        };
        let decided = acquire(&store, &[check])[0];
        prop_assert_eq!(
            decided,
            expected,
            "{} at step {} (t = {}, cost {})",
            algorithm,
            step,
            t,
            cost
        );
    }
    Ok(())
}

/// A quota of `limit` (0 to 5) per `period` with a burst and a queue (0 to 5 each), for
/// every algorithm, and a start and trace for it, with costs of 0 to 2. The token bucket's
/// interval is whole for about half of these quotas.
fn any_quota_and_trace() -> impl Strategy<Value = (Algorithm, Quota, u64, Vec<(u64, u64)>)> {
    let algorithm = prop::sample::select(Algorithm::ALL.to_vec());
    (algorithm, 0u64..=5, 0u64..=5, 0u64..=5, period()).prop_flat_map(
        |(algorithm, limit, burst, queue, period)| {
            let quota = Quota::new(limit, Duration::from_nanos(period))
                .unwrap()
                .with_burst(burst)
                .with_queue(queue);
            start_and_trace(period).prop_map(move |(start, trace)| {
                let trace = trace.into_iter().map(|(at, cost)| (at, cost - 1)).collect();
                (algorithm, quota, start, trace)
            })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(1024)
    })]

    #[test]
    fn the_memory_store_decides_as_each_algorithm_state(
        (algorithm, quota, start, trace) in any_quota_and_trace()
    ) {
        check_store_against_state(algorithm, &quota, start, &trace)?;
    }

    #[test]
    fn the_memory_store_decides_deep_token_buckets_as_their_state(
        (quota, start, trace) in deep_token_bucket_and_trace()
    ) {
        check_store_against_state(Algorithm::TokenBucket, &quota, start, &trace)?;
    }
}

/// A token bucket of 1 to 5 per 1 to 3 days (a whole interval) whose burst may take up to
/// centuries to refill, on either side of the longest that GCRA's one timestamp can keep
/// (2⁶² ns), at a time of these years, with costs from 1 up to past the burst.
fn deep_token_bucket_and_trace() -> impl Strategy<Value = (Quota, u64, Vec<(u64, u64)>)> {
    const DAY: u64 = 86_400 * 1_000_000_000;
    const NOW: u64 = 1_764_000_000 * 1_000_000_000;
    (1u64..=5, 1u64..=3).prop_flat_map(|(limit, days)| {
        let period = days * DAY;
        let interval = period / limit;
        let deepest = (1u64 << 62) / interval;
        let burst = prop_oneof![
            1u64..=5,
            deepest - 2..=deepest + 2,
            Just(1_000_000),
            Just(i64::MAX as u64),
        ];
        (burst, NOW..NOW + DAY).prop_flat_map(move |(burst, start)| {
            let quota = Quota::new(limit, Duration::from_nanos(period))
                .unwrap()
                .with_burst(burst);
            let cost = prop_oneof![1u64..=3, 0..=burst.saturating_add(1)];
            let advance = prop_oneof![Just(0u64), 0..=interval, 0..=100 * period];
            let trace = prop::collection::vec((advance, cost), 1..20);
            trace.prop_map(move |trace| (quota, start, trace))
        })
    })
}

/// A token bucket whose whole burst, at one token an interval, reaches past the last
/// nanosecond a timestamp holds cannot be kept as GCRA's one timestamp: a bucket of a million
/// tokens refilled one a day still admits what it holds, all at once, and then one a day.
#[test]
fn a_token_bucket_too_deep_for_one_timestamp_keeps_its_exact_answers() {
    const DAY: u64 = 86_400 * 1_000_000_000;
    let quota = Quota::new(1, Duration::from_nanos(DAY))
        .unwrap()
        .with_burst(1_000_000);
    let trace = [(0, 999_999), (0, 1), (0, 1), (DAY - 1, 1), (1, 1), (0, 1)];
    if let Err(error) = check_store_against_state(
        Algorithm::TokenBucket,
        &quota,
        ManualClock::START.as_u64(),
        &trace,
    ) {
        panic!("{error}");
    }
}

// ------------------------------------------------------------------------ concurrency

const THREADS: usize = 4;
const ATTEMPTS: usize = 150;

fn acquire(store: &impl Store, checks: &[LimitCheck<'_>]) -> Decisions {
    match store.acquire(checks) {
        Acquisition::Ready(Ok(decisions)) => decisions,
        Acquisition::Ready(Err(e)) => panic!("store error: {e}"),
        Acquisition::Pending(_) => panic!("the memory store answers at once"),
    }
}

/// The requests admitted when `THREADS` threads each try `ATTEMPTS` times at once, on one
/// key of a shared memory store whose clock stands still.
fn admitted_concurrently(algorithm: Algorithm, quota: Quota) -> Vec<Decision> {
    let store = MemoryStore::with_clock(ManualClock::new());
    let start = Barrier::new(THREADS);
    let check = LimitCheck {
        domain: "test",
        key: b"one key",
        tag: b"one key",
        algorithm,
        quota: &quota,
        cost: 1,
        shadow: false,
        check_only: false,
        sync_every: None,
        limit: "test",
        approximate: None,
        carried_from: &[],
    };
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    (0..ATTEMPTS)
                        .map(|_| acquire(&store, &[check])[0])
                        .filter(|d| d.allowed)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().expect("no thread panics"))
            .collect()
    })
}

#[test]
fn token_bucket_concurrent_admissions_equal_the_burst() {
    // 10 per second has a whole interval (decided as GCRA, with a compare-and-swap), 7 per
    // second does not (the two-word state, under the exclusive lock).
    for limit in [10, 7] {
        let quota = Quota::new(limit, Duration::from_secs(1))
            .unwrap()
            .with_burst(37);
        assert_eq!(
            admitted_concurrently(Algorithm::TokenBucket, quota).len(),
            37,
            "{limit} per second"
        );
    }
}

#[test]
fn leaky_bucket_concurrent_admissions_equal_the_queue_plus_one() {
    // 10 per second: each admitted request gets its own slot, 100 ms apart.
    let quota = Quota::new(10, Duration::from_secs(1))
        .unwrap()
        .with_queue(22);
    let mut delays: Vec<Duration> = admitted_concurrently(Algorithm::LeakyBucket, quota)
        .iter()
        .map(|d| d.delay)
        .collect();
    delays.sort();
    let slots: Vec<Duration> = (0..23).map(|k| Duration::from_millis(100 * k)).collect();
    assert_eq!(delays, slots);

    let policing = quota.with_policing();
    assert_eq!(
        admitted_concurrently(Algorithm::LeakyBucket, policing).len(),
        23
    );
}

#[test]
fn fixed_window_concurrent_admissions_equal_the_limit() {
    let quota = Quota::new(41, Duration::from_secs(1)).unwrap();
    assert_eq!(
        admitted_concurrently(Algorithm::FixedWindow, quota).len(),
        41
    );
}

#[test]
fn sliding_window_log_concurrent_admissions_equal_the_limit() {
    let quota = Quota::new(41, Duration::from_secs(1)).unwrap();
    assert_eq!(
        admitted_concurrently(Algorithm::SlidingWindowLog, quota).len(),
        41
    );
}

#[test]
fn sliding_window_counter_concurrent_admissions_equal_the_limit() {
    let quota = Quota::new(41, Duration::from_secs(1)).unwrap();
    assert_eq!(
        admitted_concurrently(Algorithm::SlidingWindowCounter, quota).len(),
        41
    );
}

#[test]
fn gcra_concurrent_admissions_equal_the_burst() {
    let quota = Quota::new(10, Duration::from_secs(1))
        .unwrap()
        .with_burst(29);
    assert_eq!(admitted_concurrently(Algorithm::Gcra, quota).len(), 29);
}

/// A quota admitting exactly `capacity` requests at one instant under `algorithm`.
fn quota_admitting(algorithm: Algorithm, capacity: u64) -> Quota {
    match algorithm {
        Algorithm::LeakyBucket => Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_queue(capacity - 1),
        Algorithm::TokenBucket | Algorithm::Gcra => Quota::new(1, Duration::from_secs(1))
            .unwrap()
            .with_burst(capacity),
        _ => Quota::new(capacity, Duration::from_secs(1)).unwrap(),
    }
}

#[test]
fn two_limits_on_one_request_are_all_or_nothing_under_concurrency() {
    const NARROW: u64 = 5;
    const WIDE: u64 = 100;
    for algorithm in Algorithm::ALL {
        let store = MemoryStore::with_clock(ManualClock::new());
        let narrow_quota = quota_admitting(algorithm, NARROW);
        let wide_quota = quota_admitting(algorithm, WIDE);
        let limit = |key: &'static [u8], quota| LimitCheck::new("test", key, algorithm, quota);
        let wide = limit(b"wide", &wide_quota);
        let narrow = limit(b"narrow", &narrow_quota);
        // The wide limit first: a denial by the narrow one must undo nothing already charged.
        let both = [wide, narrow];
        let start = Barrier::new(THREADS);
        let admitted: usize = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..THREADS)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        (0..ATTEMPTS)
                            .filter(|_| acquire(&store, &both).iter().all(|d| d.allowed))
                            .count()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).sum()
        });
        assert_eq!(admitted as u64, NARROW, "{algorithm}: admissions");
        // The wide limit was charged exactly once per admitted request.
        let wide_left = (0..=WIDE)
            .take_while(|_| acquire(&store, &[wide])[0].allowed)
            .count() as u64;
        assert_eq!(
            wide_left,
            WIDE - NARROW,
            "{algorithm}: charges of the wide limit"
        );
        assert!(!acquire(&store, &[narrow])[0].allowed, "{algorithm}");
    }
}
