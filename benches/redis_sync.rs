//! Local-first limits (`sync_every`) at two servers: the overshoot measured against the
//! stated bound, and Redis calls against requests.
//!
//! The bench starts its own `redis-server` with the test harness
//! (`tests/common/redis_server.rs`) and two axum servers in this process, each with its own
//! `RedisStore` on it (as two processes of a fleet would have), limited per client by one
//! limit of 1,000 a second (`sync_every: 100ms`): `fixed_window`, `sliding_window_counter`,
//! and `token_bucket` and `gcra` with a burst of 1,000. A paced client (hyper, 16 tasks per
//! server, all from 127.0.0.1, so one client) sends `r` requests a second to each server, for
//! `r` of 500, 1,000 and 2,000, for 5 s, and counts the answers by the wall-clock second each
//! request was sent in.
//!
//! For each run it prints: the rate actually sent to each server; the most requests the fleet
//! admitted in one whole second (the first second is left out: it holds the warm-up, and the
//! burst of the token bucket and GCRA); the bound of the rules guide for a window, `limit +
//! (N − 1) × r × t` with `N = 2` and `t = 100 ms` (without `d`, the sync's own time); and
//! the overshoot (admitted − limit) as a share of `r × t`. And Redis's `EVALSHA` calls per
//! second (`INFO commandstats`, after `CONFIG RESETSTAT`) against the requests per second.
//!
//! ```text
//! cargo bench --features redis --bench redis_sync      # about 2 minutes
//! ```

#[path = "common/machine.rs"]
mod machine;
#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use machine::{cpu_model, memory_total, utc_now};
use redis_server::RedisServer;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tollgate::rules::Rules;
use tollgate::store::RedisStore;
use tollgate::{Limiter, RateLimitLayer};

const LIMIT: u64 = 1_000;
const EVERY: Duration = Duration::from_millis(100);
const SERVERS: u64 = 2;
const RATES: [u64; 3] = [500, 1_000, 2_000];
const TASKS: u64 = 16;
const RUN: Duration = Duration::from_secs(5);
const ALGORITHMS: [(&str, &str); 4] = [
    ("fixed_window", ""),
    ("sliding_window_counter", ""),
    ("token_bucket", ", burst: 1000"),
    ("gcra", ", burst: 1000"),
];

fn rules(algorithm: &str, extra: &str) -> Rules {
    let yaml = format!(
        "domain: {algorithm}\ndescriptors:\n  - key: remote_address\n    rate_limit: {{ unit: second, requests_per_unit: {LIMIT}, algorithm: {algorithm}{extra}, sync_every: 100ms }}\n"
    );
    Rules::from_yaml(&yaml).expect("valid rules")
}

/// A server on a free port, and its task: aborted, it drops its store, whose sync stops.
async fn server(redis: &RedisServer, rules: Rules) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let store = RedisStore::builder(redis.url())
        .connect()
        .await
        .expect("connects");
    let router = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(Limiter::with_store(rules, store)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });
    (addr, task)
}

fn second_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Sends `rate` requests a second to each of `servers` until `until`: per second sent in,
/// (sent, admitted).
async fn load(servers: &[SocketAddr], rate: u64, until: Instant) -> BTreeMap<u64, (u64, u64)> {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut tasks = tokio::task::JoinSet::new();
    for &addr in servers {
        for _ in 0..TASKS {
            let client = client.clone();
            let uri: http::Uri = format!("http://{addr}/").parse().expect("uri");
            tasks.spawn(async move {
                let mut counts: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
                let mut pace = tokio::time::interval(
                    Duration::from_secs(TASKS) / u32::try_from(rate).unwrap_or(u32::MAX),
                );
                pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                while Instant::now() < until {
                    pace.tick().await;
                    let second = second_now();
                    let request = http::Request::get(uri.clone())
                        .body(Empty::new())
                        .expect("request");
                    let admitted = match client.request(request).await {
                        Ok(response) => response.status() == http::StatusCode::OK,
                        Err(_) => false,
                    };
                    let entry = counts.entry(second).or_default();
                    entry.0 += 1;
                    entry.1 += u64::from(admitted);
                }
                counts
            });
        }
    }
    let mut all: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    while let Some(counts) = tasks.join_next().await {
        for (second, (sent, admitted)) in counts.expect("a load task") {
            let entry = all.entry(second).or_default();
            entry.0 += sent;
            entry.1 += admitted;
        }
    }
    all
}

fn main() {
    let redis = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "machine: {} CPUs, {}, {}; {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model().unwrap_or_default(),
        memory_total().unwrap_or_default(),
        utc_now()
    );
    println!();
    println!("| algorithm | r sent per server (req/s) | most admitted in a second | bound `L + r × t` | overshoot / `r × t` | requests/s | Redis calls/s |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (algorithm, extra) in ALGORITHMS {
        for rate in RATES {
            runtime.block_on(async {
                // Fresh keys: each run is a domain of its own, over fresh stores.
                let rules = rules(algorithm, extra);
                let (first_server, first_task) = server(&redis, rules.clone()).await;
                let (second_server, second_task) = server(&redis, rules).await;
                // Start just after a second begins, so that whole seconds are measured.
                let into = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_millis());
                tokio::time::sleep(Duration::from_millis(u64::from(1_005 - into))).await;
                let first = second_now();
                redis.cli(&["CONFIG", "RESETSTAT"]);
                let started = Instant::now();
                let counts = load(&[first_server, second_server], rate, started + RUN).await;
                let elapsed = started.elapsed().as_secs_f64();
                let calls = redis.calls("evalsha") + redis.calls("eval");
                first_task.abort();
                second_task.abort();
                let whole: Vec<(u64, u64)> = counts
                    .range(first + 1..first + RUN.as_secs())
                    .map(|(_, &counts)| counts)
                    .collect();
                let seconds = whole.len().max(1) as f64;
                let sent: u64 = whole.iter().map(|(sent, _)| sent).sum();
                let per_server = sent as f64 / seconds / SERVERS as f64;
                let most = whole.iter().map(|&(_, admitted)| admitted).max().unwrap_or(0);
                let interval = per_server * EVERY.as_secs_f64();
                let bound = LIMIT as f64 + (SERVERS - 1) as f64 * interval;
                let overshoot = most.saturating_sub(LIMIT) as f64 / interval;
                let total: u64 = counts.values().map(|(sent, _)| sent).sum();
                println!(
                    "| {algorithm} | {per_server:.0} | {most} | {bound:.0} | {:.0} % | {:.0} | {:.1} |",
                    overshoot * 100.0,
                    total as f64 / elapsed,
                    calls as f64 / elapsed,
                );
            });
        }
    }
}
