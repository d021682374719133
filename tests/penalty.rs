//! `block_for`: a key a limit refused stays refused for the block, whatever the limit's own
//! count, with a `Retry-After` that counts the block down; in every store, on a manual clock.

mod common;
#[path = "common/rules.rs"]
mod rules_common;

use rules_common::rate_limit_errors;

use std::time::Duration;
use tollgate::clock::ManualClock;
use tollgate::rules::Rules;
use tollgate::store::Store;
use tollgate::{Limiter, Verdict};

/// 3 requests a minute per `user`, a block of 5 minutes; `extra` inside the rate limit.
fn three_a_minute(extra: &str) -> Rules {
    Rules::from_yaml(&format!(
        "domain: penalty\nsources: {{ user: {{ header: x-user }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ unit: minute, requests_per_unit: 3, block_for: 5m{extra} }}\n"
    ))
    .expect("valid rules")
}

async fn check<St: Store>(limiter: &Limiter<St>, user: &str) -> Verdict {
    limiter.check(&[("user", user)], 1).await
}

fn retry_after(verdict: &Verdict) -> Duration {
    verdict.decision().expect("a decision").retry_after
}

/// The penalty on the store `make` builds, the rate limit's options `extra`:
/// refused once, a key stays refused for 5 minutes though its window is new, `Retry-After`
/// counting down; then admitted again.
async fn blocks<St: Store>(extra: &str, make: impl AsyncFn(ManualClock) -> St) {
    let clock = ManualClock::new();
    let limiter = Limiter::with_store(three_a_minute(extra), make(clock.clone()).await);
    for _ in 0..3 {
        let admitted = check(&limiter, "ann").await;
        assert!(admitted.is_allowed());
        assert_eq!(admitted.decision().expect("a decision").capacity, 3);
    }
    let refused = check(&limiter, "ann").await;
    assert!(!refused.is_allowed());
    assert_eq!(
        retry_after(&refused),
        Duration::from_secs(300),
        "the block, not the window"
    );
    assert_eq!(refused.limit(), Some("user"));

    clock.advance(Duration::from_secs(90));
    let blocked = check(&limiter, "ann").await;
    assert!(!blocked.is_allowed(), "a new window, still blocked");
    assert_eq!(retry_after(&blocked), Duration::from_secs(210));
    assert_eq!(blocked.limit(), Some("user (blocked)"));
    let decision = blocked.decision().expect("a decision");
    assert_eq!(
        (decision.capacity, decision.remaining),
        (3, 0),
        "the limit's capacity"
    );
    assert!(
        check(&limiter, "bob").await.is_allowed(),
        "each key its own block"
    );

    clock.advance(Duration::from_secs(210));
    assert!(
        check(&limiter, "ann").await.is_allowed(),
        "the block is over"
    );
}

/// A shadow limit reports the block and admits.
async fn shadow_blocks_report<St: Store>(make: impl AsyncFn(ManualClock) -> St) {
    let clock = ManualClock::new();
    let rules = Rules::from_yaml(
        "domain: penalty\nsources: { user: { header: x-user } }\ndescriptors:\n  - key: user\n    shadow_mode: true\n    rate_limit: { unit: minute, requests_per_unit: 1, block_for: 5m }\n",
    )
    .expect("valid rules");
    let limiter = Limiter::with_store(rules, make(clock.clone()).await);
    assert!(check(&limiter, "ann").await.is_allowed());
    let over = check(&limiter, "ann").await;
    assert!(over.is_allowed() && over.is_shadow_denied());
    clock.advance(Duration::from_secs(120));
    let blocked = check(&limiter, "ann").await;
    assert!(blocked.is_allowed(), "shadow mode never refuses");
    assert!(blocked.is_shadow_denied(), "but reports the block");
}

/// A block survives a reload that keeps the limit.
async fn blocks_across_a_reload<St: Store>(make: impl AsyncFn(ManualClock) -> St) {
    let clock = ManualClock::new();
    let limiter = Limiter::with_store(three_a_minute(""), make(clock.clone()).await);
    for _ in 0..4 {
        check(&limiter, "ann").await;
    }
    limiter.set_rules(three_a_minute(", name: login"));
    clock.advance(Duration::from_secs(60));
    assert!(!check(&limiter, "ann").await.is_allowed(), "still blocked");
}

#[tokio::test]
async fn memory_blocks_a_key_it_refused() {
    let memory = async |clock| tollgate::store::MemoryStore::with_clock(clock);
    blocks("", memory).await;
    shadow_blocks_report(memory).await;
    blocks_across_a_reload(memory).await;
}

#[test]
fn mistaken_blocks_are_refused() {
    let cases = [
        (
            "unit: minute, requests_per_unit: 3, block_for: 10ms",
            "10ms is too short",
        ),
        (
            "unit: minute, requests_per_unit: 3, block_for: soon",
            "`soon` is not a duration",
        ),
        ("unlimited: true, block_for: 5m", "nothing to block"),
    ];
    for (rate_limit, expected) in cases {
        let errors = rate_limit_errors(rate_limit);
        assert!(errors.contains(expected), "{rate_limit}: {errors}");
    }
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use common::redis_server::{RedisCluster, RedisServer};
    use tollgate::store::RedisStore;

    async fn single(server: &RedisServer, clock: ManualClock) -> RedisStore {
        server.cli(&["FLUSHALL"]);
        server.store_with_clock(clock).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_blocks_a_key_it_refused() {
        let server = RedisServer::start();
        blocks("", async |clock| single(&server, clock).await).await;
        blocks(", sync_every: 100ms", async |clock| {
            single(&server, clock).await
        })
        .await;
        shadow_blocks_report(async |clock| single(&server, clock).await).await;
        blocks_across_a_reload(async |clock| single(&server, clock).await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_cluster_blocks_a_key_it_refused() {
        let cluster = RedisCluster::start(3);
        blocks("", async |clock| cluster.store_with_clock(clock).await).await;
    }
}

#[cfg(feature = "axum")]
mod over_http {
    use super::*;
    use axum::routing::get;
    use axum::Router;
    use common::server::{self, serve};
    use http::StatusCode;
    use tollgate::store::MemoryStore;
    use tollgate::RateLimitLayer;

    /// Over HTTP: the refusal that starts the block says the whole block, the next ones the
    /// time left, with the limit's own numbers.
    #[tokio::test]
    async fn the_headers_count_the_block_down() {
        let clock = ManualClock::new();
        let limiter =
            Limiter::with_store(three_a_minute(""), MemoryStore::with_clock(clock.clone()));
        let router = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(limiter));
        let addr = serve(router).await;
        let ann = [("x-user", "ann")];
        for _ in 0..3 {
            assert_eq!(server::get(addr, "/", &ann).await.status, StatusCode::OK);
        }
        let started = server::get(addr, "/", &ann).await;
        assert_eq!(started.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(started.number("retry-after"), 300);
        clock.advance(Duration::from_secs(100));
        let blocked = server::get(addr, "/", &ann).await;
        assert_eq!(blocked.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(blocked.number("retry-after"), 200);
        assert_eq!(blocked.number("x-ratelimit-limit"), 3);
        assert_eq!(blocked.number("x-ratelimit-remaining"), 0);
        assert!(blocked.body.contains("user (blocked)"), "{}", blocked.body);
        clock.advance(Duration::from_secs(200));
        let after = server::get(addr, "/", &ann).await;
        assert_eq!(after.status, StatusCode::OK);
        assert_eq!(
            after.number("x-ratelimit-limit"),
            3,
            "the block is not reported"
        );
    }
}
