//! `tollgate serve`: Envoy's rate limit service (RLS) API over gRPC, and its HTTP endpoints,
//! deciding with the same rules and `Limiter` as the layer.
//!
//! The rules are compiled with `KeySources::Given`: any descriptor key is accepted, as
//! envoyproxy/ratelimit accepts it, and its values come in each call. The file is watched:
//! saved changes take effect at once, and a bad edit is logged while the rules in force
//! keep serving.

mod grpc;
mod http;
pub(crate) mod proto;
mod rls;

use clap::Args;
use grpc::RlsService;
use http::Readiness;
use metrics_exporter_prometheus::PrometheusHandle;
use proto::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tokio::net::TcpListener;
use tollgate::reload::RulesWatcher;
use tollgate::rules::{KeySources, Rules};
use tollgate::store::{MemoryStore, RedisStore, Store};
use tollgate::Limiter;
use tonic::transport::server::TcpIncoming;

/// Where `tollgate serve` listens, and where its state lives.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The rules file (YAML): tollgate's format, or an envoyproxy/ratelimit configuration.
    #[arg(long, value_name = "FILE")]
    rules: PathBuf,
    /// The gRPC address of the rate limit service.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    grpc: SocketAddr,
    /// The HTTP address of `POST /json`, `GET /healthcheck` and `GET /metrics`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// Keep the state in this Redis server (redis://HOST:PORT), shared with every instance
    /// using it; in memory without.
    #[arg(long, value_name = "URL", conflicts_with = "redis_cluster")]
    redis: Option<String>,
    /// Keep the state in this Redis Cluster: some of its nodes, comma-separated.
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    redis_cluster: Vec<String>,
}

/// Runs the service until it fails or is stopped.
pub(crate) fn run(args: &ServeArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match serve(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn serve(args: &ServeArgs) -> Result<(), String> {
    // Before the limiter: it registers its metrics when it is built.
    let metrics = http::install_metrics()?;
    let rules = Rules::from_file_with(&args.rules, KeySources::Given)
        .map_err(|errors| errors.to_string())?;
    let redis = match (&args.redis, args.redis_cluster.as_slice()) {
        (Some(url), _) => Some(RedisStore::builder(url.clone())),
        (None, []) => None,
        (None, nodes) => Some(RedisStore::cluster_builder(nodes.to_vec())),
    };
    match redis {
        None => {
            let limiter = Limiter::with_store(rules, MemoryStore::new());
            tokio::spawn(sweep(limiter.clone()));
            serve_with(limiter, metrics, args).await
        }
        Some(builder) => {
            let store = builder.connect().await.map_err(|error| error.to_string())?;
            serve_with(Limiter::with_store(rules, store), metrics, args).await
        }
    }
}

/// Serves the rate limit service with `limiter`, over gRPC and HTTP, watching its rules file.
async fn serve_with<St: Store>(
    limiter: Limiter<St>,
    metrics: PrometheusHandle,
    args: &ServeArgs,
) -> Result<(), String> {
    // Kept while serving: dropping the watcher stops watching.
    let _watcher = watch(&args.rules, limiter.clone())?;
    let (grpc, grpc_addr) = listen(args.grpc, "gRPC").await?;
    let (http, http_addr) = listen(args.http, "HTTP").await?;
    let readiness = Readiness::default();
    readiness.set_ready();
    println!(
        "tollgate serve: domain `{}`, {} limit(s) from {}; gRPC on {grpc_addr} and HTTP on {http_addr}",
        limiter.rules().domain(),
        limiter.rules().limits().len(),
        args.rules.display()
    );
    let endpoints = http::router(limiter.clone(), readiness, metrics);
    let service = RateLimitServiceServer::new(RlsService::new(limiter));
    let grpc = async {
        tonic::transport::Server::builder()
            .add_service(service)
            // Without TCP_NODELAY, a small answer can wait for a delayed ACK (40 ms).
            .serve_with_incoming(TcpIncoming::from(grpc).with_nodelay(Some(true)))
            .await
            .map_err(|error| format!("gRPC server: {error}"))
    };
    let http = async {
        axum::serve(http, endpoints)
            .await
            .map_err(|error| format!("HTTP server: {error}"))
    };
    tokio::try_join!(grpc, http).map(|_| ())
}

/// Listens on `addr`, for the `protocol` server: the listener and the address it got.
async fn listen(addr: SocketAddr, protocol: &str) -> Result<(TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| format!("cannot listen on {addr} ({protocol}): {error}"))?;
    let bound = listener.local_addr().map_err(|error| error.to_string())?;
    Ok((listener, bound))
}

/// How often the memory store forgets its idle keys and counts the ones it keeps.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Forgets the memory store's idle keys, and sets `tollgate_tracked_keys`, every
/// [`SWEEP_EVERY`]: without it, memory grows with every client ever seen.
async fn sweep(limiter: Limiter<MemoryStore>) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    loop {
        every.tick().await;
        limiter.store().sweep();
        limiter.record_tracked_keys();
    }
}

/// Watches `path` for changes to put in force on `limiter`.
fn watch<St: Store>(path: &Path, limiter: Limiter<St>) -> Result<RulesWatcher, String> {
    RulesWatcher::builder(path)
        .key_sources(KeySources::Given)
        .watch(limiter)
        .map_err(|error| format!("cannot watch {}: {error}", path.display()))
}
