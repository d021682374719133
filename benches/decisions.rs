//! The cost of one rate-limiting decision in memory, per algorithm, next to governor's keyed
//! limiter on the same keys.
//!
//! **tollgate**: the public `Store::acquire` with one `LimitCheck` on
//! `MemoryStore::new().max_keys(4_000_000)` (the system clock, so every decision includes
//! its clock read; the ceiling is raised so that the 1,000,000-key sets fit whole and nothing is
//! evicted; one extra pair of rows shows the default ceiling of 1,000,000 keys). One row per
//! algorithm: `token_bucket`, `leaky_bucket` (policing, so no delays), `fixed_window`,
//! `sliding_window_log`, `sliding_window_counter` and `gcra`, and `token_bucket_rounded`, the
//! token bucket under a quota whose emission interval is not a whole number of nanoseconds
//! (the others' quotas have whole ones, so the store decides their token bucket as GCRA).
//! Keys are shaped as the limiter shapes them for one descriptor value: an 8-byte state id,
//! the value's length as 4 little-endian bytes, then the value, an IPv4 address text
//! (`10.1.2.3`) or a user ID (`user-123456`).
//!
//! **governor**: `governor::RateLimiter::keyed(quota)` (its default DashMap store and default
//! clock) and `check_key`, keyed by the natural types: [`IpAddr`] for addresses, [`String`]
//! for user IDs, with the same values.
//!
//! **Key sets**: 1 hot key, 10,000 keys and 1,000,000 keys, all filled (one admitted request
//! each) before measuring; decisions walk the set in order, so with many keys each decision
//! touches a key not seen for a while (its place in the hash table is effectively random).
//!
//! **Verdicts**: `allowed`, a limit so high that every request is admitted (1,000,000,000 per
//! second: governor `Quota::per_second(1_000_000_000)`; the token bucket's burst and GCRA's
//! are the limit, the leaky bucket has a queue of 1,000,000,000), and `denied`, 1 per hour
//! (governor `Quota::per_hour(1)`), used up by the filling request, so nearly everything is
//! denied (a fixed window starts afresh on the hour). `token_bucket_rounded`: 999,999,999 per
//! second, and 7 per 25,201 seconds with a burst of 1. The bench counts what was admitted and
//! prints it after each case, with a warning when a case did not get the verdict it is named
//! after.
//!
//! **Threads**: on 1 thread the decisions run on the bench's thread; on 2, criterion's
//! `iter_custom` starts 2 scoped threads that each make half of the decisions on the shared
//! store or limiter (the hot key: both on the same key; otherwise from opposite ends of the
//! set), and the time is the wall time from the moment both are released until the last one
//! ends. Either way the figure is wall time ÷ decisions: **ns per decision**.
//!
//! The `clock` group measures the clock reads alone: `SystemTime::now()`, tollgate's
//! `SystemClock::now()` (that read turned into nanoseconds since the epoch), governor's
//! `DefaultClock::default().now()` (quanta) and `Instant::now()`.
//!
//! Benchmark ids are `<key set>/<key kind>/<verdict>/<limiter>/<threads>t`, for example
//! `10k_keys/user_id/denied/gcra/2t`. Run everything (about 7 minutes on 2 CPUs once built):
//!
//! ```text
//! cargo bench --bench decisions
//! ```
//!
//! or filter by id (a regular expression), for example only the GCRA and governor rows:
//!
//! ```text
//! cargo bench --bench decisions -- '/(gcra|governor)/'
//! ```
//!
//! A key set is built, and a store filled, only when a benchmark that needs it runs.

#[path = "common/keys.rs"]
mod keys;
#[path = "common/verdicts.rs"]
mod verdicts;
use criterion::{criterion_group, criterion_main, Criterion};
use governor::clock::Clock as _;
use governor::DefaultKeyedRateLimiter;
use keys::KeyKind;
use std::cell::OnceCell;
use std::hint::black_box;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime};
use tollgate::algorithm::{Algorithm, Quota};
use tollgate::clock::{Clock as _, SystemClock};
use tollgate::store::{LimitCheck, MemoryStore};
use verdicts::Verdict;

/// The key ceiling of the measured stores: the largest key set fits whole.
const MAX_KEYS: usize = 4_000_000;

/// The index of the hot key's value: `10.1.2.3`, `user-066051`.
const HOT_KEY: usize = 0x01_0203;

/// The thread counts measured.
const THREADS: [usize; 2] = [1, 2];

#[derive(Clone, Copy)]
struct KeySet {
    name: &'static str,
    keys: usize,
}

const KEY_SETS: [KeySet; 3] = [
    KeySet {
        name: "1_key",
        keys: 1,
    },
    KeySet {
        name: "10k_keys",
        keys: 10_000,
    },
    KeySet {
        name: "1M_keys",
        keys: 1_000_000,
    },
];

/// The kind of key's name in benchmark ids.
fn kind_name(kind: KeyKind) -> &'static str {
    match kind {
        KeyKind::Ipv4 => "ipv4",
        KeyKind::UserId => "user_id",
    }
}

#[derive(Clone, Copy)]
enum Limiter {
    Tollgate(Algorithm),
    /// The token bucket under [`Verdict::rounded_token_bucket_quota`].
    TokenBucketRounded,
    Governor,
}

impl Limiter {
    fn name(self) -> &'static str {
        match self {
            Limiter::Tollgate(algorithm) => algorithm.name(),
            Limiter::TokenBucketRounded => "token_bucket_rounded",
            Limiter::Governor => "governor",
        }
    }
}

/// The value of the `i`th key of a set of `n`.
fn value_index(i: usize, n: usize) -> usize {
    if n == 1 {
        HOT_KEY
    } else {
        i
    }
}

/// A key set in both shapes: tollgate state keys back to back, and governor's keys.
struct Keys {
    /// Every state key, back to back: state id, value length (u32 little-endian), value.
    bytes: Vec<u8>,
    /// Where each key starts in `bytes`, and one more entry for the end of the last.
    offsets: Vec<usize>,
    /// governor's keys (the same values).
    governor: GovernorKeys,
}

enum GovernorKeys {
    Ip(Vec<IpAddr>),
    User(Vec<String>),
}

impl Keys {
    fn build(n: usize, kind: KeyKind) -> Keys {
        let mut bytes = Vec::with_capacity(n * 24);
        let mut offsets = Vec::with_capacity(n + 1);
        let mut governor = match kind {
            KeyKind::Ipv4 => GovernorKeys::Ip(Vec::with_capacity(n)),
            KeyKind::UserId => GovernorKeys::User(Vec::with_capacity(n)),
        };
        let mut key = Vec::new();
        for i in 0..n {
            let v = value_index(i, n);
            match &mut governor {
                GovernorKeys::Ip(ips) => ips.push(keys::ip(v)),
                GovernorKeys::User(users) => {
                    let mut user = String::new();
                    keys::write_user_id(&mut user, v);
                    users.push(user);
                }
            }
            kind.write_key(&mut key, v);
            offsets.push(bytes.len());
            bytes.extend_from_slice(&key);
        }
        offsets.push(bytes.len());
        Keys {
            bytes,
            offsets,
            governor,
        }
    }

    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    #[inline(always)]
    fn state_key(&self, i: usize) -> &[u8] {
        &self.bytes[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// What decides: a store with its algorithm and quota, or a governor limiter.
enum Decider {
    Tollgate {
        // Boxed: the store carries its hashing seed inline, several hundred bytes.
        store: Box<MemoryStore>,
        algorithm: Algorithm,
        quota: Quota,
    },
    GovernorIp(DefaultKeyedRateLimiter<IpAddr>),
    GovernorUser(DefaultKeyedRateLimiter<String>),
}

/// One limiter on one key set, filled, with what it admitted while measured.
struct Fixture<'k> {
    decider: Decider,
    keys: &'k Keys,
    /// Where the next measurement starts in the key set.
    cursor: AtomicUsize,
    decided: AtomicU64,
    admitted: AtomicU64,
}

impl<'k> Fixture<'k> {
    /// The limiter with one request made (and admitted) for every key.
    fn filled(limiter: Limiter, verdict: Verdict, keys: &'k Keys, store: MemoryStore) -> Self {
        let decider = match (limiter, &keys.governor) {
            (Limiter::Tollgate(algorithm), _) => Decider::Tollgate {
                store: Box::new(store),
                algorithm,
                quota: verdict.quota(algorithm),
            },
            (Limiter::TokenBucketRounded, _) => Decider::Tollgate {
                store: Box::new(store),
                algorithm: Algorithm::TokenBucket,
                quota: verdict.rounded_token_bucket_quota(),
            },
            (Limiter::Governor, GovernorKeys::Ip(_)) => {
                Decider::GovernorIp(governor::RateLimiter::keyed(verdict.governor_quota()))
            }
            (Limiter::Governor, GovernorKeys::User(_)) => {
                Decider::GovernorUser(governor::RateLimiter::keyed(verdict.governor_quota()))
            }
        };
        let fixture = Fixture {
            decider,
            keys,
            cursor: AtomicUsize::new(0),
            decided: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
        };
        let filled = fixture.run(1, keys.len() as u64, 0).1;
        assert_eq!(filled, keys.len() as u64, "every first request is admitted");
        fixture
    }

    /// Makes `iters` decisions on `threads` threads; the wall time they took.
    fn measure(&self, threads: usize, iters: u64) -> Duration {
        let start = self.cursor.fetch_add(iters as usize, Ordering::Relaxed) % self.keys.len();
        let (elapsed, admitted) = self.run(threads, iters, start);
        self.decided.fetch_add(iters, Ordering::Relaxed);
        self.admitted.fetch_add(admitted, Ordering::Relaxed);
        elapsed
    }

    /// Makes `iters` decisions on `threads` threads, the first at key `start`; the wall time
    /// and the number admitted.
    fn run(&self, threads: usize, iters: u64, start: usize) -> (Duration, u64) {
        let keys = self.keys;
        match &self.decider {
            Decider::Tollgate {
                store,
                algorithm,
                quota,
            } => run(threads, iters, start, keys.len(), |i| {
                let check = LimitCheck::new("bench", keys.state_key(i), *algorithm, quota);
                verdicts::admitted(store, &check)
            }),
            Decider::GovernorIp(limiter) => {
                let GovernorKeys::Ip(ips) = &keys.governor else {
                    unreachable!("built for addresses")
                };
                run(threads, iters, start, keys.len(), |i| {
                    black_box(limiter.check_key(&ips[i])).is_ok()
                })
            }
            Decider::GovernorUser(limiter) => {
                let GovernorKeys::User(users) = &keys.governor else {
                    unreachable!("built for user IDs")
                };
                run(threads, iters, start, keys.len(), |i| {
                    black_box(limiter.check_key(&users[i])).is_ok()
                })
            }
        }
    }

    /// Prints (and forgets) what was admitted while measuring `id`, with a warning when
    /// that is not the verdict the case is named after.
    fn report(&self, id: &str, verdict: Verdict) {
        let decided = self.decided.swap(0, Ordering::Relaxed);
        let admitted = self.admitted.swap(0, Ordering::Relaxed);
        if decided == 0 {
            return;
        }
        let share = admitted as f64 / decided as f64;
        let off = match verdict {
            Verdict::Allowed => admitted != decided,
            Verdict::Denied => share > 0.01,
        };
        println!(
            "{id}: admitted {admitted} of {decided} decisions ({:.4} %){}",
            share * 100.0,
            if off {
                format!(" WARNING: not {}", verdict.name())
            } else {
                String::new()
            }
        );
    }
}

/// Makes `iters` decisions with `decide` (which says whether it admitted) on `threads`
/// threads, on keys `0..n` in order from `start`; the wall time and the number admitted.
fn run<F>(threads: usize, iters: u64, start: usize, n: usize, decide: F) -> (Duration, u64)
where
    F: Fn(usize) -> bool + Sync,
{
    if threads == 1 {
        let began = Instant::now();
        let admitted = lane(&decide, start, iters, n);
        return (began.elapsed(), admitted);
    }
    let barrier = Barrier::new(threads);
    let lanes: Vec<(Instant, Instant, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let count = iters / threads as u64 + u64::from((t as u64) < iters % threads as u64);
                let first = (start + t * n / threads) % n;
                let (decide, barrier) = (&decide, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let began = Instant::now();
                    let admitted = lane(decide, first, count, n);
                    (began, Instant::now(), admitted)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a bench thread panicked"))
            .collect()
    });
    let began = lanes.iter().map(|l| l.0).min().expect("threads");
    let ended = lanes.iter().map(|l| l.1).max().expect("threads");
    (ended - began, lanes.iter().map(|l| l.2).sum())
}

/// `count` decisions on one thread, on keys in order from `i`, wrapping at `n`.
#[inline(always)]
fn lane<F: Fn(usize) -> bool>(decide: &F, mut i: usize, count: u64, n: usize) -> u64 {
    let mut admitted = 0;
    for _ in 0..count {
        admitted += u64::from(decide(i));
        i += 1;
        if i == n {
            i = 0;
        }
    }
    admitted
}

fn limiters() -> impl Iterator<Item = Limiter> {
    Algorithm::ALL
        .into_iter()
        .map(Limiter::Tollgate)
        .chain([Limiter::TokenBucketRounded, Limiter::Governor])
}

fn decisions(c: &mut Criterion) {
    for set in KEY_SETS {
        for kind in [KeyKind::Ipv4, KeyKind::UserId] {
            let keys = OnceCell::new();
            for verdict in [Verdict::Allowed, Verdict::Denied] {
                let group_name = format!("{}/{}/{}", set.name, kind_name(kind), verdict.name());
                let mut group = c.benchmark_group(&group_name);
                for limiter in limiters() {
                    let fixture = OnceCell::new();
                    for threads in THREADS {
                        let id = format!("{}/{threads}t", limiter.name());
                        group.bench_function(&id, |b| {
                            let keys = keys.get_or_init(|| Keys::build(set.keys, kind));
                            let fixture = fixture.get_or_init(|| {
                                let store = MemoryStore::new().max_keys(MAX_KEYS);
                                Fixture::filled(limiter, verdict, keys, store)
                            });
                            b.iter_custom(|iters| fixture.measure(threads, iters));
                        });
                        if let Some(fixture) = fixture.get() {
                            fixture.report(&format!("{group_name}/{id}"), verdict);
                        }
                    }
                }
                group.finish();
            }
        }
    }
}

/// The largest key set on the store's default ceiling (1,000,000 keys): walking 1,000,000
/// keys in order, each shard's two generations roll before a key comes round again.
fn default_ceiling(c: &mut Criterion) {
    let set = KEY_SETS[2];
    let kind = KeyKind::Ipv4;
    let keys = OnceCell::new();
    for verdict in [Verdict::Allowed, Verdict::Denied] {
        let group_name = format!(
            "default_ceiling/{}/{}/{}",
            set.name,
            kind_name(kind),
            verdict.name()
        );
        let mut group = c.benchmark_group(&group_name);
        let limiter = Limiter::Tollgate(Algorithm::Gcra);
        let fixture = OnceCell::new();
        let id = format!("{}/1t", limiter.name());
        group.bench_function(&id, |b| {
            let keys = keys.get_or_init(|| Keys::build(set.keys, kind));
            let fixture =
                fixture.get_or_init(|| Fixture::filled(limiter, verdict, keys, MemoryStore::new()));
            b.iter_custom(|iters| fixture.measure(1, iters));
        });
        if let Some(fixture) = fixture.get() {
            fixture.report(&format!("{group_name}/{id}"), verdict);
        }
        group.finish();
    }
}

fn clocks(c: &mut Criterion) {
    let mut group = c.benchmark_group("clock");
    group.bench_function("SystemTime::now", |b| b.iter(SystemTime::now));
    group.bench_function("tollgate SystemClock::now", |b| {
        let clock = SystemClock;
        b.iter(|| clock.now());
    });
    group.bench_function("governor DefaultClock::now", |b| {
        let clock = governor::clock::DefaultClock::default();
        b.iter(|| clock.now());
    });
    group.bench_function("Instant::now", |b| b.iter(Instant::now));
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1))
        // Fewer bootstrap resamples than criterion's default 100,000: the analysis of each
        // of the 170-odd cases then takes a few milliseconds, not a tenth of a second.
        .nresamples(10_000)
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = clocks, decisions, default_ceiling
}
criterion_main!(benches);
