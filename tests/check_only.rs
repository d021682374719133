//! Limits only checked (a rate limit service's descriptor of `hits_addend: 0`): decided with
//! the call's other limits, never charged, in memory, in Redis and across the slots of a
//! Redis Cluster.

mod common;

use tollgate::algorithm::Algorithm;
use tollgate::clock::ManualClock;
use tollgate::envoy::Descriptor;
use tollgate::rules::{KeySources, Rules};
use tollgate::store::{MemoryStore, Store};
use tollgate::Limiter;

/// 2 an hour per value of each of `algorithms`' key, and 2 an hour per `tenant`, with
/// `defaults`.
fn rules(algorithms: &[Algorithm], defaults: &str) -> Rules {
    let mut yaml = format!("domain: checks\ndefaults: {{ {defaults} }}\ndescriptors:\n");
    for algorithm in algorithms {
        let extra = match algorithm {
            // Police: a request either fits its queue place now or is refused.
            Algorithm::LeakyBucket => ", queue: 1, mode: police",
            _ => "",
        };
        yaml.push_str(&format!(
            "  - key: {algorithm}\n    rate_limit: {{ unit: hour, requests_per_unit: 2, algorithm: {algorithm}{extra} }}\n"
        ));
    }
    yaml.push_str("  - key: tenant\n    rate_limit: { unit: hour, requests_per_unit: 2 }\n");
    Rules::from_yaml_with(&yaml, KeySources::Given).expect("valid rules")
}

/// Whether the call was admitted, and what each descriptor's limit has left.
async fn call<St: Store>(
    limiter: &Limiter<St>,
    descriptors: &[(&str, &str, u64)],
) -> (bool, Vec<u64>) {
    let entries: Vec<[(&str, &str); 1]> = descriptors
        .iter()
        .map(|&(key, value, _)| [(key, value)])
        .collect();
    let call: Vec<Descriptor<'_>> = descriptors
        .iter()
        .zip(&entries)
        .map(|(&(_, _, cost), entries)| Descriptor {
            entries,
            cost,
            limit: None,
        })
        .collect();
    let checked = limiter.check_descriptors(&call).await;
    let remaining = checked
        .descriptors()
        .iter()
        .map(|decision| decision.as_ref().expect("limited").decision().remaining)
        .collect();
    (checked.verdict().is_allowed(), remaining)
}

/// What every store must do with limits only checked, for each of `algorithms`.
async fn checked_limits_are_never_charged<St: Store>(
    limiter: Limiter<St>,
    algorithms: &[Algorithm],
) {
    for &algorithm in algorithms {
        let key = algorithm.name();
        let (t1, t2) = (format!("{key}-1"), format!("{key}-2"));
        for _ in 0..3 {
            let checked = call(&limiter, &[(key, "ann", 0)]).await;
            assert_eq!(checked, (true, vec![2]), "{key}: checks charge nothing");
        }
        // With a limit that is charged, in the same call and in the same booking.
        let both = call(&limiter, &[(key, "ann", 0), ("tenant", &t1, 1)]).await;
        assert_eq!(both, (true, vec![2, 1]), "{key}");
        let same = call(&limiter, &[(key, "ann", 0), (key, "ann", 1)]).await;
        assert_eq!(same, (true, vec![1, 1]), "{key}: the charged one counts");
        // A full limit's check still admits, as in envoyproxy/ratelimit: it is over only
        // once its count is past the limit (a charge kept past it, `stream_done`).
        assert!(call(&limiter, &[(key, "ann", 1)]).await.0, "{key}");
        let full = call(&limiter, &[(key, "ann", 0), ("tenant", &t2, 1)]).await;
        assert_eq!(full, (true, vec![0, 1]), "{key}: a full limit's check");
        // A check refused with another limit keeps its limit's count: nothing to give back.
        // (The tenant is full but never refused yet, so that the store is asked: a store
        // may remember a refusal, and answer the next at once.)
        assert!(call(&limiter, &[(key, "bob", 1)]).await.0, "{key}");
        let t3 = format!("{key}-3");
        for _ in 0..2 {
            assert!(call(&limiter, &[("tenant", &t3, 1)]).await.0, "{key}");
        }
        let refused = call(&limiter, &[(key, "bob", 0), ("tenant", &t3, 1)]).await;
        assert!(!refused.0, "{key}");
        let bob = call(&limiter, &[(key, "bob", 0)]).await;
        assert_eq!(
            bob,
            (true, vec![1]),
            "{key}: bob's one charge is still there"
        );
    }
}

#[tokio::test]
async fn in_memory() {
    let store = MemoryStore::with_clock(ManualClock::new());
    let limiter = Limiter::with_store(rules(&Algorithm::ALL, ""), store);
    checked_limits_are_never_charged(limiter, &Algorithm::ALL).await;
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use crate::common::redis_server::{RedisCluster, RedisServer};
    use crate::common::windows::away_from_hour_edge;
    use std::time::Duration;
    use tollgate::store::RedisStore;

    /// The algorithms that local-first limits support.
    const SYNCED: [Algorithm; 4] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowCounter,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
    ];

    #[tokio::test]
    async fn in_redis() {
        let server = RedisServer::start();
        let store = RedisStore::builder(server.url()).connect().await;
        let store = store.expect("Redis answers");
        away_from_hour_edge(Duration::from_secs(60)).await;
        let limiter = Limiter::with_store(rules(&Algorithm::ALL, ""), store);
        checked_limits_are_never_charged(limiter, &Algorithm::ALL).await;
    }

    /// Local-first limits decide in the server's memory, and send only what they charged.
    #[tokio::test]
    async fn in_redis_local_first() {
        let server = RedisServer::start();
        let store = RedisStore::builder(server.url()).connect().await;
        let store = store.expect("Redis answers");
        away_from_hour_edge(Duration::from_secs(60)).await;
        let limiter = Limiter::with_store(rules(&SYNCED, "sync_every: 10s"), store);
        checked_limits_are_never_charged(limiter, &SYNCED).await;
    }

    /// Each value is its own hash tag: `ann`, `bob` and the tenants are in different slots,
    /// and a refused call gives back what the other slots charged, but for checks.
    #[tokio::test]
    async fn across_the_slots_of_a_redis_cluster() {
        let cluster = RedisCluster::start(3);
        let store = RedisStore::cluster_builder(cluster.urls()).connect().await;
        let store = store.expect("the cluster answers");
        away_from_hour_edge(Duration::from_secs(60)).await;
        let limiter = Limiter::with_store(rules(&Algorithm::ALL, ""), store);
        checked_limits_are_never_charged(limiter, &Algorithm::ALL).await;
    }
}
