//! `tollgate serve`: Envoy's rate limit service (RLS) API over gRPC, and its HTTP endpoints,
//! deciding with the same rules and `Limiter` as the layer.
//!
//! The rules are compiled with `KeySources::Given`: any descriptor key is accepted, as
//! envoyproxy/ratelimit accepts it, and its values come in each call. The file is watched:
//! saved changes take effect at once, and a bad edit is logged while the rules in force
//! keep serving.
//!
//! With `--admin ADDR`, a third listener serves the [admin](admin) endpoints, peek and
//! reset, which the other two never serve.
//!
//! Start-up goes in this order, so that a probe can always tell where it is: the
//! listeners are bound (a bad or busy address is an error), then the servers answer at
//! once while the service is not [ready](readiness) (`GET /healthcheck`, `POST /json` and
//! the admin endpoints answer `503` with the reason, gRPC calls `UNAVAILABLE`); then the
//! rules are compiled (a mistake is an error), the store connected (a Redis that is not up
//! yet is waited for: see [`store`]), and the service is ready.
//!
//! SIGTERM or Ctrl-C stops it: not ready any more (`503 shutting down`), the servers stop
//! accepting and finish the calls in flight, for at most [`shutdown::GRACE`], then a Redis
//! store sends the counts of its local-first limits, and the process exits with status 0.

mod admin;
mod grpc;
mod http;
mod metadata;
pub(crate) mod proto;
mod readiness;
mod rls;
mod shutdown;
mod store;

use clap::Args;
use grpc::RlsService;
use metrics_exporter_prometheus::PrometheusHandle;
use proto::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use readiness::Readiness;
use rls::Answering;
use shutdown::{Signals, Stop, StopRequest, GRACE};
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use store::{Backing, StoreChoice};
use tokio::net::TcpListener;
use tokio::task::JoinError;
use tollgate::reload::RulesWatcher;
use tollgate::rules::{KeySources, Rules};
use tollgate::store::{MemoryStore, Store};
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
    /// Serve `POST /v1/peek` and `POST /v1/reset` on this address: see and reset a client's
    /// state. Off without it. Anyone who reaches it can reset any client: keep it private.
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
    /// Answers carry dynamic metadata, as envoyproxy/ratelimit's do with this setting: the
    /// call, and the `metadata` of the limits its descriptors passed.
    #[arg(
        long,
        env = "RESPONSE_DYNAMIC_METADATA",
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(),
    )]
    response_dynamic_metadata: bool,
}

impl ServeArgs {
    /// How the service answers, besides its decisions.
    fn answering(&self) -> Answering {
        Answering {
            dynamic_metadata: self.response_dynamic_metadata,
        }
    }
}

/// Runs the service until it fails or is stopped: success when a signal stopped it.
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

/// Binds, starts, serves until a signal and stops (see the module docs).
async fn serve(args: &ServeArgs) -> Result<(), String> {
    let listeners = Listeners::bind(args).await?;
    let store = StoreChoice::new(args.redis.as_deref(), &args.redis_cluster)?;
    let signals = Signals::listen()?;
    // Before the limiter: it registers its metrics when it is built.
    let metrics = http::install_metrics()?;
    println!("tollgate serve: starting; {}", listeners.addresses);
    let service = Service {
        args,
        listeners,
        metrics,
        signals,
    };
    match store {
        StoreChoice::Memory => {
            let store = std::future::ready(MemoryStore::new());
            service.run(Readiness::starting(LOADING), store).await
        }
        StoreChoice::Redis(target) => {
            let readiness = Readiness::starting(LOADING);
            service
                .run(readiness.clone(), target.connect(&readiness))
                .await
        }
    }
}

/// Why the service is not ready at first.
const LOADING: &str = "loading the rules";

/// Where the service listens, as its lines say it: `gRPC on ... and HTTP on ...`, or
/// `gRPC on ..., HTTP on ... and admin on ...`.
#[derive(Clone, Copy)]
struct Addresses {
    /// Of `ShouldRateLimit`.
    grpc: SocketAddr,
    /// Of `POST /json`, `GET /healthcheck` and `GET /metrics`.
    http: SocketAddr,
    /// Of `POST /v1/peek` and `POST /v1/reset`, when served.
    admin: Option<SocketAddr>,
}

impl fmt::Display for Addresses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.admin {
            None => write!(f, "gRPC on {} and HTTP on {}", self.grpc, self.http),
            Some(admin) => write!(
                f,
                "gRPC on {}, HTTP on {} and admin on {admin}",
                self.grpc, self.http
            ),
        }
    }
}

/// The listeners, bound.
struct Listeners {
    grpc: TcpListener,
    http: TcpListener,
    /// Of the admin endpoints, with `--admin`.
    admin: Option<TcpListener>,
    /// Where they are bound (a port 0 asked for is the port the system gave).
    addresses: Addresses,
}

impl Listeners {
    /// Binds the addresses of `args`, before anything else: a bad or busy one is an error.
    async fn bind(args: &ServeArgs) -> Result<Listeners, String> {
        let (grpc, grpc_addr) = listen(args.grpc, "gRPC").await?;
        let (http, http_addr) = listen(args.http, "HTTP").await?;
        let (admin, admin_addr) = match args.admin {
            Some(addr) => {
                let (listener, bound) = listen(addr, "admin").await?;
                (Some(listener), Some(bound))
            }
            None => (None, None),
        };
        Ok(Listeners {
            grpc,
            http,
            admin,
            addresses: Addresses {
                grpc: grpc_addr,
                http: http_addr,
                admin: admin_addr,
            },
        })
    }
}

/// Listens on `addr`, for the `protocol` server: the listener and the address it got.
async fn listen(addr: SocketAddr, protocol: &str) -> Result<(TcpListener, SocketAddr), String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| format!("cannot listen on {addr} ({protocol}): {error}"))?;
    let bound = listener.local_addr().map_err(|error| error.to_string())?;
    Ok((listener, bound))
}

/// The service, listening for calls and for signals, before it starts.
struct Service<'a> {
    args: &'a ServeArgs,
    listeners: Listeners,
    metrics: PrometheusHandle,
    signals: Signals,
}

impl Service<'_> {
    /// Serves at once, starts (the rules, then `store`), decides until a signal, then
    /// stops gracefully.
    async fn run<St: Backing>(
        mut self,
        readiness: Readiness<St>,
        store: impl Future<Output = St>,
    ) -> Result<(), String> {
        let addresses = self.listeners.addresses;
        let stop = Stop::new();
        let mut servers = tokio::spawn(serve_all(
            self.listeners,
            readiness.clone(),
            self.metrics,
            self.args.answering(),
            stop.request(),
        ));
        // Ends only when the service cannot start; else it keeps the rules watched.
        let starting = async {
            match start(self.args, addresses, &readiness, store).await {
                Ok(_watcher) => std::future::pending().await,
                Err(error) => error,
            }
        };
        tokio::select! {
            error = starting => return Err(error),
            served = &mut servers => return Err(stopped_by_itself(outcome(served))),
            signal = self.signals.received() => eprintln!(
                "tollgate serve: {signal}: stopping, finishing the calls in flight \
                 (at most {GRACE:?})"
            ),
        }
        readiness.set_stopping();
        stop.now();
        let drained = match tokio::time::timeout(GRACE, &mut servers).await {
            Ok(served) => outcome(served),
            Err(_) => {
                eprintln!("tollgate serve: calls still in flight after {GRACE:?}: stopping anyway");
                servers.abort();
                Ok(())
            }
        };
        // After the last call: what it admitted is sent too.
        if let Ok(limiter) = readiness.limiter() {
            limiter.store().finish().await;
        }
        drained
    }
}

/// Compiles the rules, connects `store`, and marks the service ready; the watcher of its
/// rules file.
async fn start<St: Backing>(
    args: &ServeArgs,
    addresses: Addresses,
    readiness: &Readiness<St>,
    store: impl Future<Output = St>,
) -> Result<RulesWatcher, String> {
    let rules = Rules::from_file_with(&args.rules, KeySources::Given)
        .map_err(|errors| errors.to_string())?;
    let limiter = Limiter::with_store(rules, store.await);
    // Watching reads the file again: a change saved while the store connected is in force.
    let watcher = watch(&args.rules, limiter.clone())?;
    St::keep_up(&limiter);
    let rules = limiter.rules();
    readiness.set_ready(limiter);
    println!(
        "tollgate serve: domain `{}`, {} limit(s) from {}; {addresses}",
        rules.domain(),
        rules.limits().len(),
        args.rules.display(),
    );
    Ok(watcher)
}

/// Serves gRPC, HTTP and the admin endpoints on `listeners`, answering as `answering`
/// says, until `stop` is made, then finishes the calls in flight.
async fn serve_all<St: Backing>(
    listeners: Listeners,
    readiness: Readiness<St>,
    metrics: PrometheusHandle,
    answering: Answering,
    stop: StopRequest,
) -> Result<(), String> {
    let endpoints = http::router(readiness.clone(), metrics, answering);
    let admin = listeners.admin.map(|listener| {
        axum::serve(listener, admin::router(readiness.clone()))
            .with_graceful_shutdown(stop.clone().made())
    });
    let service = RateLimitServiceServer::new(RlsService::new(readiness, answering));
    // Without TCP_NODELAY, a small answer can wait for a delayed ACK (40 ms).
    let incoming = TcpIncoming::from(listeners.grpc).with_nodelay(Some(true));
    let grpc = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, stop.clone().made());
    let http = axum::serve(listeners.http, endpoints).with_graceful_shutdown(stop.made());
    tokio::try_join!(
        async { grpc.await.map_err(|error| format!("gRPC server: {error}")) },
        async { http.await.map_err(|error| format!("HTTP server: {error}")) },
        async {
            match admin {
                Some(admin) => admin
                    .await
                    .map_err(|error| format!("admin server: {error}")),
                None => Ok(()),
            }
        },
    )
    .map(|_| ())
}

/// How the task of the servers ended: an error if one failed.
fn outcome(served: Result<Result<(), String>, JoinError>) -> Result<(), String> {
    served.map_err(|failed| format!("a server failed: {failed}"))?
}

/// The error of servers that ended with `outcome` though nobody asked them to stop.
fn stopped_by_itself(outcome: Result<(), String>) -> String {
    outcome
        .err()
        .unwrap_or_else(|| "the servers stopped by themselves".to_owned())
}

/// Watches `path` for changes to put in force on `limiter`.
fn watch<St: Store>(path: &Path, limiter: Limiter<St>) -> Result<RulesWatcher, String> {
    RulesWatcher::builder(path)
        .key_sources(KeySources::Given)
        .watch(limiter)
        .map_err(|error| format!("cannot watch {}: {error}", path.display()))
}
