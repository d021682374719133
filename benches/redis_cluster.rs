//! The Redis store on a Redis Cluster: how keys spread over the masters, decisions per second
//! on one server and on a cluster, and what a request whose limits span two slots costs.
//!
//! The bench starts its own servers with the test harness (`tests/common/redis_server.rs`):
//! one `redis-server` (`RedisServer::start()`), and a Redis Cluster of 3 masters without
//! replicas (`RedisCluster::start(3)`), each on free loopback ports with `--save ""
//! --appendonly no`. It decides requests through the public API only:
//! `Limiter::with_store(rules, store)` on `RedisStore::builder(url)` or
//! `RedisStore::cluster_builder(urls)`, both with `.over_limit_cache(false)` (every check
//! reaches Redis) and the default 50 ms timeout, and `limiter.check(values, 1)`. The rules deny
//! on a store error, and the bench tells a store error (`Denial::StoreError`) from a limit's
//! denial. Decisions per second and latencies count the checks Redis decided; store errors (a
//! call past the timeout, or none at all for a second after 5 failures in a row, while the
//! circuit breaker is open) are counted apart and reported, and so are verdicts other than
//! the one a run expects.
//!
//! 1. **Key share per master.** 10,000 users (`user-00000` to `user-09999`), one request each,
//!    under one per-user token bucket, through the cluster store: each master's `DBSIZE` as a
//!    share of all the keys. The goal is 33 % ± 3 % on every master.
//! 2. **Decisions per second.** The workload of `redis_checks`: that per-user token bucket (1
//!    per minute with a burst of 1,000,000, so every request is admitted and every call
//!    rewrites an existing key) over the 10,000 users, picked pseudo-randomly, all of whose
//!    keys exist before measuring; at concurrency 1, 8 and 64, that many tokio tasks looping
//!    on `check` (a multi-thread runtime, one worker per CPU) for 2 s after 0.5 s of warm-up.
//!    The single server sends the requests that wait for its busy connection together, several
//!    in one call; the cluster makes one call a request (one call's keys share a slot).
//!    The single server and the cluster alternate (single, cluster, single, ...) for 3 rounds;
//!    the tables show each one's median round by rate, with that round's p50/p99 latency.
//!    Client and servers share the machine's CPUs, nothing pinned: on a machine with few CPUs
//!    the cluster's three servers compete with each other and with the client, and cannot
//!    show what they gain on machines of their own. So the bench also reports each run's Redis
//!    CPU time per decision, summed over the servers, and each master's share of it (user +
//!    system time from `/proc/<pid>/stat`, the pid from `INFO server`): that shows the load
//!    spreading. The client's CPU time (this process's) is reported too.
//! 3. **Two-slot requests**, on the cluster at concurrency 1, each request with a user and a
//!    tenant value (the user picked pseudo-randomly as above): (a) one slot: a per-user limit
//!    with a per-user-and-tenant limit nested in it, both tagged by the user, so one slot and
//!    one `FCALL`; (b) two slots: a per-user and a per-tenant limit, two tags, so two
//!    `FCALL`s sent together; (c) two slots, denied: as (b) with the tenant's limit used up,
//!    so the tenant's slot denies, the user's admits and is refunded: two acquire calls, then
//!    one refund call, three `FCALL`s. 100 tenants in (a) and (b), one in (c); every limit
//!    but (c)'s tenant limit admits everything. For reference, the per-user limit alone (the
//!    workload of 2.) runs with them: what a second limit in the same call costs. `FCALL`
//!    calls per request: the sum over the masters of `INFO commandstats` after `CONFIG
//!    RESETSTAT`, over the run's requests (refund calls are `FCALL`s too). 3 rounds of
//!    (reference), (a), (b), (c), 2 s each after 0.5 s of warm-up; each one's median round.
//!
//! The whole bench takes about a minute and a half.
//!
//! Run it with:
//!
//! ```text
//! cargo bench --features redis --bench redis_cluster
//! ```
//!
//! It prints the machine, the date and markdown tables. It needs `redis-server` and
//! `redis-cli` (which creates the cluster) on the `PATH`: `apt-get install redis-server`
//! brings both, and `scripts/test.sh` installs them.

#[path = "common/machine.rs"]
mod machine;
// The test harness's servers and cluster, of which the bench uses a few helpers.
#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

use machine::{cpu_model, memory_total, utc_now};
use redis_server::{RedisCluster, RedisServer, SLOTS};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tollgate::rules::Rules;
use tollgate::store::RedisStore;
use tollgate::{Denial, Limiter};

/// Tasks looping on `check`, for decisions per second.
const CONCURRENCIES: [usize; 3] = [1, 8, 64];
/// Distinct users (clients) of every workload.
const USERS: usize = 10_000;
/// Distinct tenants of the two-limit requests that admit everything.
const TENANTS: usize = 100;
/// The two-limit request in one slot, among the two-slot comparison's cases, whose latency
/// the others' is compared with.
const ONE_SLOT_CASE: usize = 1;
/// Masters of the cluster.
const MASTERS: usize = 3;
/// Rounds of each comparison; the tables report each one's median round.
const ROUNDS: usize = 3;
/// How long each run lasts, after its warm-up.
const MEASURE: Duration = Duration::from_secs(2);
const WARM_UP: Duration = Duration::from_millis(500);
/// Tasks that make the one request per client that creates the keys.
const FILL_TASKS: usize = 16;
/// The goal for each master's share of the keys, and how far from it a share may be, in %.
const SHARE_GOAL: f64 = 100.0 / MASTERS as f64;
const SHARE_TOLERANCE: f64 = 3.0;

/// One per-user limit under which every request is admitted (as in `redis_checks`).
const PER_USER: &str = r#"
domain: bench
defaults: { on_store_error: deny }
sources:
  user: { header: x-user }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, burst: 1000000, algorithm: token_bucket }
"#;

/// A per-user limit and, nested in it, a per-user-and-tenant limit: both tagged by the user
/// (the first varying value of the walk), so one slot.
const ONE_SLOT: &str = r#"
domain: one-slot
defaults: { on_store_error: deny }
sources:
  user: { header: x-user }
  tenant: { header: x-tenant }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, burst: 1000000, algorithm: token_bucket }
    descriptors:
      - key: tenant
        rate_limit: { unit: minute, requests_per_unit: 1, burst: 1000000, algorithm: token_bucket }
"#;

/// A per-user and a per-tenant limit: tagged by the user and by the tenant, so two slots.
const TWO_SLOTS: &str = r#"
domain: two-slots
defaults: { on_store_error: deny }
sources:
  user: { header: x-user }
  tenant: { header: x-tenant }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, burst: 1000000, algorithm: token_bucket }
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 1, burst: 1000000, algorithm: token_bucket }
"#;

/// As [`TWO_SLOTS`], with a tenant limit of 1 an hour: once used up, the tenant's slot
/// denies every request and the user's slot, which admitted it, is refunded.
const TWO_SLOTS_TENANT_FULL: &str = r#"
domain: tenant-full
defaults: { on_store_error: deny }
sources:
  user: { header: x-user }
  tenant: { header: x-tenant }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, burst: 1000000, algorithm: token_bucket }
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 1, algorithm: token_bucket }
"#;

// ---------------------------------------------------------------------------------------
// Servers, their statistics and their CPU time
// ---------------------------------------------------------------------------------------

/// Exits with a clear message unless `tool` runs.
fn require(tool: &str) {
    if let Err(error) = Command::new(tool).arg("--version").output() {
        eprintln!(
            "redis_cluster: cannot run `{tool}` ({error}). This bench starts its own redis-server \
             and Redis Cluster: install Redis (`apt-get install redis-server`, which brings \
             redis-cli; scripts/test.sh does it) and run it again."
        );
        std::process::exit(1);
    }
}

/// Redis servers measured together: the single server, or the cluster's masters.
struct Servers<'a> {
    nodes: Vec<Node<'a>>,
}

/// One server of [`Servers`], with its process id.
struct Node<'a> {
    server: &'a RedisServer,
    pid: u32,
}

/// Commands that `INFO commandstats` counts besides `FCALL` and that the bench expects:
/// the bench's own (to reset and read the statistics), and those the store's scripts call
/// (Redis 7 counts a script's commands too). Any other is reported.
const EXPECTED_COMMANDS: [&str; 6] = ["info", "config|resetstat", "time", "get", "set", "del"];

impl<'a> Servers<'a> {
    fn new(servers: impl IntoIterator<Item = &'a RedisServer>) -> Self {
        let nodes = servers
            .into_iter()
            .map(|server| {
                let info = server.cli(&["INFO", "server"]).unwrap_or_default();
                let pid = info
                    .lines()
                    .find_map(|line| line.trim().strip_prefix("process_id:"))
                    .and_then(|pid| pid.parse().ok())
                    .unwrap_or_else(|| {
                        panic!("INFO server names the process id on port {}", server.port())
                    });
                Node { server, pid }
            })
            .collect();
        Servers { nodes }
    }

    /// `CONFIG RESETSTAT` on every server: `INFO commandstats` counts from zero.
    fn reset_stats(&self) {
        for node in &self.nodes {
            let reply = node.server.cli(&["CONFIG", "RESETSTAT"]);
            assert_eq!(
                reply.as_deref().map(str::trim),
                Some("OK"),
                "CONFIG RESETSTAT on port {}",
                node.server.port()
            );
        }
    }

    /// Each server's CPU time so far.
    fn cpu(&self, ticks_per_second: u64) -> Vec<Duration> {
        self.nodes
            .iter()
            .map(|node| process_cpu(&format!("/proc/{}/stat", node.pid), ticks_per_second))
            .collect()
    }

    /// Each server's calls per command since the last [`Servers::reset_stats`].
    fn commands(&self) -> Vec<BTreeMap<String, u64>> {
        self.nodes
            .iter()
            .map(|node| node.server.command_stats())
            .collect()
    }
}

/// Clock ticks per second of the CPU times in `/proc` (`getconf CLK_TCK`, else 100).
fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8_lossy(&output.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// User + system CPU time of a process, from its `/proc/<pid>/stat` (zero if unreadable).
fn process_cpu(stat_path: &str, ticks_per_second: u64) -> Duration {
    let stat = std::fs::read_to_string(stat_path).unwrap_or_default();
    // After the command name, which is in parentheses: state is field 3, utime and stime
    // are fields 14 and 15.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .map(|field| field.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / ticks_per_second as f64)
}

// ---------------------------------------------------------------------------------------
// The workloads
// ---------------------------------------------------------------------------------------

/// Who sends a request: a user, and the tenant that user belongs to.
struct Client {
    user: String,
    tenant: String,
}

/// The 10,000 users, each in the tenant `tenant_of(user's index)`.
fn clients(tenant_of: impl Fn(usize) -> String) -> Arc<Vec<Client>> {
    Arc::new(
        (0..USERS)
            .map(|i| Client {
                user: format!("user-{i:05}"),
                tenant: tenant_of(i),
            })
            .collect(),
    )
}

/// Which of a client's values a request carries.
#[derive(Debug, Clone, Copy)]
enum Values {
    User,
    UserAndTenant,
}

impl Values {
    async fn check(self, limiter: &Limiter<RedisStore>, client: &Client) -> tollgate::Verdict {
        match self {
            Values::User => limiter.check(&[("user", client.user.as_str())], 1).await,
            Values::UserAndTenant => {
                let values = [
                    ("user", client.user.as_str()),
                    ("tenant", client.tenant.as_str()),
                ];
                limiter.check(&values, 1).await
            }
        }
    }
}

/// The verdict every request of a run should get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Admitted,
    OverLimit,
}

/// What the tasks of one run saw.
struct Tally {
    /// The latency of each check Redis decided.
    latencies: Vec<Duration>,
    /// Checks the store failed (denied by `on_store_error: deny`): a call past the timeout,
    /// or none at all while the circuit breaker is open. Not decisions, and not in
    /// `latencies`: a check failed by an open breaker takes no time.
    store_errors: u64,
    /// Other verdicts than the expected one (store errors aside).
    unexpected: u64,
    elapsed: Duration,
}

/// A small pseudo-random sequence (xorshift64*), so that tasks spread over the clients.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// `concurrency` tasks checking pseudo-random clients until `duration` is over.
async fn drive(
    limiter: &Limiter<RedisStore>,
    clients: &Arc<Vec<Client>>,
    values: Values,
    expect: Expect,
    concurrency: usize,
    duration: Duration,
) -> Tally {
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let limiter = limiter.clone();
            let clients = Arc::clone(clients);
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(100_000);
                let (mut store_errors, mut unexpected) = (0_u64, 0_u64);
                let mut random = 0x9e37_79b9_7f4a_7c15_u64 ^ (task as u64 + 1);
                while Instant::now() < deadline {
                    let client =
                        &clients[(next_random(&mut random) % clients.len() as u64) as usize];
                    let began = Instant::now();
                    let verdict = values.check(&limiter, client).await;
                    let latency = began.elapsed();
                    match verdict.denial() {
                        Some(Denial::StoreError) => store_errors += 1,
                        denial => {
                            latencies.push(latency);
                            let over_limit = denial == Some(Denial::OverLimit);
                            unexpected += u64::from(over_limit != (expect == Expect::OverLimit));
                        }
                    }
                }
                (latencies, store_errors, unexpected)
            })
        })
        .collect();
    let mut tally = Tally {
        latencies: Vec::new(),
        store_errors: 0,
        unexpected: 0,
        elapsed: Duration::ZERO,
    };
    for task in tasks {
        let (mut latencies, store_errors, unexpected) = task.await.expect("a bench task ends");
        tally.latencies.append(&mut latencies);
        tally.store_errors += store_errors;
        tally.unexpected += unexpected;
    }
    tally.elapsed = start.elapsed();
    tally
}

/// One request per client, [`FILL_TASKS`] at a time, so that their keys exist: how many
/// were admitted, and how many failed in the store.
async fn fill(
    limiter: &Limiter<RedisStore>,
    clients: &Arc<Vec<Client>>,
    values: Values,
) -> (u64, u64) {
    let tasks: Vec<_> = (0..FILL_TASKS)
        .map(|task| {
            let limiter = limiter.clone();
            let clients = Arc::clone(clients);
            tokio::spawn(async move {
                let (mut admitted, mut store_errors) = (0_u64, 0_u64);
                for client in clients.iter().skip(task).step_by(FILL_TASKS) {
                    let verdict = values.check(&limiter, client).await;
                    admitted += u64::from(verdict.is_allowed());
                    store_errors += u64::from(verdict.denial() == Some(Denial::StoreError));
                }
                (admitted, store_errors)
            })
        })
        .collect();
    let (mut admitted, mut store_errors) = (0, 0);
    for task in tasks {
        let (task_admitted, task_errors) = task.await.expect("a fill task ends");
        admitted += task_admitted;
        store_errors += task_errors;
    }
    (admitted, store_errors)
}

/// Checks what [`fill`] answered: `expected` requests admitted, unless some failed in the
/// store (then their keys may be missing, which the key counts show: a warning, not a stop).
fn check_fill(label: &str, (admitted, store_errors): (u64, u64), expected: u64) {
    if store_errors > 0 {
        eprintln!(
            "warning: filling {label}: {store_errors} of {USERS} requests failed in the store; is something else using the CPUs?"
        );
    } else {
        assert_eq!(admitted, expected, "filling {label}: requests admitted");
    }
}

// ---------------------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------------------

/// What one run measured.
struct Run {
    /// Checks Redis decided (store errors aside).
    decided: u64,
    /// Decided checks per second.
    per_second: f64,
    /// Latencies of the decided checks.
    p50: Duration,
    p99: Duration,
    store_errors: u64,
    unexpected: u64,
    /// CPU time of this process over the run.
    client_cpu: Duration,
    /// CPU time of each server over the run.
    server_cpu: Vec<Duration>,
    /// The store's calls (`FCALL`) on each server over the run.
    calls: Vec<u64>,
    /// Other commands the servers ran over the run, summed (see [`EXPECTED_COMMANDS`]).
    other_commands: BTreeMap<String, u64>,
}

impl Run {
    fn server_cpu_total(&self) -> Duration {
        self.server_cpu.iter().sum()
    }

    fn calls_per_request(&self) -> f64 {
        self.calls.iter().sum::<u64>() as f64 / self.decided.max(1) as f64
    }
}

/// What a run decides: a limiter, the clients it picks from, what their requests carry and
/// the verdict they should get.
struct Workload<'a> {
    limiter: &'a Limiter<RedisStore>,
    clients: &'a Arc<Vec<Client>>,
    values: Values,
    expect: Expect,
}

/// Measures `workload` at `concurrency` on `servers`: a warm-up, then [`MEASURE`] long.
fn measure(
    servers: &Servers<'_>,
    runtime: &tokio::runtime::Runtime,
    workload: &Workload<'_>,
    concurrency: usize,
    ticks_per_second: u64,
) -> Run {
    let Workload {
        limiter,
        clients,
        values,
        expect,
    } = *workload;
    runtime.block_on(drive(
        limiter,
        clients,
        values,
        expect,
        concurrency,
        WARM_UP,
    ));
    servers.reset_stats();
    let client_before = process_cpu("/proc/self/stat", ticks_per_second);
    let servers_before = servers.cpu(ticks_per_second);
    let mut tally = runtime.block_on(drive(
        limiter,
        clients,
        values,
        expect,
        concurrency,
        MEASURE,
    ));
    let client_cpu = process_cpu("/proc/self/stat", ticks_per_second).saturating_sub(client_before);
    let server_cpu = servers
        .cpu(ticks_per_second)
        .into_iter()
        .zip(servers_before)
        .map(|(after, before)| after.saturating_sub(before))
        .collect();
    let commands = servers.commands();
    // The store's calls: FCALL, or EVALSHA on a Redis without functions.
    let store_calls = ["fcall", "evalsha"];
    let calls = commands
        .iter()
        .map(|stats| store_calls.iter().filter_map(|c| stats.get(*c)).sum())
        .collect();
    let mut other_commands = BTreeMap::new();
    for (command, calls) in commands.into_iter().flatten() {
        if !store_calls.contains(&command.as_str())
            && !EXPECTED_COMMANDS.contains(&command.as_str())
        {
            *other_commands.entry(command).or_insert(0) += calls;
        }
    }
    tally.latencies.sort_unstable();
    let decided = tally.latencies.len() as u64;
    Run {
        decided,
        per_second: decided as f64 / tally.elapsed.as_secs_f64(),
        p50: percentile(&tally.latencies, 50),
        p99: percentile(&tally.latencies, 99),
        store_errors: tally.store_errors,
        unexpected: tally.unexpected,
        client_cpu,
        server_cpu,
        calls,
        other_commands,
    }
}

/// The `percent`th percentile of sorted latencies (zero for none).
fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    let at = (sorted.len() * percent / 100).min(sorted.len().saturating_sub(1));
    sorted.get(at).copied().unwrap_or_default()
}

/// The run of median rate.
fn median(runs: &[Run]) -> &Run {
    let mut by_rate: Vec<&Run> = runs.iter().collect();
    by_rate.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
    by_rate[by_rate.len() / 2]
}

/// Every round's rate and p99, and its store errors if any, for the record.
fn rounds(runs: &[Run]) -> String {
    runs.iter()
        .map(|run| {
            let errors = match run.store_errors {
                0 => String::new(),
                errors => format!("; {} store errors", with_thousands(errors)),
            };
            format!(
                "{} (p99 {}{errors})",
                with_thousands(run.per_second as u64),
                ms(run.p99)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Warns about store errors and unexpected verdicts, and about commands other than
/// `FCALL`, of every run.
fn warn_about(label: &str, runs: &[Run]) {
    for run in runs {
        if run.store_errors > 0 || run.unexpected > 0 {
            eprintln!(
                "warning: {label}: {} store errors and {} unexpected verdicts besides {} decided checks",
                run.store_errors, run.unexpected, run.decided
            );
        }
        if !run.other_commands.is_empty() {
            eprintln!(
                "note: {label}: commands other than FCALL: {:?}",
                run.other_commands
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

/// CPU time per request, in microseconds.
fn micros_per_request(cpu: Duration, requests: u64) -> String {
    format!("{:.1}", cpu.as_secs_f64() * 1e6 / requests.max(1) as f64)
}

/// Each value's share of their sum, e.g. `33.1 / 33.6 / 33.3 %`.
fn shares(values: &[f64]) -> String {
    let total: f64 = values.iter().sum();
    let shares: Vec<String> = values
        .iter()
        .map(|value| format!("{:.1}", 100.0 * value / total.max(f64::MIN_POSITIVE)))
        .collect();
    format!("{} %", shares.join(" / "))
}

fn with_thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The machine's load averages (`/proc/loadavg`): other work on it moves the figures.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|load| {
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// A limiter with `yaml` on `store`.
fn limiter(yaml: &str, store: &RedisStore) -> Limiter<RedisStore> {
    let rules = Rules::from_yaml(yaml).expect("the bench's rules compile");
    Limiter::with_store(rules, store.clone())
}

fn main() {
    let bench_started = Instant::now();
    for tool in ["redis-server", "redis-cli"] {
        require(tool);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ticks_per_second = clock_ticks_per_second();
    let load_before = load_average();
    let started_at = utc_now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    let cluster = RedisCluster::start(MASTERS);
    let single = RedisServer::start();
    let masters = cluster.masters();
    assert_eq!(masters.len(), MASTERS, "the cluster's masters: {masters:?}");
    let cluster_servers = Servers::new(masters.iter().map(|&i| &cluster.nodes[i]));
    let single_servers = Servers::new([&single]);

    let connect = |builder: tollgate::store::RedisStoreBuilder| {
        runtime
            .block_on(builder.over_limit_cache(false).connect())
            .expect("the store connects")
    };
    let cluster_store = connect(RedisStore::cluster_builder(cluster.urls()));
    let single_store = connect(RedisStore::builder(single.url()));

    // 1. Key share: one request per user through the cluster store creates its key.
    let users = clients(|_| String::new());
    let cluster_per_user = limiter(PER_USER, &cluster_store);
    check_fill(
        "the cluster's per-user limit",
        runtime.block_on(fill(&cluster_per_user, &users, Values::User)),
        USERS as u64,
    );
    let keys = cluster.keys_per_master();
    let owners = cluster
        .slot_owners_seen_by(masters[0])
        .expect("a master answers CLUSTER NODES");
    let slots_of = |index: usize| owners.iter().filter(|&&o| o == Some(index)).count();
    let total_keys: u64 = keys.iter().map(|(_, count)| count).sum();

    // 2. The single server gets the same keys before measuring.
    let single_per_user = limiter(PER_USER, &single_store);
    check_fill(
        "the single server's per-user limit",
        runtime.block_on(fill(&single_per_user, &users, Values::User)),
        USERS as u64,
    );
    let single_workload = Workload {
        limiter: &single_per_user,
        clients: &users,
        values: Values::User,
        expect: Expect::Admitted,
    };
    let cluster_workload = Workload {
        limiter: &cluster_per_user,
        ..single_workload
    };
    let mut throughput = Vec::new();
    for concurrency in CONCURRENCIES {
        let (mut single_runs, mut cluster_runs) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            single_runs.push(measure(
                &single_servers,
                &runtime,
                &single_workload,
                concurrency,
                ticks_per_second,
            ));
            cluster_runs.push(measure(
                &cluster_servers,
                &runtime,
                &cluster_workload,
                concurrency,
                ticks_per_second,
            ));
        }
        eprintln!(
            "concurrency {concurrency}, decisions/s: single {}; cluster {}",
            rounds(&single_runs),
            rounds(&cluster_runs)
        );
        warn_about(&format!("single, concurrency {concurrency}"), &single_runs);
        warn_about(
            &format!("cluster, concurrency {concurrency}"),
            &cluster_runs,
        );
        throughput.push((concurrency, single_runs, cluster_runs));
    }

    // 3. Two-slot requests, on the cluster at concurrency 1.
    let in_tenants = clients(|i| format!("tenant-{:03}", i % TENANTS));
    let in_full_tenant = clients(|_| "tenant-full".to_owned());
    let one_slot = limiter(ONE_SLOT, &cluster_store);
    let two_slots = limiter(TWO_SLOTS, &cluster_store);
    let tenant_full = limiter(TWO_SLOTS_TENANT_FULL, &cluster_store);
    for (label, limiter, clients, expected) in [
        ("one slot", &one_slot, &in_tenants, USERS as u64),
        ("two slots", &two_slots, &in_tenants, USERS as u64),
        // The tenant's one request an hour, then denials.
        ("two slots, tenant full", &tenant_full, &in_full_tenant, 1),
    ] {
        check_fill(
            label,
            runtime.block_on(fill(limiter, clients, Values::UserAndTenant)),
            expected,
        );
    }
    let slot_cases = [
        (
            "one slot, one limit: user (the workload above)",
            cluster_workload,
        ),
        (
            "one slot: user + user × tenant (nested)",
            Workload {
                limiter: &one_slot,
                clients: &in_tenants,
                values: Values::UserAndTenant,
                expect: Expect::Admitted,
            },
        ),
        (
            "two slots: user + tenant",
            Workload {
                limiter: &two_slots,
                clients: &in_tenants,
                values: Values::UserAndTenant,
                expect: Expect::Admitted,
            },
        ),
        (
            "two slots, denied by the tenant's slot",
            Workload {
                limiter: &tenant_full,
                clients: &in_full_tenant,
                values: Values::UserAndTenant,
                expect: Expect::OverLimit,
            },
        ),
    ];
    let mut slot_runs: Vec<Vec<Run>> = slot_cases.iter().map(|_| Vec::new()).collect();
    for _ in 0..ROUNDS {
        for ((_, workload), runs) in slot_cases.iter().zip(&mut slot_runs) {
            runs.push(measure(
                &cluster_servers,
                &runtime,
                workload,
                1,
                ticks_per_second,
            ));
        }
    }
    for ((label, _), runs) in slot_cases.iter().zip(&slot_runs) {
        eprintln!("{label}, decisions/s: {}", rounds(runs));
        warn_about(label, runs);
    }

    // The report.
    let redis_version = single
        .cli(&["INFO", "server"])
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix("redis_version:")
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("# The Redis store on a Redis Cluster\n");
    println!("- date: {started_at}");
    println!(
        "- machine: {cpus} CPUs (available_parallelism), {}, {} RAM, Linux {}",
        cpu_model().unwrap_or_else(|| "CPU model unknown".to_owned()),
        memory_total().unwrap_or_else(|| "unknown".to_owned()),
        std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(
            |_| "unknown".to_owned(),
            |release| release.trim().to_owned()
        ),
    );
    println!(
        "- load average (1, 5, 15 min): {load_before} at the start, {} at the end",
        load_average()
    );
    println!(
        "- redis {redis_version}: one server, and a cluster of {MASTERS} masters without replicas (`--save \"\" --appendonly no`, loopback TCP); client and servers share the CPUs, nothing pinned"
    );
    println!(
        "- tollgate: tokio multi-thread runtime, {cpus} workers; `over_limit_cache(false)`, default 50 ms timeout; {USERS} users; {} s per run after {} s of warm-up, {ROUNDS} rounds",
        MEASURE.as_secs_f64(),
        WARM_UP.as_secs_f64()
    );
    println!();

    println!("## Key share per master\n");
    println!(
        "{} users, one request each under a per-user limit, through `RedisStore::cluster_builder`; `DBSIZE` on each master. Goal: {SHARE_GOAL:.0} % ± {SHARE_TOLERANCE:.0} % each.\n",
        with_thousands(USERS as u64)
    );
    println!("| master (port) | slots | keys | share | within {SHARE_GOAL:.0} % ± {SHARE_TOLERANCE:.0} % |");
    println!("|---|---:|---:|---:|---|");
    for (index, count) in &keys {
        let share = 100.0 * *count as f64 / total_keys.max(1) as f64;
        let met = (share - SHARE_GOAL).abs() <= SHARE_TOLERANCE;
        println!(
            "| {} | {} | {} | {share:.1} % | {} |",
            cluster.nodes[*index].port(),
            with_thousands(slots_of(*index) as u64),
            with_thousands(*count),
            if met { "yes" } else { "**no**" }
        );
    }
    println!(
        "| all | {} | {} | 100 % | |",
        with_thousands(SLOTS as u64),
        with_thousands(total_keys)
    );
    println!();

    println!("## Decisions per second: one server vs the cluster\n");
    println!("Per-user token bucket that admits everything, users picked pseudo-randomly; median round of {ROUNDS} by rate, with that round's latency.\n");
    println!("| concurrency | single decisions/s | p50 | p99 | cluster decisions/s | p50 | p99 | cluster ÷ single |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (concurrency, single_runs, cluster_runs) in &throughput {
        let (single_run, cluster_run) = (median(single_runs), median(cluster_runs));
        println!(
            "| {concurrency} | {} | {} | {} | {} | {} | {} | {:.0} % |",
            with_thousands(single_run.per_second as u64),
            ms(single_run.p50),
            ms(single_run.p99),
            with_thousands(cluster_run.per_second as u64),
            ms(cluster_run.p50),
            ms(cluster_run.p99),
            100.0 * cluster_run.per_second / single_run.per_second
        );
    }
    println!();
    println!("CPU time per decision of the same median rounds: Redis (the single server's, or the sum over the masters) and the client (this process); each master's share of the cluster's Redis CPU time and of its `FCALL` calls; store errors (checks that failed, denied by `on_store_error: deny`):\n");
    println!("| concurrency | single Redis CPU µs/decision | cluster Redis CPU µs/decision | per-master CPU share | per-master FCALL share | single client CPU µs/decision | cluster client CPU µs/decision | store errors single, cluster |");
    println!("|---:|---:|---:|---|---|---:|---:|---|");
    for (concurrency, single_runs, cluster_runs) in &throughput {
        let (single_run, cluster_run) = (median(single_runs), median(cluster_runs));
        let cpu: Vec<f64> = cluster_run
            .server_cpu
            .iter()
            .map(Duration::as_secs_f64)
            .collect();
        let calls: Vec<f64> = cluster_run.calls.iter().map(|&c| c as f64).collect();
        println!(
            "| {concurrency} | {} | {} | {} | {} | {} | {} | {}, {} |",
            micros_per_request(single_run.server_cpu_total(), single_run.decided),
            micros_per_request(cluster_run.server_cpu_total(), cluster_run.decided),
            shares(&cpu),
            shares(&calls),
            micros_per_request(single_run.client_cpu, single_run.decided),
            micros_per_request(cluster_run.client_cpu, cluster_run.decided),
            single_run.store_errors,
            cluster_run.store_errors,
        );
    }
    println!();
    println!("Every round (decisions/s, p99 latency):\n");
    println!("| concurrency | single, each round | cluster, each round |");
    println!("|---:|---|---|");
    for (concurrency, single_runs, cluster_runs) in &throughput {
        println!(
            "| {concurrency} | {} | {} |",
            rounds(single_runs),
            rounds(cluster_runs)
        );
    }
    println!();

    println!("## Requests whose limits span two slots\n");
    println!("The cluster, concurrency 1; each request carries a user (of {}) and a tenant ({TENANTS} tenants; one, used up, when denied). Median round of {ROUNDS} by rate.\n", with_thousands(USERS as u64));
    println!("| request | FCALL calls per request | decisions/s | p50 | p99 | p50 added to one slot's (two limits) | store errors | unexpected verdicts |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let one_slot_p50 = median(&slot_runs[ONE_SLOT_CASE]).p50;
    for (case, ((label, _), runs)) in slot_cases.iter().zip(&slot_runs).enumerate() {
        let run = median(runs);
        let added = match case {
            ONE_SLOT_CASE => "—".to_owned(),
            _ => format!(
                "{:+.3} ms",
                1000.0 * (run.p50.as_secs_f64() - one_slot_p50.as_secs_f64())
            ),
        };
        println!(
            "| {label} | {:.3} | {} | {} | {} | {added} | {} | {} |",
            run.calls_per_request(),
            with_thousands(run.per_second as u64),
            ms(run.p50),
            ms(run.p99),
            run.store_errors,
            run.unexpected,
        );
    }
    println!();
    println!("Every round (decisions/s, p99 latency):\n");
    println!("| request | each round |");
    println!("|---|---|");
    for ((label, _), runs) in slot_cases.iter().zip(&slot_runs) {
        println!("| {label} | {} |", rounds(runs));
    }
    println!();
    println!(
        "The bench took {:.0} s.",
        bench_started.elapsed().as_secs_f64()
    );
}
