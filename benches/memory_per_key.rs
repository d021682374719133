//! Memory one tracked key costs in [`MemoryStore`], per algorithm, measured at 1,000,000 keys.
//!
//! A counting global allocator (a thin wrapper over [`std::alloc::System`]) keeps the live
//! heap bytes and allocations in atomics. For each case the bench builds
//! `MemoryStore::with_clock(ManualClock::new()).max_keys(4_000_000)` (so nothing is
//! evicted), then acquires through the public [`Store::acquire`] API for 1,000,000 distinct
//! keys shaped as the limiter shapes them for one descriptor value: an 8-byte state id, the
//! value's length as 4 little-endian bytes, then the value (an IPv4 address text such as
//! `10.3.25.7`, or a user ID such as `user-123456`). Keys are built into one reused buffer,
//! so the bench's own bytes do not count. The figure is the live heap bytes after minus
//! before, divided by the number of keys; `store.len()` shows that every key is tracked.
//!
//! The token bucket's quota (10 per second) has a whole emission interval, so the store keeps
//! it as GCRA's one timestamp; it is also measured under 7 per second, whose interval is not
//! whole, where it keeps its own two-word state.
//!
//! The sliding window log is also measured with full logs: 100,000 keys × 10 requests (limit
//! 10 per minute), the clock moved 1 ms between rounds so that every request is its own
//! entry.
//!
//! After measuring, each case moves the clock an hour on (every key idle) and calls
//! [`MemoryStore::sweep`], and reports what stays allocated with no key tracked and how long
//! the sweep took (each shard's lock is held for its part of that time).
//!
//! For comparison, governor's keyed limiter is measured the same way:
//! `governor::RateLimiter::keyed(Quota::per_second(10))` (its default `DashMap` state store
//! and default clock), one `check_key` for each of 1,000,000 distinct keys of the natural key
//! types: [`IpAddr`] for the IPv4 addresses and [`String`] for the user IDs (the same
//! values, without tollgate's state id and length prefix; a user ID is written into one
//! reused `String`, which the limiter clones on insert). Keys tracked is `limiter.len()`.
//! Its clock cannot be moved on, so the bench sleeps 300 ms (more than the 100 ms after
//! which a key's state is indistinguishable from a fresh one), then calls `retain_recent()`
//! and `shrink_to_fit()`, timed together.
//!
//! With the `redis` feature, the keys of local-first limits (`sync_every: 100ms`) are
//! measured too: a `fixed_window` and a `gcra` limit, quotas as above, through
//! `RedisStore::builder(url).clock(clock).max_keys(4_000_000)` on a `redis-server` the
//! bench starts and kills once connected, so every key keeps counts it could not send (an
//! outage). Requests are decided outside any Tokio runtime, where no sync task runs. Keys
//! tracked is `RedisStore::local_first_keys()`. After measuring, the clock moves an hour on
//! and `sync_now()` (failing: Redis is down) is called until no key is left: what stays
//! allocated, and how long those syncs took.
//!
//! Each case runs in a child process of this binary, so that one case's freed memory does
//! not blur the next one's resident set size (read from `/proc/self/status`, a cross-check
//! that includes what the allocator itself spends per allocation).
//!
//! Run it with:
//!
//! ```text
//! cargo bench --bench memory_per_key
//! cargo bench --features redis --bench memory_per_key -- local-first    # those cases alone
//! ```
//!
//! An argument keeps the cases whose algorithm's name contains it.
//!
//! It prints the machine, the date, the sizes of the public state types, and a markdown table.

#[path = "common/keys.rs"]
mod keys;
#[path = "common/machine.rs"]
mod machine;
use keys::KeyKind;
use machine::{cpu_model, memory_total, utc_now};

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::mem::size_of;
use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tollgate::algorithm::{
    Algorithm, Decision, FixedWindow, Gcra, LeakyBucket, Quota, SlidingWindowCounter,
    SlidingWindowLog, State, TokenBucket,
};
use tollgate::clock::{ManualClock, Nanos};
use tollgate::store::{Acquisition, LimitCheck, MemoryStore, Store};

#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

// ---------------------------------------------------------------------------------------
// Counting allocator
// ---------------------------------------------------------------------------------------

/// Allocations at least this large are counted as "large" (in a store: the hash tables);
/// smaller ones are the per-key allocations (sliding window logs; governor's `String` keys).
const LARGE: usize = 1024;

/// Live bytes in allocations smaller than [`LARGE`].
static LIVE_SMALL: AtomicUsize = AtomicUsize::new(0);
/// Live bytes in allocations of [`LARGE`] bytes or more.
static LIVE_LARGE: AtomicUsize = AtomicUsize::new(0);
/// Live allocations.
static LIVE_COUNT: AtomicUsize = AtomicUsize::new(0);
/// The most live bytes seen at once.
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// [`System`], counting live bytes (as requested by each [`Layout`]).
struct Counting;

fn class(size: usize) -> &'static AtomicUsize {
    if size >= LARGE {
        &LIVE_LARGE
    } else {
        &LIVE_SMALL
    }
}

fn live_bytes() -> usize {
    LIVE_SMALL.load(Ordering::Relaxed) + LIVE_LARGE.load(Ordering::Relaxed)
}

fn added(size: usize) {
    class(size).fetch_add(size, Ordering::Relaxed);
    PEAK.fetch_max(live_bytes(), Ordering::Relaxed);
}

fn removed(size: usize) {
    class(size).fetch_sub(size, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` unchanged and only updates counters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_COUNT.fetch_add(1, Ordering::Relaxed);
            added(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed` is passed on as is.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_COUNT.fetch_add(1, Ordering::Relaxed);
            added(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc` is passed on as is.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_COUNT.fetch_sub(1, Ordering::Relaxed);
        removed(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            removed(layout.size());
            added(new_size);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// ---------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------

/// The environment variable that makes this binary run one case (by index) as a child.
const CASE_VAR: &str = "TOLLGATE_MEMORY_PER_KEY_CASE";

const KEYS: usize = 1_000_000;
const FULL_LOG_KEYS: usize = 100_000;
const FULL_LOG_REQUESTS: usize = 10;

/// The kind of key's name in the tables.
fn kind_name(kind: KeyKind) -> &'static str {
    match kind {
        KeyKind::Ipv4 => "IPv4 address",
        KeyKind::UserId => "user ID",
    }
}

/// What a case measures.
#[derive(Clone, Copy, PartialEq)]
enum Subject {
    /// tollgate's [`MemoryStore`] with one algorithm.
    Tollgate(Algorithm),
    /// tollgate's token bucket under a quota whose emission interval is not a whole number
    /// of nanoseconds, so that it keeps its own two-word state instead of GCRA's timestamp.
    TokenBucketRoundedInterval,
    /// governor's keyed rate limiter (GCRA) with its default `DashMap` state store.
    Governor,
    /// tollgate's `RedisStore`, a local-first limit (`sync_every`) with one algorithm, Redis
    /// down.
    #[cfg(feature = "redis")]
    LocalFirst(Algorithm),
}

impl Subject {
    fn name(self) -> String {
        match self {
            Subject::Tollgate(algorithm) => algorithm.to_string(),
            Subject::TokenBucketRoundedInterval => {
                "token_bucket, 7 per second (interval not whole)".to_owned()
            }
            Subject::Governor => "governor 0.10 keyed (GCRA, DashMap)".to_owned(),
            #[cfg(feature = "redis")]
            Subject::LocalFirst(algorithm) => format!("{algorithm}, local-first (Redis down)"),
        }
    }
}

#[derive(Clone, Copy)]
struct Case {
    subject: Subject,
    kind: KeyKind,
    keys: usize,
    requests_per_key: usize,
}

impl Case {
    fn label(&self) -> String {
        if let Subject::Governor = self.subject {
            let key_type = match self.kind {
                KeyKind::Ipv4 => "IpAddr",
                KeyKind::UserId => "String",
            };
            format!("{} (`{key_type}`)", kind_name(self.kind))
        } else if self.requests_per_key == 1 {
            kind_name(self.kind).to_owned()
        } else {
            format!(
                "{}, {} requests each (full log)",
                kind_name(self.kind),
                self.requests_per_key
            )
        }
    }
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for algorithm in Algorithm::ALL {
        for kind in [KeyKind::Ipv4, KeyKind::UserId] {
            cases.push(Case {
                subject: Subject::Tollgate(algorithm),
                kind,
                keys: KEYS,
                requests_per_key: 1,
            });
        }
    }
    for subject in [Subject::TokenBucketRoundedInterval, Subject::Governor] {
        for kind in [KeyKind::Ipv4, KeyKind::UserId] {
            cases.push(Case {
                subject,
                kind,
                keys: KEYS,
                requests_per_key: 1,
            });
        }
    }
    for kind in [KeyKind::Ipv4, KeyKind::UserId] {
        cases.push(Case {
            subject: Subject::Tollgate(Algorithm::SlidingWindowLog),
            kind,
            keys: FULL_LOG_KEYS,
            requests_per_key: FULL_LOG_REQUESTS,
        });
    }
    #[cfg(feature = "redis")]
    for algorithm in [Algorithm::FixedWindow, Algorithm::Gcra] {
        for kind in [KeyKind::Ipv4, KeyKind::UserId] {
            cases.push(Case {
                subject: Subject::LocalFirst(algorithm),
                kind,
                keys: KEYS,
                requests_per_key: 1,
            });
        }
    }
    cases
}

/// A quota under which every request of the case is admitted (a denied request leaves a
/// new key untracked).
fn quota_for(algorithm: Algorithm) -> Quota {
    const SECOND: Duration = Duration::from_secs(1);
    const MINUTE: Duration = Duration::from_secs(60);
    match algorithm {
        Algorithm::TokenBucket => Quota::new(10, SECOND).unwrap().with_burst(20),
        // Ten waiting places, so requests are admitted (the default queue of 0 still admits
        // the first request, but a leaky bucket is configured with a queue in practice).
        Algorithm::LeakyBucket => Quota::new(10, SECOND).unwrap().with_queue(10),
        Algorithm::FixedWindow | Algorithm::SlidingWindowLog | Algorithm::SlidingWindowCounter => {
            Quota::new(10, MINUTE).unwrap()
        }
        _ => Quota::new(10, SECOND).unwrap(),
    }
}

/// What one case measured.
struct Measured {
    bytes: usize,
    small_bytes: usize,
    large_bytes: usize,
    allocations: usize,
    peak_bytes: usize,
    rss_bytes: Option<usize>,
    tracked: usize,
    elapsed: Duration,
    /// Live bytes still above the start once every key went idle and was swept.
    swept_bytes: usize,
    /// How long sweeping every (idle) key took.
    sweep: Duration,
}

impl Measured {
    fn to_line(&self) -> String {
        format!(
            "RESULT {} {} {} {} {} {} {} {} {} {}",
            self.bytes,
            self.small_bytes,
            self.large_bytes,
            self.allocations,
            self.peak_bytes,
            self.rss_bytes.map_or(-1, |b| b as i64),
            self.tracked,
            self.elapsed.as_micros(),
            self.swept_bytes,
            self.sweep.as_micros(),
        )
    }

    fn from_line(line: &str) -> Option<Measured> {
        let mut fields = line.strip_prefix("RESULT ")?.split_whitespace();
        let mut next = || fields.next()?.parse::<i64>().ok();
        let mut next_usize = || usize::try_from(next()?).ok();
        Some(Measured {
            bytes: next_usize()?,
            small_bytes: next_usize()?,
            large_bytes: next_usize()?,
            allocations: next_usize()?,
            peak_bytes: next_usize()?,
            rss_bytes: next_usize(),
            tracked: next_usize()?,
            elapsed: Duration::from_micros(u64::try_from(next_usize()?).ok()?),
            swept_bytes: next_usize()?,
            sweep: Duration::from_micros(u64::try_from(next_usize()?).ok()?),
        })
    }
}

/// Resident set size of this process, from `/proc/self/status`.
fn rss_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The counters when a case starts filling.
struct Before {
    rss: Option<usize>,
    small: usize,
    large: usize,
    count: usize,
    started: Instant,
}

impl Before {
    /// Reads the counters and resets the peak.
    fn take() -> Before {
        let rss = rss_bytes();
        let small = LIVE_SMALL.load(Ordering::Relaxed);
        let large = LIVE_LARGE.load(Ordering::Relaxed);
        let count = LIVE_COUNT.load(Ordering::Relaxed);
        PEAK.store(live_bytes(), Ordering::Relaxed);
        Before {
            rss,
            small,
            large,
            count,
            started: Instant::now(),
        }
    }

    /// What was filled since [`Before::take`]; `swept_bytes` and `sweep` are left at 0.
    fn measure(&self, tracked: usize) -> Measured {
        let elapsed = self.started.elapsed();
        let small_after = LIVE_SMALL.load(Ordering::Relaxed);
        let large_after = LIVE_LARGE.load(Ordering::Relaxed);
        let count_after = LIVE_COUNT.load(Ordering::Relaxed);
        let peak = PEAK.load(Ordering::Relaxed);
        let rss_after = rss_bytes();
        Measured {
            bytes: (small_after + large_after) - (self.small + self.large),
            small_bytes: small_after - self.small,
            large_bytes: large_after - self.large,
            allocations: count_after - self.count,
            peak_bytes: peak - (self.small + self.large),
            rss_bytes: self.rss.zip(rss_after).map(|(b, a)| a.saturating_sub(b)),
            tracked,
            elapsed,
            swept_bytes: 0,
            sweep: Duration::ZERO,
        }
    }

    /// Live bytes above the start (0 if below: a case may free what it held before).
    fn live_above(&self) -> usize {
        live_bytes().saturating_sub(self.small + self.large)
    }
}

/// Runs one case in this process.
fn run(case: Case) -> Measured {
    match case.subject {
        Subject::Tollgate(algorithm) => run_tollgate(algorithm, quota_for(algorithm), case),
        Subject::TokenBucketRoundedInterval => run_tollgate(
            Algorithm::TokenBucket,
            Quota::new(7, Duration::from_secs(1))
                .unwrap()
                .with_burst(20),
            case,
        ),
        Subject::Governor => run_governor(case),
        #[cfg(feature = "redis")]
        Subject::LocalFirst(algorithm) => run_local_first(algorithm, case),
    }
}

/// Fills tollgate's [`MemoryStore`].
fn run_tollgate(algorithm: Algorithm, quota: Quota, case: Case) -> Measured {
    let clock = ManualClock::new();
    let store = MemoryStore::with_clock(clock.clone()).max_keys(4_000_000);
    let mut buf: Vec<u8> = Vec::with_capacity(64);

    let before = Before::take();

    for round in 0..case.requests_per_key {
        if round > 0 {
            // A new instant, so that a sliding window log files each request separately.
            clock.advance(Duration::from_millis(1));
        }
        for i in 0..case.keys {
            case.kind.write_key(&mut buf, i);
            let check = LimitCheck::new("test", &buf, algorithm, &quota);
            let Acquisition::Ready(Ok(decisions)) = store.acquire(&[check]) else {
                panic!("the memory store answers at once, without error");
            };
            let decision: &Decision = &decisions[0];
            assert!(
                decision.allowed,
                "{algorithm} denied request {round} of key {i}",
            );
        }
    }

    let mut measured = before.measure(store.len());

    // Every key idle (the longest period is a minute), then swept: what stays allocated.
    clock.advance(Duration::from_secs(3600));
    let sweep = Instant::now();
    store.sweep();
    measured.sweep = sweep.elapsed();
    assert_eq!(store.len(), 0, "sweep drops every idle key");
    measured.swept_bytes = before.live_above();
    measured
}

/// Fills the local-first part of tollgate's `RedisStore`, Redis down.
#[cfg(feature = "redis")]
fn run_local_first(algorithm: Algorithm, case: Case) -> Measured {
    use tollgate::store::RedisStore;

    let mut redis = redis_server::RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let clock = ManualClock::new();
    let store = runtime
        .block_on(
            RedisStore::builder(redis.url())
                .clock(clock.clone())
                .max_keys(4_000_000)
                .connect(),
        )
        .expect("connects");
    redis.kill();
    let quota = quota_for(algorithm);
    let mut buf: Vec<u8> = Vec::with_capacity(64);

    let before = Before::take();
    for i in 0..case.keys {
        case.kind.write_key(&mut buf, i);
        let check = LimitCheck {
            domain: "test",
            key: &buf,
            tag: &buf,
            algorithm,
            quota: &quota,
            cost: 1,
            shadow: false,
            check_only: false,
            sync_every: Some(Duration::from_millis(100)),
            limit: "test",
            approximate: None,
            carried_from: &[],
        };
        // Outside a runtime: decided here, and no sync task starts.
        let Acquisition::Ready(Ok(decisions)) = store.acquire(&[check]) else {
            panic!("a local-first limit is decided at once");
        };
        assert!(decisions[0].allowed, "{algorithm} denied key {i}");
    }
    let mut measured = before.measure(store.local_first_keys());

    // Every key's counts run out within a minute; each sync (failing) forgets some of them.
    clock.advance(Duration::from_secs(3600));
    let sweep = Instant::now();
    for _ in 0..1_000 {
        if store.local_first_keys() == 0 {
            break;
        }
        let _ = runtime.block_on(store.sync_now());
    }
    measured.sweep = sweep.elapsed();
    assert_eq!(store.local_first_keys(), 0, "idle keys are forgotten");
    measured.swept_bytes = before.live_above();
    measured
}

/// The quota of the governor cases: 10 per second (a burst of 10).
fn governor_quota() -> governor::Quota {
    governor::Quota::per_second(NonZeroU32::new(10).expect("10 is not zero"))
}

/// Fills governor's keyed limiter, keyed by `K`, with `case.keys` keys from `key(i)`.
fn fill_governor<K, F>(case: Case, mut check: F) -> Measured
where
    K: Clone + std::hash::Hash + Eq,
    F: FnMut(&governor::DefaultKeyedRateLimiter<K>, usize) -> bool,
{
    let limiter = governor::RateLimiter::keyed(governor_quota());

    let before = Before::take();
    for i in 0..case.keys {
        assert!(check(&limiter, i), "governor denied key {i}");
    }
    let mut measured = before.measure(limiter.len());

    // A key is indistinguishable from a fresh one 100 ms (one emission interval) after its
    // only request; the clock is the real one, so wait, then drop and shrink.
    std::thread::sleep(Duration::from_millis(300));
    let sweep = Instant::now();
    limiter.retain_recent();
    limiter.shrink_to_fit();
    measured.sweep = sweep.elapsed();
    assert_eq!(limiter.len(), 0, "retain_recent drops every idle key");
    measured.swept_bytes = before.live_above();
    measured
}

/// Fills governor's keyed limiter with the case's keys, of their natural types.
fn run_governor(case: Case) -> Measured {
    assert_eq!(case.requests_per_key, 1, "one request per key");
    match case.kind {
        KeyKind::Ipv4 => {
            fill_governor::<IpAddr, _>(case, |limiter, i| limiter.check_key(&keys::ip(i)).is_ok())
        }
        KeyKind::UserId => {
            let mut buf = String::with_capacity(64);
            fill_governor::<String, _>(case, move |limiter, i| {
                keys::write_user_id(&mut buf, i);
                limiter.check_key(&buf).is_ok()
            })
        }
    }
}

// ---------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------

fn per_key(bytes: usize, keys: usize) -> String {
    format!("{:.1}", bytes as f64 / keys as f64)
}

fn main() {
    let all = cases();
    // `cargo bench` passes `--bench`; any other argument filters the cases.
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with("--"));
    if let Ok(index) = std::env::var(CASE_VAR) {
        let case = all[index.parse::<usize>().expect("a case index")];
        println!("{}", run(case).to_line());
        return;
    }

    let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("# Memory per tracked key (MemoryStore)\n");
    println!("- date: {}", utc_now());
    println!(
        "- machine: {parallelism} CPUs (available_parallelism), {}, {} RAM",
        cpu_model().unwrap_or_else(|| "CPU model unknown".to_owned()),
        memory_total().unwrap_or_else(|| "unknown".to_owned())
    );
    println!(
        "- store: MemoryStore::with_clock(ManualClock::new()).max_keys(4_000_000), {} shards",
        (parallelism * 4).next_power_of_two()
    );
    println!("- bytes per key: live heap bytes (as requested from the allocator) after minus before, / keys");
    println!();
    println!("Sizes (std::mem::size_of):\n");
    let sizes = [
        ("State", size_of::<State>()),
        ("TokenBucket", size_of::<TokenBucket>()),
        ("LeakyBucket", size_of::<LeakyBucket>()),
        ("FixedWindow", size_of::<FixedWindow>()),
        ("SlidingWindowLog", size_of::<SlidingWindowLog>()),
        ("SlidingWindowCounter", size_of::<SlidingWindowCounter>()),
        ("Gcra", size_of::<Gcra>()),
        ("Nanos", size_of::<Nanos>()),
        // The memory store's private table places: empty, or a non-zero fingerprint and the
        // state: one timestamp (GCRA, leaky bucket, a token bucket with a whole interval); or
        // the idle time and two words (fixed window, other token buckets); or the idle time
        // and a whole `State` (the sliding windows). Places come in cache-line-aligned groups
        // of four, so a general place takes 64.
        (
            "timestamp place Option<(NonZeroU64, Nanos)>",
            size_of::<Option<(NonZeroU64, Nanos)>>(),
        ),
        (
            "packed place Option<(NonZeroU64, Nanos, [u64; 2])>",
            size_of::<Option<(NonZeroU64, Nanos, [u64; 2])>>(),
        ),
        (
            "general place Option<(NonZeroU64, Nanos, State)>",
            size_of::<Option<(NonZeroU64, Nanos, State)>>(),
        ),
        (
            "VecDeque<(Nanos, u64)>",
            size_of::<VecDeque<(Nanos, u64)>>(),
        ),
        ("(Nanos, u64) (one log entry)", size_of::<(Nanos, u64)>()),
        ("governor: IpAddr", size_of::<IpAddr>()),
        ("governor: String", size_of::<String>()),
        (
            "governor: InMemoryState (an AtomicU64)",
            size_of::<governor::state::InMemoryState>(),
        ),
        (
            "governor: (IpAddr, AtomicU64) (one DashMap bucket)",
            size_of::<(IpAddr, AtomicU64)>(),
        ),
        (
            "governor: (String, AtomicU64) (one DashMap bucket)",
            size_of::<(String, AtomicU64)>(),
        ),
    ];
    for (name, size) in sizes {
        println!("- `{name}`: {size} bytes");
    }
    println!();

    let exe = std::env::current_exe().expect("the bench's own path");
    let mut rows = Vec::new();
    for (index, case) in all.iter().enumerate() {
        if filter
            .as_ref()
            .is_some_and(|filter| !case.subject.name().contains(filter.as_str()))
        {
            continue;
        }
        let output = Command::new(&exe)
            .env(CASE_VAR, index.to_string())
            .output()
            .expect("run a case in a child process");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let measured = stdout.lines().find_map(Measured::from_line);
        let Some(measured) = measured.filter(|_| output.status.success()) else {
            panic!(
                "case {index} ({} / {}) failed: {}\n{}",
                case.subject.name(),
                case.label(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        };
        assert_eq!(
            measured.tracked,
            case.keys,
            "{} / {}: keys were evicted or left untracked",
            case.subject.name(),
            case.label()
        );
        rows.push((*case, measured));
    }

    println!(
        "| algorithm | key kind | bytes per key | keys tracked | of which per-key allocations (< {LARGE} B) | of which hash tables | heap allocations per key | peak bytes per key while filling | RSS growth per key | bytes per key left after all went idle and were swept (len 0) | sweeping them | time |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (case, m) in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {:.1} ms | {:.2} s |",
            case.subject.name(),
            case.label(),
            per_key(m.bytes, case.keys),
            m.tracked,
            per_key(m.small_bytes, case.keys),
            per_key(m.large_bytes, case.keys),
            m.allocations as f64 / case.keys as f64,
            per_key(m.peak_bytes, case.keys),
            m.rss_bytes
                .map_or_else(|| "n/a".to_owned(), |b| per_key(b, case.keys)),
            per_key(m.swept_bytes, case.keys),
            m.sweep.as_secs_f64() * 1000.0,
            m.elapsed.as_secs_f64(),
        );
    }

    // tollgate against governor, per key kind, for the algorithms the issue's target names.
    let bytes_of = |subject: &dyn Fn(Subject) -> bool, kind: KeyKind| {
        rows.iter()
            .find(|(case, _)| {
                subject(case.subject) && case.requests_per_key == 1 && case.kind == kind
            })
            .map(|(case, m)| {
                (
                    m.bytes as f64 / case.keys as f64,
                    m.rss_bytes.map(|b| b as f64 / case.keys as f64),
                )
            })
    };
    println!();
    println!("tollgate against governor (bytes per key; RSS growth per key in brackets):\n");
    println!("| key kind | tollgate algorithm | tollgate | governor | tollgate ÷ governor | tollgate − governor |");
    println!("|---|---|---:|---:|---:|---:|");
    for kind in [KeyKind::Ipv4, KeyKind::UserId] {
        let Some((governor, governor_rss)) = bytes_of(&|s| s == Subject::Governor, kind) else {
            continue;
        };
        for subject in [
            Subject::Tollgate(Algorithm::Gcra),
            Subject::Tollgate(Algorithm::TokenBucket),
            Subject::TokenBucketRoundedInterval,
        ] {
            let Some((tollgate, tollgate_rss)) = bytes_of(&|s| s == subject, kind) else {
                continue;
            };
            let rss = |r: Option<f64>| r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.1}"));
            println!(
                "| {} | {} | {tollgate:.1} ({}) | {governor:.1} ({}) | {:.2} | {:+.1} |",
                kind_name(kind),
                subject.name(),
                rss(tollgate_rss),
                rss(governor_rss),
                tollgate / governor,
                tollgate - governor,
            );
        }
    }
}
