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
mod domains;
mod grpc;
mod http;
mod metadata;
pub(crate) mod proto;
mod readiness;
mod rls;
mod rules_source;
mod settings;
mod shutdown;
mod stats;
mod store;
mod tls;
mod watch;

use clap::Args;
use domains::Domains;
use grpc::RlsService;
use metrics_exporter_prometheus::PrometheusHandle;
use proto::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use readiness::Readiness;
use rls::{Answering, Headers};
use rules_source::RulesSource;
use settings::Upstream;
use shutdown::{Signals, Stop, StopRequest, GRACE};
use stats::{Statsd, StatsdTarget};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use store::{Backing, StoreChoice};
use tls::GrpcTls;
use tokio::net::TcpListener;
use tokio::task::JoinError;
use tollgate::store::MemoryStore;
use tonic::transport::server::TcpIncoming;
use tonic::transport::ServerTlsConfig;
use watch::StoreMaker;

/// Where `tollgate serve` listens, and where its state lives.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The rules (YAML, tollgate's format or an envoyproxy/ratelimit configuration): a
    /// file, or a directory of them, one domain each. Without it, envoyproxy/ratelimit's
    /// directory: `$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY`.
    #[arg(long, value_name = "FILE|DIR")]
    rules: Option<PathBuf>,
    /// Files of one domain in the rules directory merge into one, as
    /// envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`; without it, a second file of a domain
    /// is refused.
    #[arg(
        long,
        env = "MERGE_DOMAIN_CONFIG",
        value_name = "BOOL",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(),
    )]
    merge_domain_config: bool,
    /// The gRPC address of the rate limit service [default: 127.0.0.1:8081; without
    /// `--rules`, `$GRPC_HOST:$GRPC_PORT`, 0.0.0.0:8081 by default, as envoyproxy/ratelimit]
    #[arg(long, value_name = "ADDR")]
    grpc: Option<SocketAddr>,
    /// The HTTP address of `POST /json`, `GET /healthcheck` and `GET /metrics` [default:
    /// 127.0.0.1:8080; without `--rules`, `$HOST:$PORT`, 0.0.0.0:8080 by default]
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
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
    /// Serve gRPC over TLS with this certificate chain (PEM); with `--tls-key`.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Mutual TLS: a gRPC client must show a certificate signed by this CA (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Mutual TLS: a client's certificate must hold this name among its subject
    /// alternative names.
    #[arg(long, value_name = "NAME", requires = "tls_client_ca")]
    tls_client_san: Option<String>,
    /// Send envoyproxy/ratelimit's statistics of each call to this statsd server
    /// (HOST:PORT, over UDP), under its names.
    #[arg(long, value_name = "HOST:PORT")]
    statsd: Option<String>,
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
    /// Where the rules are: `--rules`, or envoyproxy/ratelimit's directory.
    fn rules_source(&self) -> RulesSource {
        let path = self.rules.clone().unwrap_or_else(runtime_directory);
        RulesSource::at(path, self.merge_domain_config)
    }

    /// envoyproxy/ratelimit's settings, from the environment, when started without
    /// `--rules`: as a drop-in for its container.
    fn upstream(&self) -> Option<Upstream> {
        self.rules.is_none().then(Upstream::from_env)
    }

    /// How the service answers, besides its decisions: with `upstream`'s headers and
    /// statistics.
    fn answering(&self, upstream: Option<&Upstream>) -> Result<Answering, String> {
        let statsd = match (&self.statsd, upstream) {
            (Some(address), _) => {
                let (host, port) = address
                    .rsplit_once(':')
                    .and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?)))
                    .ok_or_else(|| format!("--statsd {address}: write HOST:PORT"))?;
                let tags = BTreeMap::new();
                Some(StatsdTarget { host, port, tags })
            }
            (None, Some(upstream)) => upstream.statsd()?,
            (None, None) => None,
        };
        let statsd = statsd
            .map(|target| Statsd::new(&target).map(Arc::new))
            .transpose()?;
        Ok(Answering {
            dynamic_metadata: self.response_dynamic_metadata,
            headers: upstream.map_or(Ok(Headers::Rules), Upstream::headers)?,
            statsd,
        })
    }

    /// The gRPC listener's TLS: the flags', else `upstream`'s settings'.
    fn grpc_tls(&self, upstream: Option<&Upstream>) -> Result<Option<GrpcTls>, String> {
        match (&self.tls_cert, &self.tls_key, upstream) {
            (Some(cert), Some(key), _) => Ok(Some(GrpcTls {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
                client_san: self.tls_client_san.clone(),
            })),
            (_, _, Some(upstream)) => upstream.grpc_tls(),
            _ => Ok(None),
        }
    }

    /// The address of the `flag` given, else `upstream`'s `host` and `port`, else
    /// `default` (a loopback address).
    fn address(
        flag: Option<SocketAddr>,
        upstream: Option<&Upstream>,
        (host, port): (&str, &str),
        default: SocketAddr,
    ) -> Result<SocketAddr, String> {
        match (flag, upstream) {
            (Some(addr), _) => Ok(addr),
            (None, Some(upstream)) => upstream.listen(host, port, default.port()),
            (None, None) => Ok(default),
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
    let upstream = args.upstream();
    if let Some(upstream) = &upstream {
        for notice in upstream.unsupported()? {
            println!("tollgate serve: {notice}");
        }
    }
    let answering = args.answering(upstream.as_ref())?;
    let tls = args.grpc_tls(upstream.as_ref())?;
    // Read now: a missing file stops the start, before anything listens.
    let tls_config = tls.as_ref().map(GrpcTls::server_config).transpose()?;
    let shadow = upstream
        .as_ref()
        .map(Upstream::shadow_mode)
        .transpose()?
        .unwrap_or(false);
    let listeners = Listeners::bind(args, upstream.as_ref()).await?;
    let flags = args.redis.is_some() || !args.redis_cluster.is_empty();
    let store = match &upstream {
        Some(upstream) if !flags => {
            let (target, options) = upstream.store()?;
            StoreChoice::of(target, options)?
        }
        _ => StoreChoice::new(args.redis.as_deref(), &args.redis_cluster)?,
    };
    let signals = Signals::listen()?;
    // Before the limiter: it registers its metrics when it is built.
    let metrics = http::install_metrics()?;
    println!("tollgate serve: starting; {}", listeners.addresses);
    let service = Service {
        args,
        listeners,
        metrics,
        signals,
        answering,
        shadow,
        tls: tls_config.map(|config| (config, tls.and_then(|tls| tls.client_san))),
    };
    match store {
        StoreChoice::Memory => {
            let store = std::future::ready(Ok(MemoryStore::new()));
            service.run(Readiness::starting(LOADING), store).await
        }
        StoreChoice::Redis(target, options) => {
            let readiness = Readiness::starting(LOADING);
            service
                .run(readiness.clone(), target.connect(&options, &readiness))
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
    /// Binds the addresses of `args` (or of `upstream`'s settings), before anything else:
    /// a bad or busy one is an error.
    async fn bind(args: &ServeArgs, upstream: Option<&Upstream>) -> Result<Listeners, String> {
        let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let grpc = ServeArgs::address(
            args.grpc,
            upstream,
            ("GRPC_HOST", "GRPC_PORT"),
            loopback(8081),
        )?;
        let http = ServeArgs::address(args.http, upstream, ("HOST", "PORT"), loopback(8080))?;
        let (grpc, grpc_addr) = listen(grpc, "gRPC").await?;
        let (http, http_addr) = listen(http, "HTTP").await?;
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
    /// How it answers, besides its decisions.
    answering: Answering,
    /// Whether every limit only reports (`SHADOW_MODE`).
    shadow: bool,
    /// The gRPC listener's TLS, and the name a client's certificate must hold.
    tls: Option<(ServerTlsConfig, Option<String>)>,
}

impl Service<'_> {
    /// Serves at once, starts (the rules, then `store`), decides until a signal, then
    /// stops gracefully.
    async fn run<St: Backing>(
        mut self,
        readiness: Readiness<St>,
        store: impl Future<Output = Result<St, String>>,
    ) -> Result<(), String> {
        let addresses = self.listeners.addresses;
        let statsd = self.answering.statsd.clone();
        let stop = Stop::new();
        let mut servers = tokio::spawn(serve_all(
            self.listeners,
            readiness.clone(),
            self.metrics,
            self.answering,
            self.tls,
            stop.request(),
        ));
        // Ends only when the service cannot start; else it keeps the rules watched.
        let starting = async {
            let loading = Loading {
                shadow: self.shadow,
                statsd,
            };
            match start(self.args, addresses, &readiness, store, loading).await {
                Ok(()) => std::future::pending().await,
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
        if let Ok(domains) = readiness.domains() {
            for (_, limiter) in domains.limiters() {
                limiter.store().finish().await;
            }
        }
        drained
    }
}

/// How the rules are put in force.
struct Loading {
    /// Whether every limit only reports (`SHADOW_MODE`).
    shadow: bool,
    /// Where each load of the rules is counted, if anywhere.
    statsd: Option<Arc<Statsd>>,
}

/// Compiles the rules, connects `store`, marks the service ready (every limit only
/// reporting when `loading.shadow`), and keeps the rules watched.
async fn start<St: Backing + 'static>(
    args: &ServeArgs,
    addresses: Addresses,
    readiness: &Readiness<St>,
    store: impl Future<Output = Result<St, String>>,
    loading: Loading,
) -> Result<(), String> {
    let source = args.rules_source();
    let loaded = source.load();
    if let Some(statsd) = &loading.statsd {
        statsd.config_loaded(loaded.failed.is_empty());
    }
    if !loaded.failed.is_empty() {
        let failed: Vec<String> = loaded
            .failed
            .into_iter()
            .map(|(_, errors)| errors)
            .collect();
        return Err(failed.join("\n"));
    }
    let store = store.await?;
    let make: StoreMaker<St> = Arc::new(move || store.for_another_domain());
    let domains = Domains::new(loaded, || make(), loading.shadow);
    // Watching reads the files again: a change saved while the store connected is in force.
    watch::watch(source.clone(), domains.clone(), make, loading.statsd);
    St::keep_up(&domains);
    let served = domains.limiters();
    readiness.set_ready(domains);
    if served.is_empty() {
        println!(
            "tollgate serve: no domain in {} yet; {addresses}",
            source.path().display()
        );
    }
    for (domain, limiter) in served {
        println!(
            "tollgate serve: domain `{domain}`, {} limit(s) from {}; {addresses}",
            limiter.rules().limits().len(),
            source.path().display(),
        );
    }
    Ok(())
}

/// envoyproxy/ratelimit's rules directory, from its settings:
/// `$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY` (by default
/// `/srv/runtime_data/current/config`).
fn runtime_directory() -> PathBuf {
    let setting =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    PathBuf::from(setting("RUNTIME_ROOT", "/srv/runtime_data/current"))
        .join(setting("RUNTIME_SUBDIRECTORY", ""))
        .join(setting("RUNTIME_APPDIRECTORY", "config"))
}

/// Serves gRPC (over `tls` when given, a client's certificate holding its name when one is
/// given), HTTP and the admin endpoints on `listeners`, answering as `answering` says,
/// until `stop` is made, then finishes the calls in flight.
async fn serve_all<St: Backing>(
    listeners: Listeners,
    readiness: Readiness<St>,
    metrics: PrometheusHandle,
    answering: Answering,
    tls: Option<(ServerTlsConfig, Option<String>)>,
    stop: StopRequest,
) -> Result<(), String> {
    let endpoints = http::router(readiness.clone(), metrics, answering.clone());
    let admin = listeners.admin.map(|listener| {
        axum::serve(listener, admin::router(readiness.clone()))
            .with_graceful_shutdown(stop.clone().made())
    });
    let (tls, san) = tls.unzip();
    let san = san.flatten();
    let service = RateLimitServiceServer::with_interceptor(
        RlsService::new(readiness, answering),
        move |request| match &san {
            Some(san) => tls::require_san(request, san),
            None => Ok(request),
        },
    );
    // Without TCP_NODELAY, a small answer can wait for a delayed ACK (40 ms).
    let incoming = TcpIncoming::from(listeners.grpc).with_nodelay(Some(true));
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder
            .tls_config(tls)
            .map_err(|error| format!("gRPC over TLS: {error}"))?;
    }
    let grpc = builder
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
