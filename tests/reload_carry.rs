//! What a reload keeps: a limit whose quota, period or algorithm changes keeps what each
//! client used, in every store (memory, Redis, a Redis Cluster).

mod common;

use std::time::Duration;
use tollgate::algorithm::Algorithm;
use tollgate::clock::ManualClock;
use tollgate::rules::Rules;
use tollgate::store::Store;
use tollgate::Limiter;

/// One limit per `user`, `rate_limit` being the YAML flow mapping's inside.
fn per_user(rate_limit: &str) -> Rules {
    Rules::from_yaml(&format!(
        "domain: carry\nsources: {{ user: {{ header: x-user }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ {rate_limit} }}\n"
    ))
    .expect("valid rules")
}

/// `limit` a minute decided by `algorithm`, all at once (a leaky bucket queues the rest).
fn per_minute(algorithm: Algorithm, limit: u64) -> Rules {
    let queue = match algorithm {
        Algorithm::LeakyBucket => format!(", queue: {}", limit - 1),
        _ => String::new(),
    };
    per_user(&format!(
        "unit: minute, requests_per_unit: {limit}, algorithm: {}{queue}",
        algorithm.name()
    ))
}

/// How many of `attempts` requests of `user` are admitted.
async fn admitted<St: Store>(limiter: &Limiter<St>, user: &str, attempts: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..attempts {
        if limiter.check(&[("user", user)], 1).await.is_allowed() {
            admitted += 1;
        }
    }
    admitted
}

/// The example on the store `make` builds on a manual clock, for every algorithm but
/// the token bucket (which keeps its tokens, below): 5 of 5 used and the limit raised to 8,
/// 3 more; lowered to 3, none until the window or refill allows.
async fn keeps_usage<St: Store>(make: impl AsyncFn(ManualClock) -> St) {
    for algorithm in Algorithm::ALL {
        if algorithm == Algorithm::TokenBucket {
            continue;
        }
        let clock = ManualClock::new();
        let limiter = Limiter::with_store(per_minute(algorithm, 5), make(clock.clone()).await);
        assert_eq!(admitted(&limiter, "ann", 10).await, 5, "{algorithm}");
        limiter.set_rules(per_minute(algorithm, 8));
        assert_eq!(
            admitted(&limiter, "ann", 10).await,
            3,
            "{algorithm}: raised to 8"
        );
        limiter.set_rules(per_minute(algorithm, 3));
        assert_eq!(
            admitted(&limiter, "ann", 10).await,
            0,
            "{algorithm}: lowered to 3"
        );
        assert_eq!(
            admitted(&limiter, "bob", 10).await,
            3,
            "{algorithm}: a new client"
        );
        // Two minutes: the sliding window counter still counts the minute before the last.
        clock.advance(Duration::from_secs(120));
        assert_eq!(admitted(&limiter, "ann", 10).await, 3, "{algorithm}: later");
    }
}

/// A token bucket keeps its tokens, at most the new burst; a changed algorithm starts from
/// the requests used; a changed period counts them in the window of now.
async fn keeps_levels_and_counts<St: Store>(make: impl AsyncFn(ManualClock) -> St) {
    let bucket = |burst: u64| {
        per_user(&format!(
            "unit: minute, requests_per_unit: 10, algorithm: token_bucket, burst: {burst}"
        ))
    };
    let limiter = Limiter::with_store(bucket(10), make(ManualClock::new()).await);
    assert_eq!(admitted(&limiter, "ann", 4).await, 4);
    limiter.set_rules(bucket(20));
    assert_eq!(
        admitted(&limiter, "ann", 30).await,
        6,
        "6 tokens of 10 left"
    );
    limiter.set_rules(bucket(5));
    assert_eq!(admitted(&limiter, "ann", 30).await, 0, "none left");

    let limiter = Limiter::with_store(
        per_minute(Algorithm::FixedWindow, 5),
        make(ManualClock::new()).await,
    );
    assert_eq!(admitted(&limiter, "ann", 2).await, 2);
    limiter.set_rules(per_minute(Algorithm::Gcra, 5));
    assert_eq!(
        admitted(&limiter, "ann", 10).await,
        3,
        "fixed window to GCRA"
    );
    limiter.set_rules(per_user(
        "unit: hour, requests_per_unit: 6, algorithm: gcra",
    ));
    assert_eq!(
        admitted(&limiter, "ann", 10).await,
        1,
        "a minute to an hour"
    );

    let limiter = Limiter::with_store(
        per_minute(Algorithm::SlidingWindowLog, 5),
        make(ManualClock::new()).await,
    );
    assert_eq!(admitted(&limiter, "ann", 2).await, 2);
    limiter.set_rules(per_minute(Algorithm::Gcra, 5));
    assert_eq!(admitted(&limiter, "ann", 10).await, 3, "log to GCRA");
    limiter.set_rules(per_minute(Algorithm::SlidingWindowLog, 6));
    assert_eq!(admitted(&limiter, "ann", 10).await, 1, "GCRA to log");
}

#[tokio::test]
async fn the_memory_store_keeps_usage_across_reloads() {
    let memory = async |clock| tollgate::store::MemoryStore::with_clock(clock);
    keeps_usage(memory).await;
    keeps_levels_and_counts(memory).await;
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use common::redis_server::{RedisCluster, RedisServer};
    use tollgate::store::RedisStore;

    async fn single(server: &RedisServer, clock: ManualClock) -> RedisStore {
        RedisStore::builder(server.url())
            .clock(clock)
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_keeps_usage_across_reloads() {
        let server = RedisServer::start();
        keeps_usage(async |clock| {
            server.cli(&["FLUSHALL"]);
            single(&server, clock).await
        })
        .await;
        keeps_levels_and_counts(async |clock| {
            server.cli(&["FLUSHALL"]);
            single(&server, clock).await
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_carried_state_moves_to_its_new_key() {
        let server = RedisServer::start();
        let limiter = Limiter::with_store(
            per_minute(Algorithm::FixedWindow, 5),
            single(&server, ManualClock::new()).await,
        );
        assert_eq!(admitted(&limiter, "ann", 5).await, 5);
        limiter.set_rules(per_minute(Algorithm::FixedWindow, 8));
        // Refused: the request is not charged, but the state moved all the same.
        limiter.set_rules(per_minute(Algorithm::FixedWindow, 4));
        assert_eq!(admitted(&limiter, "ann", 1).await, 0);
        assert_eq!(server.cli(&["DBSIZE"]).as_deref().map(str::trim), Some("1"));
        limiter.set_rules(per_minute(Algorithm::FixedWindow, 7));
        assert_eq!(admitted(&limiter, "ann", 10).await, 2);
        assert_eq!(server.cli(&["DBSIZE"]).as_deref().map(str::trim), Some("1"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_limit_of_one_state_for_everybody_keeps_it_on_one_redis() {
        let server = RedisServer::start();
        // No varying value: the state key is its own hash tag, renamed with the limit.
        let everybody = |limit: u64| {
            Rules::from_yaml(&format!(
                "domain: carry\ndescriptors:\n  - key: method\n    value: GET\n    rate_limit: {{ unit: minute, requests_per_unit: {limit} }}\n"
            ))
            .expect("valid rules")
        };
        let limiter = Limiter::with_store(everybody(5), single(&server, ManualClock::new()).await);
        let get = [("method", "GET")];
        let mut admitted = 0;
        for _ in 0..10 {
            admitted += usize::from(limiter.check(&get, 1).await.is_allowed());
        }
        assert_eq!(admitted, 5);
        limiter.set_rules(everybody(8));
        let mut more = 0;
        for _ in 0..10 {
            more += usize::from(limiter.check(&get, 1).await.is_allowed());
        }
        assert_eq!(more, 3);
    }

    /// Two servers of one fleet, deciding a local-first limit of `rate_limit` (`sync_every:
    /// 100ms` added), each admit 3 of a client's requests and sync; both are reloaded to
    /// `raised`: how many more the fleet admits, syncing after each round.
    async fn local_first_fleet_carries(
        server: &RedisServer,
        rate_limit: &str,
        raised: &str,
    ) -> usize {
        let clock = ManualClock::new();
        let local_first = |rate_limit: &str| per_user(&format!("{rate_limit}, sync_every: 100ms"));
        let fleet = [
            Limiter::with_store(local_first(rate_limit), single(server, clock.clone()).await),
            Limiter::with_store(local_first(rate_limit), single(server, clock.clone()).await),
        ];
        for limiter in &fleet {
            assert_eq!(admitted(limiter, "ann", 3).await, 3);
        }
        for limiter in &fleet {
            limiter.store().sync_now().await.expect("Redis answers");
            limiter.set_rules(local_first(raised));
        }
        let mut more = 0;
        for _ in 0..5 {
            for limiter in &fleet {
                more += admitted(limiter, "ann", 1).await;
            }
            for limiter in &fleet {
                limiter.store().sync_now().await.expect("Redis answers");
            }
            clock.advance(Duration::from_millis(100));
        }
        more
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fleet_s_local_first_limits_keep_usage_across_reloads() {
        let server = RedisServer::start();
        let window = |limit: u64| format!("unit: minute, requests_per_unit: {limit}");
        let more = local_first_fleet_carries(&server, &window(10), &window(12)).await;
        // 6 of 10 used, raised to 12: 6 more (give or take a round before a sync); 10 without.
        assert!((6..=8).contains(&more), "fixed window: {more}");
        let gcra =
            |limit: u64| format!("unit: minute, requests_per_unit: {limit}, algorithm: gcra");
        let more = local_first_fleet_carries(&server, &gcra(10), &gcra(12)).await;
        assert!((6..=8).contains(&more), "gcra: {more}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_cluster_keeps_usage_across_reloads() {
        let cluster = RedisCluster::start(3);
        let store = async |clock| {
            for url in cluster.urls() {
                let port = url.rsplit(':').next().expect("a port");
                let _ = std::process::Command::new("redis-cli")
                    .args(["-p", port, "FLUSHALL"])
                    .output();
            }
            RedisStore::cluster_builder(cluster.urls())
                .clock(clock)
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("connects")
        };
        keeps_usage(store).await;
        keeps_levels_and_counts(store).await;
    }
}
