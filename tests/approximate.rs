//! Approximate limits (`approximate: { memory }`) in the memory store: counts in a count-min
//! sketch, exact state for the keys near their limit.

use proptest::prelude::*;
use std::time::Duration;
use tollgate::algorithm::{Algorithm, Decision, Quota};
use tollgate::clock::{ManualClock, Nanos};
use tollgate::store::{Acquisition, Approximate, LimitCheck, MemoryStore, Store};

const SECOND: u64 = 1_000_000_000;

fn check<'a>(
    algorithm: Algorithm,
    quota: &'a Quota,
    key: &'a [u8],
    memory: usize,
) -> LimitCheck<'a> {
    LimitCheck {
        limit: "per-client",
        approximate: Some(Approximate::new(memory)),
        ..LimitCheck::new("approximate", key, algorithm, quota)
    }
}

fn decide(store: &MemoryStore<ManualClock>, check: &LimitCheck<'_>) -> Decision {
    let Acquisition::Ready(Ok(decisions)) = store.acquire(&[*check]) else {
        unreachable!("the memory store decides at once")
    };
    decisions[0]
}

proptest! {
    /// In a sketch small enough that keys share cells, every request admitted is one the
    /// exact algorithm admits too, replaying just the admitted requests of its key.
    #[test]
    fn never_admits_what_the_exact_algorithm_would_not(
        algorithm in prop::sample::select(vec![Algorithm::FixedWindow, Algorithm::SlidingWindowCounter]),
        requests in prop::collection::vec((0u8..40, 0u64..50), 1..400),
        limit in 1u64..20,
    ) {
        let quota = Quota::new(limit, Duration::from_secs(1)).unwrap();
        let clock = ManualClock::starting_at(Nanos::new(100 * SECOND));
        let store = MemoryStore::with_clock(clock.clone());
        let exact = MemoryStore::with_clock(clock.clone());
        for (key, step_ms) in requests {
            clock.advance(Duration::from_millis(step_ms));
            let key = [key];
            // 64 bytes: one line, every key in it.
            let approximate = check(algorithm, &quota, &key, 64);
            if decide(&store, &approximate).allowed {
                let replay = LimitCheck { approximate: None, ..approximate };
                prop_assert!(decide(&exact, &replay).allowed, "key {key:?} at {:?}", clock);
            }
        }
    }
}

/// A heavy client passes from the sketch to exact state at half its limit, and is limited
/// exactly: `remaining` counts down to 0, then the denial's `Retry-After` is the window's end.
#[test]
fn a_heavy_client_is_limited_exactly() {
    let clock = ManualClock::starting_at(Nanos::new(100 * SECOND));
    let store = MemoryStore::with_clock(clock.clone());
    let quota = Quota::new(10, Duration::from_secs(1)).unwrap();
    let heavy = check(Algorithm::FixedWindow, &quota, b"heavy", 1 << 20);
    let remaining: Vec<u64> = (0..10).map(|_| decide(&store, &heavy).remaining).collect();
    assert_eq!(remaining, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    clock.advance(Duration::from_millis(250));
    let denied = decide(&store, &heavy);
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after, Duration::from_millis(750));
    assert_eq!(store.len(), 1, "only the heavy client has state of its own");
}

/// Light clients cost no state of their own: a hundred thousand of them, each under half
/// its limit, leave the store's tables empty.
#[test]
fn light_clients_cost_no_state_of_their_own() {
    let clock = ManualClock::starting_at(Nanos::new(100 * SECOND));
    let store = MemoryStore::with_clock(clock.clone());
    let quota = Quota::new(10, Duration::from_secs(60)).unwrap();
    for client in 0..100_000u32 {
        let key = client.to_be_bytes();
        for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindowCounter] {
            assert!(decide(&store, &check(algorithm, &quota, &key, 4 << 20)).allowed);
        }
    }
    assert_eq!(store.len(), 0);
}

/// A heavy client whose exact state the store forgets (at its key ceiling, for other heavy
/// clients) is not counted afresh: the sketch kept up with its exact count.
#[test]
fn a_heavy_client_forgotten_at_the_key_ceiling_stays_limited() {
    let clock = ManualClock::starting_at(Nanos::new(100 * SECOND));
    let store = MemoryStore::with_clock(clock.clone()).max_keys(16);
    let quota = Quota::new(10, Duration::from_secs(60)).unwrap();
    let heavy = check(Algorithm::FixedWindow, &quota, b"heavy", 1 << 20);
    assert!((0..10).all(|_| decide(&store, &heavy).allowed));
    for client in 0..1_000u32 {
        let key = client.to_be_bytes();
        for _ in 0..6 {
            decide(
                &store,
                &check(Algorithm::FixedWindow, &quota, &key, 1 << 20),
            );
        }
    }
    assert!(store.len() <= 16, "the ceiling holds: {}", store.len());
    assert!(!decide(&store, &heavy).allowed, "still limited");
}

/// A request denied for its own cost (more than the limit) leaves no state: a flood of them
/// does not fill the store.
#[test]
fn a_request_too_heavy_for_the_limit_leaves_no_state() {
    let clock = ManualClock::starting_at(Nanos::new(100 * SECOND));
    let store = MemoryStore::with_clock(clock.clone());
    let quota = Quota::new(10, Duration::from_secs(60)).unwrap();
    for client in 0..1_000u32 {
        let key = client.to_be_bytes();
        let heavy_request = LimitCheck {
            cost: 11,
            ..check(Algorithm::FixedWindow, &quota, &key, 1 << 20)
        };
        assert!(!decide(&store, &heavy_request).allowed);
    }
    assert_eq!(store.len(), 0);
}
