//! Steps of the wall clock (NTP correcting a large error, a virtual machine resumed from a
//! snapshot) change no decision in memory: a limiter on an [`AnchoredClock`] of two
//! [`ManualClock`]s, the composition [`SystemClock`](tollgate::clock::SystemClock) is made
//! of, decides as if the "wall" clock had not been touched, for every algorithm.
//!
//! A client is limited; the wall clock steps back by an hour while it waits, and it is
//! admitted again after exactly the wait it was given, not an hour later. A client uses its
//! quota; the wall clock steps forward by an hour, and it is still refused until its wait
//! is over: a step forward refills nobody.

use std::time::Duration;
use tollgate::algorithm::Algorithm;
use tollgate::clock::{AnchoredClock, Clock, ManualClock, Nanos};
use tollgate::rules::{KeySources, Rules};
use tollgate::store::MemoryStore;
use tollgate::Limiter;

const HOUR: Duration = Duration::from_secs(3_600);
const NANOSECOND: Duration = Duration::from_nanos(1);

/// The two clocks an [`AnchoredClock`] is made of: a "wall" clock, stepped by the tests,
/// and a monotonic one. Time passing moves both.
struct Clocks {
    wall: ManualClock,
    monotonic: ManualClock,
}

impl Clocks {
    fn new() -> Self {
        Clocks {
            wall: ManualClock::new(),
            monotonic: ManualClock::starting_at(Nanos::ZERO),
        }
    }

    /// A limiter in memory under `algorithm`, on the clock made of these two.
    fn limiter(&self, algorithm: Algorithm) -> Limiter<MemoryStore<AnchoredClock<ManualClock>>> {
        let clock = AnchoredClock::new(&self.wall, self.monotonic.clone());
        Limiter::with_store(rules(algorithm), MemoryStore::with_clock(clock))
    }

    /// Time passes.
    fn elapse(&self, by: Duration) {
        self.wall.advance(by);
        self.monotonic.advance(by);
    }

    /// The wall clock is set back by `by`; no time passes.
    fn step_wall_back(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).expect("a step of less than 584 years");
        self.wall.set(Nanos::new(self.wall.now().as_u64() - nanos));
    }

    /// The wall clock is set forward by `by`; no time passes.
    fn step_wall_forward(&self, by: Duration) {
        self.wall.advance(by);
    }
}

/// 2 requests a minute per client under `algorithm`.
fn rules(algorithm: Algorithm) -> Rules {
    let extra = match algorithm {
        // Police: a request either fits its queue place now or is refused.
        Algorithm::LeakyBucket => ", queue: 1, mode: police",
        _ => "",
    };
    let yaml = format!(
        "domain: steps\ndescriptors:\n  - key: client\n    rate_limit: \
         {{ unit: minute, requests_per_unit: 2, algorithm: {algorithm}{extra} }}\n"
    );
    Rules::from_yaml_with(&yaml, KeySources::Given).expect("valid rules")
}

/// Sends requests until one is refused; the wait that refusal gives.
async fn use_up(limiter: &Limiter<MemoryStore<AnchoredClock<ManualClock>>>) -> Duration {
    for _ in 0..10 {
        let verdict = limiter.check(&[("client", "alice")], 1).await;
        if !verdict.is_allowed() {
            let wait = verdict.decision().expect("a decision").retry_after;
            assert!(!wait.is_zero(), "a refusal gives a wait");
            return wait;
        }
    }
    panic!("10 requests admitted under a limit of 2 a minute");
}

/// The client is refused until `wait` has passed, and admitted then.
async fn admitted_after_exactly(
    limiter: &Limiter<MemoryStore<AnchoredClock<ManualClock>>>,
    clocks: &Clocks,
    wait: Duration,
    algorithm: Algorithm,
) {
    clocks.elapse(wait - NANOSECOND);
    let verdict = limiter.check(&[("client", "alice")], 1).await;
    assert!(
        !verdict.is_allowed(),
        "{algorithm}: admitted before the wait was over"
    );
    assert_eq!(
        verdict.decision().expect("a decision").retry_after,
        NANOSECOND,
        "{algorithm}: the wait left"
    );
    clocks.elapse(NANOSECOND);
    let verdict = limiter.check(&[("client", "alice")], 1).await;
    assert!(verdict.is_allowed(), "{algorithm}: refused after the wait");
}

#[tokio::test]
async fn a_step_back_of_the_wall_clock_adds_nothing_to_a_wait() {
    for algorithm in Algorithm::ALL {
        let clocks = Clocks::new();
        let limiter = clocks.limiter(algorithm);
        clocks.elapse(Duration::from_secs(10));
        let wait = use_up(&limiter).await;
        let before_the_step = wait / 3;
        clocks.elapse(before_the_step);
        clocks.step_wall_back(HOUR);
        admitted_after_exactly(&limiter, &clocks, wait - before_the_step, algorithm).await;
    }
}

#[tokio::test]
async fn a_step_forward_of_the_wall_clock_refills_nobody() {
    for algorithm in Algorithm::ALL {
        let clocks = Clocks::new();
        let limiter = clocks.limiter(algorithm);
        clocks.elapse(Duration::from_secs(10));
        let wait = use_up(&limiter).await;
        clocks.step_wall_forward(HOUR);
        admitted_after_exactly(&limiter, &clocks, wait, algorithm).await;
    }
}
