//! The Redis store against real `redis-server` processes that the tests start on free ports.
#![cfg(feature = "redis")]

mod common;

use common::redis_server::RedisServer;
use std::time::Duration;
use tollgate::clock::ManualClock;
use tollgate::store::RedisStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn reference_suite_passes_on_redis_with_the_same_decisions_as_memory() {
    let server = RedisServer::start();
    let runtime = runtime();
    common::reference::run_reference_suite(|clock: ManualClock| {
        runtime
            .block_on(
                RedisStore::builder(server.url())
                    .clock(clock)
                    .over_limit_cache(false)
                    .timeout(Duration::from_secs(2))
                    .connect(),
            )
            .expect("connects")
    });
    assert!(
        server.calls("evalsha") > 30,
        "the decisions came from Redis"
    );
}

/// A store on `server` with a generous timeout: these tests are about decisions, not about
/// how fast a loaded test machine answers.
async fn store(server: &RedisServer) -> RedisStore {
    RedisStore::builder(server.url())
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connects")
}

fn rules(yaml: &str) -> Rules {
    Rules::from_yaml(yaml).expect("valid rules")
}

/// One limit per `user`, `rate_limit` being the YAML flow mapping's inside.
fn per_user(domain: &str, rate_limit: &str) -> Rules {
    rules(&format!(
        "domain: {domain}\nsources: {{ user: {{ header: x-user }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ {rate_limit} }}\n"
    ))
}

/// Waits, if needed, until the current hour has more than `margin` left: fixed and sliding
/// windows are aligned to the clock, and a test that crosses an edge sees a new window.
async fn away_from_hour_edge(margin: Duration) {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let into_hour = Duration::from_millis(
        u64::try_from(since_epoch.as_millis() % 3_600_000).expect("less than an hour"),
    );
    let left = Duration::from_secs(3_600) - into_hour;
    if left < margin {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
}

/// The differences between two `INFO commandstats` snapshots, without the INFO calls that
/// took them.
fn command_delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .filter_map(|(name, calls)| {
            let grew = calls - before.get(name).copied().unwrap_or(0);
            (grew > 0).then(|| (name.clone(), grew))
        })
        .collect()
}

#[test]
fn two_limiters_sharing_one_redis_admit_exactly_the_limit_between_them() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let variants = [
            "algorithm: fixed_window",
            "algorithm: token_bucket",
            "algorithm: sliding_window_log",
            "algorithm: sliding_window_counter",
            "algorithm: gcra",
            "algorithm: leaky_bucket, queue: 99, mode: police",
        ];
        for variant in variants {
            let rules = || per_user("shared", &format!("unit: hour, requests_per_unit: 100, {variant}"));
            // Two servers of a fleet: two limiters, two connections, one Redis.
            let fleet = [
                Limiter::with_store(rules(), store(&server).await),
                Limiter::with_store(rules(), store(&server).await),
            ];
            away_from_hour_edge(Duration::from_secs(10)).await;
            let mut tasks = JoinSet::new();
            for limiter in &fleet {
                for _ in 0..8 {
                    let limiter = limiter.clone();
                    tasks.spawn(async move {
                        let mut admitted = 0;
                        for _ in 0..20 {
                            if limiter.check(&[("user", "u1")], 1).await.is_allowed() {
                                admitted += 1;
                            }
                        }
                        admitted
                    });
                }
            }
            let admitted: u32 = tasks.join_all().await.into_iter().sum();
            assert_eq!(admitted, 100, "{variant}: 320 attempts from two limiters");
            for limiter in &fleet {
                assert!(
                    !limiter.check(&[("user", "u1")], 1).await.is_allowed(),
                    "{variant}: full for both"
                );
            }
        }
    });
}

const THREE_LIMITS: &str = r#"
domain: trips
sources:
  user: { header: x-user }
  tenant: { header: x-tenant }
  plan: { header: x-plan }
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000 }
  - key: plan
    rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: sliding_window_counter }
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: token_bucket }
    descriptors:
      - key: user
        rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: gcra }
"#;

#[test]
fn one_round_trip_per_request() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = RedisStore::builder(server.url())
            .timeout(Duration::from_secs(2))
            .over_limit_cache(false)
            .connect()
            .await
            .expect("connects");
        let limiter = Limiter::with_store(rules(THREE_LIMITS), store);
        let three = [("user", "u1"), ("tenant", "t1")];
        let two = [("user", "u1"), ("plan", "free")];
        // The first call loads the script (EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA).
        assert!(limiter.check(&three, 1).await.is_allowed());
        let before = server.command_stats();
        for _ in 0..10 {
            assert!(limiter.check(&three, 1).await.is_allowed());
            assert!(limiter.check(&two, 1).await.is_allowed());
        }
        let delta = command_delta(&before, &server.command_stats());
        // Redis 7 counts the commands a script runs in `commandstats` too: per request one
        // TIME, one GET per limit and, as every limit admitted, one SET per limit, all from
        // inside the script. The client itself sent one EVALSHA per request and nothing else.
        let expected: BTreeMap<String, u64> = [
            ("evalsha", 20),
            ("time", 20),
            ("get", 10 * 3 + 10 * 2),
            ("set", 10 * 3 + 10 * 2),
        ]
        .into_iter()
        .map(|(name, calls)| (name.to_owned(), calls))
        .collect();
        assert_eq!(delta, expected);
    });
}

#[test]
fn script_flush_is_survived() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let limiter = Limiter::with_store(
            per_user("flush", "unit: hour, requests_per_unit: 10, algorithm: token_bucket"),
            store(&server).await,
        );
        let remaining = |verdict: tollgate::Verdict| {
            assert!(verdict.is_allowed());
            verdict.decision().map(|d| d.remaining)
        };
        assert_eq!(remaining(limiter.check(&[("user", "u1")], 1).await), Some(9));
        let loads = server.calls("script|load");
        assert_eq!(server.cli(&["SCRIPT", "FLUSH"]).as_deref().map(str::trim), Some("OK"));
        assert_eq!(
            remaining(limiter.check(&[("user", "u1")], 1).await),
            Some(8),
            "decided by Redis after reloading the script, on the state kept"
        );
        assert_eq!(server.calls("script|load"), loads + 1, "reloaded once");
        assert_eq!(remaining(limiter.check(&[("user", "u1")], 1).await), Some(7));
        assert_eq!(server.calls("script|load"), loads + 1, "and only once");
    });
}

#[test]
fn keys_carry_the_domain_prefix_and_expire() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = RedisStore::builder(server.url())
            .key_prefix("shop-api:")
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects");
        let limiter = Limiter::with_store(
            per_user("checkout", "unit: second, requests_per_unit: 5, algorithm: fixed_window"),
            store,
        );
        assert!(limiter.check(&[("user", "u1")], 1).await.is_allowed());
        let listed = server.cli(&["KEYS", "*"]).unwrap_or_default();
        assert!(
            listed.starts_with("shop-api:{checkout}:"),
            "KEYS * shows the prefix, then the domain as a hash tag: {listed:?}"
        );
        let mut connection = server.connection();
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut connection).expect("KEYS");
        assert_eq!(keys.len(), 1, "one limit, one key");
        assert!(keys[0].ends_with(b"u1"), "the descriptor value ends the key");
        let pttl: i64 = redis::cmd("PTTL").arg(&keys[0]).query(&mut connection).expect("PTTL");
        // The key lives until the window ends (rounded up to the ms, plus 1 ms).
        assert!(pttl > 0 && pttl <= 1_001, "PTTL {pttl} ms within the 1 s window");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left: Vec<Vec<u8>> =
                redis::cmd("KEYS").arg("*").query(&mut connection).expect("KEYS");
            if left.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "the key expired by itself");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            limiter.check(&[("user", "u1")], 1).await.is_allowed(),
            "and a new window starts afresh"
        );
    });
}
