//! Looking at one client's state and forgetting it: `Limiter::peek` and `Limiter::reset`, in
//! memory, on Redis and on a Redis Cluster.

mod common;

use std::time::Duration;
use tollgate::clock::ManualClock;
use tollgate::rules::Rules;
use tollgate::store::{MemoryStore, Store};
use tollgate::Limiter;

/// A limit per user and, below it, one per user and endpoint.
const RULES: &str = r#"
domain: inspect
sources:
  user: { header: x-user }
  endpoint: { header: x-endpoint }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3, name: per-user }
    descriptors:
      - key: endpoint
        rate_limit: { unit: hour, requests_per_unit: 10, algorithm: gcra, name: per-endpoint }
"#;

fn rules() -> Rules {
    Rules::from_yaml(RULES).expect("valid rules")
}

const ANN: [(&str, &str); 2] = [("user", "ann"), ("endpoint", "search")];

/// Peek shows what a request would get from each limit and charges nothing; once the client
/// is limited, it says until when; reset forgets the client, and only that client.
async fn peek_and_reset<St: Store>(limiter: &Limiter<St>) {
    let fresh = limiter.peek(&ANN).await.expect("peeked");
    let limits: Vec<&str> = fresh.iter().map(|limit| limit.limit()).collect();
    assert_eq!(limits, ["per-user", "per-endpoint"]);
    assert_eq!(fresh[0].decision().remaining, 3);
    assert!(fresh.iter().all(|limit| limit.decision().allowed));
    for _ in 0..3 {
        assert!(limiter.check(&ANN, 1).await.is_allowed());
    }
    let limited = limiter.peek(&ANN).await.expect("peeked");
    let per_user = limited[0].decision();
    assert!(!per_user.allowed, "a fourth request would be refused");
    assert_eq!(per_user.remaining, 0);
    assert!(
        per_user.retry_after > Duration::ZERO && per_user.retry_after <= Duration::from_secs(60)
    );
    assert_eq!(limited[1].decision().remaining, 7, "3 of 10 an hour used");
    assert_eq!(
        limiter.peek(&ANN).await.expect("peeked")[1]
            .decision()
            .remaining,
        7,
        "peeking charged nothing"
    );
    let bob = [("user", "bob")];
    assert!(limiter.check(&bob, 1).await.is_allowed());

    assert_eq!(
        limiter.reset(&ANN).await.expect("reset"),
        2,
        "two keys held state"
    );
    let after = limiter.peek(&ANN).await.expect("peeked");
    assert_eq!(after[0].decision().remaining, 3);
    assert_eq!(after[1].decision().remaining, 10);
    assert!(limiter.check(&ANN, 1).await.is_allowed());
    assert_eq!(
        limiter.peek(&bob).await.expect("peeked")[0]
            .decision()
            .remaining,
        2,
        "another client keeps its state"
    );
    assert_eq!(
        limiter.reset(&[("user", "nobody")]).await.expect("reset"),
        0,
        "a client never seen has nothing to reset"
    );
}

#[tokio::test]
async fn memory_peeks_and_resets_a_client() {
    peek_and_reset(&Limiter::with_store(
        rules(),
        MemoryStore::with_clock(ManualClock::new()),
    ))
    .await;
}

#[tokio::test]
async fn an_approximate_limit_forgets_a_client_its_sketch_counted() {
    let rules = Rules::from_yaml(
        r#"
domain: inspect
sources: { user: { header: x-user } }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10, approximate: { memory: 64KiB } }
"#,
    )
    .expect("valid rules");
    let limiter = Limiter::with_store(rules, MemoryStore::with_clock(ManualClock::new()));
    let ann = [("user", "ann")];
    // Four of ten: light, counted in the sketch only.
    for _ in 0..4 {
        assert!(limiter.check(&ann, 1).await.is_allowed());
    }
    assert_eq!(
        limiter.peek(&ann).await.expect("peeked")[0]
            .decision()
            .remaining,
        6
    );
    assert_eq!(limiter.reset(&ann).await.expect("reset"), 1);
    assert_eq!(
        limiter.peek(&ann).await.expect("peeked")[0]
            .decision()
            .remaining,
        10
    );
    let admitted = futures_admitted(&limiter, &ann, 20).await;
    assert_eq!(
        admitted, 10,
        "the whole limit again, not what the sketch remembers"
    );
}

async fn futures_admitted<St: Store>(
    limiter: &Limiter<St>,
    values: &[(&str, &str)],
    n: usize,
) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        admitted += usize::from(limiter.check(values, 1).await.is_allowed());
    }
    admitted
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use common::redis_server::{RedisCluster, RedisServer};
    use tollgate::store::RedisStore;

    async fn store(server: &RedisServer) -> RedisStore {
        RedisStore::builder(server.url())
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_peeks_and_resets_a_client() {
        let server = RedisServer::start();
        common::windows::away_from_hour_edge(Duration::from_secs(30)).await;
        peek_and_reset(&Limiter::with_store(rules(), store(&server).await)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reset_on_one_server_frees_the_client_on_every_server() {
        let server = RedisServer::start();
        common::windows::away_from_hour_edge(Duration::from_secs(30)).await;
        let (one, two) = (
            Limiter::with_store(rules(), store(&server).await),
            Limiter::with_store(rules(), store(&server).await),
        );
        for _ in 0..3 {
            assert!(one.check(&ANN, 1).await.is_allowed());
        }
        // Refused, and remembered by the over-limit cache of the second server.
        assert!(!two.check(&ANN, 1).await.is_allowed());
        assert_eq!(one.reset(&ANN).await.expect("reset"), 2);
        // The second server's over-limit cache asks Redis again within a second.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !two.check(&ANN, 1).await.is_allowed() {
            assert!(
                std::time::Instant::now() < deadline,
                "still refused after a reset"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(one.check(&ANN, 1).await.is_allowed());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_local_first_limit_forgets_a_client_here_and_in_the_fleet_s_totals() {
        let server = RedisServer::start();
        let rules = Rules::from_yaml(
            "domain: inspect\nsources: { user: { header: x-user } }\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 3, sync_every: 100ms }\n",
        )
        .expect("valid rules");
        let one = Limiter::with_store(rules.clone(), store(&server).await);
        let ann = [("user", "ann")];
        for _ in 0..3 {
            assert!(one.check(&ann, 1).await.is_allowed());
        }
        one.store().sync_now().await.expect("Redis answers");
        assert!(!one.check(&ann, 1).await.is_allowed());
        assert_eq!(one.reset(&ann).await.expect("reset"), 1);
        assert!(
            one.check(&ann, 1).await.is_allowed(),
            "at once, on this server"
        );
        // A server that joins finds nothing of the 3 in the fleet's totals.
        let joining = Limiter::with_store(rules, store(&server).await);
        assert!(joining.check(&ann, 1).await.is_allowed());
        joining.store().sync_now().await.expect("Redis answers");
        // Its own request, and the first server's since the reset if that one has synced
        // meanwhile (its task syncs every 100 ms); not the 3 before it.
        let remaining = joining.peek(&ann).await.expect("peeked")[0]
            .decision()
            .remaining;
        assert!(
            (1..=2).contains(&remaining),
            "the fleet's totals were reset: {remaining} remain"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_cluster_peeks_and_resets_a_client_across_slots() {
        let cluster = RedisCluster::start(3);
        common::windows::away_from_hour_edge(Duration::from_secs(30)).await;
        let store = RedisStore::cluster_builder(cluster.urls())
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects");
        peek_and_reset(&Limiter::with_store(rules(), store)).await;
    }
}
