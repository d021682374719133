//! The Redis store behind Redis Sentinel, against a real master, replica and sentinel that
//! the tests start: decisions follow the master through a failover.
#![cfg(feature = "redis")]

mod common;

use common::demo::DemoServer;
use common::redis_server::{free_port, RedisSentinel, SENTINEL_MASTER};
use common::runtime;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tollgate::rules::Rules;
use tollgate::store::RedisStore;
use tollgate::Limiter;

/// One limit of 5 an hour per `user`; while the store fails, requests are admitted (the
/// default `on_store_error: allow`) without a decision, so a decision says Redis made it.
fn five_an_hour() -> Rules {
    Rules::from_yaml(
        "domain: sentinel\nsources: { user: { header: x-user } }\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n",
    )
    .expect("valid rules")
}

/// Whether Redis decided `user`'s check and admitted it.
async fn admitted_by_redis(limiter: &Limiter<RedisStore>, user: &str) -> bool {
    let verdict = limiter.check(&[("user", user)], 1).await;
    verdict.is_allowed() && verdict.decision().is_some()
}

/// Checks `user` `n` times; whether each was admitted, every one decided by Redis.
async fn checks(limiter: &Limiter<RedisStore>, user: &str, n: usize) -> Vec<bool> {
    let mut admitted = Vec::with_capacity(n);
    for _ in 0..n {
        let verdict = limiter.check(&[("user", user)], 1).await;
        assert!(verdict.decision().is_some(), "{user}: decided by Redis");
        admitted.push(verdict.is_allowed());
    }
    admitted
}

/// Polls (every 20 ms, at most 60 s) until Redis decides a check for a fresh user again;
/// how long that took from `since`.
async fn until_redis_decides(
    limiter: &Limiter<RedisStore>,
    since: Instant,
    what: &str,
) -> Duration {
    for i in 0.. {
        if admitted_by_redis(limiter, &format!("probe-{what}-{i}")).await {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "{what}: Redis did not decide again within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    since.elapsed()
}

#[test]
fn decisions_follow_the_master_through_a_failover() {
    let mut redis = RedisSentinel::start();
    let runtime = runtime();
    let store = runtime
        .block_on(
            // A timeout a loaded test machine keeps; the circuit breaker's defaults (5
            // failures, a pause of 1 s), as in production.
            RedisStore::sentinel_builder(SENTINEL_MASTER, redis.sentinel_urls())
                .timeout(Duration::from_millis(200))
                .connect(),
        )
        .expect("connects through the sentinel");
    let limiter = Limiter::with_store(five_an_hour(), store);
    let first = redis.master().expect("a master");

    // State the replica holds when the master dies: 3 of 5 taken, replicated (WAIT).
    runtime.block_on(async {
        assert_eq!(checks(&limiter, "before", 3).await, [true; 3]);
    });
    let replicated = redis.servers[first].cli(&["WAIT", "1", "5000"]);
    assert_eq!(
        replicated.as_deref().map(str::trim),
        Some("1"),
        "replicated"
    );

    // Load: 2 tasks, a fresh user each check, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..2)
        .map(|task| {
            let (limiter, stop) = (limiter.clone(), stop.clone());
            runtime.spawn(async move {
                let (mut answered, mut by_redis, mut slowest) = (0u32, 0u32, Duration::ZERO);
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let started = Instant::now();
                    let decided = admitted_by_redis(&limiter, &format!("load-{task}-{i}")).await;
                    slowest = slowest.max(started.elapsed());
                    answered += 1;
                    by_redis += u32::from(decided);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                (answered, by_redis, slowest)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));

    let killed = redis.kill_master();
    let killed_at = Instant::now();
    // The sentinel's side (until it names the promoted replica) and the store's (until
    // Redis decides again), measured together.
    let ((promoted, named_after), back_after) = std::thread::scope(|scope| {
        let sentinel_side = scope.spawn(|| {
            let promoted = redis.wait_for_failover(killed);
            (promoted, killed_at.elapsed())
        });
        let back_after = runtime.block_on(until_redis_decides(&limiter, killed_at, "failover"));
        (
            sentinel_side.join().expect("the sentinel's side"),
            back_after,
        )
    });
    println!(
        "failover: the sentinel named the promoted replica {:.2} s after the master was killed, \
         and Redis decided again after {:.2} s (sentinel down-after-milliseconds 1000, \
         failover-timeout 2000; store timeout 200 ms, circuit breaker 5 failures / 1 s)",
        named_after.as_secs_f64(),
        back_after.as_secs_f64()
    );
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for task in load {
        let (answered, by_redis, slowest) = runtime.block_on(task).expect("a load task");
        assert!(
            answered > 20 && by_redis > 5,
            "the load ran: {answered} checks, {by_redis} by Redis"
        );
        assert!(
            slowest < Duration::from_secs(1),
            "every check was answered within the timeout and a little: the slowest took {slowest:?}"
        );
    }

    runtime.block_on(async {
        // Exact again, on the promoted replica, with the state it had.
        assert_eq!(
            checks(&limiter, "after", 6).await,
            [true, true, true, true, true, false]
        );
        assert_eq!(
            checks(&limiter, "before", 3).await,
            [true, true, false],
            "carried over"
        );
    });
    assert_ne!(promoted, first);
    assert!(
        redis.servers[promoted].calls("fcall") > 9,
        "the promoted replica decides"
    );
}

#[test]
fn a_manual_failover_is_followed() {
    // The old master stays up, demoted to a replica: calls must move on, not get READONLY.
    let redis = RedisSentinel::start();
    let runtime = runtime();
    let store = runtime
        .block_on(
            RedisStore::sentinel_builder(SENTINEL_MASTER, redis.sentinel_urls())
                .timeout(Duration::from_millis(500))
                .connect(),
        )
        .expect("connects through the sentinel");
    let limiter = Limiter::with_store(five_an_hour(), store);
    let first = redis.master().expect("a master");
    runtime.block_on(async {
        assert_eq!(checks(&limiter, "warm-up", 1).await, [true]);
    });
    let started = Instant::now();
    let reply = redis
        .sentinel
        .cli(&["SENTINEL", "FAILOVER", SENTINEL_MASTER]);
    assert_eq!(
        reply.as_deref().map(str::trim),
        Some("OK"),
        "failover started"
    );
    let promoted = redis.wait_for_failover(first);
    // Until the old master is demoted, it still decides: wait until it is a replica.
    while redis.master() != Some(promoted) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the old master was not demoted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = redis.servers[promoted].calls("fcall");
    runtime.block_on(async {
        until_redis_decides(&limiter, started, "manual failover").await;
        assert_eq!(
            checks(&limiter, "after", 6).await,
            [true, true, true, true, true, false]
        );
    });
    assert!(
        redis.servers[promoted].calls("fcall") >= before + 7,
        "the new master decides"
    );
}

#[test]
fn the_master_is_reached_with_its_password() {
    let redis = RedisSentinel::start_with_password("s3cret");
    runtime().block_on(async {
        let builder = || {
            RedisStore::sentinel_builder(SENTINEL_MASTER, redis.sentinel_urls())
                .timeout(Duration::from_secs(2))
        };
        let error = builder()
            .connect()
            .await
            .expect_err("the master asks for a password");
        let message = error.to_string();
        assert!(
            message.contains(&format!(
                "cannot connect to the Redis master `{SENTINEL_MASTER}`"
            )) && message.contains("NOAUTH"),
            "says whom it could not reach, and why: {message}"
        );
        let store = builder()
            .master_auth("default", "s3cret")
            .connect()
            .await
            .expect("connects with the password");
        let limiter = Limiter::with_store(five_an_hour(), store);
        assert_eq!(
            checks(&limiter, "dave", 6).await,
            [true, true, true, true, true, false]
        );
    });
}

#[test]
fn no_sentinel_to_ask_fails_connect_clearly() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    runtime().block_on(async {
        let error = RedisStore::sentinel_builder(SENTINEL_MASTER, [url.clone()])
            .connect()
            .await
            .expect_err("nobody listens there")
            .to_string();
        assert!(
            error.contains(&format!(
                "cannot connect to the Redis master `{SENTINEL_MASTER}` through the sentinels {url}"
            )),
            "{error}"
        );
        let error = RedisStore::builder("redis://127.0.0.1:1")
            .master_auth("default", "pw")
            .connect()
            .await
            .expect_err("master_auth is for sentinels")
            .to_string();
        assert!(
            error.contains("master_auth is for a store behind sentinels"),
            "{error}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_reaches_the_master_through_the_sentinels_of_its_environment() {
    let redis = RedisSentinel::start();
    let rules = "domain: demo\ndefaults: { on_store_error: deny }\nsources: { user: { header: x-user } }\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n";
    // The sentinel as `host:port`, beside one that does not answer.
    let setting = format!(
        "{SENTINEL_MASTER}@127.0.0.1:{},127.0.0.1:{}",
        free_port(),
        redis.sentinel.port()
    );
    let demo = DemoServer::start_with(rules, &[("TOLLGATE_REDIS_SENTINEL", &setting)]);
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let reply = common::server::get(demo.addr, "/", &[("x-user", "frank")]).await;
        statuses.push(reply.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429], "{}", demo.log());
    let master = redis.master().expect("a master");
    assert!(
        redis.servers[master].calls("fcall") >= 6,
        "the master decided"
    );
}
