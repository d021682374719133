//! A rolling upgrade on one Redis: servers of tollgate 0.1 (its decision script,
//! `tests/fixtures/acquire-0.1.lua`, called as 0.1 called it) beside servers of this version.
//! Every algorithm keeps its state as 0.1 did, under the same keys, but the fixed window,
//! now one integer under its own key, and the sliding window log, now a sorted set under its
//! own key: old and new servers then count these apart, unless the new ones keep them as text
//! (`legacy_layout`).
#![cfg(feature = "redis")]

mod common;

use common::redis_server::RedisServer;
use std::time::Duration;
use tollgate::rules::Rules;
use tollgate::store::RedisStore;
use tollgate::Limiter;

/// The decision script of tollgate 0.1, prelude included.
const SCRIPT_0_1: &str = include_str!("fixtures/acquire-0.1.lua");

/// A server of tollgate 0.1 deciding one limit of one key, as 0.1's store called its script:
/// the key, now from Redis's clock, then 11 numbers (the limit kept in microseconds).
struct OldServer {
    connection: redis::aio::MultiplexedConnection,
    script: redis::Script,
    key: String,
    /// Algorithm code, ticks per base unit, limit, period (µs), burst, queue, max_delay,
    /// shaping, cost, flags, ticks per ms.
    numbers: [i64; 11],
}

impl OldServer {
    async fn admits(&mut self) -> bool {
        let mut invocation = self.script.key(&self.key);
        invocation.arg("");
        for number in self.numbers {
            invocation.arg(number);
        }
        let reply: Vec<i64> = invocation
            .invoke_async(&mut self.connection)
            .await
            .expect("0.1's script answers");
        reply[1] == 1
    }
}

/// One limit per user of `limit` a minute decided by `algorithm`.
fn per_user(algorithm: &str, limit: u64) -> Rules {
    Rules::from_yaml(&format!(
        "domain: upgrade\nsources: {{ user: {{ header: x-user }} }}\ndescriptors:\n  - key: user\n    rate_limit: {{ unit: minute, requests_per_unit: {limit}, algorithm: {algorithm} }}\n"
    ))
    .expect("valid rules")
}

/// A new server and an old one deciding the limit `algorithm` (code `code` in 0.1's script)
/// of 5 a minute for the same user, the new one keeping fixed windows and logs as text when
/// `legacy`.
async fn fleet(
    server: &RedisServer,
    algorithm: &str,
    code: i64,
    legacy: bool,
) -> (Limiter<RedisStore>, OldServer) {
    let store = RedisStore::builder(server.url())
        .timeout(Duration::from_secs(2))
        .over_limit_cache(false)
        .legacy_layout(legacy)
        .connect()
        .await
        .expect("connects");
    let new = Limiter::with_store(per_user(algorithm, 5), store);
    // The new server's first request names the key; 0.1 named it the same, but a fixed
    // window kept as one integer, under `:n`, and a log kept as a sorted set, under `:z`.
    assert!(new.check(&[("user", "ann")], 1).await.is_allowed());
    let keys = server.cli(&["KEYS", "*"]).unwrap_or_default();
    let key = keys.trim();
    let key = key
        .strip_suffix(":n")
        .or_else(|| key.strip_suffix(":z"))
        .unwrap_or(key)
        .to_owned();
    let client = redis::Client::open(server.url()).expect("a Redis URL");
    let connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("connects");
    let old = OldServer {
        connection,
        script: redis::Script::new(SCRIPT_0_1),
        key,
        numbers: [code, 1, 5, 60_000_000, 5, 0, -1, 1, 1, 0, 1_000],
    };
    (new, old)
}

/// How many of 10 requests, alternating between the two servers after the new one's first,
/// are admitted (the first included).
async fn admitted_across(new: &Limiter<RedisStore>, old: &mut OldServer) -> usize {
    let mut admitted = 1;
    for i in 0..10 {
        let allowed = if i % 2 == 0 {
            old.admits().await
        } else {
            new.check(&[("user", "ann")], 1).await.is_allowed()
        };
        admitted += usize::from(allowed);
    }
    admitted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_and_new_servers_share_every_algorithm_but_fixed_windows_and_logs_exactly() {
    let server = RedisServer::start();
    common::windows::away_from_edge(Duration::from_secs(60), Duration::from_secs(5)).await;
    for (algorithm, code) in [
        ("token_bucket", 1),
        ("gcra", 6),
        ("sliding_window_counter", 5),
    ] {
        server.cli(&["FLUSHALL"]);
        let (new, mut old) = fleet(&server, algorithm, code, false).await;
        assert_eq!(admitted_across(&new, &mut old).await, 5, "{algorithm}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_windows_and_logs_kept_as_text_are_shared_exactly_with_old_servers() {
    let server = RedisServer::start();
    common::windows::away_from_edge(Duration::from_secs(60), Duration::from_secs(5)).await;
    for (algorithm, code) in [("fixed_window", 3), ("sliding_window_log", 4)] {
        server.cli(&["FLUSHALL"]);
        let (new, mut old) = fleet(&server, algorithm, code, true).await;
        assert_eq!(admitted_across(&new, &mut old).await, 5, "{algorithm}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_windows_and_logs_kept_apart_are_counted_at_most_twice_the_limit() {
    let server = RedisServer::start();
    common::windows::away_from_edge(Duration::from_secs(60), Duration::from_secs(5)).await;
    for (algorithm, code) in [("fixed_window", 3), ("sliding_window_log", 4)] {
        server.cli(&["FLUSHALL"]);
        let (new, mut old) = fleet(&server, algorithm, code, false).await;
        // Each side admits its 5 of the 11 asked: 5 new (the first and 4 of 5), 5 old.
        assert_eq!(admitted_across(&new, &mut old).await, 10, "{algorithm}");
        // The old server's key, text, expires within its window: nothing is left over.
        let pttl = server
            .cli(&["PTTL", &old.key])
            .unwrap_or_default()
            .trim()
            .parse::<i64>()
            .expect("a PTTL");
        assert!((1..=60_001).contains(&pttl), "{algorithm}: PTTL {pttl} ms");
    }
}
