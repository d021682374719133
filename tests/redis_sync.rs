//! Local-first limits (`sync_every`) against real `redis-server` processes that the tests
//! start on free ports.
#![cfg(feature = "redis")]

mod common;

use axum::routing::get;
use axum::Router;
use common::redis_server::RedisServer;
use common::runtime;
use common::stores::decide;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tollgate::algorithm::{Algorithm, Quota};
use tollgate::clock::{ManualClock, Nanos};
use tollgate::rules::Rules;
use tollgate::store::{Acquisition, LimitCheck, RedisStore, Store};
use tollgate::{Limiter, RateLimitLayer};

const EVERY: Duration = Duration::from_millis(100);

async fn store(server: &RedisServer, clock: Option<&ManualClock>) -> RedisStore {
    let builder = RedisStore::builder(server.url()).timeout(Duration::from_secs(2));
    let builder = match clock {
        Some(clock) => builder.clock(clock.clone()),
        None => builder,
    };
    builder.connect().await.expect("connects")
}

fn check<'a>(algorithm: Algorithm, quota: &'a Quota, key: &'a [u8]) -> LimitCheck<'a> {
    LimitCheck {
        sync_every: Some(EVERY),
        ..LimitCheck::new("sync", key, algorithm, quota)
    }
}

/// Whether a local-first check of `store` admits, answered at once.
fn admits(store: &RedisStore, check: &LimitCheck<'_>) -> bool {
    match store.acquire(&[*check]) {
        Acquisition::Ready(result) => result.expect("decided")[0].allowed,
        Acquisition::Pending(_) => panic!("a local-first limit is decided without waiting"),
    }
}

/// Two servers on one Redis, each asked 30 requests an interval for a second, syncing after
/// every interval: the fleet admits the limit, give or take one interval of the other server.
#[test]
fn two_servers_admit_the_limit_within_one_interval_of_the_other() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let windows = Quota::new(100, Duration::from_secs(1)).unwrap();
        let schedule = Quota::new(100, Duration::from_secs(1))
            .unwrap()
            .with_burst(100);
        let cases = [
            (Algorithm::FixedWindow, &windows, 100),
            (Algorithm::SlidingWindowCounter, &windows, 100),
            // The burst, then nine intervals of refill.
            (Algorithm::Gcra, &schedule, 190),
            (Algorithm::TokenBucket, &schedule, 190),
        ];
        for (algorithm, quota, limit) in cases {
            let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
            let servers = [
                store(&server, Some(&clock)).await,
                store(&server, Some(&clock)).await,
            ];
            let key = algorithm.name().as_bytes();
            let mut admitted = 0;
            for _ in 0..10 {
                for store in &servers {
                    admitted += (0..30)
                        .filter(|_| admits(store, &check(algorithm, quota, key)))
                        .count();
                }
                for store in &servers {
                    store.sync_now().await.expect("Redis answers");
                }
                clock.advance(EVERY);
            }
            assert!(
                (limit - 30..=limit + 30).contains(&admitted),
                "{algorithm}: {admitted} admitted for {limit}"
            );
        }
    });
}

#[test]
fn a_server_that_joins_starts_from_the_fleets_totals() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
        let quota = Quota::new(100, Duration::from_secs(10)).unwrap();
        let check = check(Algorithm::FixedWindow, &quota, b"client");
        let first = store(&server, Some(&clock)).await;
        assert_eq!((0..80).filter(|_| admits(&first, &check)).count(), 80);
        first.sync_now().await.expect("Redis answers");
        let joining = store(&server, Some(&clock)).await;
        assert!(admits(&joining, &check), "alone, its share");
        joining.sync_now().await.expect("Redis answers");
        let more = (0..100).filter(|_| admits(&joining, &check)).count();
        assert_eq!(more, 19, "100 - 80 - the one before its first sync");
    });
}

#[test]
fn local_first_and_exact_limits_of_one_request_are_all_or_nothing() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
        let store = store(&server, Some(&clock)).await;
        let local_quota = Quota::new(3, Duration::from_secs(10)).unwrap();
        let exact_quota = Quota::new(2, Duration::from_secs(10)).unwrap();
        let local = check(Algorithm::FixedWindow, &local_quota, b"local");
        let exact = LimitCheck {
            sync_every: None,
            limit: "test",
            approximate: None,
            carried_from: &[],
            ..check(Algorithm::FixedWindow, &exact_quota, b"exact")
        };
        let both = [local, exact];
        for _ in 0..2 {
            let decisions = decide(&store, &both).await.expect("decided");
            assert!(decisions.iter().all(|d| d.allowed));
        }
        // The exact limit is full: the local one gives its charge back.
        let denied = decide(&store, &both).await.expect("decided");
        assert!(denied[0].allowed && !denied[1].allowed);
        assert!(
            admits(&store, &local),
            "the third local place is still free"
        );
        // The local limit is full: Redis is not asked.
        let calls = server.calls("fcall");
        let denied = decide(&store, &both).await.expect("decided");
        assert!(!denied[0].allowed);
        assert_eq!(server.calls("fcall"), calls, "no round trip");
    });
}

/// Whatever the request rate, each server calls Redis at most once an interval.
#[test]
fn redis_calls_stay_at_one_per_server_per_interval() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let quota = Quota::new(1_000_000, Duration::from_secs(3_600)).unwrap();
        let servers = [store(&server, None).await, store(&server, None).await];
        let calls_before = server.calls("fcall");
        let started = Instant::now();
        let mut requests = 0u64;
        while started.elapsed() < Duration::from_secs(2) {
            for store in &servers {
                for key in [&b"a"[..], b"b", b"c"] {
                    admits(store, &check(Algorithm::SlidingWindowCounter, &quota, key));
                    requests += 1;
                }
            }
            tokio::task::yield_now().await;
        }
        let elapsed = started.elapsed();
        let calls = server.calls("fcall") - calls_before;
        let intervals = elapsed.as_millis() / EVERY.as_millis() + 1;
        let most = 2 * u64::try_from(intervals).unwrap();
        assert!(requests > 10 * most, "{requests} requests");
        assert!(
            calls <= most,
            "{calls} calls for {requests} requests in {elapsed:?}"
        );
        assert!(calls >= 2, "the servers synced");
    });
}

/// Redis killed mid-load: every request is still answered at once, and what the server
/// admitted while Redis was away reaches it once it is back.
#[test]
fn redis_killed_and_restarted_keeps_requests_answered_and_counts_reconcile() {
    let mut server = RedisServer::start();
    runtime().block_on(async {
        common::windows::away_from_hour_edge(Duration::from_secs(60)).await;
        let quota = Quota::new(1_000_000, Duration::from_secs(3_600)).unwrap();
        let check = check(Algorithm::FixedWindow, &quota, b"client");
        let store = store(&server, None).await;
        // Requests for `time`: how many were admitted, and the longest one took.
        let load = |time: Duration| {
            let started = Instant::now();
            let (mut admitted, mut slowest) = (0, Duration::ZERO);
            while started.elapsed() < time {
                let asked = Instant::now();
                admitted += u64::from(admits(&store, &check));
                slowest = slowest.max(asked.elapsed());
            }
            (admitted, slowest)
        };
        load(Duration::from_millis(300));
        // Everything so far is sent; then Redis dies, and comes back empty.
        tokio::time::sleep(EVERY * 3).await;
        server.kill();
        let (while_away, slowest) = load(Duration::from_millis(500));
        assert!(while_away > 0);
        assert!(
            slowest < Duration::from_millis(50),
            "answered without waiting on Redis: {slowest:?}"
        );
        tokio::time::sleep(EVERY * 3).await;
        server.restart();
        let (after, _) = load(Duration::from_millis(100));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let total = window_total(&server);
            if total == i64::try_from(while_away + after).unwrap() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{total} in Redis, {while_away} + {after} admitted since it died"
            );
            tokio::time::sleep(EVERY).await;
        }
    });
}

/// The sync task runs on the runtime that connected the store, not on the first request's:
/// counts made on a runtime since shut down, and on a thread outside any runtime, reach
/// Redis all the same.
#[test]
fn a_store_syncs_on_the_runtime_that_connected_it() {
    let server = RedisServer::start();
    let connecting = runtime();
    let store = connecting.block_on(store(&server, None));
    let quota = Quota::new(1_000_000, Duration::from_secs(3_600)).unwrap();
    let check = check(Algorithm::FixedWindow, &quota, b"client");
    let elsewhere = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    elsewhere.block_on(async { assert!(admits(&store, &check)) });
    drop(elsewhere);
    assert!(admits(&store, &check), "outside any runtime");
    let deadline = Instant::now() + Duration::from_secs(10);
    while window_total(&server) != 2 {
        assert!(Instant::now() < deadline, "the counts never reached Redis");
        std::thread::sleep(EVERY);
    }
}

/// The sum of every window count of every synced key in `server`.
fn window_total(server: &RedisServer) -> i64 {
    let keys = server
        .cli(&["--scan", "--pattern", "*:sync*"])
        .unwrap_or_default();
    keys.lines()
        .filter(|key| !key.trim().is_empty())
        .map(|key| {
            server
                .cli(&["HVALS", key.trim()])
                .unwrap_or_default()
                .lines()
                .filter_map(|v| v.trim().parse::<i64>().ok())
                .sum::<i64>()
        })
        .sum()
}

const PER_CLIENT: &str = r#"
domain: sync
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 100, algorithm: fixed_window, sync_every: 100ms }
"#;

/// A server limited by `PER_CLIENT` through its own store on `redis`.
async fn limited_server(redis: &RedisServer) -> SocketAddr {
    let rules = Rules::from_yaml(PER_CLIENT).expect("valid rules");
    let limiter = Limiter::with_store(rules, store(redis, None).await);
    let router = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter));
    common::server::serve(router).await
}

fn second_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// Two HTTP servers behind one client, 200 requests a second each: in every whole second, the
/// fleet admits the limit of 100 at least (less one interval of one server), and at most the
/// limit plus what the other server is sent in an interval or two (one interval, and the
/// time a sync takes on a busy machine).
#[test]
fn two_http_servers_admit_within_the_bound_each_window() {
    let redis = RedisServer::start();
    runtime().block_on(async {
        let servers = [limited_server(&redis).await, limited_server(&redis).await];
        // Start just after a second begins; the first second warms up.
        let into_second = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .subsec_millis();
        tokio::time::sleep(Duration::from_millis(u64::from(1_010 - into_second))).await;
        let first = second_now();
        let mut per_second: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
        let pace = Duration::from_millis(5);
        let started = Instant::now();
        let mut sent = 0u32;
        while second_now() < first + 4 {
            for &addr in &servers {
                let second = second_now();
                let reply = common::server::get(addr, "/", &[]).await;
                let counts = per_second.entry(second).or_default();
                counts.0 += 1;
                counts.1 += u64::from(reply.status == http::StatusCode::OK);
            }
            sent += 1;
            // 200 requests a second in all, when the machine keeps up.
            let next = started + pace * sent;
            tokio::time::sleep_until(next.into()).await;
        }
        for second in first + 1..first + 4 {
            let (asked, admitted) = per_second[&second];
            let per_server_interval = asked / 2 / 10;
            assert!(
                admitted <= 100 + 2 * per_server_interval,
                "second {second}: {admitted} of {asked} admitted"
            );
            if asked >= 150 {
                assert!(
                    admitted >= 100 - per_server_interval,
                    "second {second}: {admitted} of {asked} admitted"
                );
            }
        }
    });
}

/// On a Redis Cluster, keys of many clients spread over the slots, one call per slot: each
/// client's limit holds across two servers as on one Redis.
#[test]
fn two_servers_on_a_cluster_admit_each_clients_limit() {
    let cluster = common::redis_server::RedisCluster::start(3);
    runtime().block_on(async {
        let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
        let connect = || async {
            RedisStore::cluster_builder(cluster.urls())
                .clock(clock.clone())
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("connects")
        };
        let servers = [connect().await, connect().await];
        let quota = Quota::new(50, Duration::from_secs(10)).unwrap();
        let clients: Vec<Vec<u8>> = (0..8).map(|i| format!("client-{i}").into_bytes()).collect();
        let mut admitted = vec![0; clients.len()];
        for _ in 0..4 {
            for store in &servers {
                for (client, count) in clients.iter().zip(&mut admitted) {
                    let check = check(Algorithm::FixedWindow, &quota, client);
                    *count += (0..20).filter(|_| admits(store, &check)).count();
                }
            }
            for store in &servers {
                store.sync_now().await.expect("the cluster answers");
            }
            clock.advance(EVERY);
        }
        for (client, count) in clients.iter().zip(admitted) {
            // 40 an interval asked of the fleet: 50, and at most one interval of the other.
            assert!(
                (50..=50 + 20).contains(&count),
                "{}: {count}",
                String::from_utf8_lossy(client)
            );
        }
    });
}

/// A sync cut off mid-call (its future dropped, as a shutdown timeout would) keeps what it
/// carried, to send again, and its keys go on syncing.
#[test]
fn a_sync_cut_off_keeps_its_counts_for_the_next() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
        let store = store(&server, Some(&clock)).await;
        let quota = Quota::new(1_000, Duration::from_secs(10)).unwrap();
        let check = check(Algorithm::FixedWindow, &quota, b"client");
        store.sync_now().await.expect("Redis answers");
        assert_eq!((0..7).filter(|_| admits(&store, &check)).count(), 7);
        server.pause();
        let cut_off = tokio::time::timeout(Duration::from_millis(200), store.sync_now()).await;
        assert!(cut_off.is_err(), "Redis is frozen: the sync cannot finish");
        server.resume();
        // The key is not left waiting for an answer that will never come: what it admits
        // next is sent. (The call cut off was written before Redis froze, and ran when it
        // woke: its 7 count twice, on the side of denying, as the guide says.)
        assert_eq!((0..3).filter(|_| admits(&store, &check)).count(), 3);
        store.sync_now().await.expect("Redis answers");
        let total = window_total(&server);
        assert!((10..=17).contains(&total), "{total}");
    });
}

/// While Redis is down, a request that also has an exact limit is that limit's
/// `on_store_error` policy's to decide, but its local-first limit still counts and denies.
#[test]
fn a_local_first_limit_keeps_limiting_when_the_exact_ones_fail() {
    let mut server = RedisServer::start();
    runtime().block_on(async {
        let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
        let store = RedisStore::builder(server.url())
            .clock(clock.clone())
            .timeout(Duration::from_millis(200))
            .connect()
            .await
            .expect("connects");
        server.kill();
        let local_quota = Quota::new(5, Duration::from_secs(10)).unwrap();
        let exact_quota = Quota::new(100, Duration::from_secs(10)).unwrap();
        let both = [
            check(Algorithm::FixedWindow, &local_quota, b"local"),
            LimitCheck {
                sync_every: None,
                ..check(Algorithm::FixedWindow, &exact_quota, b"exact")
            },
        ];
        let mut failed = 0;
        let mut denied_locally = 0;
        for _ in 0..10 {
            match decide(&store, &both).await {
                Err(_) => failed += 1,
                Ok(decisions) => {
                    assert!(!decisions[0].allowed, "only a local denial answers");
                    denied_locally += 1;
                }
            }
        }
        assert_eq!((failed, denied_locally), (5, 5));
    });
}

/// Many keys are sent in calls of at most 500 keys, and every count arrives.
#[test]
fn many_keys_are_sent_in_calls_of_bounded_size() {
    let server = RedisServer::start();
    let runtime = runtime();
    let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
    let store = runtime.block_on(store(&server, Some(&clock)));
    let quota = Quota::new(10, Duration::from_secs(10)).unwrap();
    // Synced every hour: the store's task syncs once when the first key starts it, then
    // not again within the test, so the only sync of the 1,200 keys is the one below.
    fn hourly<'a>(quota: &'a Quota, key: &'a [u8]) -> LimitCheck<'a> {
        LimitCheck {
            sync_every: Some(Duration::from_secs(3_600)),
            ..check(Algorithm::FixedWindow, quota, key)
        }
    }
    assert!(admits(&store, &hourly(&quota, b"first")));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while window_total(&server) < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the task's first sync"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..1_200 {
        let key = format!("client-{i}").into_bytes();
        assert!(admits(&store, &hourly(&quota, &key)));
    }
    let calls = server.calls("fcall");
    runtime.block_on(store.sync_now()).expect("Redis answers");
    let sent_in = server.calls("fcall") - calls;
    assert_eq!(sent_in, 3, "1,200 keys in calls of at most 500");
    assert_eq!(window_total(&server), 1 + 1_200);
}

/// A schedule's key lives as long as it books ahead: 100 requests of burst at 10 a second
/// book 10 s, longer than two periods.
#[test]
fn a_schedules_key_lives_as_far_as_it_books_ahead() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = store(&server, None).await;
        let quota = Quota::new(10, Duration::from_secs(1))
            .unwrap()
            .with_burst(100);
        let check = check(Algorithm::Gcra, &quota, b"client");
        assert!(admits(&store, &check));
        store.sync_now().await.expect("Redis answers");
        let key = server
            .cli(&["--scan", "--pattern", "*:sync*"])
            .expect("scan");
        let ttl: u64 = server
            .cli(&["PTTL", key.trim()])
            .expect("pttl")
            .trim()
            .parse()
            .expect("a number");
        assert!(ttl > 10_000, "{ttl} ms");
    });
}

/// Redis down and a flood of 200,000 clients: the server keeps no more keys than its ceiling,
/// and none once their counts no longer matter, though it could never send them.
#[test]
fn a_flood_while_redis_is_down_stays_within_the_key_ceiling_and_then_goes() {
    let mut server = RedisServer::start();
    let runtime = runtime();
    let clock = ManualClock::starting_at(Nanos::new(1_000_000_000_000));
    let store = runtime
        .block_on(
            RedisStore::builder(server.url())
                .clock(clock.clone())
                .timeout(Duration::from_millis(200))
                .max_keys(20_000)
                .connect(),
        )
        .expect("connects");
    server.kill();
    let quota = Quota::new(100, Duration::from_secs(10)).unwrap();
    // Redis is down: every sync fails, the store's task's as these below, one an interval
    // of the test's clock.
    for i in 0..200_000u32 {
        let key = format!("client-{i}").into_bytes();
        assert!(admits(&store, &check(Algorithm::FixedWindow, &quota, &key)));
        if i % 20_000 == 0 {
            clock.advance(EVERY);
            assert!(runtime.block_on(store.sync_now()).is_err(), "Redis is down");
        }
    }
    let kept = store.local_first_keys();
    assert!((18_000..=20_000).contains(&kept), "{kept} keys kept");
    // Past the two windows of 10 s, the counts never sent no longer matter.
    clock.advance(Duration::from_secs(30));
    for _ in 0..50 {
        if store.local_first_keys() == 0 {
            break;
        }
        // Each sync fails (Redis is down) and forgets a share of the idle keys.
        let _ = runtime.block_on(store.sync_now());
        clock.advance(EVERY);
    }
    assert_eq!(store.local_first_keys(), 0);
}
