//! `Algorithm::settle`: what an admitted request turned out to cost, charged after the fact
//! (past the limit if need be, then paid back) or given back; every algorithm, on a manual
//! clock's numbers.

mod common;

use std::time::Duration;
use tollgate::algorithm::{Algorithm, Quota, State};
use tollgate::clock::Nanos;

/// 1,000 a minute, all at once where the algorithm has a burst or a queue.
fn quota(algorithm: Algorithm) -> Quota {
    per_minute(algorithm, 1_000)
}

/// `limit` a minute, all at once where the algorithm has a burst or a queue.
fn per_minute(algorithm: Algorithm, limit: u64) -> Quota {
    let quota = Quota::new(limit, Duration::from_secs(60)).expect("a quota");
    match algorithm {
        Algorithm::LeakyBucket => quota.with_queue(limit - 1).policing(),
        _ => quota,
    }
}

fn at(nanos: u64) -> Nanos {
    Nanos::new(nanos)
}

#[test]
fn a_charge_past_the_limit_is_kept_until_paid_back_and_retried_exactly() {
    for algorithm in Algorithm::ALL {
        let quota = quota(algorithm);
        let mut state: State = algorithm.fresh(at(0), &quota);
        // The guide's example: each answer reserves 1 and turns out to use 300 tokens.
        for answer in 0..4 {
            let admitted = algorithm.acquire(&mut state, at(0), &quota, 1);
            assert!(admitted.allowed, "{algorithm}: answer {answer}");
            algorithm.settle(&mut state, at(0), &quota, 299);
        }
        let fifth = algorithm.acquire(&mut state, at(0), &quota, 1);
        assert!(!fifth.allowed, "{algorithm}: 1,200 used of 1,000");
        assert_eq!(fifth.remaining, 0, "{algorithm}");
        let retry = u64::try_from(fifth.retry_after.as_nanos()).expect("short");
        assert!(retry > 0, "{algorithm}");
        let mut early = state.clone();
        assert!(
            !algorithm
                .acquire(&mut early, at(retry - 1), &quota, 1)
                .allowed,
            "{algorithm}: a nanosecond early"
        );
        assert!(
            algorithm.acquire(&mut state, at(retry), &quota, 1).allowed,
            "{algorithm}: at retry_after exactly ({retry} ns)"
        );
    }
}

#[test]
fn what_a_response_did_not_use_is_given_back() {
    for algorithm in Algorithm::ALL {
        let quota = quota(algorithm);
        let mut state = algorithm.fresh(at(0), &quota);
        // Four requests reserve 300 each and use 100.
        for _ in 0..4 {
            assert!(
                algorithm.acquire(&mut state, at(0), &quota, 300).allowed,
                "{algorithm}"
            );
            algorithm.settle(&mut state, at(0), &quota, -200);
        }
        let room = algorithm.peek(&state, at(0), &quota, 0).remaining;
        assert_eq!(room, 600, "{algorithm}: 400 used");
        // Giving back more than was charged leaves a fresh key, never a fuller one.
        algorithm.settle(&mut state, at(0), &quota, -5_000);
        let fresh = algorithm.peek(&algorithm.fresh(at(0), &quota), at(0), &quota, 0);
        assert_eq!(
            algorithm.peek(&state, at(0), &quota, 0).remaining,
            fresh.remaining,
            "{algorithm}"
        );
    }
}

#[test]
fn a_window_s_charge_is_given_back_only_in_its_own_window() {
    let quota = quota(Algorithm::FixedWindow);
    let minute = 60_000_000_000;
    let mut state = Algorithm::FixedWindow.fresh(at(0), &quota);
    assert!(
        Algorithm::FixedWindow
            .acquire(&mut state, at(0), &quota, 500)
            .allowed
    );
    // The response ended in the next window: that window owes nothing back.
    Algorithm::FixedWindow.settle(&mut state, at(minute), &quota, -500);
    let next = Algorithm::FixedWindow.peek(&state, at(minute), &quota, 0);
    assert_eq!(next.remaining, 1_000);
    // A charge made late lands in the window of its settlement.
    Algorithm::FixedWindow.settle(&mut state, at(minute), &quota, 700);
    assert_eq!(
        Algorithm::FixedWindow
            .peek(&state, at(minute), &quota, 0)
            .remaining,
        300
    );
}

mod stores {
    use super::*;
    use tollgate::clock::ManualClock;
    use tollgate::store::{Acquisition, LimitCheck, MemoryStore, Store};

    fn check<'a>(
        key: &'a [u8],
        algorithm: Algorithm,
        quota: &'a Quota,
        cost: u64,
    ) -> LimitCheck<'a> {
        LimitCheck {
            domain: "settle",
            key,
            tag: key,
            algorithm,
            quota,
            cost,
            shadow: false,
            check_only: false,
            sync_every: None,
            limit: "tokens",
            approximate: None,
            carried_from: &[],
        }
    }

    async fn decide<St: Store>(
        store: &St,
        check: &LimitCheck<'_>,
    ) -> tollgate::algorithm::Decision {
        let decisions = match store.acquire(std::slice::from_ref(check)) {
            Acquisition::Ready(result) => result,
            Acquisition::Pending(future) => future.await,
        };
        decisions.expect("decided")[0]
    }

    /// The guide's example through the store `make` builds, for every algorithm (each in
    /// the form the store keeps it: packed, a timestamp, whole): four answers of 300
    /// tokens, the fifth refused until it has been paid back, then admitted exactly.
    pub(crate) async fn settles<St: Store>(make: impl AsyncFn(ManualClock) -> St) {
        for algorithm in Algorithm::ALL {
            // A token bucket of a whole interval is kept as a timestamp; 7 a minute is not.
            for quota in [quota(algorithm), per_minute(algorithm, 7)] {
                let clock = ManualClock::new();
                let store = make(clock.clone()).await;
                // A key of its own: a store shared by the runs keeps each apart.
                let key = format!("{algorithm} {}", quota.requests_per_period()).into_bytes();
                let check = |cost| check(&key, algorithm, &quota, cost);
                let per_answer = quota.requests_per_period() * 3 / 10;
                for answer in 0..4 {
                    let admitted = decide(&store, &check(1)).await;
                    assert!(admitted.allowed, "{algorithm} {quota:?}: answer {answer}");
                    let extra = i64::try_from(per_answer).expect("small") - 1;
                    store.settle(&check(1), extra).await.expect("settled");
                }
                let fifth = decide(&store, &check(1)).await;
                assert!(!fifth.allowed, "{algorithm} {quota:?}: over the limit");
                clock.advance(fifth.retry_after - Duration::from_nanos(1));
                let early = decide(&store, &check(1)).await;
                assert!(!early.allowed, "{algorithm} {quota:?}: a nanosecond early");
                clock.advance(Duration::from_nanos(1));
                let paid = decide(&store, &check(1)).await;
                assert!(paid.allowed, "{algorithm} {quota:?}: paid back");
            }
        }
    }

    /// Through the store `make` builds: four requests reserve 300 and use 100; the 600 they
    /// gave back are admitted, and nothing more.
    pub(crate) async fn gives_back<St: Store>(make: impl AsyncFn(ManualClock) -> St) {
        for algorithm in Algorithm::ALL {
            let quota = quota(algorithm);
            let store = make(ManualClock::new()).await;
            let key = format!("{algorithm} back").into_bytes();
            let check = |cost| check(&key, algorithm, &quota, cost);
            for _ in 0..4 {
                assert!(decide(&store, &check(300)).await.allowed, "{algorithm}");
                store.settle(&check(300), -200).await.expect("settled");
            }
            assert!(
                decide(&store, &check(600)).await.allowed,
                "{algorithm}: 600 given back"
            );
            assert!(
                !decide(&store, &check(1)).await.allowed,
                "{algorithm}: and no more"
            );
        }
    }

    #[tokio::test]
    async fn the_memory_store_settles_every_algorithm() {
        settles(async |clock| MemoryStore::with_clock(clock)).await;
        gives_back(async |clock| MemoryStore::with_clock(clock)).await;
    }
}

#[cfg(feature = "redis")]
mod redis {
    use super::stores::{gives_back, settles};
    use std::time::Duration;
    use tollgate::store::RedisStore;

    use crate::common::redis_server;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_settles_every_algorithm() {
        let server = redis_server::RedisServer::start();
        settles(async |clock| {
            server.cli(&["FLUSHALL"]);
            RedisStore::builder(server.url())
                .clock(clock)
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("connects")
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_gives_back_what_was_not_used() {
        let server = redis_server::RedisServer::start();
        gives_back(async |clock| {
            RedisStore::builder(server.url())
                .clock(clock)
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("connects")
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_settles_every_algorithm_as_0_1_kept_them() {
        let server = redis_server::RedisServer::start();
        settles(async |clock| {
            server.cli(&["FLUSHALL"]);
            RedisStore::builder(server.url())
                .clock(clock)
                .legacy_layout(true)
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("connects")
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_cluster_settles_every_algorithm() {
        let cluster = redis_server::RedisCluster::start(3);
        settles(async |clock| {
            RedisStore::cluster_builder(cluster.urls())
                .clock(clock)
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("connects")
        })
        .await;
    }
}
