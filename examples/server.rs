//! A small demo API behind tollgate.
//!
//! ```text
//! cargo run --example server
//! TOLLGATE_RULES=my-rules.yaml TOLLGATE_LISTEN=0.0.0.0:8080 cargo run --example server
//! TOLLGATE_REDIS_URL=redis://127.0.0.1:6379 cargo run --example server --features redis
//! TOLLGATE_REDIS_CLUSTER=redis://127.0.0.1:7000,redis://127.0.0.1:7001 cargo run --example server --features redis
//! TOLLGATE_REDIS_SENTINEL=mymaster@127.0.0.1:26379,127.0.0.1:26380 cargo run --example server --features redis
//! TOLLGATE_REDIS_URL=rediss://127.0.0.1:6380 TOLLGATE_REDIS_CA=ca.pem cargo run --example server --features redis
//! TOLLGATE_REDIS_URL=rediss://127.0.0.1:6380 TOLLGATE_REDIS_CA=ca.pem TOLLGATE_REDIS_CERT=client.pem TOLLGATE_REDIS_KEY=client.key cargo run --example server --features redis
//! TOLLGATE_RULES=examples/local-first.yaml TOLLGATE_REDIS_URL=redis://127.0.0.1:6379 cargo run --example server --features redis
//! cargo run --example server --features metrics   # and GET /metrics, in Prometheus format
//! ```
//!
//! Every path and method answers 200 (so any rule can be tried with curl); `?delay_ms=N`
//! answers after N ms, and `?work_ms=N` runs the request on a backend of 4 workers (it waits
//! for one, then holds it N ms; both at most 10 s), so that requests stay in flight for the
//! concurrency limits and load shedding to see. `?status=N` answers that status, and
//! `?header=name:value` (repeatable) adds that response header, so that limits on what a
//! response says can be tried too. The limits come from `TOLLGATE_RULES`
//! (default `rules.example.yaml`). A bad rules file stops the server
//! with the compiler's messages. The file is watched: save a change and it takes effect
//! within a second; a bad edit is logged and the previous rules keep serving. With
//! `TOLLGATE_REDIS_URL`, the state lives in Redis, so two instances on two ports share their
//! limits; with `TOLLGATE_REDIS_CLUSTER` (some of its nodes, comma-separated), in a Redis
//! Cluster, spread over its masters; with `TOLLGATE_REDIS_SENTINEL`, in the master that Redis
//! Sentinel names, followed through failovers: the master's name, `@`, and some sentinels,
//! comma-separated, each `host:port` or a URL (`rediss://host:port` over TLS,
//! `redis://:password@host:port` for a sentinel that asks for one). A `rediss://` URL (or
//! node) is reached over TLS, trusting the system's CAs, or the PEM file `TOLLGATE_REDIS_CA`;
//! `TOLLGATE_REDIS_CERT` and `TOLLGATE_REDIS_KEY` (PEM, both or neither) are the client
//! certificate and key for a Redis that asks for one (mutual TLS). Behind sentinels, the
//! master is reached over TLS when the sentinels are, or when these files are given. `examples/local-first.yaml` decides its per-client limit
//! local-first (`sync_every: 100ms`): in memory, agreed through Redis every 100 ms. `/metrics` exists only in builds with the `metrics` feature: without it tollgate
//! measures nothing, and the plain `cargo run --example server` stays lean.

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::Router;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::Semaphore;
use tollgate::reload::RulesWatcher;
use tollgate::rules::Rules;
use tollgate::store::Store;
use tollgate::{Limiter, RateLimitLayer};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt::init();
    // First of all: tollgate registers its metrics with the recorder installed when the
    // limiter is built and when the watcher loads the rules.
    let unlimited = unlimited_routes();
    let rules_path =
        std::env::var("TOLLGATE_RULES").unwrap_or_else(|_| "rules.example.yaml".to_owned());
    let listen = std::env::var("TOLLGATE_LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let rules = match Rules::from_file(&rules_path) {
        Ok(rules) => rules,
        Err(errors) => {
            eprint!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    let limits = rules.limits().len();
    println!("tollgate demo on http://{listen} with {limits} limits from {rules_path}");

    match redis_from_env() {
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
        Ok(Some(redis)) => serve_with_redis(redis, rules, unlimited, &rules_path, &listen).await,
        Ok(None) => {
            println!("state: in memory (set TOLLGATE_REDIS_URL, TOLLGATE_REDIS_CLUSTER or TOLLGATE_REDIS_SENTINEL to share it through Redis)");
            let limiter = Limiter::new(rules);
            #[cfg(feature = "metrics")]
            tokio::spawn(sweep_and_count_keys(limiter.clone()));
            serve(limiter, unlimited, &rules_path, &listen).await
        }
    }
}

/// Where the state lives when it is shared, and the TLS files to reach it with.
struct Redis {
    nodes: Nodes,
    /// `TOLLGATE_REDIS_CA`: the CA to trust instead of the system's.
    ca: Option<String>,
    /// `TOLLGATE_REDIS_CERT` and `TOLLGATE_REDIS_KEY`: a client certificate and its key.
    client_cert: Option<(String, String)>,
}

/// The Redis servers that hold the state.
enum Nodes {
    /// One server's URL.
    Server(String),
    /// Some nodes of a Redis Cluster.
    Cluster(Vec<String>),
    /// The master the sentinels know by that name, and some sentinels' URLs.
    Sentinel {
        master: String,
        sentinels: Vec<String>,
    },
}

/// The Redis the environment names, if any; what is wrong with it, else.
fn redis_from_env() -> Result<Option<Redis>, String> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.trim().is_empty())
    };
    let chosen: Vec<(&str, String)> = [
        "TOLLGATE_REDIS_URL",
        "TOLLGATE_REDIS_CLUSTER",
        "TOLLGATE_REDIS_SENTINEL",
    ]
    .into_iter()
    .filter_map(|name| Some((name, var(name)?)))
    .collect();
    let (ca, cert, key) = (
        var("TOLLGATE_REDIS_CA"),
        var("TOLLGATE_REDIS_CERT"),
        var("TOLLGATE_REDIS_KEY"),
    );
    let client_cert = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err("set both TOLLGATE_REDIS_CERT and TOLLGATE_REDIS_KEY (the client certificate and its key), or neither".to_owned()),
    };
    let nodes = match chosen.as_slice() {
        [] if ca.is_some() || client_cert.is_some() => {
            return Err("TLS files are set (TOLLGATE_REDIS_CA, _CERT, _KEY), but no Redis: set TOLLGATE_REDIS_URL, TOLLGATE_REDIS_CLUSTER or TOLLGATE_REDIS_SENTINEL".to_owned())
        }
        [] => return Ok(None),
        [("TOLLGATE_REDIS_URL", url)] => Nodes::Server(url.trim().to_owned()),
        [("TOLLGATE_REDIS_CLUSTER", nodes)] => Nodes::Cluster(comma_separated(nodes)),
        [("TOLLGATE_REDIS_SENTINEL", setting)] => sentinel_nodes(setting)?,
        _ => {
            let names: Vec<&str> = chosen.iter().map(|(name, _)| *name).collect();
            return Err(format!(
                "set one of TOLLGATE_REDIS_URL (one server), TOLLGATE_REDIS_CLUSTER (a cluster) or TOLLGATE_REDIS_SENTINEL (behind sentinels), not {}",
                names.join(" and ")
            ));
        }
    };
    Ok(Some(Redis {
        nodes,
        ca,
        client_cert,
    }))
}

/// `master@sentinel,sentinel,...`, each sentinel `host:port` or a URL.
fn sentinel_nodes(setting: &str) -> Result<Nodes, String> {
    let usage = "TOLLGATE_REDIS_SENTINEL is the master's name, `@`, and its sentinels, comma-separated: mymaster@127.0.0.1:26379,127.0.0.1:26380";
    let (master, sentinels) = setting
        .split_once('@')
        .ok_or_else(|| format!("{usage} (no `@` in `{setting}`)"))?;
    let sentinels: Vec<String> = comma_separated(sentinels)
        .into_iter()
        .map(|sentinel| {
            if sentinel.contains("://") {
                sentinel
            } else {
                format!("redis://{sentinel}")
            }
        })
        .collect();
    if master.trim().is_empty() || sentinels.is_empty() {
        return Err(format!("{usage} (`{setting}` lacks one)"));
    }
    Ok(Nodes::Sentinel {
        master: master.trim().to_owned(),
        sentinels,
    })
}

/// The non-empty entries of a comma-separated list, trimmed.
fn comma_separated(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(feature = "redis")]
async fn serve_with_redis(
    redis: Redis,
    rules: Rules,
    unlimited: Router,
    rules_path: &str,
    listen: &str,
) -> ExitCode {
    use tollgate::store::RedisStore;
    let (mut builder, described) = match redis.nodes {
        Nodes::Server(url) => {
            let described = format!("in Redis at {url}");
            (RedisStore::builder(url), described)
        }
        Nodes::Cluster(nodes) => {
            let described = format!("in the Redis Cluster of {}", nodes.join(", "));
            (RedisStore::cluster_builder(nodes), described)
        }
        Nodes::Sentinel { master, sentinels } => {
            let described = format!(
                "in the Redis master `{master}` that the sentinels {} name",
                sentinels.join(", ")
            );
            (RedisStore::sentinel_builder(master, sentinels), described)
        }
    };
    if let Some(ca) = redis.ca {
        builder = builder.tls_ca(ca);
    }
    if let Some((cert, key)) = redis.client_cert {
        builder = builder.tls_client_cert(cert, key);
    }
    match builder.connect().await {
        Ok(store) => {
            println!("state: {described}, shared with every instance using it");
            let limiter = Limiter::with_store(rules, store);
            serve(limiter, unlimited, rules_path, listen).await
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "redis"))]
async fn serve_with_redis(
    redis: Redis,
    _rules: Rules,
    _unlimited: Router,
    _rules_path: &str,
    _listen: &str,
) -> ExitCode {
    let setting = match redis.nodes {
        Nodes::Server(url) => format!("TOLLGATE_REDIS_URL={url}"),
        Nodes::Cluster(nodes) => format!("TOLLGATE_REDIS_CLUSTER={}", nodes.join(",")),
        Nodes::Sentinel { master, sentinels } => {
            format!("TOLLGATE_REDIS_SENTINEL={master}@{}", sentinels.join(","))
        }
    };
    let _ = (redis.ca, redis.client_cert);
    eprintln!("{setting} is set, but this build has no Redis support: run with `--features redis`");
    ExitCode::FAILURE
}

/// Serves every path through the limiter, and the `unlimited` routes beside it.
async fn serve<St: Store>(
    limiter: Limiter<St>,
    unlimited: Router,
    rules_path: &str,
    listen: &str,
) -> ExitCode {
    // Kept until the server stops: dropping the watcher stops watching.
    let _watcher = match RulesWatcher::builder(rules_path).watch(limiter.clone()) {
        Ok(watcher) => watcher,
        Err(error) => {
            eprintln!("cannot watch {rules_path}: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("watching {rules_path}: saved changes take effect at once; a bad edit is logged and ignored");
    // Merged after the layer: scraping is not rate limited.
    let app = Router::new()
        .fallback(echo)
        .layer(RateLimitLayer::new(limiter))
        .merge(unlimited);
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("cannot listen on {listen}: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("try:");
    println!("  curl -i http://{listen}/                      # X-Ratelimit-Limit / -Remaining");
    println!("  for i in $(seq 6); do curl -s -o /dev/null -w '%{{http_code}}\\n' -X POST http://{listen}/auth/login; done");
    println!("  curl -i -X DELETE http://{listen}/anything    # always 429 (requests_per_unit: 0)");
    println!("  for i in $(seq 12); do curl -s -o /dev/null -w '%{{http_code}} %{{time_total}}s\\n' http://{listen}/reports & done; wait   # queued, 5 a second");
    println!("  curl -i -H 'x-api-key: internal-ci' http://{listen}/   # never limited");
    println!("  for i in 1 2 3; do curl -s -o /dev/null -w '%{{http_code}}\n' 'http://{listen}/export?delay_ms=2000' & done; wait   # 2 at once per client");
    println!("  for i in $(seq 20); do curl -s -o /dev/null -w '%{{http_code}}\n' -H 'x-priority: sheddable' 'http://{listen}/?work_ms=3000' & done; wait   # 16 run, 4 shed (503)");
    #[cfg(feature = "metrics")]
    println!("  curl http://{listen}/metrics   # tollgate_* in Prometheus format");

    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(error) = axum::serve(listener, service).await {
        eprintln!("server error: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The routes that are not rate limited: `/metrics` in builds with the `metrics` feature,
/// whose recorder this installs.
fn unlimited_routes() -> Router {
    let routes = Router::new();
    #[cfg(feature = "metrics")]
    let routes = routes.route("/metrics", prometheus());
    routes
}

/// Installs the Prometheus recorder and serves what it recorded.
#[cfg(feature = "metrics")]
fn prometheus() -> axum::routing::MethodRouter {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("the only metrics recorder of the process");
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    axum::routing::get(move || std::future::ready(handle.render()))
}

/// Drops idle keys every 10 seconds and reports how many are left (`tollgate_tracked_keys`).
#[cfg(feature = "metrics")]
async fn sweep_and_count_keys(limiter: Limiter) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(10));
    loop {
        every.tick().await;
        limiter.store().sweep();
        limiter.record_tracked_keys();
    }
}

/// The demo's backend: requests with `?work_ms=N` take one of its workers for N ms.
static WORKERS: Semaphore = Semaphore::const_new(4);

/// The longest `delay_ms` or `work_ms`.
const LONGEST: Duration = Duration::from_secs(10);

/// Answers every request with what was asked: after `delay_ms`, and after holding one of the
/// backend's workers for `work_ms`; with the status `status` (200 by default) and each
/// `header=name:value` as a response header. A status or header that cannot be sent is a
/// `400` that says why.
async fn echo(method: Method, uri: Uri) -> (StatusCode, HeaderMap, String) {
    let (status, headers) = match asked_response(&uri) {
        Ok(asked) => asked,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                HeaderMap::new(),
                format!("{error}\n"),
            )
        }
    };
    if let Some(delay) = millis(&uri, "delay_ms") {
        tokio::time::sleep(delay).await;
    }
    if let Some(work) = millis(&uri, "work_ms") {
        // The semaphore is never closed.
        let _worker = WORKERS.acquire().await.ok();
        tokio::time::sleep(work).await;
    }
    (status, headers, format!("{method} {uri}: {status}\n"))
}

/// The status and headers `uri`'s query asks for (`status=N`, `header=name:value`).
fn asked_response(uri: &Uri) -> Result<(StatusCode, HeaderMap), String> {
    let mut status = StatusCode::OK;
    let mut headers = HeaderMap::new();
    for (name, value) in query_pairs(uri) {
        match name {
            "status" => {
                status = value
                    .parse::<u16>()
                    .ok()
                    .and_then(|code| StatusCode::from_u16(code).ok())
                    .ok_or_else(|| format!("status={value}: not a status from 100 to 999"))?;
            }
            "header" => {
                let (header, text) = value
                    .split_once(':')
                    .ok_or_else(|| format!("header={value}: write header=name:value"))?;
                let header = HeaderName::try_from(header.trim())
                    .map_err(|_| format!("header={value}: `{header}` is not a header name"))?;
                let text = HeaderValue::try_from(text.trim())
                    .map_err(|_| format!("header={value}: not a header value"))?;
                headers.append(header, text);
            }
            _ => {}
        }
    }
    Ok((status, headers))
}

/// The `name=value` pairs of `uri`'s query, as written.
fn query_pairs(uri: &Uri) -> impl Iterator<Item = (&str, &str)> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
}

/// The query parameter `name` of `uri` as milliseconds, at most [`LONGEST`].
fn millis(uri: &Uri, name: &str) -> Option<Duration> {
    let (_, value) = query_pairs(uri).find(|&(key, _)| key == name)?;
    let millis = value.parse().ok()?;
    Some(Duration::from_millis(millis).min(LONGEST))
}
