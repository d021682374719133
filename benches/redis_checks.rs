//! Decisions per second through the Redis store, against `redis-benchmark` on the same server.
//!
//! The bench starts its own `redis-server` on a free loopback port (`--save "" --appendonly
//! no`), then decides requests through the public API only:
//! `Limiter::with_store(rules, RedisStore::builder(url).over_limit_cache(false).connect())`
//! and `limiter.check(&[("user", id)], 1)`, one per-user token bucket (1 per minute with a
//! burst of 1,000,000: every request is admitted, and each user's state stays in Redis for
//! the whole run, so every call reads and rewrites an existing key) over 10,000 user IDs
//! picked pseudo-randomly. Each concurrency runs that many tokio tasks on a multi-thread
//! runtime (one worker per CPU), each looping on `check` for 2 s after a 0.5 s warm-up and
//! recording every call's latency; decisions/s is the number of checks over the wall time.
//! The limit admits everything and the rules deny on a store error, so a denial is a failed
//! call (e.g. past the 50 ms timeout): those are counted and reported. Redis's
//! `INFO commandstats` counts the store's calls: one per decision, or fewer when the store
//! sends the requests that wait for a busy connection together (`acquire_batch`); the tables
//! report the decisions per call and Redis's time per decision.
//!
//! The baseline is `redis-benchmark` against the same server at the same concurrency
//! (`-c C -P 1 -r 10000`, `-n` sized for about 2 s), both for `PING` and for the call the
//! store makes for one request alone: `FCALL` of its library's function (`EVALSHA` of its
//! script on a Redis without functions) with exactly the arguments the store sends for this
//! limit. Neither the function nor the arguments are written down here: the bench reads them
//! off `MONITOR` while the store makes one call, so the baseline follows the store if its
//! library or `plan()` change. The baseline's key is the store's key
//! for a user with its last 12 characters replaced by `__rand_int__` (same prefix, same
//! length), 10,000 distinct keys. Each concurrency runs 3 rounds of (tollgate, then
//! `redis-benchmark` of that call) and reports the median round of each: the figures spread on a
//! machine whose CPUs client and server share. The whole bench takes about a minute.
//!
//! Client and server share the machine's CPUs: nothing is pinned. The bench also reports
//! the CPU time the client (this process, or `redis-benchmark`) and the server spent per
//! call, from `/proc`.
//!
//! Run it with:
//!
//! ```text
//! cargo bench --features redis --bench redis_checks
//! ```
//!
//! It prints the machine, the date, the exact `redis-benchmark` commands, and markdown tables.
//! It needs `redis-server`, `redis-cli` and `redis-benchmark` on the `PATH`.

#[path = "common/machine.rs"]
mod machine;
use machine::{cpu_model, memory_total, utc_now};

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tollgate::rules::Rules;
use tollgate::store::RedisStore;
use tollgate::Limiter;

const CONCURRENCIES: [usize; 4] = [1, 8, 32, 64];
/// Distinct user IDs (and distinct `redis-benchmark` keys, `-r`).
const USERS: usize = 10_000;
/// Rounds per concurrency, each a tollgate run then a `redis-benchmark` run of the store's
/// call; the tables report the median round of each.
const ROUNDS: usize = 3;
/// How long each tollgate run lasts, after its warm-up.
const MEASURE: Duration = Duration::from_secs(2);
const WARM_UP: Duration = Duration::from_millis(500);
/// About how long each measured `redis-benchmark` run lasts (its `-n` is sized from a probe).
const BENCHMARK_SECONDS: f64 = 2.0;
/// Requests of the short `redis-benchmark` run that sizes the measured one.
const PROBE_REQUESTS: u64 = 3_000;

/// One per-user limit under which every request of the bench is admitted. A store error is
/// a denial, so that a failed call cannot pass for a decision.
const RULES: &str = r#"
domain: bench
defaults:
  on_store_error: deny
sources:
  user: { header: x-user-id }
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1, burst: 1000000, algorithm: token_bucket }
"#;

// ---------------------------------------------------------------------------------------
// The server and the Redis tools
// ---------------------------------------------------------------------------------------

/// Exits with a clear message unless `tool` runs.
fn require(tool: &str) {
    if let Err(error) = Command::new(tool).arg("--version").output() {
        eprintln!(
            "redis_checks: cannot run `{tool}` ({error}). This bench starts its own redis-server \
             and compares with redis-benchmark: install Redis (`apt-get install redis-server`, \
             which brings redis-cli and redis-benchmark; scripts/test.sh does it) and run it again."
        );
        std::process::exit(1);
    }
}

/// A `redis-server` on a free loopback port; killed when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Server {
    fn start() -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("a free port on 127.0.0.1");
        let dir = std::env::temp_dir().join(format!(
            "tollgate-redis-checks-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start redis-server: {error}"));
        let server = Server { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.cli(&["PING"]).trim() != "PONG" {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not come up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs `redis-cli` against the server; its standard output.
    fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `calls`, `failed_calls` and `usec_per_call` of `command` since the last
    /// `CONFIG RESETSTAT`, from `INFO commandstats`.
    fn command_stats(&self, command: &str) -> (u64, u64, f64) {
        let info = self.cli(&["INFO", "commandstats"]);
        let prefix = format!("cmdstat_{command}:");
        let Some(line) = info.lines().find_map(|l| l.trim().strip_prefix(&prefix)) else {
            return (0, 0, 0.0);
        };
        let field = |name: &str| {
            line.split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .unwrap_or("0")
                .to_owned()
        };
        (
            field("calls").parse().unwrap_or(0),
            field("failed_calls").parse().unwrap_or(0),
            field("usec_per_call").parse().unwrap_or(0.0),
        )
    }

    /// The server's CPU time so far.
    fn cpu(&self) -> Duration {
        proc_cpu(&format!("/proc/{}/stat", self.child.id()), false)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The quoted arguments of a `MONITOR` line, e.g.
/// `1.2 [0 127.0.0.1:5] "evalsha" "ab.." "1" "key" "" "1"`, unescaped enough for numbers.
fn monitor_arguments(line: &str) -> Vec<String> {
    let Some((_, rest)) = line.split_once(']') else {
        return Vec::new();
    };
    let mut arguments = Vec::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut argument = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => argument.extend(chars.next()),
                c => argument.push(c),
            }
        }
        arguments.push(argument);
    }
    arguments
}

/// The call the store makes for one check of `user` (`FCALL` of its library's function, or
/// `EVALSHA` of its script on a Redis without functions), as `MONITOR` shows it: (command,
/// function or sha, key, the arguments after `now`).
fn observe_store_call(
    server: &Server,
    runtime: &tokio::runtime::Runtime,
    limiter: &Limiter<RedisStore>,
    user: &str,
) -> (String, String, String, Vec<String>) {
    let mut monitor = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &server.port.to_string(), "MONITOR"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run redis-cli MONITOR");
    let stdout = monitor.stdout.take().expect("MONITOR's output");
    let (lines, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let wait = Duration::from_secs(5);
    let first = receive.recv_timeout(wait).expect("MONITOR answers");
    assert_eq!(first.trim(), "OK", "MONITOR started");
    let verdict = runtime.block_on(limiter.check(&[("user", user)], 1));
    assert!(verdict.is_allowed(), "the monitored check is admitted");
    let call = loop {
        let line = receive
            .recv_timeout(wait)
            .expect("MONITOR shows the store's call");
        let arguments = monitor_arguments(&line);
        if arguments
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case("fcall") || c.eq_ignore_ascii_case("evalsha"))
        {
            break arguments;
        }
    };
    let _ = monitor.kill();
    let _ = monitor.wait();
    // fcall <function> <numkeys> <key> <now> <numbers>
    assert!(call.len() > 5, "one key, now, numbers: {call:?}");
    assert_eq!(call[2], "1", "one key: {call:?}");
    assert_eq!(call[4], "", "now is Redis's clock: {call:?}");
    for number in &call[5..] {
        number
            .parse::<i64>()
            .unwrap_or_else(|_| panic!("a number: {number:?} in {call:?}"));
    }
    (
        call[0].to_lowercase(),
        call[1].clone(),
        call[3].clone(),
        call[5..].to_vec(),
    )
}

// ---------------------------------------------------------------------------------------
// CPU time, from /proc
// ---------------------------------------------------------------------------------------

fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// User + system CPU time from a `/proc/.../stat` file: the process's own, or (`children`)
/// that of its children that have been waited for.
fn proc_cpu(path: &str, children: bool) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // The fields after the command name, which is in parentheses: state is field 3.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    // utime, stime are fields 14, 15; cutime, cstime 16, 17.
    let first = if children { 13 } else { 11 };
    let ticks =
        fields.get(first).copied().unwrap_or(0) + fields.get(first + 1).copied().unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second() as f64)
}

fn own_cpu() -> Duration {
    proc_cpu("/proc/self/stat", false)
}

fn children_cpu() -> Duration {
    proc_cpu("/proc/self/stat", true)
}

// ---------------------------------------------------------------------------------------
// The runs
// ---------------------------------------------------------------------------------------

/// What one run measured.
struct Run {
    /// Decisions (tollgate's checks, or redis-benchmark's calls).
    calls: u64,
    /// Calls Redis counted (tollgate's store decides several checks in a batch call).
    store_calls: u64,
    per_second: f64,
    p50: Duration,
    p99: Duration,
    /// CPU time of the client (this process, or redis-benchmark) and of the server.
    client_cpu: Duration,
    server_cpu: Duration,
    elapsed: Duration,
    /// Redis's own `usec_per_call` for the command.
    usec_per_call: f64,
    /// Checks the store failed (denied under `on_store_error: deny`); none for redis-benchmark.
    errors: u64,
}

/// A small pseudo-random sequence (xorshift64*), so that tasks spread over the users.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// `concurrency` tasks checking random users until `duration` is over: their latencies and
/// denials, and the wall time.
async fn drive(
    limiter: &Limiter<RedisStore>,
    users: &Arc<Vec<String>>,
    concurrency: usize,
    duration: Duration,
) -> (Vec<Duration>, u64, Duration) {
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let limiter = limiter.clone();
            let users = Arc::clone(users);
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(100_000);
                let mut denied = 0_u64;
                let mut random = 0x9e37_79b9_7f4a_7c15_u64 ^ (task as u64 + 1);
                while Instant::now() < deadline {
                    let user = &users[(next_random(&mut random) % USERS as u64) as usize];
                    let began = Instant::now();
                    let verdict = limiter.check(&[("user", user)], 1).await;
                    latencies.push(began.elapsed());
                    denied += u64::from(!verdict.is_allowed());
                }
                (latencies, denied)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut denied = 0;
    for task in tasks {
        let (mut task_latencies, task_denied) = task.await.expect("a bench task");
        latencies.append(&mut task_latencies);
        denied += task_denied;
    }
    (latencies, denied, start.elapsed())
}

fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    sorted[(sorted.len() * percent / 100).min(sorted.len() - 1)]
}

fn run_tollgate(
    command: &str,
    server: &Server,
    runtime: &tokio::runtime::Runtime,
    limiter: &Limiter<RedisStore>,
    users: &Arc<Vec<String>>,
    concurrency: usize,
) -> Run {
    runtime.block_on(drive(limiter, users, concurrency, WARM_UP));
    server.cli(&["CONFIG", "RESETSTAT"]);
    let (client_before, server_before) = (own_cpu(), server.cpu());
    let (mut latencies, denied, elapsed) =
        runtime.block_on(drive(limiter, users, concurrency, MEASURE));
    let (client_cpu, server_cpu) = (own_cpu() - client_before, server.cpu() - server_before);
    let calls = latencies.len() as u64;
    // The limit admits every request: a denial is a store error (most likely a call past the
    // 50 ms timeout, when something else takes the CPUs), reported, not hidden.
    if denied > 0 {
        eprintln!(
            "warning: concurrency {concurrency}: {denied} of {calls} checks failed in the store \
             (denied by `on_store_error: deny`); is something else using the CPUs?"
        );
    }
    let (store_calls, failed, usec_per_call) = server.command_stats(command);
    // Each call decides one check or several.
    assert!(
        store_calls > 0 && store_calls <= calls,
        "at most one {command} per decision (INFO commandstats): {store_calls} for {calls} checks"
    );
    assert_eq!(failed, 0, "no {command} failed");
    latencies.sort_unstable();
    Run {
        calls,
        store_calls,
        per_second: calls as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 50),
        p99: percentile(&latencies, 99),
        client_cpu,
        server_cpu,
        elapsed,
        usec_per_call,
        errors: denied,
    }
}

/// The `redis-benchmark` arguments for `requests` calls of `command` at `concurrency`.
fn benchmark_args(port: u16, concurrency: usize, requests: u64, command: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-c",
        &concurrency.to_string(),
        "-n",
        &requests.to_string(),
        "-r",
        &USERS.to_string(),
        "-P",
        "1",
        "--csv",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(command.iter().cloned());
    args
}

/// The command line, quoted for a shell where needed.
fn shell_line(program: &str, args: &[String]) -> String {
    let mut line = program.to_owned();
    for arg in args {
        line.push(' ');
        if arg.is_empty() || arg.contains(|c: char| "{}\"' $".contains(c)) {
            line.push('\'');
            line.push_str(arg);
            line.push('\'');
        } else {
            line.push_str(arg);
        }
    }
    line
}

/// Runs `redis-benchmark`: (rps, p50, p99) from its CSV line.
fn redis_benchmark(args: &[String]) -> (f64, Duration, Duration) {
    let output = Command::new("redis-benchmark")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-benchmark");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
    // "p99_latency_ms","max_latency_ms"; the test name holds no comma.
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("\"test\""))
        .unwrap_or_else(|| {
            panic!(
                "no result from redis-benchmark: {}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let fields: Vec<f64> = line
        .rsplitn(8, ',')
        .take(7)
        .map(|f| f.trim_matches('"').parse().unwrap_or(f64::NAN))
        .collect();
    // Reversed: max, p99, p95, p50, min, avg, rps.
    let ms = |v: f64| Duration::from_secs_f64(v / 1000.0);
    assert!(fields[6] > 0.0, "redis-benchmark's rate in {line:?}");
    (fields[6], ms(fields[3]), ms(fields[1]))
}

/// How many requests make a `redis-benchmark` run of `command` last about
/// [`BENCHMARK_SECONDS`], from a short probe run.
fn size_benchmark(server: &Server, concurrency: usize, command: &[String]) -> u64 {
    let probe = benchmark_args(server.port, concurrency, PROBE_REQUESTS, command);
    let (probe_rate, _, _) = redis_benchmark(&probe);
    ((probe_rate * BENCHMARK_SECONDS) as u64).clamp(20_000, 2_000_000)
}

fn run_benchmark(
    server: &Server,
    concurrency: usize,
    requests: u64,
    command: &[String],
    stats_command: &str,
) -> (Run, String) {
    let args = benchmark_args(server.port, concurrency, requests, command);
    server.cli(&["CONFIG", "RESETSTAT"]);
    let (client_before, server_before) = (children_cpu(), server.cpu());
    let started = Instant::now();
    let (rps, p50, p99) = redis_benchmark(&args);
    let elapsed = started.elapsed();
    let (client_cpu, server_cpu) = (children_cpu() - client_before, server.cpu() - server_before);
    let (calls, failed, usec_per_call) = server.command_stats(stats_command);
    assert!(
        calls >= requests,
        "redis-benchmark made {calls} {stats_command} calls of {requests}"
    );
    assert_eq!(failed, 0, "no {stats_command} failed under redis-benchmark");
    let run = Run {
        calls,
        store_calls: calls,
        per_second: rps,
        p50,
        p99,
        client_cpu,
        server_cpu,
        elapsed,
        usec_per_call,
        errors: 0,
    };
    (run, shell_line("redis-benchmark", &args))
}

// ---------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

/// CPU time per call in microseconds.
fn per_call(cpu: Duration, calls: u64) -> String {
    format!("{:.1}", cpu.as_secs_f64() * 1e6 / calls.max(1) as f64)
}

/// Redis's own time (`usec_per_call` over its calls) per decision, in microseconds.
fn redis_time_per_decision(run: &Run) -> String {
    format!(
        "{:.1}",
        run.usec_per_call * run.store_calls as f64 / run.calls.max(1) as f64
    )
}

/// CPU time as a share of one CPU over the run (Redis runs commands on one thread: near
/// 100 % for the server, it is the bottleneck).
fn one_cpu_share(cpu: Duration, run: &Run) -> String {
    format!(
        "{:.0} %",
        100.0 * cpu.as_secs_f64() / run.elapsed.as_secs_f64()
    )
}

fn main() {
    for tool in ["redis-server", "redis-cli", "redis-benchmark"] {
        require(tool);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    let rules = Rules::from_yaml(RULES).expect("the bench's rules compile");
    let store = runtime
        .block_on(
            RedisStore::builder(server.url())
                .over_limit_cache(false)
                .connect(),
        )
        .expect("the store connects");
    let limiter = Limiter::with_store(rules, store);

    let users: Arc<Vec<String>> = Arc::new((0..USERS).map(|i| format!("user-{i:05}")).collect());
    let (command, sha, key, numbers) = observe_store_call(&server, &runtime, &limiter, &users[0]);
    // The baseline's keys: the store's key for a user, its last 12 characters replaced by
    // redis-benchmark's 12-digit random number, so of the same length and prefix.
    let split = key
        .len()
        .checked_sub(12)
        .filter(|&at| key.is_char_boundary(at) && key[..at].contains("}:"))
        .unwrap_or_else(|| panic!("a key longer than its hash tag and 12 characters: {key:?}"));
    let baseline_key = format!("{}__rand_int__", &key[..split]);
    // The baseline calls what the store called: the library's function it loaded, by its
    // name, or its script, by its SHA.
    let mut store_call: Vec<String> = vec![
        command.clone(),
        sha.clone(),
        "1".into(),
        baseline_key.clone(),
        String::new(),
    ];
    store_call.extend(numbers.iter().cloned());
    let ping = vec!["ping".to_owned()];

    // Every user's state in Redis before measuring.
    runtime.block_on(async {
        let tasks: Vec<_> = (0..64)
            .map(|task| {
                let limiter = limiter.clone();
                let users = Arc::clone(&users);
                tokio::spawn(async move {
                    for user in users.iter().skip(task).step_by(64) {
                        let verdict = limiter.check(&[("user", user)], 1).await;
                        assert!(verdict.is_allowed(), "the warm-up is admitted");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a warm-up task");
        }
    });

    println!("# Redis-backed decisions (RedisStore) vs redis-benchmark\n");
    println!("- date: {}", utc_now());
    println!(
        "- machine: {cpus} CPUs (available_parallelism), {}, {} RAM, Linux {}",
        cpu_model().unwrap_or_else(|| "CPU model unknown".to_owned()),
        memory_total().unwrap_or_else(|| "unknown".to_owned()),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_owned(), |r| r.trim().to_owned()),
    );
    println!(
        "- redis: {} (`--save \"\" --appendonly no`, loopback TCP); client and server share the CPUs, nothing pinned",
        server
            .cli(&["INFO", "server"])
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("unknown")
            .trim()
    );
    println!(
        "- tollgate: tokio multi-thread runtime, {cpus} workers; `RedisStore::builder(url).over_limit_cache(false).connect()` (one multiplexed connection); `limiter.check(&[(\"user\", id)], 1)` over {USERS} user IDs; token_bucket 1/minute, burst 1000000 (all admitted); {} s per concurrency after {} s of warm-up",
        MEASURE.as_secs_f64(),
        WARM_UP.as_secs_f64()
    );
    println!(
        "- the store's call for `{}`, seen by MONITOR: {command} {sha}, key `{key}`, now \"\", then {}",
        users[0],
        numbers.join(" ")
    );
    println!("- redis-benchmark's key: `{baseline_key}` with -r {USERS}");
    println!();

    let mut rows = Vec::new();
    let mut commands = Vec::new();
    for concurrency in CONCURRENCIES {
        let requests = size_benchmark(&server, concurrency, &store_call);
        let mut tollgate_rounds = Vec::new();
        let mut script_rounds = Vec::new();
        let mut script_line = String::new();
        for _ in 0..ROUNDS {
            tollgate_rounds.push(run_tollgate(
                &command,
                &server,
                &runtime,
                &limiter,
                &users,
                concurrency,
            ));
            let (run, line) = run_benchmark(&server, concurrency, requests, &store_call, &command);
            script_rounds.push(run);
            script_line = line;
        }
        let ping_requests = size_benchmark(&server, concurrency, &ping);
        let (ping_run, ping_line) =
            run_benchmark(&server, concurrency, ping_requests, &ping, "ping");
        let rates = |runs: &[Run]| {
            runs.iter()
                .map(|r| format!("{:.0}", r.per_second))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rounds = (rates(&tollgate_rounds), rates(&script_rounds));
        eprintln!(
            "concurrency {concurrency}: tollgate {}/s; {command} {}/s; ping {:.0}/s",
            rounds.0, rounds.1, ping_run.per_second
        );
        commands.push(script_line);
        commands.push(ping_line);
        rows.push((
            concurrency,
            median(tollgate_rounds),
            median(script_rounds),
            ping_run,
            rounds,
        ));
    }

    println!("redis-benchmark commands (the measured runs, {ROUNDS} of each {command} one; a {PROBE_REQUESTS}-request probe run sized -n):\n");
    println!("```text");
    for command in &commands {
        println!("{command}");
    }
    println!("```\n");

    println!("| concurrency | tollgate decisions/s | p50 | p99 | redis-benchmark {command} rps | ratio | redis-benchmark PING rps |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (concurrency, tollgate, script_run, ping_run, _) in &rows {
        println!(
            "| {concurrency} | {:.0} | {} | {} | {:.0} | {:.0} % | {:.0} |",
            tollgate.per_second,
            ms(tollgate.p50),
            ms(tollgate.p99),
            script_run.per_second,
            100.0 * tollgate.per_second / script_run.per_second,
            ping_run.per_second,
        );
    }
    println!();
    println!("Latency and CPU (client: this process, or redis-benchmark; server: redis-server; CPU time from /proc, per decision and as a share of one CPU; Redis µs: Redis's own time in {command} per decision, from INFO commandstats; store errors: checks that failed, e.g. past the 50 ms timeout, and were denied by `on_store_error: deny`):\n");
    println!("| concurrency | tollgate decisions | {command} calls | decisions per call | store errors | client CPU µs/decision | client CPU | server CPU µs/decision | server CPU | Redis µs/decision | redis-benchmark p50 | p99 | client CPU µs/call | client CPU | server CPU µs/call | server CPU | Redis µs/call |");
    println!(
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (concurrency, tollgate, script_run, _, _) in &rows {
        println!(
            "| {concurrency} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
            tollgate.calls,
            tollgate.store_calls,
            tollgate.calls as f64 / tollgate.store_calls.max(1) as f64,
            tollgate.errors,
            per_call(tollgate.client_cpu, tollgate.calls),
            one_cpu_share(tollgate.client_cpu, tollgate),
            per_call(tollgate.server_cpu, tollgate.calls),
            one_cpu_share(tollgate.server_cpu, tollgate),
            redis_time_per_decision(tollgate),
            ms(script_run.p50),
            ms(script_run.p99),
            per_call(script_run.client_cpu, script_run.calls),
            one_cpu_share(script_run.client_cpu, script_run),
            per_call(script_run.server_cpu, script_run.calls),
            one_cpu_share(script_run.server_cpu, script_run),
            script_run.usec_per_call,
        );
    }
    println!();
    println!(
        "Every round (decisions/s and redis-benchmark rps; the tables above show the median):\n"
    );
    println!("| concurrency | tollgate, each round | redis-benchmark {command}, each round |");
    println!("|---:|---|---|");
    for (concurrency, _, _, _, (tollgate, script)) in &rows {
        println!("| {concurrency} | {tollgate} | {script} |");
    }
}

/// The run of median rate.
fn median(mut runs: Vec<Run>) -> Run {
    runs.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
    runs.swap_remove(runs.len() / 2)
}
