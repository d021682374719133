//! One hot key, decided over and over, next to governor: the fastest and the median of many
//! short rounds, so that a noisy machine's slow rounds drop out.
//!
//! `benches/decisions.rs` measures every key count with criterion; on a shared virtual
//! machine its estimates move by tens of percent from run to run. This bench is for
//! comparing two builds on the one case where the store's own code dominates: run each
//! build's binary in turn, a few times, and compare the ratios to governor, which both
//! measure in the same process.
//!
//! Each round makes 200,000 decisions per case (on 2 threads, 100,000 each, on the same key)
//! and takes the wall time per decision. Cases: 1 and 2 threads, a quota that admits
//! everything (1,000,000,000 per second) and one that admits nothing after the first request
//! (1 per hour), for `gcra`, `leaky_bucket` (policing), `token_bucket` and `fixed_window`,
//! and for `token_bucket_rounded`, the token bucket under a quota whose emission interval is
//! not a whole number of nanoseconds (the others' are whole, so the store decides their token
//! bucket as GCRA; see `Verdict::rounded_token_bucket_quota`), with governor's keyed limiter
//! beside them. The key is the IPv4 address `10.1.2.3`, shaped as the limiter shapes it (see
//! `benches/common/keys.rs`); governor's is the `IpAddr`.
//!
//! ```text
//! cargo bench --bench hot_key
//! ROUNDS=40 cargo bench --bench hot_key
//! ```

// Shared with the other benches; this one decides on an IPv4 key only.
#[allow(dead_code)]
#[path = "common/keys.rs"]
mod keys;
#[path = "common/verdicts.rs"]
mod verdicts;
use governor::DefaultKeyedRateLimiter;
use std::hint::black_box;
use std::time::Instant;
use tollgate::algorithm::{Algorithm, Quota};
use tollgate::store::{LimitCheck, MemoryStore};
use verdicts::Verdict;

/// Decisions per case in one round.
const DECISIONS: usize = 200_000;

/// The hot key's index in the key set of `benches/decisions.rs`: `10.1.2.3`.
const HOT_KEY: usize = 0x01_0203;

const ALGORITHMS: [Algorithm; 4] = [
    Algorithm::Gcra,
    Algorithm::LeakyBucket,
    Algorithm::TokenBucket,
    Algorithm::FixedWindow,
];

fn main() {
    let rounds = std::env::var("ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(25);
    println!("| threads | verdict | limiter | fastest ns | median ns | fastest ÷ governor | median ÷ governor |");
    println!("|---:|---|---|---:|---:|---:|---:|");
    for threads in [1, 2] {
        for verdict in [Verdict::Allowed, Verdict::Denied] {
            measure(threads, verdict, rounds);
        }
    }
    println!();
    println!("{rounds} rounds of {DECISIONS} decisions per case");
}

/// Runs every case of one thread count and verdict for `rounds` rounds, interleaved, and
/// prints a row per limiter.
fn measure(threads: usize, verdict: Verdict, rounds: usize) {
    let mut key = Vec::new();
    keys::KeyKind::Ipv4.write_key(&mut key, HOT_KEY);
    let ip = keys::ip(HOT_KEY);
    let store = MemoryStore::new();
    let cases: Vec<(&str, Algorithm, Quota)> = ALGORITHMS
        .iter()
        .map(|&a| (a.name(), a, verdict.quota(a)))
        .chain([(
            "token_bucket_rounded",
            Algorithm::TokenBucket,
            verdict.rounded_token_bucket_quota(),
        )])
        .collect();
    let checks: Vec<LimitCheck<'_>> = cases
        .iter()
        .map(|(_, algorithm, quota)| LimitCheck::new("bench", &key, *algorithm, quota))
        .collect();
    let governor: DefaultKeyedRateLimiter<std::net::IpAddr> =
        governor::RateLimiter::keyed(verdict.governor_quota());
    // The first request of each uses up a quota that admits one.
    for check in &checks {
        verdicts::admitted(&store, check);
    }
    let _ = governor.check_key(&ip);

    let mut times = vec![Vec::with_capacity(rounds); checks.len() + 1];
    for _ in 0..rounds {
        for (check, times) in checks.iter().zip(&mut times) {
            times.push(round(threads, verdict, || {
                verdicts::admitted(&store, check)
            }));
        }
        let governor_times = times.last_mut().expect("governor's times");
        governor_times.push(round(threads, verdict, || {
            black_box(governor.check_key(black_box(&ip))).is_ok()
        }));
    }
    let summaries: Vec<(f64, f64)> = times.iter_mut().map(|t| fastest_and_median(t)).collect();
    let (governor_fastest, governor_median) = summaries[checks.len()];
    let names = cases.iter().map(|(name, ..)| *name).chain(["governor"]);
    for (name, (fastest, median)) in names.zip(summaries) {
        println!(
            "| {threads} | {} | {name} | {fastest:.1} | {median:.1} | {:.2} | {:.2} |",
            verdict.name(),
            fastest / governor_fastest,
            median / governor_median,
        );
    }
}

/// Nanoseconds per decision of one round on `threads` threads, checking that every decision
/// got the verdict the case is named after.
fn round<F: Fn() -> bool + Sync>(threads: usize, verdict: Verdict, decide: F) -> f64 {
    let each = DECISIONS / threads;
    let start = Instant::now();
    let admitted: usize = std::thread::scope(|scope| {
        let lanes: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| (0..each).filter(|_| decide()).count()))
            .collect();
        lanes
            .into_iter()
            .map(|lane| lane.join().expect("no lane panics"))
            .sum()
    });
    let elapsed = start.elapsed();
    let expected = match verdict {
        Verdict::Allowed => each * threads,
        Verdict::Denied => 0,
    };
    assert_eq!(admitted, expected, "every decision gets the case's verdict");
    elapsed.as_nanos() as f64 / (each * threads) as f64
}

/// The fastest and the median of `times`.
fn fastest_and_median(times: &mut [f64]) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    (times[0], times[times.len() / 2])
}
