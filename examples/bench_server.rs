//! A minimal axum server for end-to-end load tests (`scripts/bench-http.sh` drives it with
//! `wrk`).
//!
//! ```text
//! cargo build --release --example bench_server
//! target/release/examples/bench_server MODE [ADDR]       # ADDR defaults to 127.0.0.1:3300
//! BENCH_WORKERS=2 target/release/examples/bench_server tollgate 127.0.0.1:3301
//! ```
//!
//! One route, `GET /`, answers a short static body. `MODE` chooses what sits in front of it:
//!
//! | mode | layer |
//! |---|---|
//! | `bare` | nothing: plain axum, the baseline |
//! | `bare-headers` | nothing, but the handler answers with the two headers tollgate adds to an admitted response in `tollgate` mode (same names, same values): what sending them costs without a limiter |
//! | `tollgate` | tollgate, one per-IP `token_bucket` of 1,000,000,000 per second: nothing is limited |
//! | `tollgate-limited` | tollgate, one per-IP `token_bucket` of 1 per hour: all but the first request get 429 |
//! | `governor` | tower_governor's `GovernorLayer`, keyed by peer IP, one cell per nanosecond with a burst of `u32::MAX`: nothing is limited |
//! | `governor-headers` | `governor` with tower_governor's `use_headers`, which sends the same two headers as tollgate on admitted responses: the like-for-like comparison with `tollgate` |
//! | `governor-limited` | tower_governor, keyed by peer IP, one cell per hour with a burst of 1: all but the first request get 429 |
//! | `tollgate-concurrency` | tollgate, one per-IP `concurrency: { max_in_flight: 1000 }`: nothing is limited, each request holds its client's slot until its body ends |
//! | `tower-concurrency` | tower's `ConcurrencyLimitLayer::new(1000)`: one global limit, nothing is limited |
//! | `swc-memory` | tollgate, one per-IP `sliding_window_counter` of 1,000,000,000 per second, in memory: nothing is limited |
//! | `swc-redis` | the same limit in Redis (`TOLLGATE_REDIS_URL`, default `redis://127.0.0.1:6379`; feature `redis`), exact: one round trip a request |
//! | `swc-sync` | the same limit in Redis with `sync_every: 100ms`: local-first |
//! | `swc-settle-memory`, `swc-settle-redis` | the `swc-memory` or `swc-redis` limit with `settle: { response_header: x-tokens-used }`, each answer saying 2: reserved 1, then charged 1 more |
//! | `swc-concurrency-redis` | the `swc-redis` limit and a per-IP `concurrency: { max_in_flight: 1000 }` beside it, both in Redis: a call for the slot, one for the limit, a `ZREM` when the body ends |
//!
//! Both limiters key by the peer address, so the server is served with
//! `into_make_service_with_connect_info::<SocketAddr>()` in every mode (bare included, so
//! that only the layer differs). The Tokio runtime is multi-threaded with `BENCH_WORKERS`
//! workers (default 1), and the whole server (accept loop included) runs on them, so that
//! the server and the load generator can be pinned to different cores.

#[path = "../benches/common/layers.rs"]
mod layers;

use axum::http::{HeaderName, HeaderValue};
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::process::ExitCode;
use tollgate::response::{X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING};

const MODES: &str = "bare, bare-headers, tollgate, tollgate-limited, governor, governor-headers, governor-limited, tollgate-concurrency, tower-concurrency, swc-memory, swc-redis, swc-sync, swc-settle-memory, swc-settle-redis, swc-concurrency-redis";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(mode) = args.next() else {
        eprintln!("usage: bench_server MODE [ADDR]   (MODE: {MODES})");
        return ExitCode::FAILURE;
    };
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:3300".to_owned());
    let workers = match std::env::var("BENCH_WORKERS") {
        Ok(value) => match value.parse::<usize>() {
            Ok(workers) if workers > 0 => workers,
            _ => {
                eprintln!("BENCH_WORKERS must be a positive whole number, not {value:?}");
                return ExitCode::FAILURE;
            }
        },
        Err(_) => 1,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the Tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Spawned, so that the accept loop runs on the workers too, not on this thread.
    runtime.block_on(async move {
        tokio::spawn(async move {
            let Some(app) = app(&mode).await else {
                eprintln!("unknown mode {mode:?} (expected one of: {MODES})");
                return ExitCode::FAILURE;
            };
            serve(app, &mode, &listen, workers).await
        })
        .await
        .unwrap_or(ExitCode::FAILURE)
    })
}

/// The router for `mode`, or `None` for an unknown mode.
async fn app(mode: &str) -> Option<Router> {
    let router = Router::new().route("/", get(|| async { HELLO }));
    let app = match mode {
        "bare" => router,
        "bare-headers" => {
            let headers = admitted_headers();
            Router::new().route("/", get(move || async move { (headers, HELLO) }))
        }
        "tollgate" => router.layer(layers::tollgate(false)),
        "tollgate-limited" => router.layer(layers::tollgate(true)),
        "governor" => router.layer(layers::governor(false)),
        "governor-headers" => router.layer(layers::governor_with_headers()),
        "governor-limited" => router.layer(layers::governor(true)),
        "tollgate-concurrency" => router.layer(layers::tollgate_concurrency()),
        "tower-concurrency" => router.layer(tower::limit::ConcurrencyLimitLayer::new(1_000)),
        "swc-memory" => router.layer(tollgate::RateLimitLayer::from_rules(swc_rules(None))),
        "swc-settle-memory" => {
            settling().layer(tollgate::RateLimitLayer::from_rules(settle_rules()))
        }
        #[cfg(feature = "redis")]
        "swc-settle-redis" => settling().layer(on_redis(settle_rules()).await),
        #[cfg(feature = "redis")]
        "swc-redis" => router.layer(on_redis(swc_rules(None)).await),
        #[cfg(feature = "redis")]
        "swc-sync" => router.layer(on_redis(swc_rules(Some(SYNC_EVERY))).await),
        #[cfg(feature = "redis")]
        "swc-concurrency-redis" => router.layer(on_redis(swc_and_concurrency_rules()).await),
        _ => return None,
    };
    Some(app)
}

/// The interval of `swc-sync`.
#[cfg(feature = "redis")]
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// One per-IP sliding window counter that limits nothing, local-first every `sync_every`.
fn swc_rules(sync_every: Option<std::time::Duration>) -> tollgate::rules::Rules {
    use tollgate::algorithm::Algorithm;
    use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
    let limit = LimitSpec::per(layers::UNLIMITED_PER_SECOND, Unit::Second)
        .algorithm(Algorithm::SlidingWindowCounter);
    let limit = match sync_every {
        Some(every) => limit.sync_every(every),
        None => limit,
    };
    Rules::builder("bench")
        .descriptor(DescriptorSpec::key("remote_address").rate_limit(limit))
        .build()
        .expect("valid bench rules")
}

/// A handler whose answers say they cost 2 (`x-tokens-used`).
fn settling() -> Router {
    Router::new().route("/", get(|| async { ([("x-tokens-used", "2")], HELLO) }))
}

/// The limit of `swc_rules(None)`, settled from `x-tokens-used`.
fn settle_rules() -> tollgate::rules::Rules {
    let yaml = format!(
        "domain: bench\ndescriptors:\n  - key: remote_address\n    rate_limit: {{ unit: second, requests_per_unit: {}, algorithm: sliding_window_counter, settle: {{ response_header: x-tokens-used }} }}\n",
        layers::UNLIMITED_PER_SECOND
    );
    tollgate::rules::Rules::from_yaml(&yaml).expect("valid bench rules")
}

/// The limit of `swc_rules(None)`, and a per-IP concurrency limit of 1000 beside it.
#[cfg(feature = "redis")]
fn swc_and_concurrency_rules() -> tollgate::rules::Rules {
    use tollgate::algorithm::Algorithm;
    use tollgate::rules::{DescriptorSpec, LimitSpec, Rules, Unit};
    let limit = LimitSpec::per(layers::UNLIMITED_PER_SECOND, Unit::Second)
        .algorithm(Algorithm::SlidingWindowCounter);
    let descriptor = DescriptorSpec::key("remote_address")
        .rate_limit(limit)
        .concurrency(1_000);
    Rules::builder("bench")
        .descriptor(descriptor)
        .build()
        .expect("valid bench rules")
}

/// A layer deciding `rules` in Redis at `TOLLGATE_REDIS_URL`; the process stops when it
/// cannot connect.
#[cfg(feature = "redis")]
async fn on_redis(
    rules: tollgate::rules::Rules,
) -> tollgate::RateLimitLayer<tollgate::store::RedisStore> {
    let url =
        std::env::var("TOLLGATE_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    match tollgate::store::RedisStore::builder(&url).connect().await {
        Ok(store) => tollgate::RateLimitLayer::new(tollgate::Limiter::with_store(rules, store)),
        Err(error) => {
            eprintln!("cannot connect to Redis at {url}: {error}");
            std::process::exit(1);
        }
    }
}

/// The body every mode answers.
const HELLO: &str = "hello, world\n";

/// The `X-Ratelimit-*` headers of an admitted response in `tollgate` mode: its bucket's size,
/// and the room left after one request. Made once and cloned for each response (a reference
/// count each, as tollgate's are), so that the mode measures sending the headers, not making
/// their values (tollgate writes each `X-Ratelimit-Remaining` anew).
fn admitted_headers() -> [(HeaderName, HeaderValue); 2] {
    [
        (
            X_RATELIMIT_LIMIT,
            HeaderValue::from(layers::UNLIMITED_PER_SECOND),
        ),
        (
            X_RATELIMIT_REMAINING,
            HeaderValue::from(layers::UNLIMITED_PER_SECOND - 1),
        ),
    ]
}

async fn serve(app: Router, mode: &str, listen: &str, workers: usize) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("cannot listen on {listen}: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("bench_server: {mode} on http://{listen} ({workers} Tokio worker(s))");
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(error) = axum::serve(listener, service).await {
        eprintln!("server error: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
