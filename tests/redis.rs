//! The Redis store against real `redis-server` processes that the tests start on free ports.
#![cfg(feature = "redis")]

mod common;

use common::redis_server::{RedisCluster, RedisServer};
use common::runtime;
use common::stores::decide;
use common::windows::away_from_hour_edge;
use std::collections::BTreeMap;
use std::error::Error as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tollgate::algorithm::{Algorithm, Quota};
use tollgate::clock::ManualClock;
use tollgate::rules::Rules;
use tollgate::store::{LimitCheck, RedisStore, StoreErrorKind};
use tollgate::{Limiter, Verdict};

/// The reference suite on `server`, fixed windows and logs kept as text when `legacy`.
fn run_reference_suite(server: &RedisServer, legacy: bool) {
    let runtime = runtime();
    common::reference::run_reference_suite(|clock: ManualClock| {
        runtime
            .block_on(
                RedisStore::builder(server.url())
                    .clock(clock)
                    .over_limit_cache(false)
                    .legacy_layout(legacy)
                    .timeout(Duration::from_secs(2))
                    .connect(),
            )
            .expect("connects")
    });
}

#[test]
fn reference_suite_passes_on_redis_with_the_same_decisions_as_memory() {
    let server = RedisServer::start();
    run_reference_suite(&server, false);
    assert!(
        server.calls("fcall") > 30,
        "the decisions came from Redis's functions"
    );
    assert!(server.calls("incrby") > 0, "fixed windows kept as integers");
    assert!(server.calls("zadd") > 0, "logs kept as sorted sets");
}

#[test]
fn reference_suite_passes_with_fixed_windows_and_logs_kept_as_text() {
    let server = RedisServer::start();
    run_reference_suite(&server, true);
    assert!(server.calls("fcall") > 30);
    assert_eq!(server.calls("incrby"), 0, "fixed windows kept as text");
    assert_eq!(server.calls("zadd"), 0, "logs kept as text");
}

#[test]
fn reference_suite_passes_on_a_redis_without_functions() {
    // As Redis before 7: no FUNCTION command. The library's text runs as scripts.
    let server = RedisServer::start_with(
        common::redis_server::free_port(),
        &["--rename-command", "FUNCTION", ""],
    );
    run_reference_suite(&server, false);
    assert_eq!(server.calls("fcall"), 0);
    assert!(
        server.calls("evalsha") > 30,
        "the decisions came from Redis's scripts"
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
    rules(&per_user_yaml(domain, rate_limit))
}

/// [`per_user`], with `policy` (`allow`, `deny` or `local`) deciding while the store fails.
fn per_user_on_store_error(domain: &str, policy: &str, rate_limit: &str) -> Rules {
    let yaml = per_user_yaml(domain, rate_limit);
    rules(&format!("defaults: {{ on_store_error: {policy} }}\n{yaml}"))
}

fn per_user_yaml(domain: &str, rate_limit: &str) -> String {
    format!(
        "domain: {domain}\nsources: {{ user: {{ header: x-user }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ {rate_limit} }}\n"
    )
}

/// A limiter with one limit per `user` (see [`per_user`]) on `server`.
async fn per_user_limiter(
    server: &RedisServer,
    domain: &str,
    rate_limit: &str,
) -> Limiter<RedisStore> {
    Limiter::with_store(per_user(domain, rate_limit), store(server).await)
}

/// The remaining count of a verdict that must be an admission.
fn admitted_remaining(verdict: Verdict) -> Option<u64> {
    assert!(verdict.is_allowed());
    verdict.decision().map(|d| d.remaining)
}

/// The differences between two `INFO commandstats` snapshots, without the INFO calls that
/// took them.
fn command_delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
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
            let rate_limit = format!("unit: hour, requests_per_unit: 100, {variant}");
            // Two servers of a fleet: two limiters, two connections, one Redis.
            let fleet = [
                per_user_limiter(&server, "shared", &rate_limit).await,
                per_user_limiter(&server, "shared", &rate_limit).await,
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

/// Two servers whose clocks are a second apart share a fixed window of a minute: past the
/// minute on one clock and not yet on the other, both decide in the later window, as the
/// memory store decides a clock that steps back.
#[test]
fn a_clock_behind_decides_in_the_window_a_clock_ahead_began() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let limiter_at = |seconds: u64| {
            let clock = ManualClock::new();
            clock.advance(Duration::from_secs(seconds));
            let store = RedisStore::builder(server.url())
                .clock(clock)
                .over_limit_cache(false)
                .timeout(Duration::from_secs(2))
                .connect();
            async {
                let rules = per_user("skew", "unit: minute, requests_per_unit: 3");
                Limiter::with_store(rules, store.await.expect("connects"))
            }
        };
        let ahead = limiter_at(60).await;
        let behind = limiter_at(59).await;
        let user = [("user", "u1")];
        assert_eq!(admitted_remaining(ahead.check(&user, 1).await), Some(2));
        assert_eq!(admitted_remaining(ahead.check(&user, 1).await), Some(1));
        let late = behind.check(&user, 1).await;
        let decision = late.decision().expect("a decision");
        assert!(late.is_allowed());
        assert_eq!(decision.remaining, 0, "the third of the later window");
        assert_eq!(
            decision.reset_after,
            Duration::from_secs(61),
            "the later window ends a minute after the clock ahead began it"
        );
        assert!(
            !ahead.check(&user, 1).await.is_allowed(),
            "the window is full"
        );
        assert!(!behind.check(&user, 1).await.is_allowed());
    });
}

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
        assert!(limiter.check(&three, 1).await.is_allowed());
        let before = server.command_stats();
        for _ in 0..10 {
            assert!(limiter.check(&three, 1).await.is_allowed());
            assert!(limiter.check(&two, 1).await.is_allowed());
        }
        let delta = command_delta(&before, &server.command_stats());
        // Redis 7 counts the commands a function runs in `commandstats` too: per request one
        // TIME, one GET per limit and, as every limit admitted, one SET per limit but the
        // fixed window's (the user's limit), charged with INCRBY, all from inside the
        // function. The client itself sent one FCALL per request and nothing else.
        let expected: BTreeMap<String, u64> = [
            ("fcall", 20),
            ("time", 20),
            ("get", 10 * 3 + 10 * 2),
            ("incrby", 20),
            ("set", 10 * 2 + 10),
        ]
        .into_iter()
        .map(|(name, calls)| (name.to_owned(), calls))
        .collect();
        assert_eq!(delta, expected);
    });
}

#[test]
fn function_flush_is_survived() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let limiter = per_user_limiter(
            &server,
            "flush",
            "unit: hour, requests_per_unit: 10, algorithm: token_bucket",
        )
        .await;
        assert_eq!(
            admitted_remaining(limiter.check(&[("user", "u1")], 1).await),
            Some(9)
        );
        let loads = server.calls("function|load");
        assert_eq!(
            server.cli(&["FUNCTION", "FLUSH"]).as_deref().map(str::trim),
            Some("OK")
        );
        assert_eq!(
            admitted_remaining(limiter.check(&[("user", "u1")], 1).await),
            Some(8),
            "decided by Redis after loading the library again, on the state kept"
        );
        assert_eq!(
            server.calls("function|load"),
            loads + 1,
            "loaded again once"
        );
        assert_eq!(
            admitted_remaining(limiter.check(&[("user", "u1")], 1).await),
            Some(7)
        );
        assert_eq!(server.calls("function|load"), loads + 1, "and only once");
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
            per_user(
                "checkout",
                "unit: second, requests_per_unit: 5, algorithm: fixed_window",
            ),
            store,
        );
        assert!(limiter.check(&[("user", "u1")], 1).await.is_allowed());
        let listed = server.cli(&["KEYS", "*"]).unwrap_or_default();
        let listed = listed.trim();
        let (tag, rest) = listed
            .strip_prefix("shop-api:{")
            .and_then(|rest| rest.split_once("}:"))
            .unwrap_or_else(|| panic!("the prefix, then the client's hash tag: {listed:?}"));
        assert_eq!(tag.len(), 16, "a hash tag of 16 hex digits: {listed:?}");
        let (state, unit) = rest
            .strip_prefix("checkout:")
            .and_then(|rest| rest.split_once(':'))
            .unwrap_or_else(|| panic!("then the domain: {listed:?}"));
        assert_eq!(
            state.len(),
            32,
            "then a digest of the state key: {listed:?}"
        );
        assert!(
            !listed.contains("u1"),
            "no client value in clear: {listed:?}"
        );
        assert_eq!(
            unit, "us:n",
            "then the tick's unit, and `n`: a fixed window kept as one integer: {listed:?}"
        );
        let mut connection = server.connection();
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut connection)
            .expect("KEYS");
        assert_eq!(keys.len(), 1, "one limit, one key");
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&keys[0])
            .query(&mut connection)
            .expect("PTTL");
        // The key lives until the window ends (rounded up to the ms, plus 1 ms).
        assert!(
            pttl > 0 && pttl <= 1_001,
            "PTTL {pttl} ms within the 1 s window"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left: Vec<Vec<u8>> = redis::cmd("KEYS")
                .arg("*")
                .query(&mut connection)
                .expect("KEYS");
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

/// One check's story in the outage test.
struct Sample {
    started: Instant,
    took: Duration,
    allowed: bool,
}

#[test]
fn killing_redis_mid_load_follows_each_failure_policy() {
    let mut server = RedisServer::start();
    let runtime = runtime();
    let limiter = |policy: &str| {
        let rules = per_user_on_store_error(
            "outage",
            policy,
            "unit: hour, requests_per_unit: 2, algorithm: token_bucket",
        );
        let store = runtime
            .block_on(
                RedisStore::builder(server.url())
                    .timeout(Duration::from_millis(50))
                    .circuit_breaker(3, Duration::from_secs(2))
                    .connect(),
            )
            .expect("connects");
        Limiter::with_store(rules, store)
    };
    let (open, closed) = (limiter("allow"), limiter("deny"));

    // Load: 4 tasks per limiter, each check for a new user (so Redis itself admits them all).
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for (policy, limiter) in [("allow", &open), ("deny", &closed)] {
        for task in 0..4 {
            let (limiter, stop) = (limiter.clone(), stop.clone());
            load.push(runtime.spawn(async move {
                let mut samples = Vec::new();
                for i in 0..100_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let user = format!("{policy}-{task}-{i}");
                    let started = Instant::now();
                    let verdict = limiter.check(&[("user", &user)], 1).await;
                    samples.push(Sample {
                        started,
                        took: started.elapsed(),
                        allowed: verdict.is_allowed(),
                    });
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                (policy, samples)
            }));
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    server.kill();
    let killed = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let mut after_kill = 0;
    for task in load {
        let (policy, samples) = runtime.block_on(task).expect("load task");
        assert!(samples.len() > 10, "{policy}: the load ran");
        for sample in samples {
            assert!(
                sample.took < Duration::from_millis(300),
                "{policy}: a check took {:?} (timeout 50 ms)",
                sample.took
            );
            if sample.started >= killed {
                after_kill += 1;
                assert_eq!(
                    sample.allowed,
                    policy == "allow",
                    "{policy}: Redis is down, the policy decides"
                );
            }
        }
    }
    assert!(after_kill > 10, "checks ran while Redis was down");

    // The breakers are open now (cooldown 2 s): checks do not even try Redis.
    runtime.block_on(async {
        for (limiter, allowed) in [(&open, true), (&closed, false)] {
            for i in 0..20 {
                let user = format!("open-breaker-{i}");
                let started = Instant::now();
                let verdict = limiter.check(&[("user", &user)], 1).await;
                assert!(
                    started.elapsed() < Duration::from_millis(40),
                    "answered at once with the breaker open, not in {:?}",
                    started.elapsed()
                );
                assert_eq!(verdict.is_allowed(), allowed);
                if !allowed {
                    assert_eq!(
                        verdict.decision().map(|d| d.retry_after),
                        Some(Duration::from_secs(1)),
                        "a store failure asks the client to come back in a second"
                    );
                }
            }
        }
    });

    server.restart();
    runtime.block_on(async {
        // Redis is back (empty): within 10 s both limiters reach it again. The deny-policy
        // limiter admits only once Redis decides; the allow-policy one reports a decision only
        // when Redis made it.
        for (name, limiter) in [("allow", &open), ("deny", &closed)] {
            let verdicts = decides_again(limiter, name).await;
            let remaining = verdicts.map(|v| v.decision().map(|d| d.remaining));
            assert_eq!(
                remaining,
                [Some(1), Some(0), Some(0)],
                "{name}: decided by Redis"
            );
        }
    });
    assert!(server.calls("fcall") >= 6, "the restarted Redis decided");
}

#[test]
fn over_limit_cache_answers_without_a_round_trip() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let limiter = per_user_limiter(
            &server,
            "cached",
            "unit: hour, requests_per_unit: 1, algorithm: token_bucket",
        )
        .await;
        let fcall = || server.calls("fcall");
        assert!(limiter.check(&[("user", "warm-up")], 1).await.is_allowed());
        let start = fcall();
        assert!(limiter.check(&[("user", "u1")], 1).await.is_allowed());
        assert_eq!(fcall(), start + 1);
        let denied = limiter.check(&[("user", "u1")], 1).await;
        assert!(!denied.is_allowed());
        assert_eq!(fcall(), start + 2, "Redis said full");
        let retry = denied.decision().expect("a denying limit").retry_after;
        assert!(retry > Duration::from_secs(3_500) && retry <= Duration::from_secs(3_600));
        for _ in 0..10 {
            let verdict = limiter.check(&[("user", "u1")], 1).await;
            assert!(!verdict.is_allowed());
            let decision = verdict.decision().expect("a denying limit");
            assert!(
                decision.retry_after <= retry
                    && decision.retry_after > retry - Duration::from_secs(5)
            );
            assert_eq!(decision.remaining, 0);
        }
        assert_eq!(fcall(), start + 2, "denied locally, no round trip");
        assert!(
            limiter.check(&[("user", "u2")], 1).await.is_allowed(),
            "other keys still go to Redis"
        );
        assert_eq!(fcall(), start + 3);
    });
}

#[test]
fn leaky_bucket_delays_come_from_redis() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let rate_limit = "unit: second, requests_per_unit: 10, algorithm: leaky_bucket, queue: 5";
        let fleet = [
            per_user_limiter(&server, "shaped", rate_limit).await,
            per_user_limiter(&server, "shaped", rate_limit).await,
        ];
        // Warm both connections up (script loaded), on another key.
        for limiter in &fleet {
            assert!(limiter.check(&[("user", "warm-up")], 1).await.is_allowed());
        }
        // Redis decides request i at a time t_i between its call and its answer; request i
        // is booked i intervals after request 0, so its delay is t_0 + i * 100 ms - t_i.
        let mut first: Option<(Instant, Instant)> = None;
        for i in 0..7u32 {
            let started = Instant::now();
            let verdict = fleet[i as usize % 2].check(&[("user", "u1")], 1).await;
            let done = Instant::now();
            let (first_started, first_done) = *first.get_or_insert((started, done));
            if i == 6 {
                assert!(
                    !verdict.is_allowed(),
                    "5 queued and 1 passing: the 7th is refused"
                );
                break;
            }
            assert!(verdict.is_allowed(), "request {i} has a place in the queue");
            let booked = Duration::from_millis(100) * i;
            let earliest = booked.saturating_sub(done - first_started);
            let latest = booked.saturating_sub(started.saturating_duration_since(first_done));
            // Redis's clock reads microseconds; Instant and it may differ by a rounding.
            let slack = Duration::from_millis(1);
            let delay = verdict.delay();
            assert!(
                delay + slack >= earliest && delay <= latest + slack,
                "request {i}: delay {delay:?} not within {earliest:?}..={latest:?}"
            );
        }
    });
}

/// Two limits per request (by user and by tenant) in `domain`.
fn two_limits(domain: &str) -> Rules {
    rules(&format!(
        r#"
domain: "{domain}"
sources:
  user: {{ header: x-user }}
  tenant: {{ header: x-tenant }}
descriptors:
  - key: user
    rate_limit: {{ unit: hour, requests_per_unit: 6, algorithm: token_bucket }}
  - key: tenant
    rate_limit: {{ unit: hour, requests_per_unit: 100, algorithm: sliding_window_log }}
"#
    ))
}

/// A limit per user and, nested in it, a limit per user on exports: one client, one hash tag.
fn user_and_export(domain: &str) -> Rules {
    rules(&format!(
        r#"
domain: "{domain}"
sources:
  user: {{ header: x-user }}
  action: {{ header: x-action }}
descriptors:
  - key: user
    rate_limit: {{ unit: hour, requests_per_unit: 6, algorithm: token_bucket }}
    descriptors:
      - key: action
        value: export
        rate_limit: {{ unit: hour, requests_per_unit: 100, algorithm: sliding_window_log }}
"#
    ))
}

#[test]
fn redis_cluster_with_three_masters() {
    let cluster = RedisCluster::start(3);
    runtime().block_on(async {
        let store = RedisStore::cluster_builder(cluster.urls())
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects to the cluster");
        let limiter = Limiter::with_store(user_and_export("orders"), store);
        let request = [("user", "u1"), ("action", "export")];
        for left in [5, 4, 3] {
            assert_eq!(
                admitted_remaining(limiter.check(&request, 1).await),
                Some(left)
            );
        }
        // Both limits of the request are the user's: their keys share a slot, on one master.
        let keys: Vec<(usize, String)> = (0..3)
            .flat_map(|node| {
                let listed = cluster.nodes[node].cli(&["KEYS", "*"]).unwrap_or_default();
                listed
                    .lines()
                    .filter(|key| !key.is_empty())
                    .map(|key| (node, key.to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(keys.len(), 2, "two limits, two keys: {keys:?}");
        let (owner, slot) = (keys[0].0, cluster.key_slot(&keys[0].1));
        assert_eq!(keys[1].0, owner, "on one master: {keys:?}");
        assert_eq!(cluster.key_slot(&keys[1].1), slot, "in one slot: {keys:?}");

        // Move that slot, with its keys, to another master.
        let target = (owner + 1) % 3;
        let target_calls = cluster.nodes[target].calls("fcall");
        cluster.move_slot(slot, target);
        assert_eq!(
            cluster.nodes[target]
                .cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
                .unwrap_or_default()
                .trim(),
            "2",
            "the state moved with the slot"
        );
        for left in [2, 1, 0] {
            assert_eq!(
                admitted_remaining(limiter.check(&request, 1).await),
                Some(left),
                "the counts carry over"
            );
        }
        assert!(
            !limiter.check(&request, 1).await.is_allowed(),
            "6 per hour, exactly"
        );
        assert!(
            cluster.nodes[target].calls("fcall") > target_calls,
            "the moved slot is decided by its new master"
        );
    });
}

/// A limit of 2 per user per hour that denies when the store fails, on a store that gives up
/// after `timeout` and pauses for `cooldown` after `failures` failures in a row.
async fn fail_closed(
    server: &RedisServer,
    timeout: Duration,
    failures: u32,
    cooldown: Duration,
) -> Limiter<RedisStore> {
    let rules = per_user_on_store_error(
        "hung",
        "deny",
        "unit: hour, requests_per_unit: 2, algorithm: token_bucket",
    );
    let store = RedisStore::builder(server.url())
        .timeout(timeout)
        .circuit_breaker(failures, cooldown)
        .connect()
        .await
        .expect("connects");
    let limiter = Limiter::with_store(rules, store);
    // Loads the script while Redis answers.
    assert!(limiter.check(&[("user", "warm-up")], 1).await.is_allowed());
    limiter
}

/// Waits (at most 10 s, every 50 ms) until Redis decides again (a check is admitted with a
/// decision: under `allow` or `deny`, only Redis makes one); then checks that the limit of 2
/// holds for a fresh user. That user's three verdicts.
async fn decides_again(limiter: &Limiter<RedisStore>, name: &str) -> [Verdict; 3] {
    let deadline = Instant::now() + Duration::from_secs(10);
    for i in 0.. {
        let user = format!("probe-{i}");
        let verdict = limiter.check(&[("user", &user)], 1).await;
        if verdict.is_allowed() && verdict.decision().is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: Redis still not used 10 s after it came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let user = format!("fresh-{name}");
    let verdicts = [
        limiter.check(&[("user", &user)], 1).await,
        limiter.check(&[("user", &user)], 1).await,
        limiter.check(&[("user", &user)], 1).await,
    ];
    assert_eq!(
        verdicts.each_ref().map(|v| v.is_allowed()),
        [true, true, false],
        "{name}: the limit of 2 holds again"
    );
    verdicts
}

#[test]
fn a_hung_redis_costs_each_request_at_most_the_timeout() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let timeout = Duration::from_millis(200);
        let limiter = fail_closed(&server, timeout, 3, Duration::from_millis(500)).await;
        // Frozen, not dead: connections stay open and nothing answers.
        server.pause();
        for i in 0..3 {
            let user = format!("hung-{i}");
            let started = Instant::now();
            let verdict = limiter.check(&[("user", &user)], 1).await;
            let took = started.elapsed();
            assert!(!verdict.is_allowed(), "fail closed");
            assert!(
                took >= timeout - Duration::from_millis(5) && took < Duration::from_millis(600),
                "call {i} waited the timeout (200 ms) and no more: {took:?}"
            );
        }
        for i in 0..10 {
            let user = format!("open-{i}");
            let started = Instant::now();
            assert!(!limiter.check(&[("user", &user)], 1).await.is_allowed());
            assert!(
                started.elapsed() < Duration::from_millis(100),
                "breaker open: answered at once, not in {:?}",
                started.elapsed()
            );
        }
        server.resume();
        decides_again(&limiter, "resumed").await;
    });
}

#[test]
fn after_the_cooldown_one_call_tries_redis_again() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let timeout = Duration::from_millis(200);
        let cooldown = Duration::from_millis(300);
        let limiter = fail_closed(&server, timeout, 2, cooldown).await;
        server.pause();
        for i in 0..2 {
            let user = format!("hung-{i}");
            assert!(!limiter.check(&[("user", &user)], 1).await.is_allowed());
        }
        tokio::time::sleep(cooldown + Duration::from_millis(100)).await;
        // Half-open: `RedisStoreBuilder::circuit_breaker` promises that after the cooldown
        // "one call tries Redis again"; the others should still fail at once.
        let mut tasks = JoinSet::new();
        for i in 0..10 {
            let limiter = limiter.clone();
            tasks.spawn(async move {
                let user = format!("half-open-{i}");
                let started = Instant::now();
                let verdict = limiter.check(&[("user", &user)], 1).await;
                (started.elapsed(), verdict.is_allowed())
            });
        }
        let results = tasks.join_all().await;
        server.resume();
        assert!(results.iter().all(|(_, allowed)| !allowed), "fail closed");
        let waited: Vec<Duration> = results
            .iter()
            .map(|(took, _)| *took)
            .filter(|took| *took >= timeout / 2)
            .collect();
        assert_eq!(
            waited.len(),
            1,
            "one call tries the hung Redis, the other 9 answer at once; waited: {waited:?}"
        );
        decides_again(&limiter, "resumed").await;
    });
}

#[test]
fn cluster_requests_with_two_limits_work_with_braces_in_the_prefix_or_domain() {
    let cluster = RedisCluster::start(3);
    runtime().block_on(async {
        let mut failing = Vec::new();
        for (prefix, domain) in [
            ("{tollgate}:", "orders"),
            ("svc{}:", "orders"),
            ("tollgate:", "}orders"),
        ] {
            // Refusing such a prefix or domain up front would do as well.
            let Ok(store) = RedisStore::cluster_builder(cluster.urls())
                .key_prefix(prefix)
                .timeout(Duration::from_secs(2))
                .connect()
                .await
            else {
                continue;
            };
            let yaml = format!(
                "domain: {domain:?}\nsources: {{ user: {{ header: x-user }}, tenant: {{ header: x-tenant }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ unit: hour, requests_per_unit: 6 }}\n  - key: tenant\n    rate_limit: {{ unit: hour, requests_per_unit: 100 }}\n"
            );
            let Ok(rules) = Rules::from_yaml(&yaml) else {
                continue;
            };
            let limiter = Limiter::with_store(rules, store);
            let verdict = limiter.check(&[("user", "u1"), ("tenant", "t1")], 1).await;
            if verdict.decision().map(|d| d.remaining) != Some(5) {
                failing.push(format!("prefix {prefix:?}, domain {domain:?}"));
            }
        }
        // A `{}` before the domain's tag leaves the keys with no hash tag: the request's
        // keys land in different slots, Redis refuses the script (CROSSSLOT), and every
        // request with two limits fails over to `on_store_error` (here: allow, unlimited).
        assert!(
            failing.is_empty(),
            "not decided by Redis (keys of one request in different slots): {failing:?}"
        );
    });
}

#[test]
fn a_full_limit_charges_no_other_limit_of_the_request() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // user: 6 per hour (token bucket); tenant: 100 per hour (sliding log).
        let limiter = Limiter::with_store(two_limits("all-or-nothing"), store(&server).await);
        let full = [("user", "u1"), ("tenant", "t1")];
        let admitted = {
            let mut admitted = 0;
            for _ in 0..20 {
                if limiter.check(&full, 1).await.is_allowed() {
                    admitted += 1;
                }
            }
            admitted
        };
        assert_eq!(admitted, 6);
        // The tenant was charged for the 6 admitted requests only, not the 14 denied.
        let other = limiter.check(&[("user", "u2"), ("tenant", "t1")], 1).await;
        assert!(other.is_allowed());
        let mut connection = server.connection();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut connection)
            .expect("KEYS");
        // The tenant's sliding log is a sorted set, one member a request (`…:z`); the users'
        // token buckets are text.
        let log = keys
            .iter()
            .find(|key| key.ends_with(":z"))
            .unwrap_or_else(|| panic!("the tenant's sliding log among {keys:?}"));
        let total: u64 = redis::cmd("ZCARD")
            .arg(log)
            .query(&mut connection)
            .expect("ZCARD");
        assert_eq!(total, 7, "the sliding log's total: 6 + 1 admitted requests");
    });
}

#[test]
fn the_over_limit_cache_denies_only_costs_known_to_be_too_large() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let limiter = per_user_limiter(
            &server,
            "weights",
            "unit: hour, requests_per_unit: 5, algorithm: token_bucket",
        )
        .await;
        assert!(limiter.check(&[("user", "u1")], 3).await.is_allowed());
        assert!(
            !limiter.check(&[("user", "u1")], 3).await.is_allowed(),
            "3 + 3 > 5"
        );
        let calls = server.calls("fcall");
        assert!(
            !limiter.check(&[("user", "u1")], 4).await.is_allowed(),
            "a larger cost is denied too"
        );
        assert_eq!(server.calls("fcall"), calls, "without a round trip");
        let smaller = limiter.check(&[("user", "u1")], 2).await;
        assert!(smaller.is_allowed(), "2 tokens are left: Redis is asked");
        assert_eq!(server.calls("fcall"), calls + 1);
        assert_eq!(smaller.decision().map(|d| d.remaining), Some(0));
    });
}

#[test]
fn a_cancelled_queue_place_is_given_back_in_redis() {
    use tollgate::store::{LimitCheck, Store};

    let server = RedisServer::start();
    runtime().block_on(async {
        let store = store(&server).await;
        // 2 a second: one place every 500 ms, so a busy machine cannot blur the difference.
        let quota = Quota::new(2, Duration::from_secs(1)).unwrap().with_queue(5);
        let check = LimitCheck {
            domain: "queue",
            key: b"client-1",
            tag: b"client-1",
            algorithm: Algorithm::LeakyBucket,
            quota: &quota,
            cost: 1,
            shadow: false,
            check_only: false,
            sync_every: None,
            limit: "test",
            approximate: None,
            carried_from: &[],
        };
        let acquire = || async {
            let decisions = decide(&store, &[check]).await.expect("Redis decides");
            decisions[0]
        };
        let first = acquire().await;
        let second = acquire().await;
        let third = acquire().await;
        assert!(first.allowed && second.allowed && third.allowed);
        assert!(first.booked_until.is_none(), "the first goes at once");
        let booked = third.booked_until.expect("the third waits in the queue");
        assert!(third.delay > second.delay, "{third:?} after {second:?}");
        // The third leaves before its turn: its place goes back (asynchronously). Wait until
        // the bucket's stored state changes (the first cancel may also load its script).
        let key = server
            .cli(&["--scan", "--pattern", "*}:queue:*"])
            .expect("scan");
        let key = key.trim();
        let before = server.cli(&["GET", key]).expect("get");
        store.cancel(&check, booked);
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.cli(&["GET", key]).expect("get") == before {
            assert!(Instant::now() < deadline, "the cancel reached Redis");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The next request takes the place the third gave back: its delay is the third's
        // (less the time that passed), not one interval more.
        let fourth = acquire().await;
        assert!(fourth.allowed);
        assert!(
            fourth.delay <= third.delay && fourth.delay + Duration::from_millis(400) > third.delay,
            "the third's place ({:?}) went to the fourth ({:?})",
            third.delay,
            fourth.delay
        );
    });
}

#[test]
fn the_local_policy_decides_in_memory_while_redis_is_down() {
    let mut server = RedisServer::start();
    let runtime = runtime();
    let rules = per_user_on_store_error("local", "local", "unit: hour, requests_per_unit: 2");
    let store = runtime
        .block_on(
            RedisStore::builder(server.url())
                .timeout(Duration::from_millis(50))
                .connect(),
        )
        .expect("connects");
    let limiter = Limiter::with_store(rules, store);
    runtime.block_on(async {
        assert!(limiter.check(&[("user", "shared")], 1).await.is_allowed());
    });
    server.kill();
    runtime.block_on(async {
        let allowed: Vec<bool> = checks_for(&limiter, "u", 3).await;
        assert_eq!(
            allowed,
            [true, true, false],
            "the same limit, held in this process"
        );
        assert!(
            limiter.check(&[("user", "v")], 1).await.is_allowed(),
            "per user, as in Redis"
        );
    });
    server.restart();
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(10);
        // Back on Redis, which lost its state: "u" starts afresh there.
        while !limiter.check(&[("user", "u")], 1).await.is_allowed() {
            assert!(
                Instant::now() < deadline,
                "limits are decided by Redis again"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(server.calls("fcall") > 0, "the decision came from Redis");
    });
}

/// A check of one request for `key`, against a fixed window of `quota`.
fn one_check<'a>(quota: &'a tollgate::algorithm::Quota, key: &'a [u8]) -> LimitCheck<'a> {
    LimitCheck::new("errors", key, Algorithm::FixedWindow, quota)
}

#[test]
fn store_errors_say_which_kind_of_failure_they_are() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let connect = |builder: tollgate::store::RedisStoreBuilder| async move {
            builder.connect().await.err().map(|error| error.kind())
        };
        let nobody = RedisStore::builder("redis://127.0.0.1:1");
        assert_eq!(connect(nobody).await, Some(StoreErrorKind::Connection));
        let no_url = RedisStore::builder("127.0.0.1:6379");
        assert_eq!(connect(no_url).await, Some(StoreErrorKind::Configuration));
        let braces = RedisStore::builder(server.url()).key_prefix("{app}:");
        assert_eq!(connect(braces).await, Some(StoreErrorKind::Configuration));
        let tls_file = RedisStore::builder(server.url().replace("redis://", "rediss://"))
            .tls_ca("/nonexistent/ca.pem");
        assert_eq!(connect(tls_file).await, Some(StoreErrorKind::Configuration));

        let store = RedisStore::builder(server.url())
            .timeout(Duration::from_millis(100))
            .circuit_breaker(1, Duration::from_secs(3_600))
            .connect()
            .await
            .expect("connects");
        let quota = Quota::new(10, Duration::from_secs(60)).expect("a quota");
        let log = Quota::new(5_000, Duration::from_secs(60)).expect("a quota");
        let unfit = store
            .holds(Algorithm::SlidingWindowLog, &log)
            .expect_err("too large");
        assert_eq!(unfit.kind(), StoreErrorKind::Unsupported);
        let check = one_check(&quota, b"user");
        decide(&store, &[check]).await.expect("Redis decides");

        // A full Redis refuses the write: an error of its own, which trips no breaker.
        server.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
        server.cli(&["CONFIG", "SET", "maxmemory", "1"]);
        let full = decide(&store, &[one_check(&quota, b"another")]).await;
        server.cli(&["CONFIG", "SET", "maxmemory", "0"]);
        let full = full.expect_err("out of memory");
        assert_eq!(full.kind(), StoreErrorKind::Server, "{full}");
        assert!(full.source().is_some(), "the redis-rs error: {full}");

        // Paused past the timeout: a timeout, then the breaker (1 failure) opens.
        server.cli(&["CLIENT", "PAUSE", "1000", "ALL"]);
        let slow = decide(&store, &[check]).await.expect_err("paused");
        assert_eq!(slow.kind(), StoreErrorKind::Timeout, "{slow}");
        let started = Instant::now();
        let open = decide(&store, &[check]).await.expect_err("breaker open");
        assert_eq!(open.kind(), StoreErrorKind::CircuitOpen, "{open}");
        assert!(started.elapsed() < Duration::from_millis(50), "at once");
        assert!(open.source().is_none(), "no call, no cause: {open}");
    });
}

/// `count` checks for `user`, in order: whether each was admitted.
async fn checks_for(limiter: &Limiter<RedisStore>, user: &str, count: usize) -> Vec<bool> {
    let mut allowed = Vec::new();
    for _ in 0..count {
        allowed.push(limiter.check(&[("user", user)], 1).await.is_allowed());
    }
    allowed
}

#[test]
fn a_key_holding_garbage_or_deleted_counts_as_never_seen_and_trips_nothing() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = RedisStore::builder(server.url())
            .circuit_breaker(1, Duration::from_secs(3_600))
            .connect()
            .await
            .expect("connects");
        let quota = Quota::new(3, Duration::from_secs(60)).unwrap();
        let check = LimitCheck {
            domain: "g",
            key: b"k",
            tag: b"k",
            algorithm: Algorithm::FixedWindow,
            quota: &quota,
            cost: 1,
            shadow: false,
            check_only: false,
            sync_every: None,
            limit: "test",
            approximate: None,
            carried_from: &[],
        };
        // The key's name, from a first decision.
        let decisions = decide(&store, &[check]).await.expect("decided by Redis");
        assert_eq!(decisions[0].remaining, 2);
        let key = server.cli(&["KEYS", "*"]).expect("keys");
        let key = key.trim();
        // Another type, then values that are not this algorithm's state.
        server.cli(&["DEL", key]).expect("del");
        server.cli(&["HSET", key, "field", "value"]).expect("hset");
        for garbage in [None, Some("nan inf"), Some("1 2 3 4 5"), Some("banana")] {
            if let Some(garbage) = garbage {
                server.cli(&["SET", key, garbage]).expect("set");
            }
            let decisions = decide(&store, &[check])
                .await
                .expect("decided by Redis, as a key never seen");
            assert!(decisions[0].allowed);
            assert_eq!(
                decisions[0].remaining, 2,
                "{garbage:?} read as a fresh state"
            );
        }
        // Keys deleted under us: the state starts afresh, nothing fails.
        server.cli(&["FLUSHALL"]).expect("flushall");
        let decisions = decide(&store, &[check]).await.expect("decided by Redis");
        assert_eq!(decisions[0].remaining, 2);
    });
}

/// `used_memory` from `INFO memory`, in bytes.
fn used_memory(server: &RedisServer) -> u64 {
    let info = server.cli(&["INFO", "memory"]).unwrap_or_default();
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|bytes| bytes.trim().parse().ok())
        .expect("INFO memory reports used_memory")
}

/// Every key on `server`, as bytes.
fn all_keys(server: &RedisServer) -> Vec<Vec<u8>> {
    redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.connection())
        .expect("KEYS")
}

/// 200 requests, each from a user whose id is 30 KB long, through `store`: each a limit per
/// user and, nested in it, a limit per user and page, so two keys each.
async fn send_huge_user_ids(store: RedisStore) {
    let rules = rules(
        r#"
domain: huge
sources: { user: { header: x-user-id }, page: { header: x-page } }
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
    descriptors:
      - key: page
        rate_limit: { unit: hour, requests_per_unit: 5, algorithm: sliding_window_log }
"#,
    );
    let limiter = Limiter::with_store(rules, store);
    for i in 0..200 {
        let user = format!("{i:05}{}", "x".repeat(30_000));
        let page = "p".repeat(30_000);
        let verdict = limiter.check(&[("user", &user), ("page", &page)], 1).await;
        assert!(
            verdict.is_allowed() && verdict.decision().is_some(),
            "decided by Redis"
        );
    }
}

/// Asserts that the keys on `servers` are 400 (two per request), each at most 100 bytes,
/// and that they took well under what 200 × 60 KB of client values would.
fn assert_bounded(servers: &[&RedisServer], memory_before: u64) {
    let keys: Vec<Vec<u8>> = servers.iter().flat_map(|s| all_keys(s)).collect();
    assert_eq!(keys.len(), 400, "two limits per request, one key each");
    let longest = keys.iter().map(Vec::len).max().unwrap_or(0);
    assert!(longest <= 100, "a key of {longest} bytes");
    let mut usage = 0;
    for server in servers {
        let mut connection = server.connection();
        for key in all_keys(server) {
            let bytes: u64 = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&key)
                .query(&mut connection)
                .expect("MEMORY USAGE");
            usage += bytes;
        }
    }
    // Each key costs its name, a few numbers and Redis's overhead: about 200 bytes. Keys
    // holding the client values would cost 60 KB each.
    assert!(usage < 400 * 256, "the 400 keys take {usage} bytes");
    // And Redis as a whole (loaded scripts and buffers included) grew by far less than the
    // 12 MB of client values sent.
    let memory_after: u64 = servers.iter().map(|s| used_memory(s)).sum();
    let grew = memory_after.saturating_sub(memory_before);
    assert!(grew < 1_500_000, "Redis grew by {grew} bytes");
}

#[test]
fn client_values_of_30_kb_make_keys_of_at_most_100_bytes() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = store(&server).await;
        let before = used_memory(&server);
        send_huge_user_ids(store).await;
        assert_bounded(&[&server], before);
    });
}

#[test]
fn client_values_of_30_kb_make_keys_of_at_most_100_bytes_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    runtime().block_on(async {
        let store = RedisStore::cluster_builder(cluster.urls())
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .expect("connects to the cluster");
        let masters: Vec<&RedisServer> = cluster.nodes.iter().collect();
        let before: u64 = masters.iter().map(|s| used_memory(s)).sum();
        send_huge_user_ids(store).await;
        assert_bounded(&masters, before);
        let spread = masters.iter().filter(|s| !all_keys(s).is_empty()).count();
        assert_eq!(spread, 3, "200 users spread over the 3 masters");
    });
}
